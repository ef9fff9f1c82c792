// agentr1/tasks/webshop/webshop_vocab.h — the fixed vocabulary of generated WebShop catalogues:
// product types (category, product_category path, search query, title noun phrase,
// attribute pool, option groups, price range) and brand names.
//
//   for (const WebshopTypeSpec& t : webshop_product_types()) { ... }   // 24 types
//
// Rules the table keeps (webshop_test.cpp checks them): within one type (its pool and
// its category's extra attributes) no two attributes are near-duplicates (token-set ratio <= 85) or substrings of each other,
// and within one option group no two values match each other under the option reward
// (normalize_color, then token-set ratio <= 85), so that every value can be the one a
// goal asks for. Product_category paths of types in different categories share at most
// one part (category_match needs two), so across categories r_type rests on the titles;
// related types of one department (coffee and tea under Beverages) may match by path,
// as in WebShop; goal generation checks every such product (webshop_goal.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace agentr1::tasks {

struct WebshopOptionSpec {
  std::string name;                 // "color"
  std::vector<std::string> values;  // the pool products draw 2-5 values from
};

struct WebshopTypeSpec {
  std::string category;             // "beauty"
  std::string product_category;     // "Beauty & Personal Care › Skin Care › ..."
  std::string query;                // the instruction's noun phrase and WebShop's "query"
  bool plural = false;              // the query is a plural ("protein bars")
  std::string noun;                 // title noun phrase ("Body Wash")
  std::vector<std::string> attributes;
  std::vector<WebshopOptionSpec> options;
  double min_price = 5, max_price = 50;
};

const std::vector<WebshopTypeSpec>& webshop_product_types();
// Attributes any product of a category may carry besides its type's ("gift box"), so
// that products of one type differ more (category -> pool).
const std::vector<std::string>& webshop_category_attributes(const std::string& category);
const std::vector<std::string>& webshop_brands();

// A helper the webshop sources share: "a", "a and b", "a, b and c".
std::string webshop_join_and(const std::vector<std::string>& xs);

}  // namespace agentr1::tasks
