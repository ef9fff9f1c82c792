#include "agentr1/model/paged_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <vector>
#include <limits>
#include <functional>
#include <type_traits>

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#endif

#include "agentr1/core/error.h"
#include "agentr1/core/fast_exp.h"
#include "agentr1/model/avx512_util.h"
#include "agentr1/model/row_linear.h"

namespace agentr1::model::detail {

namespace {

// The value a T tensor would hold for float f (identity for float).
template <typename T>
inline float round_to(float f) {
  return static_cast<float>(static_cast<T>(f));
}
template <>
inline float round_to<float>(float f) {
  return f;
}

// The two inner loops of attention over one block of fp32 keys/values, compiled for
// AVX-512, AVX2 and the baseline ISA and picked at load time (GCC function
// multi-versioning), so one binary runs everywhere and uses the vector units it finds.
//   scores[j] = scale * <q, k_j>            j < n, k_j = k + j * stride
//   acc      += sum_j w[j] * v_j            v_j = v + j * stride
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define AGENTR1_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define AGENTR1_MULTIVERSION
#endif

AGENTR1_MULTIVERSION
void block_scores(const float* __restrict q, const float* __restrict k, int64_t stride, int64_t n, int64_t hd,
                  float scale, float* __restrict scores) {
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = k + j * stride;
    float part[16] = {0};  // 16 independent partial sums: vectorised without reassociation
    int64_t d = 0;
    for (; d + 16 <= hd; d += 16)
      for (int u = 0; u < 16; ++u) part[u] += q[d + u] * kj[d + u];
    float s = 0;
    for (; d < hd; ++d) s += q[d] * kj[d];
    for (int u = 0; u < 16; ++u) s += part[u];
    scores[j] = s * scale;
  }
}

AGENTR1_MULTIVERSION
void block_accumulate(const float* __restrict w, const float* __restrict v, int64_t stride, int64_t n, int64_t hd,
                      float* __restrict acc) {
  for (int64_t j = 0; j < n; ++j) {
    const float* vj = v + j * stride;
    const float wj = w[j];
    for (int64_t d = 0; d < hd; ++d) acc[d] += wj * vj[d];
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define AGENTR1_ATTN_AVX512 1
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12, inside its own intrinsics
#pragma GCC diagnostic ignored "-Wuninitialized"       // (_mm512_reduce_add_ps, inlined M at a time)

using avx512::load16f;
using avx512::round16;
using avx512::store16;

// The AVX-512 forms of the two loops above for head_dim % 16 == 0, reading float or
// bf16/half keys and values straight from the cache (widened in registers, exactly).
// Per score: 16 fma lanes over the 16-element chunks in order, then the lanes' tree sum
// (_mm512_reduce_add_ps). Per value element: fma over the block's positions in order.
// A float copy of a block gives the same bits as the block itself.
//
// M keys' scores side by side: each key's chain of fmas is the one it has alone (the
// same instructions on the same operands in the same order, so the same bits), but one
// key's chain waits on the fma latency at every chunk (~4 cycles x hd / 16, then the
// tree sum) while M chains fill the pipeline: decoding at a 4096-token context spent
// ~60% of its step in attention (Qwen3-0.6B shape, bf16, perf; bench/README.md session 18).
template <int M, typename T>
inline void scores_m(const float* __restrict q, const T* __restrict k, int64_t stride, int64_t hd, float scale,
                     float* __restrict scores) {
  __m512 a[M];
  const __m512 q0 = _mm512_loadu_ps(q);
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m) a[m] = _mm512_mul_ps(q0, load16f(k + m * stride));
  for (int64_t d = 16; d < hd; d += 16) {
    const __m512 qd = _mm512_loadu_ps(q + d);
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) a[m] = _mm512_fmadd_ps(qd, load16f(k + m * stride + d), a[m]);
  }
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m) scores[m] = _mm512_reduce_add_ps(a[m]) * scale;
}

template <typename T>
void block_scores_512(const float* __restrict q, const T* __restrict k, int64_t stride, int64_t n, int64_t hd,
                      float scale, float* __restrict scores) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) scores_m<8>(q, k + j * stride, stride, hd, scale, scores + j);
  if (j + 4 <= n) {
    scores_m<4>(q, k + j * stride, stride, hd, scale, scores + j);
    j += 4;
  }
  for (; j < n; ++j) scores_m<1>(q, k + j * stride, stride, hd, scale, scores + j);
}

