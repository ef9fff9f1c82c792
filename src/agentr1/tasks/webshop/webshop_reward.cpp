#include "agentr1/tasks/webshop/webshop_reward.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <unordered_set>

#include "agentr1/core/strings.h"

namespace agentr1::tasks {
namespace {

// normalize.py COLOR_SET, in its order (the first contained entry wins).
const char* const kColorSet[] = {
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite",
    "grass", "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon",
    "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink",
    "plum", "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver",
    "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise",
    "violet", "walnut", "wheat", "white", "wine", "yellow"};

// Words title_nouns drops: English function words and words spaCy tags ADJ/ADV/VERB
// in product titles (common adjectives, basic colours, shop words).
const std::unordered_set<std::string>& non_nouns() {
  static const std::unordered_set<std::string> words = {
      // function words
      "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
      "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
      "will", "with", "from", "your", "you", "our", "we", "me", "my", "all", "any", "each", "every", "per", "up",
      "out", "off", "over", "under", "than", "too", "very", "can", "has", "have", "do", "does", "its", "also",
      "only", "more", "most", "so", "x", "vs", "via", "without", "within", "about", "plus",
      // adjectives, adverbs and participles
      "high", "low", "new", "best", "large", "small", "medium", "big", "long", "short", "soft", "hard", "light",
      "dark", "heavy", "extra", "super", "mini", "natural", "organic", "portable", "premium", "professional",
      "casual", "compatible", "adjustable", "waterproof", "wireless", "lightweight", "durable", "free", "easy",
      "quick", "fast", "slim", "perfect", "great", "cute", "multi", "comfortable", "breathable", "reusable",
      "washable", "disposable", "electric", "digital", "automatic", "original", "classic", "modern", "vintage",
      "full", "double", "single", "listed", "moisturizing", "ionic", "ergonomic", "wooden", "shockproof", "nonstick",
      "whole", "dried", "quality", "stainless", "sturdy", "cozy", "elegant", "pure",
      "fresh", "real", "strong", "thick", "thin", "wide", "tall", "warm", "cool", "clear", "matte",
      // basic colours
      "black", "white", "red", "blue", "green", "yellow", "grey", "gray", "pink", "purple", "orange", "brown",
      "beige"};
  return words;
}

bool is_alnum_byte(unsigned char c) { return std::isalnum(c) != 0 || c == '_'; }

// thefuzz utils.full_process(force_ascii=True).
std::string fuzz_process(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x80) continue;
    out.push_back(is_alnum_byte(c) ? static_cast<char>(std::tolower(c)) : ' ');
  }
  const size_t b = out.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  const size_t e = out.find_last_not_of(' ');
  return out.substr(b, e - b + 1);
}

