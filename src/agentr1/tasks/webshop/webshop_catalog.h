// agentr1/tasks/webshop/webshop_catalog.h — the products and goals of the "webshop" family:
// a seeded catalogue in WebShop's shape, or WebShop's own files, indexed for search.
//
//   WebshopCatalogueSpec spec;                          // generated: seed 1, 300 products
//   spec.size = 500;
//   std::shared_ptr<const WebshopCatalogue> cat = get_webshop_catalogue(spec);  // cached per spec
//   const WebshopProduct& p = cat->products[0];         // asin "B0...", title, options ...
//   std::vector<size_t> hits = cat->search("long lasting eau de toilette");   // <= 50, best first
//
//   spec = WebshopCatalogueSpec::from_json({{"products_file", "items_shuffle_1000.json"},
//                                           {"attributes_file", "items_ins_v2_1000.json"},
//                                           {"human_instructions_file", "items_human_ins.json"}});
//   cat = get_webshop_catalogue(spec);                  // cat->goals: WebShop's goals
//
// Products mirror WebShop's load_products (web_agent_site/engine/engine.py): Title (the
// file's "name"), Description ("full_description"), BulletPoints ("small_description",
// a list or one string), Attributes (items_ins_v2[asin]["attributes"], else
// ["DUMMY_ATTR"]), options (customization_options: name lower-cased, values
// value.strip().replace("/", " | ").lower()), Price tag "$a" or "$a to $b" from
// "pricing", category, query (lower-cased, trimmed), product_category ("a › b › c").
// Asins that are "nan", longer than 10 characters or repeated are skipped, as there.
// The search document of a product is WebShop's (search_engine/convert_product_file_
// format.py): lower-cased Title + Description + first bullet + "name: v1, v2, and name2:
// ..."; search is BM25 (tasks/bm25.h), at most 50 results (SEARCH_RETURN_N).
//
// Goals from files mirror goal.py: human goals (items_human_ins: per asin a list of
// {"instruction", "instruction_attributes", "instruction_options", ...}; instructions
// without attributes are skipped; text = instruction with '.' stripped from both ends
// + the price clause) or, without a human file, synthetic goals (items_ins_v2
// "instruction" + " with name: v, and name2: w" for every option combination, names
// sorted). Price bound as get_human_goals: of the multiples of 10 (10..990) above the
// price take the first 4; with >= 2 of them the larger of two distinct ones drawn at
// random, and the clause ", and price lower than X.00 dollars"; else 1000000 and no
// clause. Deviations: WebShop draws the bound and a ranged product's price
// (uniform in [lo, hi]) from Python's global RNG; here both come from a generator seeded
// by the asin (and the goal's index), so every process agrees. Reviews and ratings are
// empty / "N.A." as in WebShop's loader (its review file is commented out).
//
// Generated catalogues (spec.products_file empty): 24 product types in 5 categories
// (beauty, grocery, fashion, home, electronics), each with its own product_category
// path, search query, title noun phrase, attribute pool ("machine wash", "long
// lasting", "sulfate free" ...), option groups (color, size, flavor, ...) and price
// range; each category adds a pool of 8 extra attributes ("gift box", "made in usa").
// A fresh product draws a brand, 2-4 type attributes and 1-2 extra ones, 1-2 option
// groups of 2-5 values and a price (the first 24 products are one of each type). With
// probability near_miss_rate a product is instead a near miss of an earlier one: the
// same type with one attribute swapped, the same listing with one option value dropped
// and another added, or the same listing 40-80 dollars dearer. Generation is
// deterministic in (seed, size, near_miss_rate). Titles "Brand Attribute Noun", the
// description and one bullet per attribute mention only the product's own attributes;
// prices end in .99; asins are "B0" + 8 random characters. Deviation: products have no
// images, reviews or ratings (WebShop's loader has no reviews either).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/tasks/bm25.h"

namespace agentr1::tasks {

// WebShop's constants (engine.py).
constexpr size_t kWebshopSearchReturnN = 50;   // SEARCH_RETURN_N
constexpr size_t kWebshopProductWindow = 10;   // PRODUCT_WINDOW (results per page)

// One option group of a product ("color": ["navy", "black"]), values as clickable.
struct WebshopOptionGroup {
  std::string name;                 // lower-case ("color", "size")
  std::vector<std::string> values;  // lower-case, unique within the product
};

struct WebshopProduct {
  std::string asin;                 // upper-case, <= 10 characters
  std::string title;                // WebShop "Title" (also the goal's "name")
  std::string category;             // "beauty", "fashion", ...
  std::string query;                // the product type's search query ("body wash")
  std::string product_category;     // "Beauty & Personal Care › Skin Care › Body Wash"
  std::string description;          // "Description"
  std::vector<std::string> bullets; // "BulletPoints" (Features)
  std::vector<std::string> attributes;        // "Attributes"
  std::vector<WebshopOptionGroup> options;    // in page order
  std::string price_tag;            // "$12.99" or "$10.0 to $15.0"
  double price = 0;                 // the price the reward compares with the bound
  std::string rating = "N.A.";

