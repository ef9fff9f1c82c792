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
#include <string>

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

}  // namespace agentr1::algo
