// agentr1/tasks/webshop/webshop_goal.h — seeded shopping goals over a catalogue, by level, with
// a train/test split disjoint by target product.
//
//   WebshopGoalOptions o;                    // levels 1..4, train split
//   o.max_level = 3;
//   WebshopGoal g = generate_webshop_goal(*cat, /*seed=*/7, /*index=*/0, o);
//   // g.instruction_text "i am looking for a body wash that is sulfate free and tea tree
//   //                     with scent: vanilla, and price lower than 30.00 dollars"
//   std::vector<WebshopGoal> test = webshop_dataset_goals(*cat, DataSplit::kTest, 64, /*seed=*/3, o);
//
// Levels set the fewest goal (attributes, options): 1 (1, 0), 2 (2, 1), 3 (3, 2), 4 (4,
// 2). The target is drawn among the products of the split with enough attributes and
// option groups; its attributes and option groups are put in a random order, one value
// per group drawn, the price bound is WebShop's (webshop_catalog.h). The goal takes the
// level's number of each; while another product (or another option value) would also
// earn reward 1, it takes one more condition, an option and an attribute in turn (at
// most 4 attributes and every option group); when nothing is left to add, the target is
// redrawn. So every goal is unique: only the target with the asked options earns 1
// (webshop_goal_is_unique). The instruction is one of five phrasings ("i need a ...",
// "i am looking for ...", "find me ...") with WebShop's synthetic option clause
// " with color: navy, and size: large" (names sorted) and price clause ", and price
// lower than 40.00 dollars".
// Determinism: goal i depends only on (catalogue, seed, i, options).
// Split: a product is a test target when the FNV-1a hash of its asin, mixed, is odd
// (webshop_split_of); train and test goals never share a target. The goals of
// WebShop's files split the same way by default (its human goals share targets between
// its own splits, so by-index and by-asin differ); with webshop_index_split they split
// as WebShop does (baseline_models/env.py): the goals in load order shuffled as
// Python's random.seed(233); random.shuffle(goals) does (webshop_python_shuffle), then
// test = positions 0..499 (kept in that order), dev = 500..1499 (left out), train = the
// rest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentr1/tasks/data_split.h"
#include "agentr1/tasks/webshop/webshop_catalog.h"

namespace agentr1::tasks {

constexpr int kWebshopMaxLevel = 4;

struct WebshopGoalOptions {
  int min_level = 1;                     // 1..4
  int max_level = 4;                     // min_level..4
  DataSplit split = DataSplit::kTrain;   // which targets
  int max_attempts = 400;                // redraws before Error (not reached for generated catalogues)
  bool webshop_index_split = false;      // file goals: WebShop's split by goal index (see above)

  void validate() const;
};

// (goal attributes, goal options) of a level.
std::pair<int, int> webshop_level_shape(int level);

// Python 3's random.seed(seed) then random.shuffle(list(range(n))): MT19937 seeded by
// init_by_array, Fisher-Yates from the back with _randbelow (getrandbits + rejection).
std::vector<size_t> webshop_python_shuffle(size_t n, uint32_t seed);

// kTrain or kTest for a target asin.
DataSplit webshop_split_of(const std::string& asin);

// Goal `index` of `seed` over a generated catalogue. Throws Error when no unique goal
// is found within max_attempts draws (a catalogue too small for the split or level).
WebshopGoal generate_webshop_goal(const WebshopCatalogue& cat, uint64_t seed, int64_t index,
                                  const WebshopGoalOptions& opts);

// True when the target (cat index) is the only way to reward 1: every other product
// sharing a title noun scores < 1 even with all its option values chosen, and no other
// value of the target's option groups matches a goal option.
bool webshop_goal_is_unique(const WebshopCatalogue& cat, const WebshopGoal& goal, size_t target);

// n goals of `split`: generated ones (generate_webshop_goal(seed, i)) when the
// catalogue has no goals of its own, else the catalogue's goals of that split, shuffled
// by seed (the test goals of webshop_index_split in WebShop's order) and repeated
// cyclically (levels do not apply). Throws Error when the split has no goals, or for
// webshop_index_split on a generated catalogue.
std::vector<WebshopGoal> webshop_dataset_goals(const WebshopCatalogue& cat, DataSplit split, int64_t n,
                                               uint64_t seed, const WebshopGoalOptions& opts);

}  // namespace agentr1::tasks
