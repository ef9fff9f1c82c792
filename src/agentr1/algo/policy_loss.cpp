#include "agentr1/algo/policy_loss.h"

#include <functional>

#include "agentr1/core/error.h"

namespace agentr1::algo {

void PolicyLossOptions::validate() const {
  AGENTR1_CHECK(clip_ratio_low >= 0 && clip_ratio_low < 1,
                "actor.clip_ratio_low must be in [0, 1), got " << clip_ratio_low);
  AGENTR1_CHECK(clip_ratio_high >= 0, "actor.clip_ratio_high must be >= 0, got " << clip_ratio_high);
  AGENTR1_CHECK(clip_ratio_c > 1.0, "actor.clip_ratio_c (dual clip) must be > 1, got "
                                        << clip_ratio_c);
}

PolicyLossOut ppo_clip_loss(const at::Tensor& logprob, const at::Tensor& old_logprob,
                            const at::Tensor& advantages, const at::Tensor& mask,
                            const PolicyLossOptions& opts) {
  AGENTR1_CHECK(logprob.sizes() == old_logprob.sizes() && logprob.sizes() == advantages.sizes() &&
                    logprob.sizes() == mask.sizes(),
                "ppo_clip_loss: shapes differ: logprob " << logprob.sizes() << ", old "
                    << old_logprob.sizes() << ", adv " << advantages.sizes() << ", mask "
                    << mask.sizes());
  const at::Tensor m = mask.to(logprob.scalar_type());
  const at::Tensor neg_kl = (logprob - old_logprob).clamp(-20.0, 20.0);
  const at::Tensor ratio = neg_kl.exp();
  const at::Tensor l1 = -advantages * ratio;
  const at::Tensor l2 = -advantages * ratio.clamp(1.0 - opts.clip_ratio_low, 1.0 + opts.clip_ratio_high);
  const at::Tensor clipped = at::maximum(l1, l2);
  const at::Tensor l3 = -advantages * opts.clip_ratio_c;
  const at::Tensor dual = at::minimum(l3, clipped);
  const at::Tensor neg_adv = advantages < 0;
  const at::Tensor per_token = at::where(neg_adv, dual, clipped);

  PolicyLossOut out;
  out.loss = aggregate_loss(per_token, m, opts.agg, opts.norm_len);
  {
    at::NoGradGuard no_grad;
    out.metrics["actor/pg_loss"] = out.loss.item<double>();
    out.metrics["actor/pg_clipfrac"] = masked_mean((l2 > l1).to(m.scalar_type()), m).item<double>();
    out.metrics["actor/pg_clipfrac_lower"] =
        masked_mean(((clipped > l3) & neg_adv).to(m.scalar_type()), m).item<double>();
    out.metrics["actor/ppo_kl"] = masked_mean(-neg_kl, m).item<double>();
  }
  return out;
}

namespace {
void check_same_shapes(const char* fn, const at::Tensor& logprob, const at::Tensor& old_logprob,
                       const at::Tensor& advantages, const at::Tensor& mask) {
  AGENTR1_CHECK(logprob.dim() == 2 && logprob.sizes() == old_logprob.sizes() &&
                    logprob.sizes() == advantages.sizes() && logprob.sizes() == mask.sizes(),
                fn << ": expected four [B,T] tensors of one shape: logprob " << logprob.sizes()
                   << ", old " << old_logprob.sizes() << ", adv " << advantages.sizes()
                   << ", mask " << mask.sizes());
}
}  // namespace

PolicyLossOut gspo_loss(const at::Tensor& logprob, const at::Tensor& old_logprob,
                        const at::Tensor& advantages, const at::Tensor& mask,
                        const PolicyLossOptions& opts) {
  check_same_shapes("gspo_loss", logprob, old_logprob, advantages, mask);
  opts.validate();
  const at::Tensor m = mask.to(logprob.scalar_type());
  const at::Tensor neg_kl = logprob - old_logprob;                                // [B,T]
  const at::Tensor len = m.sum(/*dim=*/-1).clamp_min(1.0);                         // [B]
  const at::Tensor seq_log_ratio = (neg_kl * m).sum(/*dim=*/-1) / len;             // [B]
  const at::Tensor log_ratio =
      (logprob - logprob.detach() + seq_log_ratio.detach().unsqueeze(-1)).clamp_max(10.0);
  const at::Tensor ratio = log_ratio.exp();                                        // [B,T]
  const at::Tensor l1 = -advantages * ratio;
  const at::Tensor l2 =
      -advantages * ratio.clamp(1.0 - opts.clip_ratio_low, 1.0 + opts.clip_ratio_high);
  const at::Tensor per_token = at::maximum(l1, l2);

  PolicyLossOut out;
  out.loss = aggregate_loss(per_token, m, opts.agg, opts.norm_len);
  {
    at::NoGradGuard no_grad;
    out.metrics["actor/pg_loss"] = out.loss.item<double>();
    out.metrics["actor/pg_clipfrac"] = masked_mean((l2 > l1).to(m.scalar_type()), m).item<double>();
    out.metrics["actor/pg_clipfrac_lower"] = 0.0;
    out.metrics["actor/ppo_kl"] = masked_mean(-neg_kl, m).item<double>();
  }
  return out;
}

PolicyLossOut reinforce_loss(const at::Tensor& logprob, const at::Tensor& old_logprob,
                             const at::Tensor& advantages, const at::Tensor& mask,
                             const PolicyLossOptions& opts) {
  check_same_shapes("reinforce_loss", logprob, old_logprob, advantages, mask);
  const at::Tensor m = mask.to(logprob.scalar_type());
  PolicyLossOut out;
  out.loss = aggregate_loss(-advantages * logprob, m, opts.agg, opts.norm_len);
  {
    at::NoGradGuard no_grad;
    out.metrics["actor/pg_loss"] = out.loss.item<double>();
    out.metrics["actor/ppo_kl"] = masked_mean(old_logprob - logprob, m).item<double>();
  }
  return out;
}

namespace {

using LossFn = PolicyLossOut (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                 const at::Tensor&, const PolicyLossOptions&);

class FnPolicyLoss final : public PolicyLoss {
 public:
  FnPolicyLoss(std::string name, LossFn fn) : name_(std::move(name)), fn_(fn) {}
  std::string name() const override { return name_; }
  PolicyLossOut compute(const at::Tensor& logprob, const at::Tensor& old_logprob,
                        const at::Tensor& advantages, const at::Tensor& mask,
                        const PolicyLossOptions& opts) const override {
    return fn_(logprob, old_logprob, advantages, mask, opts);
  }

 private:
  std::string name_;
  LossFn fn_;
};

const std::vector<std::pair<std::string, LossFn>>& builtin_losses() {
  static const std::vector<std::pair<std::string, LossFn>> losses = {
      {"gspo", &gspo_loss}, {"reinforce", &reinforce_loss}, {"vanilla", &ppo_clip_loss}};
  return losses;
}

}  // namespace

std::unique_ptr<PolicyLoss> make_policy_loss(const std::string& name) {
  for (const auto& [n, fn] : builtin_losses())
    if (n == name) return std::make_unique<FnPolicyLoss>(n, fn);
  std::string known;
  for (const auto& n : policy_loss_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown policy loss (actor.policy_loss.loss_mode) '" + name + "'; known: " + known);
}

std::vector<std::string> policy_loss_names() {
  std::vector<std::string> out;
  for (const auto& kv : builtin_losses()) out.push_back(kv.first);
  return out;
}

}  // namespace agentr1::algo
