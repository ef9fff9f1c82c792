// agentr1/algo/loss_agg.h — how per-token losses become one scalar (verl agg_loss).
//
//   at::Tensor loss = aggregate_loss(per_token, mask, LossAgg::kTokenMean);
//
// per_token, mask: [B,T] (mask 1 on tokens that count). Modes:
//   token-mean                 sum(l*m) / sum(m)
//   seq-mean-token-sum         mean over rows of sum_t(l*m)
//   seq-mean-token-mean        mean over rows of sum_t(l*m) / sum_t(m)
//   seq-mean-token-sum-norm    sum(l*m) / norm_len   (Dr.GRPO; norm_len = T by default)
// The seq-mean modes skip rows whose mask is all zero (padding rows of a micro-batch);
// otherwise they equal verl's agg_loss.
#pragma once

#include <string>

#include <ATen/ATen.h>

namespace agentr1::algo {

enum class LossAgg { kTokenMean, kSeqMeanTokenSum, kSeqMeanTokenMean, kSeqMeanTokenSumNorm };

// Throws Error listing the valid names.
LossAgg loss_agg_from_string(const std::string& name);
const char* loss_agg_name(LossAgg a);

// norm_len <= 0 means "use T" (the padded response length), as verl does.
at::Tensor aggregate_loss(const at::Tensor& per_token, const at::Tensor& mask, LossAgg mode,
                          double norm_len = 0);

// sum(x*m)/max(sum(m), 1) — masked mean over all elements.
at::Tensor masked_mean(const at::Tensor& x, const at::Tensor& mask);

}  // namespace agentr1::algo
