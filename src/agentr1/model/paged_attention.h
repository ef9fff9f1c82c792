// agentr1/model/paged_attention.h — the fused CPU kernels behind
// Transformer::forward_cached (internal to the model layer).
//
// Decoding a small model is bound by per-op overhead, not arithmetic: the tensor path
// spends ~50 ATen calls per layer and token (norms, RoPE, cache scatter and gather,
// masks, softmax). These kernels do the per-token work in one pass over raw memory:
//   rms_norm_rows     HF RMSNorm over rows (fp32 math, rounded like HF's casts)
//   paged_attention   q/k RMSNorm + RoPE, keys/values written into their blocks, then
//                     causal attention of every new token over its row's blocks with an
//                     online softmax (no [T, S] scores, no gathered K/V copies)
// Both handle float, bfloat16 and half storage and compute in float, rounding to the
// storage type wherever the tensor path's ops would (so fp32 results equal it up to
// summation order).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/model/spin_pool.h"

namespace agentr1::model::detail {

// Where each new token of a cached forward goes.
struct PagedLayout {
  int64_t block_size = 0;
  std::vector<int64_t> pos;                         // [N] position of token i
  std::vector<int32_t> row;                         // [N] row of token i
  std::vector<const std::vector<int32_t>*> blocks;  // [B] block table of each row
  int64_t max_pos = 0;                              // max over pos, + 1
  int64_t total_keys = 0;                           // sum over tokens of pos + 1
};

// x [N, D] contiguous, w [D] (same dtype): w * (x / rms(x)), fp32 math.
at::Tensor rms_norm_rows(const at::Tensor& x, const at::Tensor& w, double eps);

// q [N, nH*hd], k and v [N, nKV*hd] (projection outputs, contiguous, one dtype);
// q_norm_w / k_norm_w [hd] or undefined; cos, sin [>= max_pos, hd] float RoPE tables.
// Writes k and v into k_cache / v_cache [n_blocks, bs, nKV, hd] at each token's
// position, then returns attention outputs [N, nH*hd] (before o_proj) in q's dtype.
// Work is split over `pool`'s threads when given, else over OpenMP's.
at::Tensor paged_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& q_norm_w, const at::Tensor& k_norm_w, double eps,
                           const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                           at::Tensor& v_cache, const PagedLayout& layout, int64_t n_heads,
                           int64_t n_kv, int64_t head_dim, SpinPool* pool = nullptr);

}  // namespace agentr1::model::detail
