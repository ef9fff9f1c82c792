// agentr1/core/trajectory.h — the step-level data every layer above core shares.
//
//   Sample s = Sample::from_json(row);          // one dataset row (Agent-R1 schema)
//   Step st; st.prompt_ids = ...; st.response_ids = gen.token_ids; ...
//   traj.steps.push_back(std::move(st));
//
// A Step stores the prompt and response ids exactly as the policy saw and sampled
// them, with the behaviour log-probs. Training reads these ids; it never decodes and
// re-tokenises text.
#pragma once

#include <cstdint>
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

struct Step {
  TokenIds prompt_ids;               // the full prompt the policy conditioned on
  TokenIds response_ids;             // exactly what it sampled
  std::vector<float> response_logprobs;  // behaviour log-probs, one per response id
  float reward = 0.0f;               // per-step reward from the environment
  bool done = false;                 // the episode ended after this step
  bool truncated = false;            // ended by a budget (length, context), not by the env
  json info = json::object();        // env/tool details (tool calls, errors, ...)
  int64_t policy_version = 0;

  json to_json() const;
  static Step from_json(const json& j);
};

struct Trajectory {
  std::string uid;                   // unique id of this trajectory
  std::string group;                 // sample id; GRPO groups share it
  std::vector<Step> steps;
  float outcome_reward = 0.0f;       // reward from the reward_model rule at the end
  json metrics = json::object();     // num_turns, tool_calls, tool_errors, ...

  // Sum of step rewards plus the outcome reward.
  float total_reward() const;
  json to_json() const;
  static Trajectory from_json(const json& j);
};

}  // namespace agentr1
