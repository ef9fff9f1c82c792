// agentr1/tasks/webshop/webshop_family.h — the "webshop" task family: web shopping in WebShop's
// text site (Yao et al. 2022, princeton-nlp/WebShop) as a game through GameEnv.
//
//   register_webshop_family();      // task family "webshop" + game env "webshop" (idempotent)
//   auto fam = make_task_family("webshop", {{"max_level", 2}, {"catalogue_size", 300}});
//   std::vector<Sample> val = fam->make_dataset(DataSplit::kTest, 64, /*seed=*/1000004);
//   // val[0].agent_name "webshop", reward_style "env", data_source "webshop",
//   // env_kwargs {"game": {"catalogue_seed": 1, "catalogue_size": 300, "near_miss_rate": 0.35,
//   //                      "step_limit": 15, "repeat_instruction": false}}
//   // extra_info {"goal": {asin, instruction_text, attributes, goal_options, option_names,
//   //             price_upper, query, category, product_category, name, level}, "split", "index"}
//   // ground_truth {"asin", "attributes", "goal_options", "price_upper"}
//   // with the real catalogue:
//   make_task_family("webshop", {{"products_file", "data/items_shuffle_1000.json"},
//                                {"attributes_file", "data/items_ins_v2_1000.json"},
//                                {"human_instructions_file", "data/items_human_ins.json"}});
//
// task_kwargs (WebshopFamilyOptions; all optional; unknown keys, wrong types and bad values
// throw Error naming the key and listing the valid ones):
//   min_level, max_level (int 1..4, default 1, 3)  the fewest goal conditions
//                                  (webshop_goal.h): 1 = one attribute; 2 = two and an
//                                  option; 3 = three and two options; 4 = four and two
//                                  options; more are added until only the target (with
//                                  the asked options) earns reward 1
//   catalogue_seed (int, 1), catalogue_size (int 24..100000, 300), near_miss_rate
//                                  (0..0.9, 0.35)   the generated catalogue (webshop_catalog.h)
//   products_file, attributes_file, human_instructions_file (paths), num_products (int)
//                                  WebShop's files instead (items_shuffle*.json,
//                                  items_ins_v2*.json, items_human_ins.json); goals are
//                                  WebShop's (human goals with the human file, else
//                                  synthetic), levels ignored
//   split_by ("asin" | "webshop_index", "asin")  how train and test goals are told
//                                  apart: the target asin's hash, or (files only)
//                                  WebShop's goal index (test = its first 500 goals after
//                                  its seed-233 shuffle, dev the next 1000 left out,
//                                  train the rest; webshop_goal.h)
//   step_limit (int 0..1000, 15)   actions before an unbought episode ends
//   repeat_instruction (bool, false)  the instruction atop every page, as WebShop
//   show_admissible (bool, false)  samples ask GameEnv to list the clickables after pages
//   use_system_prompt (bool, true) prompts hold kWebshopSystemPrompt (else one user message,
//                                  kWebshopShortInstruction: a prompt may not be empty)
// The GameEnv appends the search page (with the instruction) as the first user message.
// Reward: the game's get_reward at Buy Now (reward_style "env": the outcome reward is
// the sum of the steps' game rewards). Recipe defaults (recipe_defaults()):
// rollout.max_steps = step_limit (15, as WebShop's IL/RL code), max_new_tokens 64 (the
// longest expert action, a search with four attributes and two options, is ~40 tokens),
// max_response_tokens 64 x steps, max_prompt_tokens 1984 (fits a 2048-position model with the 64 new tokens), and the sliding_window context
// keeping the last 4 turns (result pages are the long ones; the instruction stays in the
// head).
// demonstrations(): the game's expert per train sample (tasks/game_demo.h); with
// WebShop's files, goals whose expert purchase scores below 1 are skipped.
//
// Deviations from WebShop (details where each is implemented):
//   - the default catalogue is generated (24 types, near misses; webshop_catalog.h) and
//     its instructions come from five templates; WebShop's files plug in unchanged;
//     every generated goal has exactly one perfect purchase (webshop_goal.h), which
//     WebShop's goals do not promise;
//   - reward (webshop_reward.h): spaCy's noun tags are a fixed rule (title_nouns);
//     thefuzz's token_set_ratio is reimplemented; synthetic goals' options are a list of
//     values (WebShop hands the dict's (name, value) pairs to the same code); r_att is 1
//     for a goal without attributes (WebShop divides by zero);
//   - the price bound and a ranged product's price come from generators seeded by the
//     asin, not Python's global RNG (webshop_catalog.h);
//   - train/test split by target asin unless split_by = webshop_index (webshop_goal.h);
//   - pages (webshop_game.h): the instruction only on the search page unless
//     repeat_instruction; search only from the search page; action names are
//     case-insensitive too; no images or MTurk code; the score on the done page is
//     printed with 4 significant digits; the step limit appends " [SEP] Step limit
//     reached.";
//   - search is tasks/bm25.h over WebShop's documents (Lucene's BM25 without Porter
//     stemming), not Pyserini's index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/tasks/webshop/webshop_game.h"
#include "agentr1/tasks/webshop/webshop_goal.h"

