// agentr1/tasks/paper_search/paper_family.h — the "paper_search" task family: academic paper
// search with search/expand tools, an environment-owned paper pool and per-step rewards
// from a selector (Agent-R1's paper_search recipe; PaperScout, arXiv 2601.10029).
//
//   register_paper_search_family();     // family, env "paper_search", context policy "paper_pool"
//   auto fam = make_task_family("paper_search", {{"max_level", 2}});
//   std::vector<Sample> val = fam->make_dataset(DataSplit::kTest, 64, /*seed=*/1000004);
//   // real data: {"corpus_file": "papers.jsonl", "train_file": "AutoScholarQuery_train.jsonl",
//   //             "test_file": "RealScholarQuery_test.jsonl"}
//
// task_kwargs (PaperFamilyOptions; unknown keys, wrong types and bad values throw naming the key):
//   seed, methods, tasks_per_method   the generated corpus (paper_generator.h)
//   min_level, max_level (1..3)       generated query levels
//   top_k (10), expand_limit (30), max_calls_per_step (5), call_cost (0.05),
//   repeat_cost (0.5), reward_top (3), keep_threshold (0.5), recall_weight (1.0),
//   selector ("rule")                 the environment's options (paper_env.h)
//   max_pool (20), max_words (400)    the paper_pool context (paper_pool.h)
//   use_system_prompt (true)          prompts start with kPaperSystemPrompt
//   corpus_file, train_file, test_file  real data: a JSONL corpus (paper_corpus.h) and
//                                     AutoScholarQuery/RealScholarQuery-format JSONL query files
//                                     (load_scholar_queries); all three or none
//
// Samples: agent_name "paper_search" (the env), data_source "paper_search", reward style
// "env" (outcome = recall_weight x final recall@pool; the per-step rewards are the
// recipe's), ground_truth = the gold paper ids, env_kwargs = the env's options with the
// corpus ({"generated": {...}} or {"file": path}), extra_info {question, level, plan,
// query_id, split, index}. Prompt: [system, user "Query: <question>"].
//
// Expert (demonstrations, play): the query's plan (generated queries only): step 1 the
// searches, then the expansions of the pool's papers, then "Done." (no call: the episode
// ends). It reaches full recall on every generated query (paper_generator.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/tasks/paper_search/paper_generator.h"
#include "agentr1/tasks/task_family.h"

namespace agentr1::tasks {

extern const char* const kPaperSystemPrompt;

struct PaperFamilyOptions {
  uint64_t seed = 1;
  int methods = 24;
  int tasks_per_method = 4;
  int min_level = 1;
  int max_level = 3;
  int top_k = 10;
  int expand_limit = 30;
  int max_calls_per_step = 5;
  double call_cost = 0.05;
  double repeat_cost = 0.5;
  int reward_top = 3;
  double keep_threshold = 0.5;
  double recall_weight = 1.0;
  json selector = "rule";
  int max_pool = 20;
  int max_words = 400;
  bool use_system_prompt = true;
  std::string corpus_file;
  std::string train_file;
  std::string test_file;

  template <class V>
  void visit(V& v) {
    v.field("seed", seed, "seed of the generated corpus and queries");
    v.field("methods", methods, "methods in the generated corpus (4..48)");
    v.field("tasks_per_method", tasks_per_method, "tasks each generated method is applied to (1..12)");
    v.field("min_level", min_level, "lowest generated query level (1..3)");
    v.field("max_level", max_level, "highest generated query level (min_level..3)");
    v.field("top_k", top_k, "papers per search (1..50)");
    v.field("expand_limit", expand_limit, "papers per expand (1..100)");
    v.field("max_calls_per_step", max_calls_per_step, "tool calls run per response (1..16)");
    v.field("call_cost", call_cost, "reward cost of each search or expand");
    v.field("repeat_cost", repeat_cost, "reward cost of a repeated query or re-expanded paper");
    v.field("reward_top", reward_top, "newly kept papers whose scores make the step reward");
    v.field("keep_threshold", keep_threshold, "a paper the selector scores at least this is kept");
    v.field("recall_weight", recall_weight, "outcome reward = this x final recall@pool");
    v.field("selector", selector, "rule | {type: remote, url: ..., parser: yes_no, ...}");
    v.field("max_pool", max_pool, "papers in the pool shown to the model");
    v.field("max_words", max_words, "words of each abstract shown; 0 = all");
    v.field("use_system_prompt", use_system_prompt, "prompts start with the task's system prompt");
    v.field("corpus_file", corpus_file, "a JSONL paper corpus (with train_file and test_file); empty = generated");
    v.field("train_file", train_file, "AutoScholarQuery-format JSONL queries for the train split");
    v.field("test_file", test_file, "AutoScholarQuery-format JSONL queries for the test split");
  }
  void validate() const;
  static PaperFamilyOptions from_json(const json& kwargs);
  bool uses_files() const { return !corpus_file.empty(); }
  PaperWorldOptions world() const;
  // The env_kwargs of this family's samples (the corpus spec included).
  json env_kwargs() const;
};

// AutoScholarQuery / RealScholarQuery rows (PaSa), one JSON object per line (a JSON array
// is accepted too): {"question", "answer": [titles], "answer_arxiv_id": [ids]?, "qid"?}.
// Gold ids: answer_arxiv_id entries found in the corpus, else the answer titles matched
// against the corpus titles (case and spacing ignored). Rows with no gold paper in the
// corpus are skipped (counted in one warning). Throws Error naming the path and the row
// (the line for bad JSON).
std::vector<ScholarQuery> load_scholar_queries(const std::string& path, const PaperCorpus& corpus);

// The expert's assistant messages for a sample with extra_info.plan: one per plan step
// (tool_calls), then {"content": "Done."}. Throws Error when the sample has no plan.
json paper_expert_messages(const Sample& sample);

class PaperSearchFamily : public TaskFamily {
 public:
  explicit PaperSearchFamily(PaperFamilyOptions opts = {});
  std::string name() const override { return "paper_search"; }
  std::vector<Sample> make_dataset(DataSplit split, int64_t n, uint64_t seed) const override;
  std::vector<json> demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                   const std::string& end_of_turn,
                                   std::vector<std::string>* rendered = nullptr) const override;
  // rollout.max_steps=5 (the recipe's), max_new_tokens=256, max_prompt_tokens=1792 (a
  // 2,048-position model), max_response_tokens=1280.
  std::vector<std::string> recipe_defaults() const override;
  // A paper-search episode: an action is tool calls (a JSON object {"name", "arguments"},
  // a JSON list of them, or hermes markup with any number of blocks); anything else
  // ends it. Observations are the pool messages; the reward of a step is the env's step
  // reward plus its recall gain. The expert (generated queries only) follows the plan.
  std::unique_ptr<PlayEpisode> play_episode(const Sample& sample) const override;
  const PaperFamilyOptions& options() const { return opts_; }

 private:
  PaperFamilyOptions opts_;
};

// Registers task family "paper_search", env "paper_search" and context policy
// "paper_pool". Thread-safe and idempotent.
void register_paper_search_family();

}  // namespace agentr1::tasks
