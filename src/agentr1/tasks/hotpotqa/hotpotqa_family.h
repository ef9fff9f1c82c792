// agentr1/tasks/hotpotqa/hotpotqa_family.h — the "hotpotqa" task family: multi-hop retrieval QA
// through the ToolEnv, with a BM25 "search" tool (and optionally "open"), exact-match or
// token-F1 rewards, seeded synthetic questions (hotpotqa_kb.h) or HotpotQA files
// (hotpotqa_data.h), and a searching expert for SFT demonstrations.
//
//   register_hotpotqa_family();          // task family, tools search/open, rewards em/f1
//   auto fam = make_task_family("hotpotqa", {{"max_level", 2}, {"reward", "f1"}});
//   std::vector<Sample> val = fam->make_dataset(DataSplit::kTest, 64, /*seed=*/1000004);
//   // val[i].env_kwargs == {"tools": ["search"],
//   //                       "tool_kwargs": {"search": {"docs": [[title, text], ...], "top_k": 3}}}
//   // real data:
//   make_task_family("hotpotqa", {{"train_file", "hotpot_train_v1.1.json"},
//                                 {"test_file", "hotpot_dev_distractor_v1.json"}, {"corpus", "global"}});
//
// task_kwargs (all optional; unknown keys, wrong types and bad values throw Error naming
// the key and the rule):
//   min_level, max_level (int 1..3,   searches per generated question: 1 lookup, 2 bridge
//     defaults 1 and 3)               or comparison, 3 three-hop (hotpotqa_kb.h)
//   top_k (int >= 1, default 3)       passages per search
//   open_tool (bool, false)           also offer "open" (one passage in full, by title)
//   reward ("em" | "f1", "em")        reward_model.style: exact match or token F1
//   distractors (int 0..32, 4)        namesake distractor passages per generated question
//   use_system_prompt (bool, true)    prompts start with kHotpotSystemPrompt (false: the user
//                                     message alone)
//   train_file, test_file (string)    HotpotQA JSON arrays: when either is set, make_dataset
//                                     reads the split's file instead of generating (the first
//                                     n rows; n > rows gives all rows with a warning; seed
//                                     unused; kAny reads train_file, else test_file); a split
//                                     whose file is not set throws Error. Levels and
//                                     distractors are then unused.
//   corpus ("distractor" | "global")  file rows search their own context (passages inline in
//                                     the sample), or the global corpus of every context of
//                                     the same file (tool kwargs corpus_file = that file's
//                                     absolute path, loaded and indexed once per process)
//
// Samples: agent_name "tool"; data_source "hotpotqa" (no reward function has that name, so
// the reward is the style's, "em" or "f1"); reward_model {style, ground_truth: the answer};
// env_kwargs {"tools": ["search"(, "open")], "tool_kwargs": {"search": {corpus, "top_k"},
// "open": {corpus}}}; extra_info {type, level, hops: [{query, title, found}],
// supporting_facts, index, split, question, and seed + template (generated) or id +
// source_file (files)}. File rows' hops are their supporting-fact titles (query = title,
// found = "").
//
// Prompt: Search-R1's (PeterGriffinJin/Search-R1) reworded for tool calls: it asks for
// <think>, <search>query</search> and <answer>; we offer the search tool through hermes
// tool calls instead of <search> tags (agentr1 is a tool-calling framework; the ToolEnv
// renders the tools block), drop <think> (tiny models), and keep the final answer in
// <answer>...</answer>. The user message is "Question: <question>".
//
// Expert (demonstrations, play): one search per hop with the hop's query, each run on the
// real tool (the sample's own env_kwargs) and checked to return the hop's passage (and,
// for generated questions, the hop's `found` text), then "<answer>ANSWER</answer>".
// Tool-call turns have no text besides the call (short, for the built-in model).
//
// Deviations: passages are shown as Search-R1 prints them, "Doc 1(Title: T) text" (no
// space before the parenthesis, where the issue wrote "Doc i (Title: ...)"); the final
// answer is the LAST <answer> of the response (Search-R1 needs at least two in the
// whole text because its user prompt holds an example); BM25 without stemming
// (tasks/bm25.h) instead of Search-R1's dense e5 retriever; normalisation ASCII-only
// (qa_metrics.h). The global corpus of a file is that file's contexts (train rows search
// the train file's, test rows the test file's), not a Wikipedia dump.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/tasks/hotpotqa/hotpotqa_data.h"
#include "agentr1/tasks/hotpotqa/hotpotqa_kb.h"
#include "agentr1/tasks/hotpotqa/qa_metrics.h"
#include "agentr1/tasks/task_family.h"

namespace agentr1::tasks {

extern const char* const kHotpotSystemPrompt;
extern const char* const kHotpotOpenToolHint;  // appended to the system prompt with open_tool

enum class HotpotCorpus {
  kDistractor,  // each file row searches its own context
  kGlobal,      // every row searches all contexts of its file
};

struct HotpotFamilyOptions {
  int min_level = 1;                          // fewest searches per generated question (1..3)
  int max_level = 3;                          // most searches (min_level..3)
  int top_k = 3;                              // passages per search (>= 1)
  bool open_tool = false;                     // also offer the "open" tool
  QaMetric reward = QaMetric::kExactMatch;    // reward_model.style "em" or "f1"
  int distractors = 4;                        // namesake passages per generated question (0..32)
  bool use_system_prompt = true;              // prepend kHotpotSystemPrompt
  std::string train_file;                     // HotpotQA JSON for kTrain ("" = generate)
  std::string test_file;                      // HotpotQA JSON for kTest ("" = generate)
  HotpotCorpus corpus = HotpotCorpus::kDistractor;  // what file rows search

