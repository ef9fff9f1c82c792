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
//
// Two forms of the inner loops, one per process: portable loops, and on CPUs with
// AVX-512 vector forms (head_dim % 16 == 0 for attention, % 32 for the norms and RoPE)
// that read bf16/half keys and values straight from the cache, widened in registers
// (both forms take the softmax's exp from core::exp_f). Their summation orders differ (the dot products'
// lane sum, the sum of squares' lanes), so the two forms agree within float rounding,
// not bit for bit; a process uses one form for every call, which keeps batch
// invariance exact. (AGENTR1_ROW_LINEAR_ISA picks the products' kernel only: an AVX-512
// CPU forced to avx2 still runs these forms, so its bits differ from an AVX2 CPU's.)
#pragma once

#include <cstdint>
#include <optional>
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

// Whether this CPU can take the AVX-512 forms; tests force either form (nullopt: the
// default, AVX-512 where supported). Not for use while kernels run on other threads.
bool attention_avx512_supported();
void force_attention_avx512(std::optional<bool> on);

}  // namespace agentr1::model::detail
