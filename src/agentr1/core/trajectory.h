// agentr1/core/trajectory.h — the step-level data every layer above core shares.
//
//   Sample s = Sample::from_json(row);          // one dataset row (Agent-R1 schema)
//   Step st; st.prompt_ids = ...; st.response_ids = gen.token_ids; ...
//   traj.steps.push_back(std::move(st));
//
// A Step stores the prompt and response ids exactly as the policy saw and sampled
// them, with the behaviour log-probs. Training reads these ids; it never decodes and
// re-tokenises text.
//
// What code branches on is a typed field (kind, finish, anchor, game_reward); `info` is
// for what is only logged. On disk (to_json) the typed fields are written into "info"
// under the keys they had before they were fields ("kind", "finish_reason", "anchor",
// "game_reward"), first, and from_json reads them back out of it, so dumps keep their
// keys and values and old dumps load.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"

namespace agentr1 {

// One dataset row (JSONL), the Agent-R1 sample schema:
//   {"prompt": [{"role": "user", "content": "..."}], "agent_name": "tool_agent",
//    "reward_model": {"style": "rule", "ground_truth": "42"},
//    "env_kwargs": {...}, "data_source": "arith", "extra_info": {...}}
struct Sample {
  json prompt = json::array();       // chat messages
  std::string agent_name;            // which flow/env runs it ("" = config default)
  std::string reward_style = "rule"; // reward_model.style
  json ground_truth;                 // reward_model.ground_truth (string or number)
  json env_kwargs = json::object();  // per-sample overrides of flow/env defaults
  std::string data_source;
  json extra_info = json::object();

  // Throws Error naming the field and the rule when the row is malformed.
  static Sample from_json(const json& row);
  json to_json() const;
};

// What a step is: a turn of the policy, or a model call an environment made itself
// and wants trained (a summary of earlier turns, env/context_policy.h).
enum class StepKind { kAction, kSummary };
const char* step_kind_name(StepKind k);  // "action", "summary"

struct Step {
  TokenIds prompt_ids;               // the full prompt the policy conditioned on
  TokenIds response_ids;             // exactly what it sampled
  std::vector<float> response_logprobs;  // behaviour log-probs, one per response id
  float reward = 0.0f;               // per-step reward from the environment
  bool done = false;                 // the episode ended after this step
  bool truncated = false;            // ended by a budget (length, context), not by the env
  StepKind kind = StepKind::kAction; // a summary step is no answer and no turn (info "kind":
                                     // "summary" on disk; an action step has no "kind")
  std::optional<FinishReason> finish;  // how its generation ended; unset for a step that
                                     // was not generated (e.g. built by hand). On disk:
                                     // info "finish_reason" (finish_reason_name)
  std::string anchor;                // the environment state the step acted in, for GiGPO's
                                     // step groups (env::StepResult::anchor); "" = unknown,
                                     // never grouped. On disk: info "anchor" when not ""
  std::optional<float> game_reward;  // a text game's reward for this step
                                     // (env::StepResult::game_reward), summed into the
                                     // outcome by the "env" reward. On disk: info "game_reward"
  json info = json::object();        // what is only logged: env/tool details (tool calls,
                                     // errors, turn, truncated_by, ...). Must not hold the
                                     // typed fields' keys (is_step_field_info_key)
  int64_t policy_version = 0;
  std::string response_text;         // in memory only, never written by to_json: the
                                     // response as the environment read it (env::Action::text,
                                     // decoded once by the flow); "" when not decoded

  // Throws Error when info holds a typed field's key.
  json to_json() const;
  // Throws Error for a typed field's key in "info" with a value it cannot hold (an
  // unknown finish reason or kind, a non-string anchor, a non-number game_reward).
  static Step from_json(const json& j);
};

// True for the info keys that hold Step's typed fields on disk: "kind",
// "finish_reason", "anchor", "game_reward".
bool is_step_field_info_key(const std::string& key);

struct Trajectory {
  std::string uid;                   // unique id of this trajectory
  std::string group;                 // sample id; GRPO groups share it
  std::string data_source;           // the sample's data_source (routes it to a distillation
                                     // teacher); "" = none. On disk only when not ""
  std::vector<Step> steps;
  std::string infra_failure;         // "" = none; else why the episode's infrastructure failed
                                     // (a tool's server or sandbox, the reward service:
                                     // core/error.h's InfraError). Such a trajectory is not
                                     // the model's doing: the trainer leaves it out of its
                                     // group's advantage and counts it (env/infra_failures).
                                     // On disk only when not ""
  float outcome_reward = 0.0f;       // reward from the reward_model rule at the end
  json metrics = json::object();     // num_turns, tool_calls, tool_errors, ...

  // Sum of step rewards plus the outcome reward.
  float total_reward() const;
  json to_json() const;
  static Trajectory from_json(const json& j);
};

// Moves the trajectories marked infra_failure out of `trajs` (the rest keep their order)
// into `failed`, in order. A group of several that this leaves with one member has no
// baseline for a group estimator (GRPO would give the lone member its raw score): that
// member moves to `orphaned`. The trainer trains on what stays, so a group's advantage
// is computed over its members that the infrastructure did not fail.
struct InfraSplit {
  std::vector<Trajectory> failed;
  std::vector<Trajectory> orphaned;
};
InfraSplit take_infra_failures(std::vector<Trajectory>& trajs);

}  // namespace agentr1
