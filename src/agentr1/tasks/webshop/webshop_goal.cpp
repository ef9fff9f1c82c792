#include "agentr1/tasks/webshop/webshop_goal.h"

#include <algorithm>

#include "agentr1/core/error.h"
#include "agentr1/core/hash.h"
#include "agentr1/core/rng.h"
#include "agentr1/tasks/webshop/webshop_reward.h"
#include "agentr1/tasks/webshop/webshop_vocab.h"

namespace agentr1::tasks {
namespace {

constexpr uint64_t kSeedGoal = 0x5747;       // "WG"
constexpr uint64_t kSeedFileGoals = 0x5746;  // shuffles of a file catalogue's goals
constexpr size_t kMaxGoalAttributes = 4;     // attributes a goal may grow to

std::string article(const std::string& next) {
  const bool you_sound = next.rfind("us", 0) == 0 || next.rfind("uni", 0) == 0;  // "a usb", "a unisex"
  return !next.empty() && std::string("aeiou").find(next[0]) != std::string::npos && !you_sound ? "an " : "a ";
}

bool is_plural_query(const std::string& query) {
  for (const WebshopTypeSpec& t : webshop_product_types()) {
    if (t.query == query) return t.plural;
  }
  return false;
}

std::string instruction_head(const std::string& query, const std::vector<std::string>& attrs, size_t phrasing) {
  const bool plural = is_plural_query(query);
  const std::string art = plural ? "" : article(query);
  const std::string verb = plural ? "are" : "is";
  const std::string p = webshop_join_and(attrs);
  switch (phrasing) {
    case 0: return "i need " + art + query + " that " + verb + " " + p;
    case 1: return "i am looking for " + art + query + " that " + verb + " " + p;
    case 2: return "i want to buy " + art + query + " which " + verb + " " + p;
    case 3: return "find me " + art + query + " that " + verb + " " + p;
    default: return "i'm looking for " + (plural ? std::string() : article(p)) + p + " " + query;
  }
}

// Python's random module: MT19937 seeded by init_by_array with the seed's 32-bit words
// (random.seed(int)), getrandbits(k) = next >> (32 - k) for k <= 32.
class PythonMt {
 public:
  explicit PythonMt(uint32_t seed) {
    init(19650218u);
    size_t i = 1;
    for (size_t k = kN; k > 0; --k) {  // key length 1: j is always 0
      mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + seed;
      if (++i >= kN) {
        mt_[0] = mt_[kN - 1];
        i = 1;
      }
    }
    for (size_t k = kN - 1; k > 0; --k) {
      mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
      if (++i >= kN) {
        mt_[0] = mt_[kN - 1];
        i = 1;
      }
    }
    mt_[0] = 0x80000000u;
  }

  uint32_t next() {
    if (index_ >= kN) twist();
    uint32_t y = mt_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }

  // random._randbelow(n) for 1 <= n < 2^32.
  uint32_t below(uint32_t n) {
    int k = 0;
    while (k < 32 && (uint64_t{1} << k) <= n) ++k;  // n.bit_length()
    while (true) {
      const uint32_t r = next() >> (32 - k);
      if (r < n) return r;
    }
  }