  json to_json() const;
};

// One shopping goal (goal.py's dict): what the reward compares the purchase with.
struct WebshopGoal {
  std::string asin;                 // the target product
  std::string instruction_text;     // "i need a ..., and price lower than 40.00 dollars"
  std::vector<std::string> attributes;        // goal attributes
  std::vector<std::string> options;           // goal option values ("navy", "large")
  std::vector<std::string> option_names;      // their groups where known (generated), else empty
  double price_upper = 1000000;     // bound; > 0
  std::string query, category, product_category, name;  // the target's (name = its title)
  int level = 0;                    // generated goals: the difficulty level; 0 for files

  json to_json() const;
  // Throws Error naming the missing or malformed field.
  static WebshopGoal from_json(const json& j);
};

// Which catalogue: generated (products_file empty) or WebShop's files.
struct WebshopCatalogueSpec {
  uint64_t seed = 1;                // generated: catalogue seed
  int64_t size = 300;               // generated: number of products (>= 24)
  double near_miss_rate = 0.35;     // generated: share of near-miss products in [0, 0.9]
  std::string products_file;        // items_shuffle*.json (a JSON list of products)
  std::string attributes_file;      // items_ins_v2*.json ({asin: {"attributes", ...}})
  std::string human_instructions_file;  // items_human_ins.json; empty: synthetic goals
  int64_t num_products = 0;         // files: keep the first n products (0 = all)

  bool generated() const { return products_file.empty(); }
  // Names every key once (core/config.h). The keys sit at the top level of the game
  // kwargs (WebshopGameOptions) and of the family's task_kwargs.
  template <class V>
  void visit(V& v) {
    v.field("catalogue_seed", seed, "generated catalogue: seed");
    v.field("catalogue_size", size, "generated catalogue: products (24..100000)");
    v.field("near_miss_rate", near_miss_rate, "generated catalogue: share of near-miss products (0..0.9)");
    v.field("products_file", products_file, "WebShop's items_shuffle*.json instead of a generated catalogue");
    v.field("attributes_file", attributes_file, "files: WebShop's items_ins_v2*.json");
    v.field("human_instructions_file", human_instructions_file, "files: items_human_ins.json (else synthetic goals)");
    v.field("num_products", num_products, "files: keep the first n products (0 = all)");
  }
  // Ranges, and one kind only: with products_file the generated keys keep their defaults,
  // without it the other file keys stay unset. Throws Error naming the key and the rule.
  void validate() const;
  // The keys above, bound with bind_config at "env_kwargs.game" (null = defaults). Throws
  // one Error listing unknown keys (with the valid ones), wrong types and invalid values.
  static WebshopCatalogueSpec from_json(const json& j);
  // The keys of its kind only (the cache key and the samples' env_kwargs.game).
  json to_json() const;
};

class WebshopCatalogue {
 public:
  WebshopCatalogue(std::vector<WebshopProduct> products, std::vector<WebshopGoal> goals);

  std::vector<WebshopProduct> products;
  std::vector<WebshopGoal> goals;   // files: WebShop's goals; generated: empty (goals are drawn per sample)

  // Index of `asin` (case-insensitive), or -1.
  int64_t find(const std::string& asin) const;
  // Product indices for the keywords, best first, at most kWebshopSearchReturnN.
  std::vector<size_t> search(const std::string& keywords) const;
  // title_nouns(products[i].title), computed once.
  const std::vector<std::string>& nouns(size_t i) const { return nouns_[i]; }
  // Products whose title nouns share at least one of `nouns` (ascending): the only ones
  // whose type factor r_type can exceed 0.
  std::vector<size_t> sharing_nouns(const std::vector<std::string>& nouns) const;

 private:
  std::unordered_map<std::string, size_t> by_asin_;
  std::vector<std::vector<std::string>> nouns_;
  std::unordered_map<std::string, std::vector<size_t>> noun_postings_;
  std::unique_ptr<Bm25Index> index_;
};

// WebShop's search document of a product (see the top of this file).
std::string webshop_search_document(const WebshopProduct& p);

// The generated catalogue of (seed, size, near_miss_rate). Throws Error for a bad spec.
WebshopCatalogue generate_webshop_catalogue(const WebshopCatalogueSpec& spec);
// WebShop's files. Throws Error naming the file and the field for unreadable files and
// malformed records.
WebshopCatalogue load_webshop_catalogue(const WebshopCatalogueSpec& spec);
// Built once per process per spec (to_json() as the key) and shared; thread-safe.
std::shared_ptr<const WebshopCatalogue> get_webshop_catalogue(const WebshopCatalogueSpec& spec);

// WebShop's price bound for a price (see the top of this file): {bound, clause}; the
// clause is "" when the bound is 1000000. Draws from rng only when there is a choice.
std::pair<double, std::string> webshop_price_bound(double price, uint64_t rng_seed);

}  // namespace agentr1::tasks
