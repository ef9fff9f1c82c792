// agentr1/train/learner/actor.h — the policy learner: its options, its loss, and the calls
// into the shared learner core (scoring.h, update.h, optimizer.h).
//
//   Actor actor(policy, opts);                            // on the policy's device
//   actor.fill_logprobs(rows, &PackedRow::old_logprob);   // before the update, no grad
//   Metrics m = actor.update(rows);                       // one RL step (PPO-style)
//
// The loss of a micro-batch: the policy loss (algo::make_policy_loss(policy_loss): PPO
// clip, GSPO or REINFORCE on pi / pi_old with the rows' advantages), minus
// entropy_coeff x entropy, plus kl_loss_coef x KL(pi || ref) when use_kl_loss; all
// aggregated with loss_agg_mode over the micro-batch's action tokens and combined over
// micro-batches by update.h's weighting rule. Numerics: forward in the model's dtype,
// log-softmax and losses in fp32. Non-finite losses or gradients skip the step
// (Optimizer); max_consecutive_skips in a row throws Error. With an off-policy
// correction (off_policy.method), the policy loss sees advantages x w and the mask after
// rejection (algo::off_policy_weights from old = pi_old and the rows' behaviour log-probs).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/algo/distill.h"
#include "agentr1/algo/kl.h"
#include "agentr1/algo/off_policy.h"
#include "agentr1/algo/policy_loss.h"
#include "agentr1/model/lora.h"
#include "agentr1/model/transformer.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/learner/metrics.h"
#include "agentr1/train/learner/optimizer.h"
#include "agentr1/train/learner/scoring.h"
#include "agentr1/train/distributed/distributed.h"
#include "agentr1/train/learner/update.h"

namespace agentr1::train {

struct ActorOptions {
  OptimOptions optim;               // policy optimiser
  model::LoraOptions lora;          // low-rank adapters (rank 0 = full fine-tuning): the base
                                    // frozen, only the adapters trained; the reference policy
                                    // is then the base itself (adapters off), not a copy
  LoopOptions loop;                 // epochs, mini/micro-batches, shared prefix, skips
  algo::PolicyLossOptions loss;     // clip ratios, dual clip, aggregation
  bool use_kl_loss = false;         // add kl_loss_coef * KL(pi || ref) to the loss
  double kl_loss_coef = 0.001;      // weight of the KL loss
  algo::KlType kl_loss_type = algo::KlType::kLowVarKl;  // KL estimator
  double entropy_coeff = 0.0;       // entropy bonus weight (loss -= coeff * entropy)
  bool gradient_checkpointing = false;  // recompute each decoder layer in the backward pass
                                    // (model::TransformerImpl::set_gradient_checkpointing):
                                    // one layer's activations in memory instead of all, for
                                    // about a third more learner compute
  int64_t attention_block = model::kDefaultAttentionBlock;  // rows longer than this many
                                    // tokens attend in tiles of it with an online softmax
                                    // (model::TransformerImpl::set_attention_block): no
                                    // [heads, T, T] scores; 0 = always dense. The trainer
                                    // gives the reference and the critic the same
  bool merge_prefix_steps = true;   // pack append-only steps of a trajectory into one row
  bool use_rollout_logprobs = true; // old log-probs = the engine's behaviour log-probs (the
                                    // synchronous trainer rolls out with the weights it then
                                    // updates from, so they are the same quantity up to fp32
                                    // rounding); skips the scoring pass. The agreement stays
                                    // measured: rollout/logprob_max_diff is taken from the
                                    // first micro-batch's forward, before any optimiser step
  algo::OffPolicyOptions off_policy;  // correction for stale rollouts (algo/off_policy.h):
                                    // none | decoupled_ppo | tis. Any method but none scores
                                    // pi_old with the learner (use_rollout_logprobs is then
                                    // ignored: pi_old and pi_behav must be two quantities)
  double temperature = 1.0;         // log-probs of logits / temperature, as the sampler drew
                                    // them (set from rollout.temperature by the trainer; not a
                                    // config key of its own, as in verl); > 0
  std::optional<algo::DistillOptions> distill_topk;  // algorithm.distill with loss topk_fkl (set
                                    // by the trainer, not a key of this section): the loss
                                    // adds coef x the forward KL on the teacher's top-k
                                    // (algo/distill.h), aggregated like the policy loss; without
                                    // use_task_rewards the policy loss is left out
  // Config-file spellings (verl names) of the enum-valued options above; resolve()
  // parses them into `loss` and `kl_loss_type`.
  double clip_ratio = 0.2;          // default for clip_ratio_low/high when those are < 0
  double clip_ratio_low = -1;       // < 0: use clip_ratio
  double clip_ratio_high = -1;      // < 0: use clip_ratio
  std::string policy_loss = "vanilla";  // algo::make_policy_loss: vanilla (PPO clip) | gspo | reinforce
  std::string loss_agg_mode = "token-mean";
  std::string kl_loss_type_name = "low_var_kl";
  // True when old log-probs come from the engine (no scoring pass): use_rollout_logprobs
  // and no off-policy correction.
  bool bypass_scoring() const { return use_rollout_logprobs && !off_policy.enabled(); }
  // Parses the string options into the typed ones; then validate().
  void resolve();
  void validate() const;
  template <class V>
  void visit(V& v) {
    v.section("optim", optim, "policy optimiser (AdamW)");
    v.section("lora", lora, "LoRA adapters (PEFT names and files); rank 0 = full fine-tuning");
    loop.visit(v);
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
    v.field("gradient_checkpointing", gradient_checkpointing,
            "recompute each decoder layer in the backward pass: one layer's activations in memory, ~1/3 more compute");
    v.field("attention_block", attention_block,
            "rows longer than this attend in tiles of it with an online softmax (no [heads,T,T] scores); 0 = dense. "
            "Also the reference's and the critic's");
    v.field("merge_prefix_steps", merge_prefix_steps, "pack append-only steps into one row");
    v.field("use_rollout_logprobs", use_rollout_logprobs,
            "old log-probs = the engine's behaviour log-probs (skips a scoring pass)");
    v.section("off_policy", off_policy,
              "off-policy correction of stale rollouts (rollout.max_staleness > 0): none | decoupled_ppo | tis");
  }
};

class Actor {
 public:
  // Resolves opts (Error naming actor.<key>). The learner's tensors go to the policy's
  // device (trainer.device, where the trainer loaded it).
  Actor(model::Transformer policy, ActorOptions opts);
  ~Actor();

