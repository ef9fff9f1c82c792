#include "agentr1/algo/policy_loss.h"

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

}  // namespace agentr1::algo
