// agentr1/sft/sft.h — supervised fine-tuning on demonstration episodes.
//
//   // Demonstrations become trajectories through the SAME agent loop as RL rollouts
//   // (a scripted generator "samples" the expert's tokens), so SFT rows are token for
//   // token what the policy will see and produce at rollout time.
//   auto trajs = demonstration_trajectories(demos, ctx_parts, flow_opts);
//   SftResult r = run_sft(policy, trajs, sft_opts, metrics_sink);  // loss on action tokens
//
// A demonstration is {"sample": <Agent-R1 sample>, "actions": ["<assistant text>", ...]}:
// the assistant texts of each turn exactly as the model should write them, including
// the end-of-turn token text (e.g. "<|im_end|>"). tasks::assistant_action_text() turns a
// chat message with tool_calls into that text for the hermes format; task families'
// demonstrations() produce this format.
//
// The SFT step runs on the shared learner core: one mini-batch (the step's rows), split
// into micro-batches by update.h's token-weighting rule, loss = token-mean NLL over the
// action tokens at temperature 1, one guarded Optimizer step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/model/transformer.h"
#include "agentr1/train/learner/metrics.h"
#include "agentr1/train/learner/optimizer.h"
#include "agentr1/train/learner/update.h"

namespace agentr1::train {

struct SftOptions {
  OptimOptions optim;               // AdamW settings (lr, warmup, clipping)
  int epochs = 3;                   // passes over the demonstrations
  int batch_size = 32;              // rows per optimiser step (a demonstration is one row when
                                    // its turns extend each other, else one per turn)
  int micro_batch_size = 16;        // rows per forward/backward
  int64_t min_shared_prefix = 16;   // compute a micro-batch's common row prefix once (>= N tokens)
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

// One supervised learner: an Optimizer ("sft") and the NLL loss on the learner core.
class SftLearner {
 public:
  // The learner's tensors go to the policy's device.
  SftLearner(model::Transformer policy, const SftOptions& opts);
  // One optimiser step on the action tokens of `rows`. Returns sft/loss (token-mean
  // NLL before the step; NaN if the step was skipped as non-finite), sft/token_acc
  // (argmax accuracy), sft/tokens, sft/skipped_updates, and sft/grad_norm, sft/lr when
  // applied. Throws Error if the rows have no action token.
  Metrics step(const std::vector<PackedRow>& rows);
  // The NLL of one micro-batch (token mean over its action tokens); adds unweighted
  // sft/token_acc to m. For tests.
  at::Tensor micro_batch_loss(const TrainBatch& b, const MicroBatchScale& s, Metrics& m);
  Optimizer& optimizer() { return optim_; }

 private:
  model::Transformer policy_;
  SftOptions opts_;
  at::Device device_;
  Optimizer optim_;
};

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