  model::Transformer& policy() { return policy_; }
  const ActorOptions& options() const { return opts_; }
  Optimizer& optimizer() { return *optim_; }
  // Data parallelism (distributed.h): updates forward this rank's share and the
  // optimiser sums the gradients over the ranks. nullptr (default) = one process.
  void set_process_group(ProcessGroup* pg);

  // Fills rows[i].*field with the policy's log-prob of every token (score_logprobs).
  void fill_logprobs(std::vector<PackedRow>& rows, std::vector<float> PackedRow::*field);

  // One RL step over `rows` (old_logprob must be filled; ref_logprob too when
  // use_kl_loss). Returns averaged metrics: actor/pg_loss, actor/pg_clipfrac,
  // actor/ppo_kl, actor/kl_loss, actor/entropy, actor/loss, actor/grad_norm, actor/lr,
  // actor/updates, actor/skipped_updates; with use_rollout_logprobs also
  // rollout/logprob_max_diff (first micro-batch, before any optimiser step).
  Metrics update(const std::vector<PackedRow>& rows);

  // The micro-batch loss of the header comment (what update() minimises); adds the
  // unweighted metrics to m. Exposed for tests.
  at::Tensor micro_batch_loss(const TrainBatch& b, const MicroBatchScale& s, Metrics& m);

 private:
  model::Transformer policy_;
  ActorOptions opts_;
  at::Device device_;
  std::unique_ptr<Optimizer> optim_;
  ProcessGroup* pg_ = nullptr;
  std::unique_ptr<GradientAllReduce> reducer_;
  std::unique_ptr<algo::PolicyLoss> loss_fn_;
  bool first_micro_ = false;   // the next micro-batch is the update's first
  double rollout_diff_ = -1;   // max |log-prob - behaviour log-prob| there (-1: none)
};

}  // namespace agentr1::train
