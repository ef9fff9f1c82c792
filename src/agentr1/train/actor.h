// agentr1/train/actor.h — the policy learner: log-probs of packed rows and the
// PPO-style update over mini- and micro-batches.
//
//   Actor actor(policy, opts);
//   actor.fill_logprobs(rows, &PackedRow::old_logprob);        // before the update
//   ref_actor.fill_logprobs(rows, &PackedRow::ref_logprob);    // frozen reference
//   auto metrics = actor.update(rows, trajectory_of_row_groups);  // one RL step
//
// Numerics: forward in the model's dtype, log-softmax and losses in fp32. A
// non-finite loss or gradient skips that optimiser step (counted in
// actor/skipped_updates); `max_consecutive_skips` in a row throws Error.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/algo/kl.h"
#include "agentr1/algo/policy_loss.h"
#include "agentr1/model/transformer.h"
#include "agentr1/train/batch.h"

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

struct ActorOptions {
  OptimOptions optim;               // policy optimiser
  int ppo_epochs = 1;               // passes over each RL batch
  int ppo_mini_batch_size = 0;      // trajectories per optimiser step; 0 = whole batch
  int micro_batch_size = 8;         // rows per forward/backward (gradient accumulation)
  int64_t micro_batch_max_tokens = 0;  // cap on rows * padded length; 0 = none
  algo::PolicyLossOptions loss;     // clip ratios, dual clip, aggregation
  bool use_kl_loss = false;         // add kl_loss_coef * KL(pi || ref) to the loss
  double kl_loss_coef = 0.001;      // weight of the KL loss
  algo::KlType kl_loss_type = algo::KlType::kLowVarKl;  // KL estimator
  double entropy_coeff = 0.0;       // entropy bonus weight (loss -= coeff * entropy)
  bool merge_prefix_steps = true;   // pack append-only steps of a trajectory into one row
  int64_t min_shared_prefix = 16;   // compute a micro-batch's common row prefix once when it
                                    // has at least this many tokens; 0 = off
  int max_consecutive_skips = 5;    // non-finite updates in a row before giving up
  double temperature = 1.0;         // log-probs of logits / temperature, as the sampler drew
                                    // them (set from rollout.temperature by the trainer; not a
                                    // config key of its own, as in verl); > 0
  // Config-file spellings (verl names) of the enum-valued options above; resolve()
  // parses them into `loss` and `kl_loss_type`.
  double clip_ratio = 0.2;          // default for clip_ratio_low/high when those are < 0
  double clip_ratio_low = -1;       // < 0: use clip_ratio
  double clip_ratio_high = -1;      // < 0: use clip_ratio
  std::string policy_loss = "vanilla";  // algo::make_policy_loss: vanilla (PPO clip) | gspo | reinforce
  std::string loss_agg_mode = "token-mean";
  std::string kl_loss_type_name = "low_var_kl";
  // Parses the string options into the typed ones; then validate().
  void resolve();
  void validate() const;
  template <class V>
  void visit(V& v) {
    v.section("optim", optim, "policy optimiser (AdamW)");
    v.field("ppo_epochs", ppo_epochs, "passes over each RL batch");
    v.field("ppo_mini_batch_size", ppo_mini_batch_size, "trajectories per optimiser step; 0 = all");
    v.field("micro_batch_size", micro_batch_size, "rows per forward/backward pass");
    v.field("micro_batch_max_tokens", micro_batch_max_tokens, "cap on rows x padded length; 0 = none");
    v.field("policy_loss", policy_loss, "vanilla (PPO clip, dual clip) | gspo | reinforce");
    v.field("clip_ratio", clip_ratio, "PPO clip range (both sides unless low/high are set)");
    v.field("clip_ratio_low", clip_ratio_low, "lower clip range; < 0 = clip_ratio");
    v.field("clip_ratio_high", clip_ratio_high, "upper clip range; < 0 = clip_ratio");
    v.field("clip_ratio_c", loss.clip_ratio_c, "dual-clip bound for negative advantages (> 1)");
    v.field("loss_agg_mode", loss_agg_mode,
            "token-mean | seq-mean-token-sum | seq-mean-token-mean | seq-mean-token-sum-norm");
    v.field("use_kl_loss", use_kl_loss, "add a KL(pi || ref) loss");
    v.field("kl_loss_coef", kl_loss_coef, "weight of the KL loss");
    v.field("kl_loss_type", kl_loss_type_name, "k1 | abs | k2 (mse) | k3 (low_var_kl)");
    v.field("entropy_coeff", entropy_coeff, "entropy bonus weight");
    v.field("merge_prefix_steps", merge_prefix_steps, "pack append-only steps into one row");
    v.field("min_shared_prefix", min_shared_prefix,
            "compute a micro-batch's common prefix (system prompt, tools) once if >= N tokens; 0 = off");
    v.field("max_consecutive_skips", max_consecutive_skips, "non-finite updates in a row before stopping");
  }
};

// Log-probs of batch.targets under `model` with logits divided by `temperature` (the
// distribution the sampler drew from): [B,T-1] fp32. If entropy != nullptr it receives
// the per-position entropy [B,T-1]. Grad flows unless under NoGradGuard.
at::Tensor target_logprobs(model::Transformer& model, const TrainBatch& batch,
                           at::Tensor* entropy = nullptr, double temperature = 1.0);

class Actor {
 public:
  Actor(model::Transformer policy, ActorOptions opts);
  ~Actor();

  model::Transformer& policy() { return policy_; }
  const ActorOptions& options() const { return opts_; }

  // Fills rows[i].*field with the log-prob of every token (0 at position 0), no grad.
  void fill_logprobs(std::vector<PackedRow>& rows, std::vector<float> PackedRow::*field);

  // One RL step over `rows` (old_logprob must be filled; ref_logprob too when
  // use_kl_loss). Rows of the same trajectory stay in one mini-batch.
  // Returns averaged metrics: actor/pg_loss, actor/pg_clipfrac, actor/ppo_kl,
  // actor/kl_loss, actor/entropy, actor/grad_norm, actor/lr, actor/skipped_updates.
  std::map<std::string, double> update(const std::vector<PackedRow>& rows);

  // Supervised step: token-mean NLL over action tokens of `rows`. Returns sft/loss etc.
  std::map<std::string, double> sft_step(const std::vector<PackedRow>& rows);

  int64_t optimizer_steps() const { return steps_; }
  void save_optimizer(const std::string& path);
  void load_optimizer(const std::string& path);
  void set_optimizer_steps(int64_t steps) { steps_ = steps; }

 private:
  double current_lr() const;
  // Applies the gradients accumulated so far; returns false if skipped (non-finite).
  bool optimizer_step(std::map<std::string, double>& m);

  model::Transformer policy_;
  ActorOptions opts_;
  std::unique_ptr<torch::optim::AdamW> optim_;
  std::unique_ptr<algo::PolicyLoss> loss_fn_;
  int64_t steps_ = 0;
  int consecutive_skips_ = 0;
  int64_t skipped_total_ = 0;
};

}  // namespace agentr1::train
