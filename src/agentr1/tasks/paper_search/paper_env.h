// agentr1/tasks/paper_search/paper_env.h — the paper-search environment (AgentEnv
// "paper_search"): the model calls search(query) and expand(paper_id), several in
// parallel per step; the environment keeps the paper pool and rebuilds the prompt.
//
//   auto env = env::make_env("paper_search", ctx, sample.env_kwargs);   // after register_paper_search_family()
//   Observation o = env->reset(sample);     // the task + tools block
//   StepResult r = env->step(action);       // runs the calls; r.reward = the step's reward
//
// One step (the recipe of Agent-R1's paper_search / PaperScout, arXiv 2601.10029):
//   - the response is parsed with the tool format (auto from the chat template, or
//     tool_format; all five formats work); no tool-call markup ends the episode;
//   - up to max_calls_per_step calls run (more: an error line each, counted);
//     search(query): the top_k BM25 matches over title + abstract; expand(paper_id): the
//     papers citing it, then its references, at most expand_limit, for a paper returned
//     by an earlier call of the episode (any other id is an error line, no cost);
//   - a search repeating an earlier query of the episode (case and spaces ignored), or
//     an expand of a paper already expanded, is not run and costs repeat_cost;
//     malformed calls, unknown tools, empty queries and unknown ids are error lines for
//     the model (counted), never exceptions;
//   - every paper returned for the first time in the episode is scored by the selector
//     (paper_selector.h; one batch per step); those scoring >= keep_threshold are kept;
//   - reward = sum of the reward_top highest scores among the newly kept papers
//             - call_cost * (searches + expands run) - repeat_cost * repeats;
//   - game_reward = recall_weight * (recall@pool after - before), so the outcome reward
//     (reward style "env": their sum) is recall_weight * the final recall@pool, and
//     success (outcome >= rollout.success_threshold) is full recall by default;
//   - the next prompt is the context policy's (default "paper_pool", paper_pool.h): the
//     task, the past actions and the ranked pool of kept papers.
// A selector whose service fails (InfraError, or a score that is not a finite number): no
// paper of that step is kept (they count as unseen, a later call may score them), the
// step's info carries "infra_error" (the trajectory is marked and left out of its group's
// advantage) and "infra_failures" = 1.
// Info per step: tool_calls, tool_errors, malformed_calls, unknown_tools, infra_failures
// (summed by the flow), and "episode_metrics" {paper/recall, paper/precision,
// paper/pool_size, paper/kept, paper/searches, paper/expands, paper/repeats,
// paper/errors} as of this step (the flow keeps the last step's, see trajectory_builder.h).
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/env/agent_env.h"
#include "agentr1/env/context_policy.h"
#include "agentr1/tasks/paper_search/paper_corpus.h"
#include "agentr1/tasks/paper_search/paper_pool.h"
#include "agentr1/tasks/paper_search/paper_selector.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tool_format/tool_format.h"

namespace agentr1::tasks {

struct PaperSearchEnvOptions {
  json corpus;                    // {"generated": {PaperWorldOptions}} or {"file": "papers.jsonl"}
  int top_k = 10;                 // papers per search (1..50)
  int expand_limit = 30;          // papers per expand (1..100)
  int max_calls_per_step = 5;     // calls run per response (1..16)
  double call_cost = 0.05;        // cost of each search/expand run (>= 0)
  double repeat_cost = 0.5;       // cost of a repeated query or re-expanded paper (>= 0)
  int reward_top = 3;             // newly kept papers whose scores count (>= 1)
  double keep_threshold = 0.5;    // a scored paper is kept at >= this
  double recall_weight = 1.0;     // outcome: weight of the final recall@pool (>= 0)
  json selector = "rule";         // paper_selector.h spec
  json context = "paper_pool";    // the paper_pool context policy and its options (paper_pool.h)
  std::string tool_format = "auto";  // text::make_tool_format name, or auto (the template's)
  bool tools_in_prompt = true;    // render the tools' schemas into the prompt (the chat
                                  // template's tools block), as ToolEnv's option of that name

