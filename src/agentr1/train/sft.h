// agentr1/train/sft.h — supervised fine-tuning on demonstration episodes.
//
//   // Demonstrations become trajectories through the SAME agent loop as RL rollouts
//   // (a scripted generator "samples" the expert's tokens), so SFT rows are token for
//   // token what the policy will see and produce at rollout time.
//   auto trajs = demonstration_trajectories(demos, ctx_parts, flow_opts);
//   SftResult r = run_sft(policy, trajs, sft_opts, run_dir);     // loss on action tokens
//
// A demonstration is {"sample": <Agent-R1 sample>, "actions": ["<assistant text>", ...]}:
// the assistant texts of each turn exactly as the model should write them, including
// the end-of-turn token text (e.g. "<|im_end|>"). assistant_action_text() turns a chat
// message with tool_calls into that text for the hermes format.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/model/transformer.h"
#include "agentr1/train/actor.h"

namespace agentr1::train {

struct SftOptions {
  OptimOptions optim;               // AdamW settings (lr, warmup, clipping)
  int epochs = 3;                   // passes over the demonstrations
  int batch_size = 32;              // trajectories per optimiser step
  int micro_batch_size = 16;        // rows per forward/backward
  int seed = 7;                     // shuffling
  int log_every = 10;               // progress line every N optimiser steps
  void validate() const;
};

struct SftResult {
  int64_t steps = 0;
  double first_loss = 0;
  double final_loss = 0;            // mean over the last epoch
  double final_token_acc = 0;       // argmax accuracy on action tokens, last epoch
  double wall_s = 0;
  std::vector<std::map<std::string, double>> history;  // per optimiser step
};

// Hermes/Qwen form of one assistant message: content, then for each tool call
// ("\n" between parts) <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>,
// then end_of_turn. Arguments rendered with python_tojson (as the template does).
std::string assistant_action_text(const json& message, const std::string& end_of_turn);

// Runs each demonstration through the sample's agent loop with a scripted generator.
// Throws Error if a demonstration ends early (the env finished before its actions
// ran out) or needs more actions than given.
std::vector<Trajectory> demonstration_trajectories(const std::vector<json>& demos,
                                                   const flow::FlowContext& ctx,
                                                   const flow::FlowOptions& opts);

// Trains `policy` on the action tokens of `trajs`. metrics_sink (may be null) gets one
// JSON line per step.
SftResult run_sft(model::Transformer& policy, const std::vector<Trajectory>& trajs,
                  const SftOptions& opts,
                  const std::function<void(const json&)>& metrics_sink = nullptr);

}  // namespace agentr1::train