  // Names every key once (core/config.h: binding, to_json, describe_config).
  template <class V>
  void visit(V& v) {
    v.field("min_level", min_level, "fewest searches per generated question (1..3)");
    v.field("max_level", max_level, "most searches per generated question (min_level..3)");
    v.field("top_k", top_k, "passages per search (1..100)");
    v.field("open_tool", open_tool, "also offer the open tool (one passage in full, by title)");
    v.field("reward", reward, "reward_model.style: em (exact match) | f1 (token F1)");
    v.field("distractors", distractors, "namesake distractor passages per generated question (0..32)");
    v.field("use_system_prompt", use_system_prompt, "prompts start with the task's system prompt");
    v.field("train_file", train_file, "HotpotQA JSON read for the train split; empty = generated");
    v.field("test_file", test_file, "HotpotQA JSON read for the test split; empty = generated");
    v.field("corpus", corpus, "what file rows search: distractor (own context) | global (the whole file)");
  }
  // Throws Error naming the key, the rule and the value.
  void validate() const;
  // From task_kwargs (null or {} = defaults), bound with bind_config at "data.task_kwargs":
  // throws one Error listing unknown keys (with the valid ones), wrong types and invalid
  // values, each with its dotted key.
  static HotpotFamilyOptions from_json(const json& kwargs);
  json to_json() const;
  bool uses_files() const { return !train_file.empty() || !test_file.empty(); }
};

// [system?, user "Question: <question>"].
json hotpot_prompt_messages(const std::string& question, const HotpotFamilyOptions& opts);

// A generated question as a sample of `split` (the sample schema above).
Sample kb_question_to_sample(const KbQuestion& q, DataSplit split, const HotpotFamilyOptions& opts);
// A file row as a sample; `file` is the path it came from (the global corpus's file).
Sample hotpot_example_to_sample(const HotpotExample& ex, int64_t index, DataSplit split, const std::string& file,
                                const HotpotFamilyOptions& opts);

// The expert's tool calls for a sample of this family: [{"name": "search", "arguments":
// {"query": ...}}, ...], one per extra_info.hops. Throws Error when the sample has no hops.
std::vector<json> hotpot_expert_calls(const Sample& sample);
// The whole expert episode as chat messages (prompt, assistant tool-call turns, tool
// results from the real tools, final "<answer>...</answer>"). Throws Error when a search
// misses the hop's passage or `found` text (a generator bug, or a file row the global
// corpus does not retrieve).
json hotpot_expert_messages(const Sample& sample);

class HotpotFamily : public TaskFamily {
 public:
  explicit HotpotFamily(HotpotFamilyOptions opts = {});
  std::string name() const override { return "hotpotqa"; }
  const HotpotFamilyOptions& options() const { return opts_; }

  // Generated: generate_kb_question(seed, i) for i < n. Files: see the top. Throws Error
  // if n < 0 or a file is unreadable / malformed.
  std::vector<Sample> make_dataset(DataSplit split, int64_t n, uint64_t seed) const override;
  // The train samples make_dataset(kTrain, n, seed) gives, each with its expert episode
  // (actions via assistant_action_text). Generated questions always succeed (Error
  // otherwise); file rows whose supporting passages a search misses are skipped with a
  // warning (then fewer than n come back). rendered: the episode rendered with tmpl and
  // the tools' schemas (no generation prompt, enable_thinking = false).
  std::vector<json> demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                   const std::string& end_of_turn,
                                   std::vector<std::string>* rendered = nullptr) const override;
  // {"rollout.max_steps=<hops + 2>", "rollout.max_new_tokens=128"}: max_level + 2 for
  // generated data (every hop, the answer, one spare turn), 4 for files (HotpotQA has two
  // supporting passages).
  std::vector<std::string> recipe_defaults() const override;
  // A tool episode (tasks/play.h) whose expert actions are hotpot_expert_calls as JSON
  // text, then "<answer>ANSWER</answer>".
  std::unique_ptr<PlayEpisode> play_episode(const Sample& sample) const override;

 private:
  HotpotFamilyOptions opts_;
};

// Registers task family "hotpotqa" (kwargs: HotpotFamilyOptions), tools "search" and
// "open" (kwargs: CorpusToolOptions, hotpotqa_search.h) and reward functions "em" and
// "f1" (qa_metrics.h score_answer; reward kwargs must be empty). Thread-safe and
// idempotent (std::call_once). Throws Error if another component registered one of
// these names first.
void register_hotpotqa_family();

}  // namespace agentr1::tasks

// QaMetric and HotpotCorpus bind by name ("em" | "f1", "distractor" | "global"); core/config.h
// has no enum fields.
namespace agentr1::config_detail {
template <>
struct Codec<tasks::QaMetric> {
  static std::string type_name() { return "string"; }
  static void read(const json& v, tasks::QaMetric& out, const std::string& key, BindContext& ctx);
  static json write(const tasks::QaMetric& x);
};
template <>
struct Codec<tasks::HotpotCorpus> {
  static std::string type_name() { return "string"; }
  static void read(const json& v, tasks::HotpotCorpus& out, const std::string& key, BindContext& ctx);
  static json write(const tasks::HotpotCorpus& x);
};
}  // namespace agentr1::config_detail
