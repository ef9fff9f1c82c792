// agentr1/algo/entropy.h — token entropy of the policy and the entropy bonus.
//
//   at::Tensor h = entropy_from_logits(logits);              // [B,T]
//   EntropyOut e = entropy_loss(logits, mask, LossAgg::kTokenMean);
//   loss = pg_loss - entropy_coeff * e.loss;                 // metrics["actor/entropy"]
#pragma once

#include <map>
#include <string>

#include <ATen/ATen.h>

#include "agentr1/algo/loss_agg.h"

namespace agentr1::algo {

// H = logsumexp(z) - sum_v softmax(z)_v * z_v (verl entropy_from_logits), computed in
// fp32 or wider. logits: [..., V] -> [...].
at::Tensor entropy_from_logits(const at::Tensor& logits);

struct EntropyOut {
  at::Tensor loss;                        // aggregated entropy, differentiable
  std::map<std::string, double> metrics;  // actor/entropy
};

// logits: [B,T,V], mask: [B,T].
EntropyOut entropy_loss(const at::Tensor& logits, const at::Tensor& mask, LossAgg agg,
                        double norm_len = 0);

}  // namespace agentr1::algo
