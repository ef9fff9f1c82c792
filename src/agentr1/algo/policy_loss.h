// agentr1/algo/policy_loss.h — policy-gradient losses over response tokens.
//
//   PolicyLossOptions o;  o.clip_ratio_low = 0.2; o.clip_ratio_high = 0.28;
//   PolicyLossOut out = ppo_clip_loss(logprob, old_logprob, adv, mask, o);
//   out.loss.backward();  metrics["actor/pg_clipfrac"] = out.metrics["actor/pg_clipfrac"];
//
// All inputs are [B,T] over the same token positions; mask is 1 on action tokens.
// Every loss returns the scalar loss and namespaced metrics (uniform contract).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/algo/loss_agg.h"

namespace agentr1::algo {

struct PolicyLossOptions {
  double clip_ratio_low = 0.2;     // ratio floor is 1 - clip_ratio_low
  double clip_ratio_high = 0.2;    // ratio ceiling is 1 + clip_ratio_high (DAPO clip-higher)
  double clip_ratio_c = 3.0;       // dual-clip bound for negative advantages (> 1)
  LossAgg agg = LossAgg::kTokenMean;  // how per-token losses become a scalar
  double norm_len = 0;             // seq-mean-token-sum-norm divisor; 0 = T
  void validate() const;           // throws Error naming the bad value
};

struct PolicyLossOut {
  at::Tensor loss;                            // scalar, differentiable
  std::map<std::string, double> metrics;      // actor/pg_loss, actor/pg_clipfrac, ...
};

// PPO clipped surrogate with asymmetric clip and dual clip (Ye et al. 2019,
// arXiv 1912.09729), as in verl's "vanilla" policy loss:
//   ratio = exp(clamp(logprob - old_logprob, -20, 20))
//   l1 = -A*ratio, l2 = -A*clip(ratio, 1-low, 1+high), lc = max(l1, l2)
//   l  = A < 0 ? min(lc, -A*c) : lc
// Metrics: actor/pg_loss, actor/pg_clipfrac (l2 > l1), actor/pg_clipfrac_lower
// (dual clip active), actor/ppo_kl (mean of old_logprob - logprob).
PolicyLossOut ppo_clip_loss(const at::Tensor& logprob, const at::Tensor& old_logprob,
                            const at::Tensor& advantages, const at::Tensor& mask,
                            const PolicyLossOptions& opts);

// GSPO (Zheng et al. 2025, arXiv 2507.18071), verl's compute_policy_loss_gspo: one
// importance ratio per sequence (row), the geometric mean of its token ratios:
//   log s_i   = sum_t m*(logprob - old_logprob) / max(sum_t m, 1)            [B]
//   log s_i,t = sg[log s_i] + logprob - sg[logprob], clamped to <= 10       [B,T]
//   l = max(-A*s_i,t, -A*clip(s_i,t, 1-low, 1+high))   (no dual clip)
// aggregated with opts.agg (GSPO's objective is seq-mean-token-mean, verl's fixed
// choice; set it in opts). The value of s_i,t is s_i; its gradient flows through each
// token's logprob. Metrics: actor/pg_loss, actor/pg_clipfrac, actor/pg_clipfrac_lower
// (0), actor/ppo_kl. Inputs [B,T].
PolicyLossOut gspo_loss(const at::Tensor& logprob, const at::Tensor& old_logprob,
                        const at::Tensor& advantages, const at::Tensor& mask,
                        const PolicyLossOptions& opts);

// Plain REINFORCE (Williams 1992; verl's "gpg" loss without its rescaling):
//   l = -A * logprob, aggregated with opts.agg (clip settings unused).
// old_logprob is only used for the metric actor/ppo_kl. Metrics: actor/pg_loss,
// actor/ppo_kl. Inputs [B,T].
PolicyLossOut reinforce_loss(const at::Tensor& logprob, const at::Tensor& old_logprob,
                             const at::Tensor& advantages, const at::Tensor& mask,
                             const PolicyLossOptions& opts);

// The policy losses by name (actor.policy_loss.loss_mode): "vanilla" (ppo_clip_loss),
// "gspo", "reinforce".
class PolicyLoss {
 public:
  virtual ~PolicyLoss() = default;
  virtual std::string name() const = 0;
  // All tensors [B,T]; returns the scalar loss and its metrics. Throws Error on shape
  // mismatch or invalid options.
  virtual PolicyLossOut compute(const at::Tensor& logprob, const at::Tensor& old_logprob,
                                const at::Tensor& advantages, const at::Tensor& mask,
                                const PolicyLossOptions& opts) const = 0;
};

// Throws Error listing the known names.
std::unique_ptr<PolicyLoss> make_policy_loss(const std::string& name);
std::vector<std::string> policy_loss_names();

}  // namespace agentr1::algo