// C chunks of 16 value elements held in registers over the block's positions: each
// element's fmas over the positions in order, as ever; more chunks at once, more chains
// in flight (the whole of a 128-wide head in one pass).
template <int C, typename T>
inline void accumulate_c(const float* __restrict w, const T* __restrict v, int64_t stride, int64_t n,
                         float* __restrict acc) {
  __m512 a[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) a[c] = _mm512_loadu_ps(acc + 16 * c);
  for (int64_t j = 0; j < n; ++j) {
    const __m512 wj = _mm512_set1_ps(w[j]);
    const T* vj = v + j * stride;
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) a[c] = _mm512_fmadd_ps(wj, load16f(vj + 16 * c), a[c]);
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(acc + 16 * c, a[c]);
}

template <typename T>
void block_accumulate_512(const float* __restrict w, const T* __restrict v, int64_t stride, int64_t n, int64_t hd,
                          float* __restrict acc) {
  int64_t d = 0;
  for (; d + 128 <= hd; d += 128) accumulate_c<8>(w, v + d, stride, n, acc + d);
  for (; d + 64 <= hd; d += 64) accumulate_c<4>(w, v + d, stride, n, acc + d);
  for (; d < hd; d += 16) accumulate_c<1>(w, v + d, stride, n, acc + d);
}

// rms_inplace and rope_inplace for n % 32 == 0 (the vector phase A): the sum of squares
// in double over 8 lanes (element i into lane i % 8, lanes added in order at the end),
// then the same roundings per element as the scalar forms. cr/sr: cos/sin rounded to T.
template <typename T>
void rms_512(float* x, const T* w, int64_t n, double eps) {
  __m512d a = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    a = _mm512_fmadd_pd(v, v, a);
  }
  alignas(64) double lane[8];
  _mm512_store_pd(lane, a);
  double ss = 0;
  for (int u = 0; u < 8; ++u) ss += lane[u];
  const __m512 r = _mm512_set1_ps(static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps)));
  for (int64_t i = 0; i < n; i += 16)
    _mm512_storeu_ps(x + i, round16<T>(_mm512_mul_ps(load16f(w + i), round16<T>(_mm512_mul_ps(_mm512_loadu_ps(x + i), r)))));
}

inline __m512 neg16(__m512 x) {  // -x, as scalar negation (the sign bit flipped)
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}

