// agentr1/algo/value_loss.h — the critic's clipped value loss (PPO).
//
//   ValueLossOptions o;  o.cliprange_value = 0.5;
//   ValueLossOut out = value_loss(vpreds, returns, old_values, mask, o);
//   out.loss.backward();   // out.metrics["critic/vf_loss"], ["critic/vf_clipfrac"], ...
//
// verl's compute_value_loss (from TRL):
//   vclip = values + clamp(vpreds - values, -cliprange_value, cliprange_value)
//   l = max((vpreds - returns)^2, (vclip - returns)^2)
//   loss = 0.5 * aggregate(l, mask, agg)
// Metrics: critic/vf_loss (the loss), critic/vf_clipfrac (share of masked tokens where
// the clipped term is larger), critic/vpred_mean (masked mean of vpreds).
#pragma once

#include <map>
#include <string>

#include <ATen/ATen.h>

#include "agentr1/algo/loss_agg.h"

namespace agentr1::algo {

struct ValueLossOptions {
  double cliprange_value = 0.5;      // critic.cliprange_value: how far vpreds may move from old values
  LossAgg agg = LossAgg::kTokenMean; // critic.loss_agg_mode
  double norm_len = 0;               // seq-mean-token-sum-norm divisor; 0 = T
  void validate() const;             // throws Error naming the bad value
};

struct ValueLossOut {
  at::Tensor loss;                        // scalar, differentiable w.r.t. vpreds
  std::map<std::string, double> metrics;  // critic/vf_loss, critic/vf_clipfrac, critic/vpred_mean
};

// vpreds (current critic), returns (targets), values (critic at rollout time), mask: [B,T].
ValueLossOut value_loss(const at::Tensor& vpreds, const at::Tensor& returns,
                        const at::Tensor& values, const at::Tensor& mask,
                        const ValueLossOptions& opts);

}  // namespace agentr1::algo
