#include "agentr1/train/learner/actor.h"

#include <cmath>

#include "agentr1/algo/loss_agg.h"
#include "agentr1/core/error.h"
#include "agentr1/train/device.h"

namespace agentr1::train {

void ActorOptions::resolve() {
  loss.clip_ratio_low = clip_ratio_low >= 0 ? clip_ratio_low : clip_ratio;
  loss.clip_ratio_high = clip_ratio_high >= 0 ? clip_ratio_high : clip_ratio;
  loss.agg = with_context("actor.loss_agg_mode", [&] { return algo::loss_agg_from_string(loss_agg_mode); });
  kl_loss_type = with_context("actor.kl_loss_type", [&] { return algo::kl_type_from_string(kl_loss_type_name); });
  with_context("actor.policy_loss", [&] { return algo::make_policy_loss(policy_loss); });
  off_policy.resolve("actor.off_policy.");
  validate();
}

void ActorOptions::validate() const {
  optim.validate("actor.optim");
  lora.validate("actor.lora");
  loop.validate("actor");
  AGENTR1_CHECK(kl_loss_coef >= 0, "actor.kl_loss_coef must be >= 0, got " << kl_loss_coef);
  AGENTR1_CHECK(attention_block >= 0, "actor.attention_block must be >= 0 tokens (0 = dense attention; the default "
                                          << model::kDefaultAttentionBlock << "), got " << attention_block);
  AGENTR1_CHECK(temperature > 0 && std::isfinite(temperature),
                "actor temperature must be > 0 (it follows rollout.temperature, which must be > 0 for RL "
                "sampling), got " << temperature);
  loss.validate();
}

Actor::Actor(model::Transformer policy, ActorOptions opts)
    : policy_(std::move(policy)), opts_(std::move(opts)), device_(module_device(*policy_)) {
  opts_.resolve();
  loss_fn_ = algo::make_policy_loss(opts_.policy_loss);
  // LoRA: adapters on the policy (the trainer adds them before an engine copies it) and
  // only they reach the optimiser; the frozen base has no gradients and no moments.
  if (opts_.lora.enabled() && policy_->lora() == nullptr) policy_->add_lora(opts_.lora, /*seed=*/0);
  AGENTR1_CHECK(opts_.lora.enabled() == (policy_->lora() != nullptr),
                "Actor: actor.lora.rank is " << opts_.lora.rank << " but the policy "
                                             << (policy_->lora() ? "has" : "has no") << " LoRA adapters");
  policy_->set_gradient_checkpointing(opts_.gradient_checkpointing);
  policy_->set_attention_block(opts_.attention_block);
  optim_ = std::make_unique<Optimizer>(policy_->trainable_parameters(), opts_.optim, "actor",
                                       opts_.loop.max_consecutive_skips);
}

Actor::~Actor() = default;

void Actor::set_process_group(ProcessGroup* pg) {
  pg_ = pg;
  reducer_ = pg != nullptr ? std::make_unique<GradientAllReduce>(*pg, "actor gradients") : nullptr;
  optim_->set_gradient_reducer(reducer_.get());
}

void Actor::fill_logprobs(std::vector<PackedRow>& rows, std::vector<float> PackedRow::*field) {
  score_logprobs(policy_, rows, field, opts_.loop.scoring(device_, opts_.temperature));
}

at::Tensor Actor::micro_batch_loss(const TrainBatch& b, const MicroBatchScale& s, Metrics& m) {
  AGENTR1_CHECK(b.old_logprobs.defined(), "Actor::update: old log-probs were not computed");
  at::Tensor ent, topk_lp;
  const std::optional<algo::DistillOptions>& fkl = opts_.distill_topk;
  AGENTR1_CHECK(!fkl || (b.teacher_topk_ids.defined() && b.teacher_topk_logprobs.defined()),
                "Actor::update: algorithm.distill.loss=topk_fkl but the rows have no teacher top-k log-probs");
  const at::Tensor lp = target_logprobs(policy_, b, &ent, opts_.temperature,
                                        fkl ? b.teacher_topk_ids : at::Tensor(), fkl ? &topk_lp : nullptr);
  if (first_micro_) {  // weights still those the rollout sampled from
    first_micro_ = false;
    const at::Tensor d = (lp.detach() - b.rollout_logprobs.to(lp.device())).abs() * b.action_mask;
    rollout_diff_ = d.numel() ? d.max().item<double>() : 0.0;
  }
  algo::PolicyLossOptions lo = opts_.loss;
  lo.norm_len = s.norm_len;
  at::Tensor adv = b.advantages;
  at::Tensor mask = b.action_mask;
  if (opts_.off_policy.enabled()) {  // advantages x w, rejected tokens out of the mask
    const algo::OffPolicyWeights w =
        algo::off_policy_weights(b.old_logprobs, b.rollout_logprobs.to(lp.device()), b.action_mask,
                                 b.step_ids.defined() ? b.step_ids.to(lp.device()) : at::Tensor(), opts_.off_policy);
    adv = adv * w.weight.to(adv.scalar_type());
    mask = w.mask;
  }
  algo::PolicyLossOut pl = loss_fn_->compute(lp, b.old_logprobs, adv, mask, lo);
  // topk_fkl without the task's rewards: the distillation loss alone (pg_* still logged).
  at::Tensor loss = fkl && !fkl->use_task_rewards ? at::zeros({}, pl.loss.options()) : pl.loss;
  for (const auto& kv : pl.metrics) m[kv.first] += kv.second;
  if (fkl) {
    const at::Tensor t_lp = b.teacher_topk_logprobs.to(topk_lp.device());
    const at::Tensor per_token = algo::topk_forward_kl(topk_lp, t_lp, *fkl);  // [B,T-1]
    const at::Tensor d = algo::aggregate_loss(per_token, b.action_mask, lo.agg, lo.norm_len);
    m["distill/topk_fkl"] += d.item<double>();
    m["distill/topk_mass"] += algo::masked_mean(t_lp.exp().sum(/*dim=*/-1), b.action_mask).item<double>();
    if (fkl->loss_max_clamp > 0)
      m["distill/topk_clamp_frac"] +=
          algo::masked_mean((per_token.detach().abs() >= fkl->loss_max_clamp).to(at::kFloat), b.action_mask)
              .item<double>();
    loss = loss + fkl->coef * d;
  }
  // Entropy aggregated like the loss (verl's agg_loss on the entropy), so the bonus
  // combines over micro-batches by the same rule.
  const at::Tensor ent_agg = algo::aggregate_loss(ent, b.action_mask, lo.agg, lo.norm_len);
  m["actor/entropy"] += ent_agg.item<double>();
  if (opts_.entropy_coeff != 0.0) loss = loss - opts_.entropy_coeff * ent_agg;
  if (opts_.use_kl_loss) {
    AGENTR1_CHECK(b.ref_logprobs.defined(), "use_kl_loss needs reference log-probs");
    const at::Tensor kl = algo::aggregate_loss(algo::kl_penalty(lp, b.ref_logprobs, opts_.kl_loss_type),
                                               b.action_mask, lo.agg, lo.norm_len);
    m["actor/kl_loss"] += kl.item<double>();
    loss = loss + opts_.kl_loss_coef * kl;
  }
  return loss;
}

Metrics Actor::update(const std::vector<PackedRow>& rows) {
  policy_->train();
  LossSpec spec;
  spec.agg = opts_.loss.agg;
  spec.norm_len = opts_.loss.norm_len;
  spec.units = [](const PackedRow& r) { return static_cast<double>(r.num_action_tokens()); };
  first_micro_ = opts_.bypass_scoring();
  rollout_diff_ = -1;
  UpdateLoopOptions loop = opts_.loop.update_loop(device_);
  loop.process_group = pg_;
  const double reduce_s = reducer_ ? reducer_->seconds() : 0.0;
  Metrics m = run_update(rows, loop, spec, *optim_,
                         [this](const TrainBatch& b, const MicroBatchScale& s, Metrics& m) {
                           return micro_batch_loss(b, s, m);
                         });
  first_micro_ = false;
  // Each rank measured its own first micro-batch (-1: it had none).
  if (pg_ != nullptr && opts_.bypass_scoring()) rollout_diff_ = pg_->all_reduce_max(rollout_diff_, "logprob_max_diff");
  if (rollout_diff_ >= 0) m["rollout/logprob_max_diff"] = rollout_diff_;
  if (reducer_) m["timing/allreduce_actor"] = reducer_->seconds() - reduce_s;
  return m;
}

}  // namespace agentr1::train