// Products and sums through the explicit-rounding intrinsics: GCC may fuse a plain
// vector a * b + c into one fma (-ffp-contract=fast is its default), which for float
// would drop the rounding rope_inplace performs between them.
inline __m512 mul_rn(__m512 a, __m512 b) { return _mm512_mul_round_ps(a, b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline __m512 add_rn(__m512 a, __m512 b) { return _mm512_add_round_ps(a, b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

template <typename T>
void rope_512(float* x, const float* cr, const float* sr, int64_t n) {
  const int64_t h = n / 2;
  for (int64_t j = 0; j < h; j += 16) {
    const __m512 lo = _mm512_loadu_ps(x + j), hi = _mm512_loadu_ps(x + j + h);
    const __m512 lo_c = round16<T>(mul_rn(lo, _mm512_loadu_ps(cr + j)));
    const __m512 hi_c = round16<T>(mul_rn(hi, _mm512_loadu_ps(cr + j + h)));
    // rotate_half: the first half takes -x[j + h], the second x[j - h]
    const __m512 lo_s = round16<T>(mul_rn(neg16(hi), _mm512_loadu_ps(sr + j)));
    const __m512 hi_s = round16<T>(mul_rn(lo, _mm512_loadu_ps(sr + j + h)));
    _mm512_storeu_ps(x + j, round16<T>(add_rn(lo_c, lo_s)));
    _mm512_storeu_ps(x + j + h, round16<T>(add_rn(hi_c, hi_s)));
  }
}

// One row of rms_norm_rows with the vector form; buf: d floats.
template <typename T>
void rms_row_512(const T* x, const T* w, T* out, int64_t d, double eps, float* buf) {
  for (int64_t i = 0; i < d; i += 16) _mm512_storeu_ps(buf + i, load16f(x + i));
  rms_512<T>(buf, w, d, eps);
  for (int64_t i = 0; i < d; i += 16) store16<T>(out + i, _mm512_loadu_ps(buf + i));
}

// Phase A for token i with the vector forms: q heads into qf (float), the key (normed,
// rotated) and value into the cache at dst.
template <typename T>
void phase_a_512(const T* q, const T* k, const T* v, const T* qw, const T* kw, double eps, const float* c,
                 const float* s, int64_t nH, int64_t nKV, int64_t hd, float* qf, T* kdst, T* vdst, float* cr,
                 float* sr, float* kb) {
  for (int64_t j = 0; j < hd; j += 16) {
    _mm512_storeu_ps(cr + j, round16<T>(_mm512_loadu_ps(c + j)));
    _mm512_storeu_ps(sr + j, round16<T>(_mm512_loadu_ps(s + j)));
  }
  for (int64_t h = 0; h < nH; ++h) {
    float* x = qf + h * hd;
    for (int64_t j = 0; j < hd; j += 16) _mm512_storeu_ps(x + j, load16f(q + h * hd + j));
    if (qw) rms_512<T>(x, qw, hd, eps);
    rope_512<T>(x, cr, sr, hd);
  }
  for (int64_t g = 0; g < nKV; ++g) {
    for (int64_t j = 0; j < hd; j += 16) _mm512_storeu_ps(kb + j, load16f(k + g * hd + j));
    if (kw) rms_512<T>(kb, kw, hd, eps);
    rope_512<T>(kb, cr, sr, hd);
    for (int64_t j = 0; j < hd; j += 16) store16<T>(kdst + g * hd + j, _mm512_loadu_ps(kb + j));
    std::copy(v + g * hd, v + (g + 1) * hd, vdst + g * hd);
  }
}

// Asks for n rows of `bytes` each, `stride` elements apart, to be brought into cache: a
// KV group's slice of a block is 16 short rows 2 KB apart (Qwen3-0.6B), which the
// hardware prefetchers do not follow.
template <typename T>
inline void prefetch_rows(const T* p, int64_t stride, int64_t n, int64_t bytes) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t o = 0; o < bytes; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p + j * stride) + o, _MM_HINT_T0);
}

#pragma GCC diagnostic pop
#pragma GCC pop_options
#else
#define AGENTR1_ATTN_AVX512 0
#endif

std::atomic<int> g_attention_forced{-1};  // -1: AVX-512 where the CPU has it

// Whether the kernels take the AVX-512 forms: fixed for the process (unless a test
// forces it), so every call, prefill or decode, any batch, computes a given row with the
// same arithmetic.
bool attention_avx512() {
#if AGENTR1_ATTN_AVX512
  static const bool supported = row_linear_isa_supported(RowLinearIsa::kAvx512);
  const int forced = g_attention_forced.load(std::memory_order_relaxed);
  return supported && forced != 0;
#else
  return false;
#endif
}

// HF RMSNorm of one vector in place: x = T(w * T(x * rsqrt(mean(x^2) + eps))).
template <typename T>
inline void rms_inplace(float* x, const T* w, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) x[i] = round_to<T>(static_cast<float>(w[i]) * round_to<T>(x[i] * r));
}

// HF RoPE (rotate_half, non-interleaved) in place at one position, with the tensor
// path's roundings: x*cos and rotate_half(x)*sin rounded to T, then their sum.
template <typename T>
inline void rope_inplace(float* x, const float* cos, const float* sin, int64_t n, float* tmp) {
  const int64_t h = n / 2;
  for (int64_t j = 0; j < n; ++j) tmp[j] = x[j];
  for (int64_t j = 0; j < n; ++j) {
    const float rot = j < h ? -tmp[j + h] : tmp[j - h];
    const float c = round_to<T>(cos[j]), s = round_to<T>(sin[j]);
    x[j] = round_to<T>(round_to<T>(tmp[j] * c) + round_to<T>(rot * s));
  }
}

// at::parallel_for's contract (serial below `grain` items) on the pool when there is one.
void par_for(SpinPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr) {
    at::parallel_for(0, n, grain, fn);
  } else if (n <= grain) {
    fn(0, n);
  } else {
    pool->parallel_for(n, fn);
  }
}

