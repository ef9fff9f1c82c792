// agentr1/flow/trajectory_builder.h — the bookkeeping every flow shares: observation ->
// prompt ids, budgets, one generation per turn, per-turn seeds, outcome reward, metrics.
//
//   TrajectoryBuilder b(ctx, opts, seed);
//   while (std::optional<Step> st = b.generate(b.prompt_ids(obs))) {   // nullopt: budget hit
//     ... st->reward, st->done, st->info from the environment ...
//     bool done = st->done;
//     b.add(std::move(*st));
//     if (done || b.aborted()) break;
//   }
//   Trajectory t = b.finish(sample);
//
// Budgets, checked by generate() before each turn:
//   - steps().size() == max_steps               -> "max_steps"
//   - no response tokens left                   -> "response_budget"
//   - prompt > max_prompt_tokens, or prompt + 1 > generator->max_context()
//                                               -> "context_overflow" (logged as a warning)
//   In each case no generation happens, the last step (if any) gets truncated = true and
//   info["truncated_by"] = the reason, and generate() returns nullopt.
//   A turn's generation cap is min(max_new_tokens, response tokens left,
//   max_context - prompt length).
//
// Step semantics: done = the environment ended the episode; truncated = a budget ended
// it (the two are exclusive; the last step has one of them unless the engine aborted).
//
// Metrics (all numbers; flags are 0/1): num_turns, response_length (all response
// tokens), prompt_length (first prompt), tool_calls, tool_errors, tool_timeouts,
// malformed_calls, unknown_tools (sums of the step infos), truncated, context_overflow,
// max_steps_reached, response_budget_exhausted, aborted, success (outcome_reward >=
// success_threshold), outcome_reward, finish/<reason> (turns per finish reason:
// stop_token, stop_string, length, context_full, aborted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/trajectory.h"
#include "agentr1/env/observation.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/text/jinja/chat_template.h"

namespace agentr1::flow {

// Observation -> prompt ids: tokens verbatim; text -> encode(text, allow_special=true);
// messages -> render(messages, no tools, add_generation_prompt=true) then encode.
TokenIds observation_to_prompt_ids(const env::Observation& obs, const text::Tokenizer& tokenizer,
                                   const text::ChatTemplate& chat_template,
                                   const text::RenderOptions& render_options);

// The seed of turn `turn` of a trajectory with seed `trajectory_seed`.
uint64_t turn_seed(uint64_t trajectory_seed, int turn);

class TrajectoryBuilder {
 public:
  // ctx and opts must outlive the builder. Validates both (Error).
  TrajectoryBuilder(const FlowContext& ctx, const FlowOptions& opts, uint64_t seed);

  const text::RenderOptions& render_options() const { return render_options_; }
  TokenIds prompt_ids(const env::Observation& obs) const;

  // One turn: checks the budgets (see above), then generates. The Step has prompt_ids,
  // response_ids, response_logprobs, policy_version, finish, response_text (the
  // response decoded once, env::action_text: what the env reads as Action::text) and
  // info {"turn", "max_new_tokens"}; the caller fills reward/done/anchor/game_reward/info
  // from the environment and passes it to add().
  // Throws Error for an empty prompt or a generator that breaks its contract (more
  // tokens than asked, logprobs not one per token).
  std::optional<Step> generate(TokenIds prompt_ids);

  // Appends a step. A step whose generation was aborted by the engine (finish ==
  // kAborted) is marked truncated (info["truncated_by"] = "aborted"); aborted() is then
  // true.
  void add(Step step);
  bool aborted() const { return aborted_; }
  const std::vector<Step>& steps() const { return steps_; }

  // The text a reward function reads: decode of the step's response ids without their
  // trailing stop ids (the sampling's and the context's). That is the step's
  // response_text (which drops trailing special tokens) whenever the two rules drop the
  // same ids, as for every response that ends with a stop id that is a special token
  // (<|im_end|>, eos) or with an ordinary token; only otherwise (a length cut after a
  // special token that is no stop, a stop id that is not special) is it decoded again.
  std::string reward_text(const Step& step) const;

  // Outcome reward (the reward function on the last turn's reward_text against the
  // sample's ground truth; 0 when there are no steps; for kEnvReward the sum of the
  // steps' game_reward) and metrics. Summary steps (Step::kind) are no turn. An env's
  // own episode metrics (a step's info "episode_metrics", an object of numbers) join
  // the metrics from the last step that has them, under their own names (the trainer
  // logs them as env/<name>/mean). Throws Error when no reward function matches (see
  // FlowOptions::reward_fn).
  Trajectory finish(const Sample& sample);

 private:
  void end_truncated(const char* reason);

  const FlowContext& ctx_;
  const FlowOptions& opts_;
  uint64_t seed_;
  text::RenderOptions render_options_;
  TokenIds stop_ids_;
  std::vector<Step> steps_;
  int response_tokens_ = 0;
  bool aborted_ = false;
  bool context_overflow_ = false;
  bool max_steps_reached_ = false;
  bool response_budget_exhausted_ = false;
};

// The reserved reward name "env": the outcome reward is the sum of the steps'
// Step::game_reward (text games, env/text_game.h), not a function of the response.
// Chosen by a sample's reward style "env" (when its data_source names no reward
// function) or by FlowOptions::reward_fn = "env".
inline constexpr const char* kEnvReward = "env";

// The reward function name for `sample` under `opts` (see FlowOptions::reward_fn), or
// kEnvReward. Throws Error naming data_source, style and the known names when none matches.
std::string reward_fn_name_for(const Sample& sample, const FlowOptions& opts);

}  // namespace agentr1::flow
