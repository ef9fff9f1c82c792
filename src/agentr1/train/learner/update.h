// agentr1/train/learner/update.h — the update loop shared by the actor, the critic and SFT:
// epochs x mini-batches x micro-batches, one optimiser step per mini-batch.
//
//   UpdateLoopOptions o;                    // epochs, mini/micro sizes, shared prefix, device
//   LossSpec spec;  spec.agg = algo::LossAgg::kTokenMean;
//   spec.units = [](const PackedRow& r) { return double(r.num_action_tokens()); };
//   Metrics m = run_update(rows, o, spec, optimizer,
//       [&](const TrainBatch& b, const MicroBatchScale& s, Metrics& mm) -> at::Tensor {
//         ...  // the micro-batch's loss, aggregated over ITS rows with `spec.agg`
//       });
//
// Mini-batches hold whole trajectories (trajectory_mini_batches), so the rows of one
// trajectory always share an optimiser step. Micro-batches split a mini-batch only for
// memory (make_micro_batches: row count and padded-token caps).
//
// The token-weighting rule. A loss is an aggregate over the mini-batch; each micro-batch
// loss is aggregated over its own rows and multiplied by a weight so that the sum over
// micro-batches of weight * loss IS the mini-batch aggregate (and so are its gradients,
// whatever the micro-batch size):
//   token-mean                  weight = units(micro) / units(mini)
//   seq-mean-token-sum / -mean  weight = rows with units > 0 (micro) / same (mini)
//   seq-mean-token-sum-norm     weight = 1, and the divisor norm_len is fixed for the
//                               mini-batch (the configured one, else the mini-batch's
//                               longest row - 1, so it does not depend on padding)
// "units" of a row are what the loss averages over: the actor's and SFT's action tokens,
// the critic's value-masked tokens. Rows with no units are left out of both counts.
// Metrics the loss function reports are combined with the metric weight (the units'
// share; the rows' share in the seq-mean modes), then averaged over applied steps. Only
// <name>/loss is exactly the mini-batch aggregate in every mode; a token-mean statistic
// (clip fraction, ppo_kl) reported in a seq-mean mode, or any metric in sum-norm mode,
// is a weighted average of the micro-batches' values, which can move slightly with the
// micro-batch size.
//
// A non-finite micro-batch loss throws the mini-batch's step away (Optimizer::skip).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/algo/loss_agg.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/learner/metrics.h"
#include "agentr1/train/learner/optimizer.h"
#include "agentr1/train/learner/scoring.h"

namespace agentr1::train {

class ProcessGroup;

struct UpdateLoopOptions {
  int epochs = 1;                       // passes over the rows
  int64_t mini_batch_trajectories = 0;  // trajectories per optimiser step; <= 0 = all
  int64_t micro_batch_size = 8;         // rows per forward/backward
  int64_t micro_batch_max_tokens = 0;   // cap on rows x padded length; 0 = none
  int64_t min_shared_prefix = 16;       // collate's shared prefix (>= N tokens); 0 = off
  bool tree_packing = false;            // collate's tree packing
  at::Device device = at::Device(at::kCPU);  // where collate puts the tensors (trainer.device)
  // Data parallelism (distributed.h; nullptr = one process): `rows` is the whole batch on
  // every rank; each rank forwards its update_share of every mini-batch, weighted by the
  // whole mini-batch's counts, and the optimiser's reducer sums the gradients. The
  // metrics are summed over the ranks at the end (the weights of their parts add up to
  // one); a non-finite loss on any rank skips the step on every rank.
  ProcessGroup* process_group = nullptr;
};

// The config keys of a learner's loop, shared by the actor and critic sections
// (actor.ppo_epochs, critic.micro_batch_size, ...: verl names).
struct LoopOptions {
  int ppo_epochs = 1;                  // passes over each RL batch
  int ppo_mini_batch_size = 0;         // trajectories per optimiser step; 0 = whole batch
  int micro_batch_size = 8;            // rows per forward/backward (gradient accumulation)
  int64_t micro_batch_max_tokens = 0;  // cap on rows x padded length; 0 = none
  int64_t min_shared_prefix = 16;      // compute a micro-batch's common row prefix (system
                                       // prompt, tools block) once if >= N tokens; 0 = off
  int max_consecutive_skips = 5;       // non-finite updates in a row before giving up
  bool tree_packing = false;           // lay each micro-batch out as a prefix tree: every
                                       // shared prefix (a group's prompt, earlier turns)
                                       // forwarded once; rows grouped by shared prefix
  // Throws Error naming section.<key> (section: "actor", "critic").
  void validate(const std::string& section) const;
  UpdateLoopOptions update_loop(at::Device device) const;
  ScoringOptions scoring(at::Device device, double temperature = 1.0) const;
  template <class V>
  void visit(V& v) {
    v.field("ppo_epochs", ppo_epochs, "passes over each RL batch");
    v.field("ppo_mini_batch_size", ppo_mini_batch_size, "trajectories per optimiser step; 0 = all");
    v.field("micro_batch_size", micro_batch_size, "rows per forward/backward pass");
    v.field("micro_batch_max_tokens", micro_batch_max_tokens, "cap on rows x padded length; 0 = none");
    v.field("min_shared_prefix", min_shared_prefix,
            "compute a micro-batch's common prefix (system prompt, tools) once if >= N tokens; 0 = off");
    v.field("max_consecutive_skips", max_consecutive_skips, "non-finite updates in a row before stopping");
    v.field("tree_packing", tree_packing,
            "lay micro-batches out as a prefix tree: every shared prefix forwarded once");
  }
};

// What a row contributes to the aggregate.
struct LossSpec {
  algo::LossAgg agg = algo::LossAgg::kTokenMean;   // how the loss aggregates (loss_agg_mode)
  double norm_len = 0;                             // seq-mean-token-sum-norm divisor; <= 0 = per mini-batch
  std::function<double(const PackedRow&)> units;   // e.g. the row's action-token count
};

struct MicroBatchScale {
  double loss_weight = 1;    // multiply the micro-batch aggregate by this
  double metric_weight = 1;  // multiply reported metrics by this
  double norm_len = 0;       // the divisor to use for seq-mean-token-sum-norm
};

// Returns the micro-batch's aggregated loss (scalar, with grad); may add metrics
// (unweighted, micro-batch level) to `m`.
using MicroLossFn = std::function<at::Tensor(const TrainBatch& b, const MicroBatchScale& s, Metrics& m)>;

// One update over `rows` as the header comment describes. Returns the metrics averaged
// over applied optimiser steps, plus <name>/loss (the mini-batch aggregate: the sum of
// loss_weight x micro-batch loss), <name>/updates (applied steps) and
// <name>/skipped_updates (the optimiser's total), where <name> is optimizer.name(). Throws what the optimiser throws.
Metrics run_update(const std::vector<PackedRow>& rows, const UpdateLoopOptions& opts, const LossSpec& spec,
                   Optimizer& optimizer, const MicroLossFn& loss_fn);

// The weights and norm_len of the rule above for one micro-batch.
MicroBatchScale micro_batch_scale(const LossSpec& spec, double micro_units, int64_t micro_rows, double mini_units,
                                  int64_t mini_rows, double mini_norm_len);

}  // namespace agentr1::train