template <typename T>
at::Tensor rms_norm_impl(const at::Tensor& x, const at::Tensor& w, double eps) {
  const int64_t n = x.size(0), d = x.size(1);
  at::Tensor out = at::empty_like(x);
  const T* xp = x.data_ptr<T>();
  const T* wp = w.data_ptr<T>();
  T* op = out.data_ptr<T>();
  const bool v512 = attention_avx512() && d % 32 == 0;
  at::parallel_for(0, n, std::max<int64_t>(1, (1 << 17) / d), [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<size_t>(d));
    for (int64_t r = r0; r < r1; ++r) {
#if AGENTR1_ATTN_AVX512
      if (v512) {  // the vector form (its own lane order for the sum of squares)
        rms_row_512<T>(xp + r * d, wp, op + r * d, d, eps, buf.data());
        continue;
      }
#endif
      for (int64_t i = 0; i < d; ++i) buf[i] = static_cast<float>(xp[r * d + i]);
      rms_inplace<T>(buf.data(), wp, d, eps);
      for (int64_t i = 0; i < d; ++i) op[r * d + i] = static_cast<T>(buf[i]);
    }
  });
  return out;
}

template <typename T>
at::Tensor paged_attention_impl(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& q_norm_w, const at::Tensor& k_norm_w, double eps,
                                const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                                at::Tensor& v_cache, const PagedLayout& L, int64_t nH, int64_t nKV,
                                int64_t hd, SpinPool* pool) {
  const int64_t N = q.size(0), bs = L.block_size, rep = nH / nKV;
  const T* qp = q.data_ptr<T>();
  const T* kp = k.data_ptr<T>();
  const T* vp = v.data_ptr<T>();
  const T* qw = q_norm_w.defined() ? q_norm_w.data_ptr<T>() : nullptr;
  const T* kw = k_norm_w.defined() ? k_norm_w.data_ptr<T>() : nullptr;
  const float* cp = cos.data_ptr<float>();
  const float* sp = sin.data_ptr<float>();
  T* kc = k_cache.data_ptr<T>();
  T* vc = v_cache.data_ptr<T>();
  const int64_t pos_stride = nKV * hd;  // between positions of one block

  // Phase A, per token: q/k norms and RoPE; keys and values into their blocks.
  std::vector<float> qf(static_cast<size_t>(N * nH * hd));
  // Parallel regions cost more than they save on small work (decoding a few rows):
  // grains are sized so that under ~2^17 multiply-adds runs on the calling thread.
  const bool a512 = attention_avx512() && hd % 32 == 0;
  par_for(pool, N, std::max<int64_t>(1, (1 << 17) / ((nH + 2 * nKV) * hd * 8)), [&](int64_t i0, int64_t i1) {
    std::vector<float> tmp(static_cast<size_t>(hd)), kb(static_cast<size_t>(hd));
    std::vector<float> cr(a512 ? static_cast<size_t>(hd) : 0), sr(cr.size());
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t p = L.pos[i];
      const float* c = cp + p * hd;
      const float* s = sp + p * hd;
#if AGENTR1_ATTN_AVX512
      if (a512) {
        const std::vector<int32_t>& table = *L.blocks[L.row[i]];
        const int64_t dst = (static_cast<int64_t>(table[p / bs]) * bs + p % bs) * pos_stride;
        phase_a_512<T>(qp + i * nH * hd, kp + i * nKV * hd, vp + i * nKV * hd, qw, kw, eps, c, s, nH, nKV, hd,
                       qf.data() + i * nH * hd, kc + dst, vc + dst, cr.data(), sr.data(), kb.data());
        continue;
      }
#endif
      for (int64_t h = 0; h < nH; ++h) {
        float* x = qf.data() + (i * nH + h) * hd;
        for (int64_t j = 0; j < hd; ++j) x[j] = static_cast<float>(qp[(i * nH + h) * hd + j]);
        if (qw) rms_inplace<T>(x, qw, hd, eps);
        rope_inplace<T>(x, c, s, hd, tmp.data());
      }
      const std::vector<int32_t>& table = *L.blocks[L.row[i]];
      const int64_t dst = (static_cast<int64_t>(table[p / bs]) * bs + p % bs) * pos_stride;
      for (int64_t g = 0; g < nKV; ++g) {
        for (int64_t j = 0; j < hd; ++j) kb[j] = static_cast<float>(kp[(i * nKV + g) * hd + j]);
        if (kw) rms_inplace<T>(kb.data(), kw, hd, eps);
        rope_inplace<T>(kb.data(), c, s, hd, tmp.data());
        for (int64_t j = 0; j < hd; ++j) {
          kc[dst + g * hd + j] = static_cast<T>(kb[j]);
          vc[dst + g * hd + j] = vp[(i * nKV + g) * hd + j];
        }
      }
    }
  });

  // Phase B, per (token, head): online-softmax attention over positions 0..pos.
  at::Tensor out = at::empty({N, nH * hd}, q.options());
  T* op = out.data_ptr<T>();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  // bf16/half with more tokens than rows (a prefill): every cache block this call reads
  // is widened to fp32 once (exact) when the copies fit kMirrorBytes, instead of once per
  // (token, KV group) that reads it (a 512-token prefill: ~500 times per group).
  // Otherwise (decoding: a row's blocks are read by that row's items only, and copying
  // them all first measured slower) each block as an item reads it.
  std::unique_ptr<float[]> kmir, vmir;
  std::vector<int32_t> slot;
  if (!std::is_same_v<T, float> && N > static_cast<int64_t>(L.blocks.size())) {
    constexpr int64_t kMirrorBytes = int64_t{64} << 20;
    const int64_t block_elems = bs * pos_stride;
    slot.assign(static_cast<size_t>(k_cache.size(0)), -1);
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < N; ++i) {
      const std::vector<int32_t>& table = *L.blocks[L.row[i]];
      for (int64_t b = 0; b * bs <= L.pos[i]; ++b)
        if (slot[static_cast<size_t>(table[b])] < 0) {
          slot[static_cast<size_t>(table[b])] = static_cast<int32_t>(ids.size());
          ids.push_back(table[b]);
        }
    }
    const int64_t n_ids = static_cast<int64_t>(ids.size());
    if (2 * n_ids * block_elems * static_cast<int64_t>(sizeof(float)) <= kMirrorBytes) {
      kmir.reset(new float[static_cast<size_t>(n_ids * block_elems)]);  // uninitialised: all written
      vmir.reset(new float[static_cast<size_t>(n_ids * block_elems)]);
      par_for(pool, n_ids, std::max<int64_t>(1, (1 << 16) / block_elems), [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
          const int64_t src = static_cast<int64_t>(ids[static_cast<size_t>(j)]) * block_elems;
          widen_to_float(kc + src, kmir.get() + j * block_elems, block_elems);
          widen_to_float(vc + src, vmir.get() + j * block_elems, block_elems);
        }
      });
    } else {
      slot.clear();
    }
  }
  const bool mirrored = kmir != nullptr;
  const int64_t avg_keys = std::max<int64_t>(1, L.total_keys / std::max<int64_t>(1, N));
  // Work items are (token, a range of KV groups): a group's `rep` query heads share each
  // block, so a bf16/half block is widened once for all of them, and a range's groups lie
  // side by side in each cached position (the cache is [block, position, group, hd]): an
  // item reads one contiguous run per position instead of a group's 256 bytes of every
  // 2 KB (Qwen3-0.6B). A token's groups are split into as many ranges as there are
  // threads to share them (decoding one row: one range per thread). Each head's
  // arithmetic (its blocks in order, online softmax) is the same whatever the grouping.
  // Measured (paged_attention alone, one bf16 row at a 4096-token context, 28 layers of
  // the 0.6B shape, 2 threads; bench/README.md session 18): 51-55 ms with one group per item and one key
  // per chain, 43-46 ms with scores_m's 8 chains, 33-38 ms with ranges: ~13 GB/s of
  // keys and values. Splitting a long row's blocks between the threads instead (spans of
  // 256 keys merged in order, each thread streaming whole positions) measured the same
  // (29.5-35 ms), as did the rows in the cache at 256 positions: the loops are bound by
  // their instructions (~150 cycles per head and position: widening bf16, the fmas, the
  // lane sums), not by how the cache is read.
  // parts: the fewest ranges per token that give every thread as many items (N x parts a
  // multiple of the threads; a batch of 3 rows on 2 threads: 6 items), else one group each.
  const int64_t threads = pool != nullptr ? pool->threads() : at::get_num_threads();
  int64_t parts = nKV;
  for (int64_t p = std::clamp<int64_t>((threads + std::max<int64_t>(N, 1) - 1) / std::max<int64_t>(N, 1), 1, nKV);
       p < nKV; ++p)
    if ((N * p) % std::max<int64_t>(threads, 1) == 0) {
      parts = p;
      break;
    }
  const int64_t grain = std::max<int64_t>(1, (1 << 17) / (avg_keys * hd * rep * ((nKV + parts - 1) / parts)));
  const bool v512 = attention_avx512() && hd % 16 == 0;
  par_for(pool, N * parts, grain, [&](int64_t w0, int64_t w1) {
    const int64_t most = (nKV + parts - 1) / parts;  // groups in the largest range
    std::vector<float> acc(static_cast<size_t>(most * rep * hd)), sc(static_cast<size_t>(bs));
    std::vector<float> m(static_cast<size_t>(most * rep)), l(static_cast<size_t>(most * rep));
    std::vector<float> kbuf, vbuf;  // a widened block (bf16/half without the mirror or AVX-512)
    if (!std::is_same_v<T, float> && !mirrored && !v512) {
      kbuf.resize(static_cast<size_t>(bs * hd));
      vbuf.resize(static_cast<size_t>(bs * hd));
    }
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t i = w / parts, part = w % parts;
      const int64_t g0 = part * nKV / parts, g1 = (part + 1) * nKV / parts;  // this item's groups
      const int64_t n_keys = L.pos[i] + 1;
      const std::vector<int32_t>& table = *L.blocks[L.row[i]];
      std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
      std::fill(l.begin(), l.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t b = 0; b * bs < n_keys; ++b) {
        const int64_t n = std::min(bs, n_keys - b * bs);
#if AGENTR1_ATTN_AVX512
        if (v512 && !mirrored) {
          // This block's values (read after the scores) and the next block's keys, for
          // the item's groups: one run of (g1 - g0) x hd per position.
          const int64_t run = (g1 - g0) * hd * static_cast<int64_t>(sizeof(T));
          prefetch_rows(vc + static_cast<int64_t>(table[b]) * bs * pos_stride + g0 * hd, pos_stride, n, run);
          if ((b + 1) * bs < n_keys)
            prefetch_rows(kc + static_cast<int64_t>(table[b + 1]) * bs * pos_stride + g0 * hd, pos_stride,
                          std::min(bs, n_keys - (b + 1) * bs), run);
        }
#endif
        for (int64_t g = g0; g < g1; ++g) {
          const float* kb = nullptr;
          const float* vb = nullptr;
          [[maybe_unused]] const T* kt = nullptr;  // AVX-512 without the mirror: the cache's own block
          [[maybe_unused]] const T* vt = nullptr;
          int64_t stride = pos_stride;
          if (v512 && !mirrored) {
            const int64_t base = static_cast<int64_t>(table[b]) * bs * pos_stride + g * hd;
            kt = kc + base;
            vt = vc + base;
          } else if (mirrored) {
            const int64_t mbase = static_cast<int64_t>(slot[static_cast<size_t>(table[b])]) * bs * pos_stride + g * hd;
            kb = kmir.get() + mbase;
            vb = vmir.get() + mbase;
          } else {
            const int64_t base = static_cast<int64_t>(table[b]) * bs * pos_stride + g * hd;
            if constexpr (std::is_same_v<T, float>) {
              kb = kc + base;
              vb = vc + base;
            } else {
              for (int64_t j = 0; j < n; ++j) {
                widen_to_float(kc + base + j * pos_stride, kbuf.data() + j * hd, hd);
                widen_to_float(vc + base + j * pos_stride, vbuf.data() + j * hd, hd);
              }
              kb = kbuf.data();
              vb = vbuf.data();
              stride = hd;
            }
          }
          for (int64_t hh = 0; hh < rep; ++hh) {
            const int64_t h = g * rep + hh, s = (g - g0) * rep + hh;  // s: the head's state
            const float* qh = qf.data() + (i * nH + h) * hd;
            float* ah = acc.data() + s * hd;
#if AGENTR1_ATTN_AVX512
            if (kt)
              block_scores_512(qh, kt, stride, n, hd, scale, sc.data());
            else if (v512)
              block_scores_512(qh, kb, stride, n, hd, scale, sc.data());
            else
#endif
              block_scores(qh, kb, stride, n, hd, scale, sc.data());
            float bm = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < n; ++j) bm = std::max(bm, sc[j]);
            if (bm > m[s]) {
              const float f = core::exp_f(m[s] - bm);  // 0 on the first block (m = -inf)
              l[s] *= f;
              for (int64_t d = 0; d < hd; ++d) ah[d] *= f;
              m[s] = bm;
            }
            core::exp_shifted(sc.data(), m[s], sc.data(), n);  // vectorised, within 2 ulp
            for (int64_t j = 0; j < n; ++j) l[s] += sc[j];
#if AGENTR1_ATTN_AVX512
            if (vt)
              block_accumulate_512(sc.data(), vt, stride, n, hd, ah);
            else if (v512)
              block_accumulate_512(sc.data(), vb, stride, n, hd, ah);
            else
#endif
              block_accumulate(sc.data(), vb, stride, n, hd, ah);
          }
        }
      }
      for (int64_t g = g0; g < g1; ++g)
        for (int64_t hh = 0; hh < rep; ++hh) {
          const int64_t h = g * rep + hh, s = (g - g0) * rep + hh;
          const float inv = 1.0f / l[s];
          for (int64_t d = 0; d < hd; ++d) op[(i * nH + h) * hd + d] = static_cast<T>(acc[s * hd + d] * inv);
        }
    }
  });
  return out;
}

}  // namespace

