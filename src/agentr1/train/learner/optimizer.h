// agentr1/train/learner/optimizer.h — the optimiser unit shared by the actor, the critic and SFT:
// AdamW, the learning-rate schedule, and one guarded step.
//
//   Optimizer opt(model->parameters(), opts.optim, "actor", /*max_consecutive_skips=*/5);
//   opt.zero_grad();
//   loss.backward();                       // gradients of one optimiser step, accumulated
//   std::map<std::string, double> m;
//   if (opt.step(m)) ...                   // reduced, clipped, applied; m["actor/grad_norm"], m["actor/lr"]
//   opt.skip("non-finite loss");           // or: a step thrown away before step()
//
// step() is the one place gradients of a step pass through before they change weights:
//   1. the GradientReducer, if one is set (data parallelism: all-reduce the gradients
//      so every rank applies the same update; see GradientReducer);
//   2. the global norm, clipped to grad_clip (> 0) or just measured;
//   3. a non-finite norm skips the step: gradients are zeroed, the skip counted
//      (skipped(); run_update reports it as <name>/skipped_updates) and, after
//      max_consecutive_skips in a row, Error;
//   4. otherwise the learning rate of this step (linear warm-up over warmup_steps, then
//      constant) and AdamW's update; gradients are zeroed.
// grad_norm is recorded only for applied steps (the norm before clipping).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace torch::optim {
class AdamW;
}

namespace agentr1::train {

struct OptimOptions {
  double lr = 1e-5;                 // peak learning rate
  double weight_decay = 0.0;        // AdamW decoupled weight decay
  double beta1 = 0.9;               // AdamW beta1
  double beta2 = 0.999;             // AdamW beta2
  double eps = 1e-8;                // AdamW epsilon
  int warmup_steps = 0;             // linear warm-up from 0 over this many optimiser steps
  double grad_clip = 1.0;           // max global grad norm; <= 0 disables clipping
  // Throws Error naming prefix.<field> (e.g. "actor.optim.lr") and the rule.
  void validate(const std::string& prefix) const;
  template <class V>
  void visit(V& v) {
    v.field("lr", lr, "peak learning rate");
    v.field("weight_decay", weight_decay, "AdamW decoupled weight decay");
    v.field("beta1", beta1, "AdamW beta1");
    v.field("beta2", beta2, "AdamW beta2");
    v.field("eps", eps, "AdamW epsilon");
    v.field("warmup_steps", warmup_steps, "linear learning-rate warm-up (optimiser steps)");
    v.field("grad_clip", grad_clip, "max global gradient norm; <= 0 disables");
  }
};

// Runs on the accumulated gradients of a step before clipping. A data-parallel run
// installs one that all-reduces every parameter's gradient (sum over ranks, divided
// by the ranks' total loss weight) so all ranks apply the same update. Must leave
// p.grad() defined wherever it was defined.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual void reduce(std::vector<at::Tensor>& params) = 0;
};

class Optimizer {
 public:
  // params: the trainable tensors (requires_grad). name: the metric namespace
  // ("actor", "critic", "sft"). hint: how a user makes the updates finite, for the
  // Error after too many skips ("" = "lower <name>.optim.lr or set <name>.optim.grad_clip").
  // Validates opts (Error naming name.optim.<field>).
  Optimizer(std::vector<at::Tensor> params, OptimOptions opts, std::string name, int max_consecutive_skips,
            std::string hint = "");
  ~Optimizer();

  void zero_grad();
  // The guarded step of the header comment. Returns true if the update was applied.
  // Adds <name>/grad_norm and <name>/lr to m when applied. Throws Error after
  // max_consecutive_skips skipped steps in a row.
  bool step(std::map<std::string, double>& m);
  // Throws away the step being accumulated (e.g. its loss was non-finite): zeroes the
  // gradients, counts it like a non-finite step (same Error after too many in a row).
  void skip(const std::string& why);
  // Data parallel: this rank's loss was non-finite, but the step is collective. Fills
  // every gradient with NaN, so that the reduced norm is non-finite on every rank and
  // step() skips it everywhere.
  void poison_gradients();

  double current_lr() const;           // the rate the next applied step uses
  int64_t steps() const { return steps_; }          // applied steps so far
  void set_steps(int64_t steps) { steps_ = steps; }  // on resume
  int64_t skipped() const { return skipped_total_; }
  const std::string& name() const { return name_; }
  const OptimOptions& options() const { return opts_; }
  const std::vector<at::Tensor>& parameters() const { return params_; }  // what it trains
  // Not owned; nullptr = none (one process).
  void set_gradient_reducer(GradientReducer* reducer) { reducer_ = reducer; }

  // AdamW moments (torch::save format). load() throws Error naming the path.
  void save(const std::string& path);
  void load(const std::string& path);

 private:
  void count_skip(const std::string& why);

  std::vector<at::Tensor> params_;
  OptimOptions opts_;
  std::string name_;
  int max_consecutive_skips_;
  std::string hint_;
  std::unique_ptr<torch::optim::AdamW> adam_;
  GradientReducer* reducer_ = nullptr;
  int64_t steps_ = 0;
  int consecutive_skips_ = 0;
  int64_t skipped_total_ = 0;
};

}  // namespace agentr1::train
