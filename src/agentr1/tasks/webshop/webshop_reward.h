// agentr1/tasks/webshop/webshop_reward.h — WebShop's purchase reward (goal.py get_reward) as a
// pure function, with the string rules it rests on.
//
//   WebshopRewardTerms r = webshop_reward(goal, bought_product, bought_product.price, {"navy", "large"});
//   // r.total in [0, 1]; 1 only when type, every attribute, every option and the price match
//   fuzzy_token_set_ratio("grey heather", "heather grey");   // 100
//   normalize_color("dark navy blue");                       // "blue": the first COLOR_SET entry it contains
//
// The formula (goal.py), with A goal attributes and O goal options:
//   total = (attribute matches + option matches + r_price) / (A + O + 1) * r_type
//   r_price  = price <= goal.price_upper (1 or 0)
//   a goal attribute matches when some product attribute has token-set ratio > 85 with
//     it, or else when it is a substring of the lower-cased title, the bullets joined
//     by spaces, or the lower-cased description;
//   a goal option matches when some chosen option value has token-set ratio > 85 with
//     it, both first passed through normalize_color;
//   r_type (get_type_reward): query_match = same query; category_match = the
//     product_category paths (split on '›', trimmed) share >= 2 distinct parts;
//     title_score = |nouns(bought title) ∩ nouns(goal name)| / |nouns(goal name)| (0.2
//     when the goal name has no nouns); r_type = 1, then 0.5 unless (query_match or
//     category_match or title_score > 0.2), then 0.1 if title_score < 0.1, then 0 if
//     title_score == 0.
// r_att = attribute matches / A, r_option = option matches / O (absent when O = 0).
//
// Equivalents where WebShop uses a library or a model:
//   fuzzy_token_set_ratio is thefuzz's fuzz.token_set_ratio with its default processing
//     (non-ASCII dropped, every non-alphanumeric character a space, lower case, trimmed;
//     an empty side scores 0): with the sorted intersection t0 and the sorted differences
//     d1, d2 of the two token sets, t1 = t0 + " " + d1, t2 = t0 + " " + d2 (trimmed), the
//     best of ratio(t0, t1), ratio(t0, t2), ratio(t1, t2) where ratio(a, b) = 100 (|a| +
//     |b| - indel distance) / (|a| + |b|) (the Levenshtein/rapidfuzz ratio), rounded half
//     to even to an integer.
//   title_nouns stands in for spaCy's en_core_web_sm tags NOUN/PROPN: the lower-cased
//     title split on every character that is not a letter or digit, keeping tokens of >= 2
//     letters only (numbers and "6.76" are NUM to spaCy), dropping English function words
//     and a fixed list of common adjectives, colours and shop words that spaCy tags ADJ
//     (non_nouns() in the .cpp). On WebShop's own test pairs (test_goal.py) it gives
//     title scores 0.31 and 0.17 where spaCy gives 0.3 and 0.15, and the same r_type on
//     all four; it differs where spaCy tags a word by context (its "Casual", "Off White"
//     count as nouns there, so one pair scores 0.67 here against 0.33).
// Goal options are taken as a list of values (the human goals' form); for synthetic
// goals WebShop passes the (name, value) pairs of a dict to the same code.
#pragma once

#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/tasks/webshop/webshop_catalog.h"

namespace agentr1::tasks {

struct WebshopRewardTerms {
  double total = 0;           // the reward
  double r_type = 0;          // product-type factor
  double r_att = 0;           // attribute matches / A (1 when A = 0)
  double r_option = 1;        // option matches / O (meaningful when has_option)
  bool has_option = false;    // O > 0
  double r_price = 0;         // 1 when price <= bound
  int num_attr_matches = 0;
  int num_option_matches = 0;
  bool query_match = false;
  bool category_match = false;
  double title_score = 0;
  double w_att = 0, w_option = 0, w_price = 0;  // A, O, 1 over (A + O + 1)

  json to_json() const;
};

// thefuzz.fuzz.token_set_ratio (see above): an integer 0..100.
int fuzzy_token_set_ratio(const std::string& a, const std::string& b);

// normalize.py normalize_color: the first COLOR_SET entry contained in `s`, else `s`.
std::string normalize_color(const std::string& s);

// The title's "nouns" (see above), in order, repeats kept.
std::vector<std::string> title_nouns(const std::string& title);

// The type factor and its parts (get_type_reward). bought_nouns / goal_nouns are
// title_nouns of the bought title and of goal.name (pass them precomputed).
WebshopRewardTerms webshop_type_reward(const WebshopGoal& goal, const WebshopProduct& bought,
                                       const std::vector<std::string>& bought_nouns,
                                       const std::vector<std::string>& goal_nouns);

// Attribute matches of the bought product against the goal's attributes.
int webshop_attribute_matches(const std::vector<std::string>& goal_attributes, const WebshopProduct& bought);

// Option matches of the chosen values against the goal's option values.
int webshop_option_matches(const std::vector<std::string>& goal_options, const std::vector<std::string>& chosen);

// get_reward(bought, goal, price, options): every term. chosen = the option values
// selected when Buy Now was clicked (any order). Pure; never throws.
WebshopRewardTerms webshop_reward(const WebshopGoal& goal, const WebshopProduct& bought, double price,
                                  const std::vector<std::string>& chosen);

}  // namespace agentr1::tasks