 private:
  static constexpr size_t kN = 624;
  void init(uint32_t s) {
    mt_[0] = s;
    for (size_t i = 1; i < kN; ++i) {
      mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
    }
    index_ = kN;
  }
  void twist() {
    for (size_t i = 0; i < kN; ++i) {
      const uint32_t y = (mt_[i] & 0x80000000u) | (mt_[(i + 1) % kN] & 0x7fffffffu);
      mt_[i] = mt_[(i + 397) % kN] ^ (y >> 1) ^ ((y & 1u) != 0 ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }
  uint32_t mt_[kN];
  size_t index_ = kN;
};

}  // namespace

void WebshopGoalOptions::validate() const {
  AGENTR1_CHECK(min_level >= 1 && min_level <= kWebshopMaxLevel,
                "webshop option 'min_level' must be in 1.." << kWebshopMaxLevel << ", got " << min_level);
  AGENTR1_CHECK(max_level >= 1 && max_level <= kWebshopMaxLevel,
                "webshop option 'max_level' must be in 1.." << kWebshopMaxLevel << ", got " << max_level);
  AGENTR1_CHECK(min_level <= max_level, "webshop options: min_level must be <= max_level, got "
                                            << min_level << " > " << max_level
                                            << ". HINT: raise max_level or lower min_level");
  AGENTR1_CHECK(max_attempts >= 1, "webshop goal max_attempts must be >= 1, got " << max_attempts);
}

std::pair<int, int> webshop_level_shape(int level) {
  switch (level) {
    case 1: return {1, 0};
    case 2: return {2, 1};
    case 3: return {3, 2};
    case 4: return {4, 2};
    default: throw Error("webshop level must be in 1.." + std::to_string(kWebshopMaxLevel) + ", got " + std::to_string(level));
  }
}

std::vector<size_t> webshop_python_shuffle(size_t n, uint32_t seed) {
  std::vector<size_t> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = i;
  PythonMt mt(seed);
  for (size_t i = n; i > 1; --i) std::swap(x[i - 1], x[mt.below(static_cast<uint32_t>(i))]);
  return x;
}

DataSplit webshop_split_of(const std::string& asin) {
  return (mix64(fnv1a64(asin)) & 1) != 0 ? DataSplit::kTest : DataSplit::kTrain;
}

bool webshop_goal_is_unique(const WebshopCatalogue& cat, const WebshopGoal& goal, size_t target) {
  const WebshopProduct& tp = cat.products.at(target);
  if (webshop_reward(goal, tp, tp.price, goal.options).total < 1.0) return false;
  std::vector<std::string> norm_goal;
  for (const std::string& v : goal.options) norm_goal.push_back(normalize_color(v));
  for (size_t i = 0; i < norm_goal.size(); ++i) {
    for (size_t j = 0; j < norm_goal.size(); ++j) {
      if (i != j && fuzzy_token_set_ratio(norm_goal[i], norm_goal[j]) > 85) return false;
    }
  }
  for (const WebshopOptionGroup& g : tp.options) {
    for (const std::string& u : g.values) {
      if (std::find(goal.options.begin(), goal.options.end(), u) != goal.options.end()) continue;
      for (const std::string& v : norm_goal) {
        if (fuzzy_token_set_ratio(normalize_color(u), v) > 85) return false;
      }
    }
  }
  const std::vector<std::string> goal_nouns = title_nouns(goal.name);
  for (size_t i : cat.sharing_nouns(goal_nouns)) {
    if (i == target) continue;
    const WebshopProduct& p = cat.products[i];
    if (webshop_type_reward(goal, p, cat.nouns(i), goal_nouns).r_type < 1.0) continue;
    if (p.price > goal.price_upper) continue;
    if (webshop_attribute_matches(goal.attributes, p) < static_cast<int>(goal.attributes.size())) continue;
    std::vector<std::string> all_values;
    for (const WebshopOptionGroup& g : p.options) all_values.insert(all_values.end(), g.values.begin(), g.values.end());
    if (webshop_option_matches(goal.options, all_values) < static_cast<int>(goal.options.size())) continue;
    return false;
  }
  return true;
}

namespace {

// The goal on target p with its first a attributes (in ai order) and first o option
// groups (in gi order, listed by name), values vals[group].
WebshopGoal build_goal(const WebshopProduct& p, int level, const std::vector<size_t>& ai, size_t a,
                       const std::vector<size_t>& gi, size_t o, const std::vector<size_t>& vals, double bound,
                       const std::string& clause, size_t phrasing) {
  WebshopGoal g;
  g.asin = p.asin;
  g.query = p.query;
  g.category = p.category;
  g.product_category = p.product_category;
  g.name = p.title;
  g.level = level;
  for (size_t k = 0; k < a; ++k) g.attributes.push_back(p.attributes[ai[k]]);
  std::vector<size_t> groups(gi.begin(), gi.begin() + static_cast<std::ptrdiff_t>(o));
  std::sort(groups.begin(), groups.end(), [&](size_t x, size_t y) { return p.options[x].name < p.options[y].name; });
  std::string option_text;
  for (size_t k : groups) {
    const WebshopOptionGroup& grp = p.options[k];
    const std::string& v = grp.values[vals[k]];
    g.options.push_back(v);
    g.option_names.push_back(grp.name);
    option_text += (option_text.empty() ? " with " : ", and ") + grp.name + ": " + v;
  }
  g.price_upper = bound;
  g.instruction_text = instruction_head(p.query, g.attributes, phrasing) + option_text + clause;
  return g;
}

}  // namespace

WebshopGoal generate_webshop_goal(const WebshopCatalogue& cat, uint64_t seed, int64_t index,
                                  const WebshopGoalOptions& opts) {
  opts.validate();
  AGENTR1_CHECK(!cat.products.empty(), "webshop goals: the catalogue is empty");
  const uint64_t split_id = static_cast<uint64_t>(opts.split) + 1;
  Rng rng(derive_seed(seed, {kSeedGoal, split_id, static_cast<uint64_t>(index)}));
  const int level = static_cast<int>(rng.uniform_int(opts.min_level, opts.max_level));
  const auto [na, no] = webshop_level_shape(level);
  for (int attempt = 0; attempt < opts.max_attempts; ++attempt) {
    const size_t t = rng.choice(cat.products.size());
    const WebshopProduct& p = cat.products[t];
    if (opts.split != DataSplit::kAny && webshop_split_of(p.asin) != opts.split) continue;
    if (p.attributes.size() < static_cast<size_t>(na) || p.options.size() < static_cast<size_t>(no)) continue;
    const std::vector<size_t> ai = rng.permutation(p.attributes.size());
    const std::vector<size_t> gi = rng.permutation(p.options.size());
    std::vector<size_t> vals;
    for (const WebshopOptionGroup& grp : p.options) vals.push_back(rng.choice(grp.values.size()));
    const auto [bound, clause] = webshop_price_bound(p.price, rng.next_u64());
    const size_t phrasing = rng.choice(5);
    // The level's conditions, then one more option / attribute at a time (options
    // first) until the goal is unique.
    size_t a = static_cast<size_t>(na), o = static_cast<size_t>(no);
    bool option_next = true;
    while (true) {
      WebshopGoal g = build_goal(p, level, ai, a, gi, o, vals, bound, clause, phrasing);
      if (webshop_goal_is_unique(cat, g, t)) return g;
      const bool can_o = o < p.options.size();
      const bool can_a = a < std::min<size_t>(p.attributes.size(), kMaxGoalAttributes);
      if (!can_o && !can_a) break;
      if ((option_next && can_o) || !can_a) {
        ++o;
      } else {
        ++a;
      }
      option_next = !option_next;
    }
  }
  throw Error("webshop goals: no unique goal found for seed " + std::to_string(seed) + ", index " +
              std::to_string(index) + " in " + std::to_string(opts.max_attempts) +
              " draws. HINT: use a larger catalogue_size or lower near_miss_rate / max_level");
}

std::vector<WebshopGoal> webshop_dataset_goals(const WebshopCatalogue& cat, DataSplit split, int64_t n,
                                               uint64_t seed, const WebshopGoalOptions& opts) {
  AGENTR1_CHECK(n >= 0, "webshop dataset: n must be >= 0, got " << n);
  std::vector<WebshopGoal> out;
  out.reserve(static_cast<size_t>(n));
  if (cat.goals.empty()) {
    AGENTR1_CHECK(!opts.webshop_index_split, "webshop option 'split_by' = 'webshop_index' needs WebShop's files "
                                             "(products_file and its goals); generated catalogues split by asin");
    WebshopGoalOptions o = opts;
    o.split = split;
    for (int64_t i = 0; i < n; ++i) out.push_back(generate_webshop_goal(cat, seed, i, o));
    return out;
  }
  std::vector<size_t> pool;
  if (opts.webshop_index_split) {
    // WebShop's order (random.seed(233); random.shuffle(goals)), then test = the first
    // 500, dev the next 1000 (in neither split here), train the rest.
    const std::vector<size_t> order = webshop_python_shuffle(cat.goals.size(), 233);
    for (size_t pos = 0; pos < order.size(); ++pos) {
      const bool keep = split == DataSplit::kAny || (split == DataSplit::kTest && pos < 500) ||
                        (split == DataSplit::kTrain && pos >= 1500);
      if (keep) pool.push_back(order[pos]);
    }
  } else {
    for (size_t i = 0; i < cat.goals.size(); ++i) {
      if (split == DataSplit::kAny || webshop_split_of(cat.goals[i].asin) == split) pool.push_back(i);
    }
  }
  AGENTR1_CHECK(n == 0 || !pool.empty(), "webshop dataset: the catalogue's goals have none in the "
                                             << data_split_name(split) << " split (" << cat.goals.size()
                                             << " goals in all" << (opts.webshop_index_split ? ", split by WebShop's goal index" : "")
                                             << ")");
  // The test goals of WebShop's split stay in its order (sample i = its test goal i).
  if (!(opts.webshop_index_split && split == DataSplit::kTest)) {
    Rng rng(derive_seed(seed, {kSeedFileGoals, static_cast<uint64_t>(split) + 1}));
    rng.shuffle(pool.begin(), pool.end());
  }
  for (int64_t i = 0; i < n; ++i) out.push_back(cat.goals[pool[static_cast<size_t>(i) % pool.size()]]);
  return out;
}

}  // namespace agentr1::tasks