std::set<std::string> token_set(const std::string& s) {
  std::set<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) out.insert(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string join_sorted(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

size_t lcs_length(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = a[i - 1] == b[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The Indel (Levenshtein without substitutions) similarity ratio in [0, 100].
double indel_ratio(const std::string& a, const std::string& b) {
  const size_t total = a.size() + b.size();
  if (total == 0) return 100.0;
  return 100.0 * static_cast<double>(2 * lcs_length(a, b)) / static_cast<double>(total);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// product_category split on '›' (U+203A), trimmed.
std::set<std::string> category_parts(const std::string& path) {
  static const std::string kSep = "\xE2\x80\xBA";
  std::set<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t p = path.find(kSep, start);
    out.insert(trim(path.substr(start, p == std::string::npos ? std::string::npos : p - start)));
    if (p == std::string::npos) break;
    start = p + kSep.size();
  }
  return out;
}

}  // namespace

json WebshopRewardTerms::to_json() const {
  json j = {{"total", total},
            {"r_type", r_type},
            {"r_att", r_att},
            {"r_price", r_price},
            {"num_attr_matches", num_attr_matches},
            {"num_option_matches", num_option_matches},
            {"query_match", query_match},
            {"category_match", category_match},
            {"title_score", title_score},
            {"w_att", w_att},
            {"w_price", w_price}};
  if (has_option) {
    j["r_option"] = r_option;
    j["w_option"] = w_option;
  }
  return j;
}

int fuzzy_token_set_ratio(const std::string& a, const std::string& b) {
  const std::string pa = fuzz_process(a), pb = fuzz_process(b);
  if (pa.empty() || pb.empty()) return 0;
  const std::set<std::string> ta = token_set(pa), tb = token_set(pb);
  std::vector<std::string> sect, d1, d2;
  std::set_intersection(ta.begin(), ta.end(), tb.begin(), tb.end(), std::back_inserter(sect));
  std::set_difference(ta.begin(), ta.end(), tb.begin(), tb.end(), std::back_inserter(d1));
  std::set_difference(tb.begin(), tb.end(), ta.begin(), ta.end(), std::back_inserter(d2));
  const std::string t0 = join_sorted(sect);
  const std::string t1 = trim(t0 + " " + join_sorted(d1));
  const std::string t2 = trim(t0 + " " + join_sorted(d2));
  double best = indel_ratio(t1, t2);
  if (!t0.empty()) best = std::max({best, indel_ratio(t0, t1), indel_ratio(t0, t2)});
  return static_cast<int>(std::nearbyint(best));  // round half to even, as Python's round()
}

std::string normalize_color(const std::string& s) {
  for (const char* c : kColorSet) {
    if (s.find(c) != std::string::npos) return c;
  }
  return s;
}

std::vector<std::string> title_nouns(const std::string& title) {
  std::vector<std::string> out;
  const std::unordered_set<std::string>& skip = non_nouns();
  std::string tok;
  auto flush = [&] {
    if (tok.size() >= 2 && skip.count(tok) == 0) {
      const bool letters = std::all_of(tok.begin(), tok.end(), [](char c) { return c >= 'a' && c <= 'z'; });
      if (letters) out.push_back(tok);
    }
    tok.clear();
  };
  for (unsigned char c : title) {
    if (std::isalnum(c) != 0) {
      tok.push_back(static_cast<char>(std::tolower(c)));
    } else {
      flush();
    }
  }
  flush();
  return out;
}

WebshopRewardTerms webshop_type_reward(const WebshopGoal& goal, const WebshopProduct& bought,
                                       const std::vector<std::string>& bought_nouns,
                                       const std::vector<std::string>& goal_nouns) {
  WebshopRewardTerms t;
  t.query_match = bought.query == goal.query;
  const std::set<std::string> pc = category_parts(bought.product_category);
  const std::set<std::string> gc = category_parts(goal.product_category);
  size_t shared = 0;
  for (const std::string& c : pc) shared += gc.count(c);
  t.category_match = shared >= 2;
  const std::set<std::string> bset(bought_nouns.begin(), bought_nouns.end());
  const std::set<std::string> gset(goal_nouns.begin(), goal_nouns.end());
  size_t inter = 0;
  for (const std::string& w : gset) inter += bset.count(w);
  t.title_score = goal_nouns.empty() ? 0.2 : static_cast<double>(inter) / static_cast<double>(goal_nouns.size());
  t.r_type = 1.0;
  if (!(t.query_match || t.category_match || t.title_score > 0.2)) t.r_type = 0.5;
  if (t.title_score < 0.1) t.r_type = 0.1;
  if (t.title_score == 0.0) t.r_type = 0.0;
  return t;
}

int webshop_attribute_matches(const std::vector<std::string>& goal_attributes, const WebshopProduct& bought) {
  const std::string title = lower(bought.title);
  std::string bullets;
  for (size_t i = 0; i < bought.bullets.size(); ++i) bullets += (i == 0 ? "" : " ") + bought.bullets[i];
  bullets = lower(bullets);
  const std::string desc = lower(bought.description);
  int matches = 0;
  for (const std::string& g : goal_attributes) {
    bool matched = false;
    for (const std::string& p : bought.attributes) {
      if (fuzzy_token_set_ratio(p, g) > 85) {
        matched = true;
        break;
      }
    }
    if (!matched) {
      matched = title.find(g) != std::string::npos || bullets.find(g) != std::string::npos ||
                desc.find(g) != std::string::npos;
    }
    matches += matched ? 1 : 0;
  }
  return matches;
}

int webshop_option_matches(const std::vector<std::string>& goal_options, const std::vector<std::string>& chosen) {
  std::vector<std::string> norm_chosen;
  norm_chosen.reserve(chosen.size());
  for (const std::string& c : chosen) norm_chosen.push_back(normalize_color(c));
  int matches = 0;
  for (const std::string& g : goal_options) {
    const std::string ng = normalize_color(g);
    for (const std::string& c : norm_chosen) {
      if (fuzzy_token_set_ratio(c, ng) > 85) {
        ++matches;
        break;
      }
    }
  }
  return matches;
}

WebshopRewardTerms webshop_reward(const WebshopGoal& goal, const WebshopProduct& bought, double price,
                                  const std::vector<std::string>& chosen) {
  WebshopRewardTerms t = webshop_type_reward(goal, bought, title_nouns(bought.title), title_nouns(goal.name));
  const size_t na = goal.attributes.size(), no = goal.options.size();
  const double denom = static_cast<double>(na + no + 1);
  t.r_price = price <= goal.price_upper ? 1.0 : 0.0;
  t.num_attr_matches = webshop_attribute_matches(goal.attributes, bought);
  t.r_att = na == 0 ? 1.0 : t.num_attr_matches / static_cast<double>(na);
  t.num_option_matches = webshop_option_matches(goal.options, chosen);
  t.has_option = no > 0;
  t.r_option = no == 0 ? 1.0 : t.num_option_matches / static_cast<double>(no);
  t.w_att = static_cast<double>(na) / denom;
  t.w_option = static_cast<double>(no) / denom;
  t.w_price = 1.0 / denom;
  t.total = (t.num_attr_matches + t.num_option_matches + t.r_price) / denom * t.r_type;
  return t;
}

}  // namespace agentr1::tasks