namespace agentr1::tasks {

extern const char* const kWebshopSystemPrompt;
// The one user line of a prompt without the system prompt (use_system_prompt false).
extern const char* const kWebshopShortInstruction;

// How train and test goals are told apart (task_kwargs split_by).
enum class WebshopSplitBy {
  kAsin,          // "asin": the target asin's hash
  kWebshopIndex,  // "webshop_index": WebShop's goal index (files only; webshop_goal.h)
};

struct WebshopFamilyOptions {
  int min_level = 1;                 // fewest goal attributes/options (1..4)
  int max_level = 3;                 // most (min_level..4)
  WebshopGameOptions game;           // catalogue, step_limit, repeat_instruction (top-level keys)
  WebshopSplitBy split_by = WebshopSplitBy::kAsin;  // how train and test goals are told apart
  bool show_admissible = false;      // env_kwargs.show_admissible
  bool use_system_prompt = true;     // prompts start with kWebshopSystemPrompt
  bool webshop_index_split = false;  // not a key: split_by == kWebshopIndex, set by from_json and
                                     // WebshopFamily's constructor for readers of the old field
                                     // (data_convert); the family reads split_by

  // Names every key once (core/config.h); the game's keys sit at the top level.
  template <class V>
  void visit(V& v) {
    v.field("min_level", min_level, "fewest goal attributes/options (1..4)");
    v.field("max_level", max_level, "most goal attributes/options (min_level..4)");
    game.visit(v);
    v.field("split_by", split_by, "train/test split: asin (target's hash) | webshop_index (WebShop's, files only)");
    v.field("show_admissible", show_admissible, "samples ask GameEnv to list the clickables after each page");
    v.field("use_system_prompt", use_system_prompt, "prompts start with the task's system prompt");
  }
  // Levels, the game's options, split_by's rule. Throws Error naming the key and the rule.
  void validate() const;
  // From task_kwargs (null or {} = defaults), bound with bind_config at "data.task_kwargs":
  // throws one Error listing unknown keys (with the valid ones), wrong types and invalid
  // values, each with its dotted key.
  static WebshopFamilyOptions from_json(const json& kwargs);
  json to_json() const;
};

class WebshopFamily : public TaskFamily {
 public:
  explicit WebshopFamily(WebshopFamilyOptions opts = {});

  std::string name() const override { return "webshop"; }
  const WebshopFamilyOptions& options() const { return opts_; }

  // Sample i is webshop_dataset_goals(catalogue, split, n, seed, levels)[i]. Throws
  // Error if n < 0 or no goal of the split exists.
  std::vector<Sample> make_dataset(DataSplit split, int64_t n, uint64_t seed) const override;
  // The expert's episode for train samples make_dataset(kTrain, ...) (the first n whose
  // expert reaches reward 1; every generated one does).
  std::vector<json> demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                   const std::string& end_of_turn,
                                   std::vector<std::string>* rendered = nullptr) const override;
  // rollout.max_steps = step_limit, max_new_tokens, max_response_tokens,
  // max_prompt_tokens and the sliding-window context (see the top of this file).
  std::vector<std::string> recipe_defaults() const override;

  // The sample of one goal (as make_dataset writes it).
  Sample goal_to_sample(const WebshopGoal& goal, DataSplit split, int64_t index) const;

 private:
  WebshopFamilyOptions opts_;
};

// Registers task family "webshop" and the game env "webshop". Idempotent, thread-safe.
void register_webshop_family();

}  // namespace agentr1::tasks

// WebshopSplitBy binds by name ("asin" | "webshop_index"); core/config.h has no enum fields.
namespace agentr1::config_detail {
template <>
struct Codec<tasks::WebshopSplitBy> {
  static std::string type_name() { return "string"; }
  static void read(const json& v, tasks::WebshopSplitBy& out, const std::string& key, BindContext& ctx);
  static json write(const tasks::WebshopSplitBy& x);
};
}  // namespace agentr1::config_detail
