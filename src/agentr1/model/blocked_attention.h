// Softmax attention computed in tiles with an online softmax, forward and backward
// (FlashAttention's recurrence, as ATen operations on tiles): the learner's attention never
// materialises the [heads, T, S] scores of a row, so its memory grows linearly in the
// sequence length instead of quadratically.
//
// Forward, per tile of `block` queries: walk the key tiles keeping for every query the
// running maximum m, the running sum l of exp(s - m) and the running weighted sum of
// values, rescaling both by exp(m_old - m_new) when the maximum grows; the output is the
// sum over l and the saved statistic is logsumexp = m + log l per query. Backward,
// recomputing each tile's scores from q and k: p = exp(s - logsumexp),
// dV += p^T dO, dP = dO V^T, dS = p * (dP - rowsum(dO * O)), dQ += dS K, dK += dS^T Q
// (times the scale). Tiles whose queries may see none of its keys are skipped (causal
// rows: about half; packed segments: most), tiles with some blocked pairs are masked.
//
// Everything inside is fp32 whatever the inputs' dtype; the results return in q's
// (k's, v's) dtype. A query that may see no key at all gets a zero output and zero
// gradients (the dense softmax would give NaN).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace agentr1::model::detail {

// q [B,nH,T,hd], k/v [B,nKV,S,hd] with nH a multiple of nKV (query head h reads kv head
// h / (nH/nKV)), blocked [B|1,1,1,T,S] bool (true where a query may not see a key, as
// AttentionImpl::attend takes it). Returns softmax(q k^T * scale, blocked) v as
// [B,nH,T,hd], differentiable in q, k and v. block >= 1: the tile edge in tokens.
at::Tensor blocked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                             double scale, int64_t block);

}  // namespace agentr1::model::detail