  template <class V>
  void visit(V& v) {
    v.field("corpus", corpus, "the corpus: {generated: {seed, methods, ...}} or {file: papers.jsonl}");
    v.field("top_k", top_k, "papers per search (1..50)");
    v.field("expand_limit", expand_limit, "papers per expand (1..100)");
    v.field("max_calls_per_step", max_calls_per_step, "tool calls run per response (1..16)");
    v.field("call_cost", call_cost, "reward cost of each search or expand (>= 0)");
    v.field("repeat_cost", repeat_cost, "reward cost of a repeated query or re-expanded paper (>= 0)");
    v.field("reward_top", reward_top, "newly kept papers whose scores make the step reward (>= 1)");
    v.field("keep_threshold", keep_threshold, "a paper the selector scores at least this is kept");
    v.field("recall_weight", recall_weight, "outcome reward = this x final recall@pool (>= 0)");
    v.field("selector", selector, "rule (gold-set membership) | remote | {type: remote, url: ..., ...}");
    v.field("context", context, "paper_pool or {type: paper_pool, max_pool, max_words, show_actions}");
    v.field("tool_format", tool_format, "tool-call format: auto | hermes | llama3_json | deepseek_v3 | mistral | gpt_oss");
    v.field("tools_in_prompt", tools_in_prompt, "render the tool schemas into the prompt; false = the model learned its tools");
  }
  void validate() const;  // Error naming the key, the rule and the value
  // Bound at env_kwargs.<key>; unknown keys, types and ranges fail naming the key.
  static PaperSearchEnvOptions from_json(const json& kwargs);
};

// The corpus named by an env's 'corpus' option (cached per spec). Throws Error naming the
// option when malformed.
std::shared_ptr<const PaperCorpus> paper_corpus_for(const json& spec);
// The tools block the environment offers: search and expand.
json paper_tools_schema(int top_k, int expand_limit);
// "search query" normalised for repeat detection: lower case, spaces collapsed.
std::string normalize_query(const std::string& q);

// The episode's state without tokens or templates: runs calls, scores and keeps papers,
// computes rewards and metrics (the env, agentr1 play and the expert's demonstrations
// share it). Not thread-safe (one per episode).
class PaperSearchSession {
 public:
  // corpus and selector must outlive the session.
  PaperSearchSession(const PaperCorpus& corpus, PaperSelector& selector, const PaperSearchEnvOptions& options,
                     int max_pool, std::string question, std::unordered_set<std::string> gold);

  struct Outcome {
    float reward = 0;          // the step reward (see the top)
    float recall_gain = 0;     // recall@pool after - before
    json tool_messages = json::array();  // one per call/malformed block: {role: tool, content, action, items?}
    json info = json::object();          // the step's info (see the top)
  };
  // One step's calls (in order; those beyond max_calls_per_step are not run) and the
  // response's malformed blocks. Never throws for anything the model wrote.
  Outcome run(const std::vector<text::ToolCall>& calls, const std::vector<text::ToolCallError>& errors);

  std::vector<PoolItem> pool() const { return rank_pool(kept_, max_pool_); }
  // The state a step starts from, for GiGPO's anchor: the pool's ids, the queries run and
  // the papers expanded (the same actions are rewarded differently after them).
  std::string state_key() const;
  double recall() const { return recall_; }
  const std::unordered_set<std::string>& gold() const { return gold_; }

 private:
  const PaperCorpus& corpus_;
  PaperSelector& selector_;
  const PaperSearchEnvOptions& options_;
  int max_pool_;
  std::string question_;
  std::unordered_set<std::string> gold_;
  std::unordered_set<std::string> seen_;      // every paper returned this episode
  std::unordered_set<std::string> queries_;   // normalised queries run
  std::unordered_set<std::string> expanded_;  // papers expanded
  std::vector<PoolItem> kept_;                // in the order kept
  int searches_ = 0, expands_ = 0, repeats_ = 0, errors_ = 0;
  double recall_ = 0;
};

// The question of a sample (extra_info.question, else its last user message) and its gold
// ids (ground_truth: a list of ids, or null). Throws Error for another ground truth.
std::string paper_question(const Sample& sample);
std::unordered_set<std::string> paper_gold(const Sample& sample);
// The paper_pool options of a context spec (defaults for a bare name). Throws Error naming
// env_kwargs.context.<key>.
PaperPoolOptions context_pool_options(const json& context);

class PaperSearchEnv : public env::AgentEnv {
 public:
  PaperSearchEnv(const env::EnvContext& ctx, PaperSearchEnvOptions options);
  ~PaperSearchEnv() override;
  std::string name() const override { return "paper_search"; }
  // The sample's prompt (system + user query) with the tools block. Gold = ground_truth
  // (an array of paper ids; empty when unknown), question = extra_info.question or the
  // last user message.
  env::Observation reset(const Sample& sample) override;
  env::StepResult step(const env::Action& action) override;

  const json& messages() const { return messages_; }
  // The current pool, best first (what the next prompt shows with paper_pool).
  std::vector<PoolItem> pool() const;
  double recall() const;

 private:
  env::EnvContext ctx_;
  PaperSearchEnvOptions options_;
  text::RenderOptions render_options_;
  std::shared_ptr<const PaperCorpus> corpus_;
  std::unique_ptr<PaperSelector> selector_;
  std::unique_ptr<text::ToolFormat> format_;
  std::unique_ptr<env::ContextPolicy> policy_;
  std::unique_ptr<PaperSearchSession> session_;
  PaperPoolOptions pool_options_;             // the context's (max_pool: what recall counts)
  double emitted_ = 0;                        // game rewards emitted this episode (their sum)
  json tools_;
  json messages_ = json::array();
  size_t head_size_ = 0;
  TokenIds prompt_ids_;
  bool started_ = false, finished_ = false;
  size_t turn_index_ = 0;
};

}  // namespace agentr1::tasks
