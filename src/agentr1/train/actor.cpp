#include "agentr1/train/actor.h"

#include <torch/torch.h>

#include <cmath>
#include <numeric>

#include "agentr1/algo/loss_agg.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

namespace agentr1::train {

void OptimOptions::validate(const std::string& prefix) const {
  AGENTR1_CHECK(lr > 0 && std::isfinite(lr), prefix << ".lr must be a positive number, got " << lr);
  AGENTR1_CHECK(weight_decay >= 0, prefix << ".weight_decay must be >= 0, got " << weight_decay);
  AGENTR1_CHECK(beta1 >= 0 && beta1 < 1, prefix << ".beta1 must be in [0, 1), got " << beta1);
  AGENTR1_CHECK(beta2 >= 0 && beta2 < 1, prefix << ".beta2 must be in [0, 1), got " << beta2);
  AGENTR1_CHECK(eps > 0, prefix << ".eps must be > 0, got " << eps);
  AGENTR1_CHECK(warmup_steps >= 0, prefix << ".warmup_steps must be >= 0, got " << warmup_steps);
}

void ActorOptions::resolve() {
  loss.clip_ratio_low = clip_ratio_low >= 0 ? clip_ratio_low : clip_ratio;
  loss.clip_ratio_high = clip_ratio_high >= 0 ? clip_ratio_high : clip_ratio;
  loss.agg = with_context("actor.loss_agg_mode", [&] { return algo::loss_agg_from_string(loss_agg_mode); });
  kl_loss_type = with_context("actor.kl_loss_type", [&] { return algo::kl_type_from_string(kl_loss_type_name); });
  with_context("actor.policy_loss", [&] { return algo::make_policy_loss(policy_loss); });
  validate();
}

void ActorOptions::validate() const {
  optim.validate("actor.optim");
  AGENTR1_CHECK(ppo_epochs >= 1, "actor.ppo_epochs must be >= 1, got " << ppo_epochs);
  AGENTR1_CHECK(ppo_mini_batch_size >= 0,
                "actor.ppo_mini_batch_size must be >= 0 (0 = whole batch), got " << ppo_mini_batch_size);
  AGENTR1_CHECK(micro_batch_size >= 1, "actor.micro_batch_size must be >= 1, got " << micro_batch_size);
  AGENTR1_CHECK(kl_loss_coef >= 0, "actor.kl_loss_coef must be >= 0, got " << kl_loss_coef);
  AGENTR1_CHECK(min_shared_prefix >= 0, "actor.min_shared_prefix must be >= 0 (0 = off), got " << min_shared_prefix);
  AGENTR1_CHECK(temperature > 0 && std::isfinite(temperature),
                "actor temperature must be > 0 (it follows rollout.temperature, which must be > 0 for RL "
                "sampling), got " << temperature);
  AGENTR1_CHECK(max_consecutive_skips >= 1,
                "actor.max_consecutive_skips must be >= 1, got " << max_consecutive_skips);
  loss.validate();
}

at::Tensor target_logprobs(model::Transformer& model, const TrainBatch& batch, at::Tensor* entropy,
                           double temperature) {
  // logits: [B,T,V] fp32; keep positions 0..T-2 which predict tokens 1..T-1.
  at::Tensor logits = model->forward(batch.input_ids, batch.positions, batch.segment_ids, batch.prefix_ids);
  logits = logits.slice(/*dim=*/1, 0, -1);
  if (temperature != 1.0) logits = logits / temperature;
  at::Tensor logp_all = at::log_softmax(logits, /*dim=*/-1);  // [B,T-1,V]
  at::Tensor lp = logp_all.gather(/*dim=*/-1, batch.targets.unsqueeze(-1)).squeeze(-1);
  if (entropy != nullptr) *entropy = -(logp_all.exp() * logp_all).sum(/*dim=*/-1);
  return lp;
}

Actor::Actor(model::Transformer policy, ActorOptions opts)
    : policy_(std::move(policy)), opts_(std::move(opts)) {
  opts_.resolve();
  loss_fn_ = algo::make_policy_loss(opts_.policy_loss);
  torch::optim::AdamWOptions o(opts_.optim.lr);
  o.betas({opts_.optim.beta1, opts_.optim.beta2}).eps(opts_.optim.eps).weight_decay(opts_.optim.weight_decay);
  optim_ = std::make_unique<torch::optim::AdamW>(policy_->parameters(), o);
}

Actor::~Actor() = default;

double Actor::current_lr() const {
  const int w = opts_.optim.warmup_steps;
  if (w > 0 && steps_ < w) return opts_.optim.lr * static_cast<double>(steps_ + 1) / (w + 1);
  return opts_.optim.lr;
}

void Actor::fill_logprobs(std::vector<PackedRow>& rows, std::vector<float> PackedRow::*field) {
  torch::NoGradGuard no_grad;
  const bool was_training = policy_->is_training();
  policy_->eval();
  for (const auto& mb : make_micro_batches(rows, opts_.micro_batch_size, opts_.micro_batch_max_tokens)) {
    TrainBatch b = collate(rows, mb, opts_.min_shared_prefix);
    at::Tensor lp = target_logprobs(policy_, b, nullptr, opts_.temperature).contiguous();
    auto acc = lp.accessor<float, 2>();
    const size_t p = static_cast<size_t>(b.prefix_len);
    for (size_t i = 0; i < mb.size(); ++i) {
      PackedRow& row = rows[mb[i]];
      std::vector<float>& out = row.*field;
      out.assign(row.tokens.size(), 0.0f);  // tokens 1..p (prompt, inside the prefix) stay 0
      for (size_t t = p + 1; t < row.tokens.size(); ++t) out[t] = acc[i][static_cast<int64_t>(t - p - 1)];
    }
  }
  policy_->train(was_training);
}

bool Actor::optimizer_step(std::map<std::string, double>& m) {
  std::vector<at::Tensor> params = policy_->parameters();
  double norm = 0;
  if (opts_.optim.grad_clip > 0) {
    norm = torch::nn::utils::clip_grad_norm_(params, opts_.optim.grad_clip);
  } else {
    double ss = 0;
    for (auto& p : params)
      if (p.grad().defined()) ss += p.grad().pow(2).sum().item<double>();
    norm = std::sqrt(ss);
  }
  m["actor/grad_norm"] += norm;
  if (!std::isfinite(norm)) {
    optim_->zero_grad();
    skipped_total_++;
    consecutive_skips_++;
    AGENTR1_LOG(WARN) << "non-finite gradient norm (" << norm << "): optimiser step skipped ("
                      << consecutive_skips_ << " in a row)";
    AGENTR1_CHECK(consecutive_skips_ < opts_.max_consecutive_skips,
                  consecutive_skips_ << " consecutive updates had a non-finite loss or gradient; "
                  "stopping. HINT: lower actor.optim.lr or enable actor.optim.grad_clip");
    return false;
  }
  const double lr = current_lr();
  for (auto& group : optim_->param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  optim_->step();
  optim_->zero_grad();
  steps_++;
  consecutive_skips_ = 0;
  m["actor/lr"] = lr;
  return true;
}

std::map<std::string, double> Actor::update(const std::vector<PackedRow>& rows) {
  policy_->train();
  std::map<std::string, double> sum;
  int64_t n_updates = 0;
  // Mini-batches by trajectory so a trajectory's rows share an optimiser step.
  const auto minis = trajectory_mini_batches(rows, opts_.ppo_mini_batch_size);
  for (int epoch = 0; epoch < opts_.ppo_epochs; ++epoch) {
    for (const auto& mini : minis) {
      int64_t mini_tokens = 0;
      for (const auto& r : mini) mini_tokens += r.num_action_tokens();
      if (mini_tokens == 0) continue;
      optim_->zero_grad();
      std::map<std::string, double> step_m;
      bool finite = true;
      for (const auto& mb : make_micro_batches(mini, opts_.micro_batch_size, opts_.micro_batch_max_tokens)) {
        TrainBatch b = collate(mini, mb, opts_.min_shared_prefix);
        if (b.num_action_tokens == 0) continue;
        AGENTR1_CHECK(b.old_logprobs.defined(), "Actor::update: old log-probs were not computed");
        const bool need_entropy = opts_.entropy_coeff != 0.0;
        at::Tensor ent;
        at::Tensor lp = target_logprobs(policy_, b, &ent, opts_.temperature);
        // Weight so that the sum over micro-batches equals the mini-batch aggregate.
        const bool by_token = opts_.loss.agg == algo::LossAgg::kTokenMean;
        const double w = by_token ? static_cast<double>(b.num_action_tokens) / mini_tokens
                                  : static_cast<double>(mb.size()) / mini.size();
        algo::PolicyLossOut pl = loss_fn_->compute(lp, b.old_logprobs, b.advantages, b.action_mask, opts_.loss);
        at::Tensor loss = pl.loss;
        for (const auto& kv : pl.metrics) step_m[kv.first] += kv.second * w;
        at::Tensor ent_mean = algo::masked_mean(ent, b.action_mask);
        step_m["actor/entropy"] += ent_mean.item<double>() * w;
        if (need_entropy) loss = loss - opts_.entropy_coeff * ent_mean;
        if (opts_.use_kl_loss) {
          AGENTR1_CHECK(b.ref_logprobs.defined(), "use_kl_loss needs reference log-probs");
          at::Tensor kl = algo::aggregate_loss(algo::kl_penalty(lp, b.ref_logprobs, opts_.kl_loss_type),
                                               b.action_mask, opts_.loss.agg, opts_.loss.norm_len);
          step_m["actor/kl_loss"] += kl.item<double>() * w;
          loss = loss + opts_.kl_loss_coef * kl;
        }
        if (!std::isfinite(loss.item<double>())) {
          finite = false;
          break;
        }
        (loss * w).backward();
      }
      if (!finite) {
        optim_->zero_grad();
        skipped_total_++;
        consecutive_skips_++;
        AGENTR1_LOG(WARN) << "non-finite loss: optimiser step skipped (" << consecutive_skips_
                          << " in a row)";
        AGENTR1_CHECK(consecutive_skips_ < opts_.max_consecutive_skips,
                      consecutive_skips_ << " consecutive updates had a non-finite loss; stopping. "
                      "HINT: lower actor.optim.lr");
        continue;
      }
      if (optimizer_step(step_m)) {
        for (const auto& kv : step_m) sum[kv.first] += kv.second;
        n_updates++;
      }
    }
  }
  std::map<std::string, double> out;
  for (const auto& kv : sum) out[kv.first] = n_updates > 0 ? kv.second / n_updates : 0.0;
  out["actor/updates"] = static_cast<double>(n_updates);
  out["actor/skipped_updates"] = static_cast<double>(skipped_total_);
  return out;
}

std::map<std::string, double> Actor::sft_step(const std::vector<PackedRow>& rows) {
  policy_->train();
  optim_->zero_grad();
  int64_t total = 0;
  for (const auto& r : rows) total += r.num_action_tokens();
  AGENTR1_CHECK(total > 0, "sft_step: no assistant tokens in the batch");
  std::map<std::string, double> m;
  double nll_sum = 0, correct = 0;
  for (const auto& mb : make_micro_batches(rows, opts_.micro_batch_size, opts_.micro_batch_max_tokens)) {
    TrainBatch b = collate(rows, mb, opts_.min_shared_prefix);
    if (b.num_action_tokens == 0) continue;
    at::Tensor logits =
        policy_->forward(b.input_ids, b.positions, b.segment_ids, b.prefix_ids).slice(1, 0, -1);
    at::Tensor logp_all = at::log_softmax(logits, /*dim=*/-1);
    at::Tensor lp = logp_all.gather(-1, b.targets.unsqueeze(-1)).squeeze(-1);  // [B,T-1]
    at::Tensor nll = -(lp * b.action_mask).sum();
    (nll / static_cast<double>(total)).backward();
    nll_sum += nll.item<double>();
    at::Tensor hit = (logits.argmax(-1) == b.targets).to(at::kFloat) * b.action_mask;
    correct += hit.sum().item<double>();
  }
  optimizer_step(m);
  m["sft/loss"] = nll_sum / static_cast<double>(total);
  m["sft/token_acc"] = correct / static_cast<double>(total);
  m["sft/tokens"] = static_cast<double>(total);
  return m;
}

void Actor::save_optimizer(const std::string& path) { torch::save(*optim_, path); }
void Actor::load_optimizer(const std::string& path) { torch::load(*optim_, path); }

}  // namespace agentr1::train