bool attention_avx512_supported() {
#if AGENTR1_ATTN_AVX512
  return row_linear_isa_supported(RowLinearIsa::kAvx512);
#else
  return false;
#endif
}

void force_attention_avx512(std::optional<bool> on) {
  g_attention_forced.store(on ? (*on ? 1 : 0) : -1, std::memory_order_relaxed);
}

at::Tensor rms_norm_rows(const at::Tensor& x, const at::Tensor& w, double eps) {
  AGENTR1_CHECK(x.dim() == 2 && x.is_contiguous() && w.dim() == 1 && w.size(0) == x.size(1) &&
                    w.scalar_type() == x.scalar_type() && w.is_contiguous(),
                "rms_norm_rows: x must be [N, D] contiguous and w [D] of its dtype, got " << x.sizes()
                                                                                          << " and " << w.sizes());
  switch (x.scalar_type()) {
    case at::kFloat: return rms_norm_impl<float>(x, w, eps);
    case at::kBFloat16: return rms_norm_impl<c10::BFloat16>(x, w, eps);
    case at::kHalf: return rms_norm_impl<c10::Half>(x, w, eps);
    default: AGENTR1_CHECK(false, "rms_norm_rows: unsupported dtype " << x.scalar_type());
  }
  return {};
}

at::Tensor paged_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& q_norm_w, const at::Tensor& k_norm_w, double eps,
                           const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                           at::Tensor& v_cache, const PagedLayout& layout, int64_t n_heads, int64_t n_kv,
                           int64_t head_dim, SpinPool* pool) {
  AGENTR1_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && k_cache.is_contiguous() &&
                    v_cache.is_contiguous() && cos.scalar_type() == at::kFloat && cos.size(0) >= layout.max_pos,
                "paged_attention: inputs must be contiguous and the RoPE tables cover every position");
  AGENTR1_CHECK(head_dim % 2 == 0, "paged_attention: head_dim must be even, got " << head_dim);
  switch (q.scalar_type()) {
    case at::kFloat:
      return paged_attention_impl<float>(q, k, v, q_norm_w, k_norm_w, eps, cos, sin, k_cache, v_cache, layout,
                                         n_heads, n_kv, head_dim, pool);
    case at::kBFloat16:
      return paged_attention_impl<c10::BFloat16>(q, k, v, q_norm_w, k_norm_w, eps, cos, sin, k_cache, v_cache,
                                                 layout, n_heads, n_kv, head_dim, pool);
    case at::kHalf:
      return paged_attention_impl<c10::Half>(q, k, v, q_norm_w, k_norm_w, eps, cos, sin, k_cache, v_cache, layout,
                                             n_heads, n_kv, head_dim, pool);
    default: AGENTR1_CHECK(false, "paged_attention: unsupported dtype " << q.scalar_type());
  }
  return {};
}

}  // namespace agentr1::model::detail
