#include "agentr1/model/row_linear.h"
#include "agentr1/model/avx512_util.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "agentr1/core/error.h"
#include "agentr1/core/fast_exp.h"
#include "agentr1/core/log.h"

// The AVX2 kernel relies on GCC's `#pragma GCC target` (clang ignores it): other
// compilers and CPUs get the portable kernel, which computes the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define AGENTR1_ROW_LINEAR_AVX2 1
#else
#define AGENTR1_ROW_LINEAR_AVX2 0
#endif

namespace agentr1::model::detail {

namespace {

constexpr int kLanes = 8;     // fp32 partial sums per dot product (the contract)
constexpr int kTileRows = 4;  // rows of x per register tile (the last 1-3 rows of a call: smaller tiles)
// Output columns per register tile of R rows: R x C accumulators plus the loads fit the 16
// ymm registers. One row: 8 columns, streamed 4 at a time (tile_avx2's one-row path).
constexpr int cols_for(int rows) { return rows == 1 ? 8 : rows == 2 ? 6 : rows == 3 ? 4 : 3; }
constexpr int kMaxTileCols = 8;
constexpr int kTileOut = 12;   // max over R of R x cols_for(R)
constexpr int kColUnit = 48;   // a multiple of the widths (AVX2 8,6,4,3; AVX-512 12,8,6): threads get whole tiles
// Work below this many multiply-adds runs on the calling thread (a parallel region costs
// more than it saves; the same threshold as paged_attention's grains).
constexpr int64_t kSerialMacs = int64_t{1} << 17;
constexpr int64_t kPieceBytes = int64_t{128} << 10;  // weights per piece of a pool's balanced split

// Exact widening of one stored value to fp32.
inline float widen(float v) { return v; }
inline float widen(c10::BFloat16 v) { return static_cast<float>(v); }
inline float widen(c10::Half v) { return static_cast<float>(v); }

// The fixed reduction of the lanes.
inline float sum_lanes(const float* a) { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }

// One element by the definition in row_linear.h (no bias).
// wk(k): the weight at k (row-major or the decode layout).
template <typename WAt>
float dot_portable_at(const float* x, int64_t K, WAt wk) {
  const int64_t K8 = K - K % kLanes;
  float a[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < K8; k += kLanes)
    for (int u = 0; u < kLanes; ++u) a[u] = std::fma(x[k + u], widen(wk(k + u)), a[u]);
  float s = sum_lanes(a);
  for (int64_t k = K8; k < K; ++k) s = std::fma(x[k], widen(wk(k)), s);
  return s;
}
template <typename W>
float dot_portable(const float* x, const W* w, int64_t K) {
  return dot_portable_at(x, K, [w](int64_t k) { return w[k]; });
}

// One group of kPackCols columns in the decode layout (row_linear.h): column c's element
// k at at(c, k). A load of up to L elements from k stays in one line when k % L plus its
// length is at most L (every load of the tiles below: 8 or 16 elements at a multiple of
// its length, or a whole line).
template <typename W>
struct PackedCols {
  static constexpr int64_t L = 64 / static_cast<int64_t>(sizeof(W));
  const W* g;
  const W* at(int c, int64_t k) const {
    const auto u = static_cast<uint64_t>(k);
    return g + (u / L) * (kPackCols * L) + static_cast<uint64_t>(c) * L + u % L;
  }
};

// out[r * cc + c] = dot(x row r, w row c) for r < rr, c < cc; x and w rows have
// stride K.
// The weights of the tile after this one (contiguous: rows are), fetched into the cache
// while this tile computes, `per_step` 64-byte lines per k step: the hardware prefetcher
// sees a tile's 3-16 rows as short separate streams and starts each late; this keeps one
// stream a tile ahead (decode reads every weight once, so the bound is how early the
// bytes arrive). Hints only: results do not depend on them.
struct Ahead {
  const char* p = nullptr;
  const char* end = nullptr;
  int per_step = 0;
  bool within = true;  // one-row tiles: also fetch the tile's next group of columns (4 on
                       // AVX-512: kOneRowPairs pairs; 4 on AVX2) (off with the switch)
};

// One-row tiles run this many of their column pairs at once, each over all of K: every
// pair's accumulator is one chain of dependent vdpbf16ps / FMAs (the contract fixes each
// lane's order), and one chain alone cannot go faster than the instruction's latency:
// ~40-45 GB/s of bf16 weights per thread with them in the cache (12 cycles per 128 bytes)
// against the ~32 GB/s per thread that streaming at this VM's fast moments asks, too
// little headroom to catch up after a stall (bench/README.md session 16). Two chains
// double that; four columns stream at a time instead of two.
constexpr int kOneRowPairs = 2;

// What a one-row tile fetches while its pairs [p, p + G) compute: the next G pairs'
// columns of this tile (when `within`), or for the last group the next tile's first 2G
// columns (clamped to the ahead range), as addresses [lo, hi). w: the tile's first
// column; row_bytes: bytes per column.
struct LineRange {
  uintptr_t lo = 0, hi = 0;
};
inline LineRange group_ahead(const void* w, int64_t row_bytes, int p, int G, int P, const Ahead& ahead) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(w);
  if (p + G < P) {
    if (!ahead.within) return {};
    const uintptr_t q = base + static_cast<uintptr_t>((2 * p + 2 * G) * row_bytes);
    return {q, q + static_cast<uintptr_t>(2 * G * row_bytes)};
  }
  if (ahead.p == nullptr) return {};
  const uintptr_t q = reinterpret_cast<uintptr_t>(ahead.p);
  return {q, q + static_cast<uintptr_t>(std::min<std::ptrdiff_t>(2 * G * row_bytes, ahead.end - ahead.p))};
}

// A prefetch cursor over a LineRange without branches (a branch in a tile's loop made
// GCC split the loop and keep the accumulators in memory): lines at or past the range's
// last line fetch that last line again (an empty range: `own`, a line the tile reads
// anyway), a hint that costs nothing. Addresses stay integers: nothing is formed past
// the range.
struct LineCursor {
  uintptr_t at, last;
  LineCursor(LineRange r, const void* own) {
    if (r.lo < r.hi) {
      at = r.lo;
      last = r.lo + (r.hi - r.lo - 1) / 64 * 64;
    } else {
      at = last = reinterpret_cast<uintptr_t>(own);
    }
  }
  // Fetches the next n lines (T0: one-row tiles keep their lines in L1 as tuned).
  template <int n>
  inline void fetch() {
#pragma GCC unroll 8
    for (int i = 0; i < n; ++i) {
      const uintptr_t q = at + 64 * static_cast<uintptr_t>(i);
      __builtin_prefetch(reinterpret_cast<const void*>(q < last ? q : last), 0, 3);
    }
    const uintptr_t nx = at + 64 * static_cast<uintptr_t>(n);
    at = nx < last ? nx : last;
  }
};

template <typename W>
using TileFn = void (*)(const float* x, const W* w, int64_t K, float* out, Ahead& ahead);

template <typename W>
void tile_portable(const float* x, const W* w, int64_t K, float* out, int rr, int cc) {
  for (int r = 0; r < rr; ++r)
    for (int c = 0; c < cc; ++c) out[r * cc + c] = dot_portable(x + r * K, w + c * K, K);
}

#if AGENTR1_ROW_LINEAR_AVX2
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// Up to n lines of the next tile's weights (ahead's range), fetched while this tile
// computes. Tiles of several rows fetch into the L2 cache (T1), one row into L1 (T0): a
// T0 fetch holds one of L1's ~24 miss buffers until its line arrives, which caps a
// thread at ~10 GB/s from memory, less than an 8-row tile consumes (it computes at
// ~170 GFLOP/s, 21 GB/s); T1 fetches queue at L2, which keeps more in flight (8 rows x
// 6 columns of bf16 streamed on one thread: 104 -> 172 GFLOP/s, bench/README.md session
// 15). One row keeps T0, as it was tuned (it streams at the read speed of the moment).
template <int R>
inline void fetch_ahead(Ahead& ahead, int n) {
  for (int i = 0; i < n && ahead.p < ahead.end; ++i) {
    _mm_prefetch(ahead.p, R == 1 ? _MM_HINT_T0 : _MM_HINT_T1);
    ahead.p += std::min<std::ptrdiff_t>(64, ahead.end - ahead.p);  // never past the range's end
  }
}

// The next tile's first C columns as prefetch bases (tiles of kColumnFetchRows rows or
// more): column j at j * row_bytes from ahead.p while ahead's range holds it, else the
// range's first column, else (no range: the prefetch switch off, or a later row group
// whose columns an earlier one fetched) the tile's own column j, whose line at o the
// tile loads in the same step: nothing is fetched ahead. fetch(o) hints the line at
// byte o of each (o below row_bytes: inside its column).
constexpr int kColumnFetchRows = 8;
template <int C>
struct ColumnAhead {
  const char* c[C] = {};
  ColumnAhead() = default;
  ColumnAhead(const Ahead& ahead, const void* own, int64_t row_bytes) {
    const int64_t have = ahead.p == nullptr ? 0 : (ahead.end - ahead.p) / row_bytes;
    for (int j = 0; j < C; ++j)
      c[j] = j < have ? ahead.p + j * row_bytes
             : have > 0 ? ahead.p
                        : static_cast<const char*>(own) + j * row_bytes;
  }
  inline void fetch(int64_t o) const {
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) _mm_prefetch(c[j] + o, _MM_HINT_T1);
  }
};

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const c10::BFloat16* p) {  // bf16 -> fp32: the 16 bits moved up, exact
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m256 load8(const c10::Half* p) {  // fp16 -> fp32, exact
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

void widen_avx2(const c10::BFloat16* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8(src + i));
  for (; i < n; ++i) dst[i] = widen(src[i]);
}
void widen_avx2(const c10::Half* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8(src + i));
  for (; i < n; ++i) dst[i] = widen(src[i]);
}

// The end of a register tile of R x C outputs, shared by the AVX2 and AVX-512 tiles:
// lane_set(i) is output i's (i = r * C + c) eight fp32 lanes. sum_lanes of four lane sets
// at once: hadd(hadd(a, b), hadd(c, d)) holds (l0+l1)+(l2+l3) of a..d in its low half and
// (l4+l5)+(l6+l7) in its high half, and low + high is sum_lanes' last addition (each
// addition commutes exactly). Then the k >= K8 tail fused in order, as dot_portable.
// wat(c, k): column c's weight at k (row-major in finish_tile, or the decode layout).
template <int R, int C, typename LaneSet, typename WAt>
inline void finish_tile_at(LaneSet lane_set, const float* x, int64_t K, WAt wat, float* out) {
  const int64_t K8 = K - K % kLanes;
  constexpr int n = R * C;
  alignas(16) float sums[((n + 3) / 4) * 4];
#pragma GCC unroll 16
  for (int i = 0; i < n; i += 4) {
    const __m256 z = _mm256_setzero_ps();
    const __m256 a = lane_set(i);
    const __m256 b = i + 1 < n ? lane_set(i + 1) : z;
    const __m256 c = i + 2 < n ? lane_set(i + 2) : z;
    const __m256 d = i + 3 < n ? lane_set(i + 3) : z;
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_store_ps(sums + i, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      float s = sums[r * C + c];
      for (int64_t k = K8; k < K; ++k) s = std::fma(x[r * K + k], widen(wat(c, k)), s);
      out[r * C + c] = s;
    }
}
template <int R, int C, typename W, typename LaneSet>
inline void finish_tile(LaneSet lane_set, const float* x, const W* w, int64_t K, float* out) {
  finish_tile_at<R, C>(lane_set, x, K, [w, K](int c, int64_t k) { return w[c * K + k]; }, out);
}

// R x C register tile: the same fused multiply-adds, lane by lane, as dot_portable.
template <int R, int C, typename W>
void tile_avx2(const float* x, const W* w, int64_t K, float* out, Ahead& ahead) {
  const int64_t K8 = K - K % kLanes;
  // The r/c loops are unrolled so that the accumulators live in registers.
  __m256 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  if constexpr (R == 1 && C % 4 == 0) {
    // One row (batch-1 decode on AVX2-only CPUs): 4 columns at a time, each group over all
    // of K, so that 4 weight streams are read at once instead of C (as the AVX-512 tiles'
    // pairs: the prefetchers keep up with a few streams, not eight), the next group's
    // columns (the next tile's first, for the last group) fetched while one computes,
    // 4 x 32 k of lines per 32 k. Each accumulator sees the same steps in the same order
    // as below. Forced on an AVX-512 machine, 2 threads: 72-92% -> 84-107% of a read of
    // the same bytes (bench/README.md session 15).
    constexpr int G = 4;
    constexpr int kLines = G * 4 * kLanes * static_cast<int>(sizeof(W)) / 64;  // per 32 k
    const int64_t col_bytes = K * static_cast<int64_t>(sizeof(W));
    for (int g = 0; g < C; g += G) {
      const char* pf = nullptr;
      const char* pf_end = nullptr;
      if (g + G < C) {
        if (ahead.within) {
          pf = reinterpret_cast<const char*>(w + (g + G) * K);
          pf_end = pf + G * col_bytes;
        }
      } else if (ahead.p != nullptr) {
        pf = ahead.p;
        pf_end = ahead.p + std::min<std::ptrdiff_t>(G * col_bytes, ahead.end - ahead.p);
      }
      const W* w0 = w + g * K;
      const W* w1 = w0 + K;
      const W* w2 = w1 + K;
      const W* w3 = w2 + K;
      __m256 a0 = acc[0][g], a1 = acc[0][g + 1], a2 = acc[0][g + 2], a3 = acc[0][g + 3];
      int64_t k = 0;
      for (; k + 4 * kLanes <= K8; k += 4 * kLanes) {
        const std::ptrdiff_t left = pf_end - pf;  // 0 for an empty range (both null)
        if (left >= kLines * 64) {
#pragma GCC unroll 8
          for (int i = 0; i < kLines; ++i) _mm_prefetch(pf + 64 * i, _MM_HINT_T0);
          pf += kLines * 64;
        } else if (left > 0) {
          _mm_prefetch(pf, _MM_HINT_T0);
          pf += std::min<std::ptrdiff_t>(64, left);
        }
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m256 xv = _mm256_loadu_ps(x + k + j * kLanes);
          a0 = _mm256_fmadd_ps(xv, load8(w0 + k + j * kLanes), a0);
          a1 = _mm256_fmadd_ps(xv, load8(w1 + k + j * kLanes), a1);
          a2 = _mm256_fmadd_ps(xv, load8(w2 + k + j * kLanes), a2);
          a3 = _mm256_fmadd_ps(xv, load8(w3 + k + j * kLanes), a3);
        }
      }
      for (; k < K8; k += kLanes) {
        const __m256 xv = _mm256_loadu_ps(x + k);
        a0 = _mm256_fmadd_ps(xv, load8(w0 + k), a0);
        a1 = _mm256_fmadd_ps(xv, load8(w1 + k), a1);
        a2 = _mm256_fmadd_ps(xv, load8(w2 + k), a2);
        a3 = _mm256_fmadd_ps(xv, load8(w3 + k), a3);
      }
      acc[0][g] = a0;
      acc[0][g + 1] = a1;
      acc[0][g + 2] = a2;
      acc[0][g + 3] = a3;
    }
    finish_tile<R, C>([&](int i) { return acc[i / C][i % C]; }, x, w, K, out);
    return;
  }
  for (int64_t k = 0; k < K8; k += kLanes) {
    fetch_ahead<R>(ahead, ahead.per_step);
    // Keep the shorter side's vectors in registers and stream the longer side's: R x C
    // accumulators + min(R, C) + 1 fit the 16 ymm registers for every tile shape.
    if constexpr (R >= C) {
      __m256 wv[C];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) wv[c] = load8(w + c * K + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_loadu_ps(x + r * K + k);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
      }
    } else {
      __m256 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x + r * K + k);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m256 wv = load8(w + c * K + k);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
      }
    }
  }
  finish_tile<R, C>([&](int i) { return acc[i / C][i % C]; }, x, w, K, out);
}

// One row x one group of the decode layout (kPackCols columns): tile_avx2<1, 8>'s one-row
// path for 4 columns (the same multiply-adds per accumulator in the same order), reading
// the group's lines in address order.
template <typename W>
void group_avx2(const float* x, PackedCols<W> w, int64_t K, float* out) {
  static_assert(kPackCols == 4, "four accumulators");
  const int64_t K8 = K - K % kLanes;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t k = 0; k < K8; k += kLanes) {
    const __m256 xv = _mm256_loadu_ps(x + k);
    a0 = _mm256_fmadd_ps(xv, load8(w.at(0, k)), a0);
    a1 = _mm256_fmadd_ps(xv, load8(w.at(1, k)), a1);
    a2 = _mm256_fmadd_ps(xv, load8(w.at(2, k)), a2);
    a3 = _mm256_fmadd_ps(xv, load8(w.at(3, k)), a3);
  }
  const __m256 acc[4] = {a0, a1, a2, a3};
  finish_tile_at<1, 4>([&](int i) { return acc[i]; }, x, K, [w](int c, int64_t k) { return *w.at(c, k); }, out);
}

#pragma GCC pop_options

template <typename W>
TileFn<W> avx2_tile(int rr, int cc) {
  static const TileFn<W> table[kTileRows][kMaxTileCols] = {
      {tile_avx2<1, 1, W>, tile_avx2<1, 2, W>, tile_avx2<1, 3, W>, tile_avx2<1, 4, W>, tile_avx2<1, 5, W>,
       tile_avx2<1, 6, W>, tile_avx2<1, 7, W>, tile_avx2<1, 8, W>},
      {tile_avx2<2, 1, W>, tile_avx2<2, 2, W>, tile_avx2<2, 3, W>, tile_avx2<2, 4, W>, tile_avx2<2, 5, W>,
       tile_avx2<2, 6, W>, nullptr, nullptr},
      {tile_avx2<3, 1, W>, tile_avx2<3, 2, W>, tile_avx2<3, 3, W>, tile_avx2<3, 4, W>, nullptr, nullptr, nullptr,
       nullptr},
      {tile_avx2<4, 1, W>, tile_avx2<4, 2, W>, tile_avx2<4, 3, W>, nullptr, nullptr, nullptr, nullptr, nullptr},
  };
  return table[rr - 1][cc - 1];
}

bool cpu_has_avx2_fma() {
  static const bool has = [] {
    const bool h = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    if (!h) {
      AGENTR1_LOG(WARN) << "row_linear: this CPU lacks AVX2/FMA/F16C; the batch-invariant products run the portable "
                           "kernel (same results, several times slower; HINT: rollout.batch_invariant=false)";
    }
    return h;
  }();
  return has;
}
// AVX-512 tiles: the same contract, two output columns per 512-bit register (lanes 0-7
// are column c's eight lanes, 8-15 column c+1's) and x's eight values broadcast to both
// halves, so each instruction performs the FMAs of two AVX2 ones on the same lanes. The
// register file (32) holds R x P accumulators for up to 8 rows: one pass over a column
// tile's weights serves all the rows of a decode step (weight-stationary).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")

inline __m512 load_pair(const float* a, const float* b) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a)), _mm256_loadu_ps(b), 1);
}
inline __m512 load_pair(const c10::BFloat16* a, const c10::BFloat16* b) {
  const __m256i h = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 load_pair(const c10::Half* a, const c10::Half* b) {
  const __m256i h = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  return _mm512_cvtph_ps(h);
}

// finish_tile for R x P registers that each hold two columns' lane sets (output
// r * 2P + c: register c / 2, half c % 2): the AVX-512 and AVX-512 BF16 tiles.
template <int R, int P, typename W>
inline void finish_pair_tile(const __m512 (&acc)[R][P], const float* x, const W* w, int64_t K, float* out) {
  // finish_tile's steps with its lane sets taken from the registers directly (GCC had
  // left the lambda that returned them a call per lane set: ~7% of the 8-row bf16
  // tiles' time in the cache): outputs 4q..4q+3 are registers 2q and 2q + 1 (in row
  // order), each low half then high half.
  constexpr int n = R * P;  // registers
  const int64_t K8 = K - K % kLanes;
  alignas(16) float sums[((2 * n + 3) / 4) * 4];
#pragma GCC unroll 16
  for (int q = 0; q < n; q += 2) {
    const __m512 a = acc[q / P][q % P];
    const __m512 b = q + 1 < n ? acc[(q + 1) / P][(q + 1) % P] : _mm512_setzero_ps();
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)),
                                    _mm256_hadd_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1)));
    _mm_store_ps(sums + 2 * q, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < 2 * P; ++c) {
      float s = sums[r * 2 * P + c];
      for (int64_t k = K8; k < K; ++k) s = std::fma(x[r * K + k], widen(w[c * K + k]), s);
      out[r * 2 * P + c] = s;
    }
}
// finish_pair_tile of one row for a group in the decode layout.
template <int P, typename W>
inline void finish_pair_group(const __m512 (&acc)[P], const float* x, PackedCols<W> w, int64_t K, float* out) {
  finish_tile_at<1, 2 * P>(
      [&](int i) {
        const __m512 a = acc[i / 2];
        return (i % 2) == 0 ? _mm512_castps512_ps256(a) : _mm512_extractf32x8_ps(a, 1);
      },
      x, K, [w](int c, int64_t k) { return *w.at(c, k); }, out);
}

// R rows x 2P columns; out as tile_avx2's (row-major R x 2P).
template <int R, int P, typename W>
void tile_avx512(const float* x, const W* w, int64_t K, float* out, Ahead& ahead) {
  const int64_t K8 = K - K % kLanes;
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  if constexpr (R == 1) {
    // One row: kOneRowPairs pairs at a time over all of K, the next group's columns
    // fetched while one computes (as tile_dp's one-row path; the same steps per
    // accumulator in the same order as below). A pair-step reads 64 bytes (fp32) or 32
    // (bf16, half): the group's lines per step rounded up.
    constexpr int G = kOneRowPairs;
    static_assert(P % G == 0, "one-row tiles run whole groups of pairs");
    constexpr int kLinesPerStep = (2 * G * kLanes * static_cast<int>(sizeof(W)) + 63) / 64;
    for (int p = 0; p < P; p += G) {
      const W* wa = w + (2 * p) * K;
      LineCursor pf(group_ahead(w, K * static_cast<int64_t>(sizeof(W)), p, G, P, ahead), wa);
      __m512 c[G];
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) c[g] = acc[0][p + g];
      for (int64_t k = 0; k < K8; k += kLanes) {
        pf.fetch<kLinesPerStep>();
        const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + k));
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g)
          c[g] = _mm512_fmadd_ps(xv, load_pair(wa + 2 * g * K + k, wa + (2 * g + 1) * K + k), c[g]);
      }
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) acc[0][p + g] = c[g];
    }
    finish_pair_tile<1, P>(acc, x, w, K, out);
    return;
  }
  for (int64_t k = 0; k < K8; k += kLanes) {
    fetch_ahead<R>(ahead, ahead.per_step);
    __m512 wv[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) wv[p] = load_pair(w + (2 * p) * K + k, w + (2 * p + 1) * K + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + r * K + k));
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(xv, wv[p], acc[r][p]);
    }
  }
  finish_pair_tile<R, P>(acc, x, w, K, out);
}

// One row x one group of a copy in kLines order (bf16 without AVX-512 BF16, half; fp32
// copies on AVX-512 are in kFmaPairs order: group_fma below): tile_avx512<1, P>'s pairs
// (0, 1) and (2, 3) (the same fused multiply-adds per accumulator in the same order), the
// group's lines read in address order.
template <typename W>
void group_avx512(const float* x, PackedCols<W> w, int64_t K, float* out) {
  static_assert(kPackCols == 4, "two column pairs");
  const int64_t K8 = K - K % kLanes;
  __m512 c0 = _mm512_setzero_ps(), c1 = c0;
  for (int64_t k = 0; k < K8; k += kLanes) {
    const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + k));
    c0 = _mm512_fmadd_ps(xv, load_pair(w.at(0, k), w.at(1, k)), c0);
    c1 = _mm512_fmadd_ps(xv, load_pair(w.at(2, k), w.at(3, k)), c1);
  }
  const __m512 acc[2] = {c0, c1};
  finish_pair_group<2>(acc, x, w, K, out);
}

// The four columns' sums of a one-row group's two accumulators (c0: columns 0 and 1 in
// its low and high 8 lanes, c1: 2 and 3): finish_pair_group<2>'s steps written out
// (finish_tile_at for one row and four columns, lane sets c0 low, high, c1 low, high),
// then the scalar k >= K8 steps, so that nothing is called between two groups.
template <typename W>
inline __attribute__((always_inline)) __m128 group_sums(__m512 c0, __m512 c1, const float* x, PackedCols<W> w,
                                                        int64_t K) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(_mm512_castps512_ps256(c0), _mm512_extractf32x8_ps(c0, 1)),
                                  _mm256_hadd_ps(_mm512_castps512_ps256(c1), _mm512_extractf32x8_ps(c1, 1)));
  __m128 sums = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const int64_t K8 = K - K % kLanes;
  if (K8 < K) {
    alignas(16) float out[kPackCols];
    _mm_store_ps(out, sums);
    for (int c = 0; c < kPackCols; ++c)
      for (int64_t k = K8; k < K; ++k) out[c] = std::fma(x[k], widen(*w.at(c, k)), out[c]);
    sums = _mm_load_ps(out);
  }
  return sums;
}

// Four groups' sums in one register, group q in lanes 4q..4q+3.
inline __m512 join_sums(__m128 s0, __m128 s1, __m128 s2, __m128 s3) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_insertf128_ps(_mm256_castps128_ps256(s0), s1, 1)),
                            _mm256_insertf128_ps(_mm256_castps128_ps256(s2), s3, 1), 1);
}

// One row x one group of a copy in kFmaPairs order (fp32): group_avx512's fused
// multiply-adds per accumulator in the same order; a 16-k step's four lines hold the
// column pairs' halves as the instructions take them (pack_weight), so the step is two
// x broadcasts and four multiply-adds straight from memory; the lines of k >= 16J are in
// kLines order.
inline __attribute__((always_inline)) __m128 group_fma(const float* x, PackedCols<float> w, int64_t K) {
  static_assert(kPackCols == 4, "two column pairs");
  const int64_t K8 = K - K % kLanes;
  const float* p = w.g;
  __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K8; k += 16, p += 4 * 16) {
    const __m512 xlo = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + k));
    const __m512 xhi = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + k + 8));
    c0 = _mm512_fmadd_ps(xlo, _mm512_load_ps(p), c0);
    c1 = _mm512_fmadd_ps(xlo, _mm512_load_ps(p + 16), c1);
    c0 = _mm512_fmadd_ps(xhi, _mm512_load_ps(p + 32), c0);
    c1 = _mm512_fmadd_ps(xhi, _mm512_load_ps(p + 48), c1);
  }
  for (; k < K8; k += kLanes) {  // a last 8-step, kLines order
    const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + k));
    c0 = _mm512_fmadd_ps(xv, load_pair(w.at(0, k), w.at(1, k)), c0);
    c1 = _mm512_fmadd_ps(xv, load_pair(w.at(2, k), w.at(3, k)), c1);
  }
  return group_sums(c0, c1, x, w, K);
}

// y[o0, o1) (+ b) of one row from a kFmaPairs copy (`group` floats per group; o0 a
// multiple of kPackCols): four groups' sums at a time, the bias added and stored from
// registers.
void groups_fma(const float* x, const float* base, int64_t group, int64_t K, const float* b, float* y, int64_t o0,
                int64_t o1) {
  const int64_t ge = (o1 + kPackCols - 1) / kPackCols;
  for (int64_t g = o0 / kPackCols; g < ge; g += 4) {
    __m128 s[4];
    for (int q = 0; q < 4; ++q)
      s[q] = g + q < ge ? group_fma(x, PackedCols<float>{base + (g + q) * group}, K) : _mm_setzero_ps();
    const int64_t c0 = g * kPackCols, n = std::min<int64_t>(16, o1 - c0);
    const __mmask16 m = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
    __m512 f = join_sums(s[0], s[1], s[2], s[3]);
    if (b != nullptr) f = _mm512_add_ps(f, _mm512_maskz_loadu_ps(m, b + c0));
    _mm512_mask_storeu_ps(y + c0, m, f);
  }
}

#pragma GCC pop_options

// Rows per AVX-512 tile (1..8) -> column pairs: accumulators + pairs + 1 fit 32 registers
// (one row: 4 pairs, streamed kOneRowPairs pairs at a time).
constexpr int pairs_for(int rows) { return rows == 1 ? 4 : rows == 2 ? 6 : rows <= 4 ? 4 : 3; }
constexpr int kTileRows512 = 8;

template <typename W>
TileFn<W> avx512_tile(int rr) {
  static const TileFn<W> table[kTileRows512] = {
      tile_avx512<1, pairs_for(1), W>, tile_avx512<2, pairs_for(2), W>, tile_avx512<3, pairs_for(3), W>,
      tile_avx512<4, pairs_for(4), W>, tile_avx512<5, pairs_for(5), W>, tile_avx512<6, pairs_for(6), W>,
      tile_avx512<7, pairs_for(7), W>, tile_avx512<8, pairs_for(8), W>};
  return table[rr - 1];
}

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                          cpu_has_avx2_fma();
  return has;
}

// AVX-512 BF16 tiles (bf16 x and w only): vdpbf16ps computes, per fp32 lane j,
// acc = fma(a[2j+1], b[2j+1], acc) then acc = fma(a[2j], b[2j], acc) (the products of
// two bf16 are exact in fp32; RNE), i.e. two of the contract's steps when lane u of a
// column holds w[k+u] in its high half and w[k+8+u] in its low half. The weights are
// interleaved so in registers (one vpermt2w per column pair and 16 k from two columns'
// whole lines, or one vpermw for a last 16 k), or in memory (one row from a copy in
// PackOrder::kDpPairs: group_dpp), x once per call (x_dp below), and a last lone step of
// 8 puts zeros in the low halves (acc + 0 * 0 = acc: an accumulator that starts at +0 is
// never -0). So these tiles compute the
// contract's bits, with one difference the instruction imposes: denormal inputs and
// results (|v| < 2^-126) are flushed to zero. The ISA runs every bf16 product on such a
// CPU (one row too), so a row's bits never depend on its batch there either.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma,f16c")

// Word index of the interleave within each 256-bit half: dword u = (low: k+8+u, high: k+u).
inline __m512i dp_interleave() {
  alignas(64) static const uint16_t idx[32] = {8,  0,  9,  1,  10, 2,  11, 3,  12, 4,  13, 5,  14, 6,  15, 7,
                                               24, 16, 25, 17, 26, 18, 27, 19, 28, 20, 29, 21, 30, 22, 31, 23};
  return _mm512_load_si512(idx);
}

// The same interleave from two columns' 32-word lines a (words 0-31) and b (32-63):
// words `base`..base+15 of a into the low 256 bits, of b into the high 256 bits.
struct alignas(64) Interleave2 {
  uint16_t idx[32];
  constexpr explicit Interleave2(int base) : idx{} {
    for (int u = 0; u < 8; ++u) {
      idx[2 * u] = static_cast<uint16_t>(base + 8 + u);
      idx[2 * u + 1] = static_cast<uint16_t>(base + u);
      idx[16 + 2 * u] = static_cast<uint16_t>(32 + base + 8 + u);
      idx[16 + 2 * u + 1] = static_cast<uint16_t>(32 + base + u);
    }
  }
};
inline constexpr Interleave2 kInterleaveLo{0}, kInterleaveHi{16};
inline __m512i dp_interleave2(const Interleave2& t) { return _mm512_load_si512(t.idx); }

// 16 words (32 bytes) from each of two columns: a's in the low 256 bits, b's in the high
// (the operand a last 16-k step permutes with one vpermw).
inline __m512i join_lines(const void* a, const void* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(b)), 1);
}

// x [N,K] bf16 -> N * Kp words, Kp = K8 rounded up to 16, each 16-block interleaved as
// the weights are, a last lone 8-step as (0, x[k+u]); arranged per tile of
// kTileRows512 rows (rows 8t.. of R = min(8, N - 8t) rows at out + 8t * Kp) block by
// block: row i's 16-block at k at + k * R + i * 16, so that a tile reads all its rows'
// x at one k from one pointer at fixed offsets (one row: plain rows). columns() cuts its
// row tiles at the same multiples of 8 (its row blocks are multiples of 8).
void x_dp(const c10::BFloat16* x, int64_t N, int64_t K, uint16_t* out, int64_t Kp) {
  const int64_t K8 = K - K % kLanes, K16 = K8 - K8 % 16;
  const __m512i idx = dp_interleave();
  for (int64_t r = 0; r < N; ++r) {
    const uint16_t* xr = reinterpret_cast<const uint16_t*>(x + r * K);
    const int64_t t0 = r - r % kTileRows512, R = std::min<int64_t>(kTileRows512, N - t0);
    uint16_t* o = out + t0 * Kp + (r - t0) * 16;  // + k * R: the block at k
    int64_t k = 0;
    for (; k + 32 <= K16; k += 32) {
      const __m512i v = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512(xr + k));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + k * R), _mm512_castsi512_si256(v));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + (k + 16) * R), _mm512_extracti64x4_epi64(v, 1));
    }
    for (; k < K16; k += 16)
      for (int u = 0; u < 8; ++u) {
        o[k * R + 2 * u] = xr[k + 8 + u];
        o[k * R + 2 * u + 1] = xr[k + u];
      }
    if (K8 > K16)
      for (int u = 0; u < 8; ++u) {
        o[K16 * R + 2 * u] = 0;
        o[K16 * R + 2 * u + 1] = xr[K16 + u];
      }
  }
}

// R rows x 2P columns of bf16 weights; xq: x_dp's tile of R rows (row r's 16-block at k
// at xq + k * R + r * 16); x: the fp32 rows for finish_tile's k >= K8 tail; out
// as tile_avx512's.
template <int R, int P>
void tile_dp(const uint16_t* xq, const float* x, const c10::BFloat16* w, int64_t K, float* out, Ahead& ahead) {
  const int64_t K8 = K - K % kLanes, K16 = K8 - K8 % 16;
  const __m512i idx = dp_interleave();
  const uint16_t* wq = reinterpret_cast<const uint16_t*>(w);
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  // acc[r][p] += the two steps at k of row r and column pair p (wv: the pairs' weights).
  auto step = [&](const __m512i (&wv)[P], int64_t k) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k * R + r * 16)));
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_dpbf16_ps(acc[r][p], (__m512bh)xv, (__m512bh)wv[p]);
    }
  };
  __m512i wv[P];
  const __m512i idx_lo = dp_interleave2(kInterleaveLo), idx_hi = dp_interleave2(kInterleaveHi);
  if constexpr (R == 1) {
    // One row (batch-1 decode, bound by how fast the weights stream in): kOneRowPairs
    // pairs at a time, each over all of K, so that four columns' lines stream at a time
    // instead of 2P (the hardware prefetcher keeps up with a few streams and lags behind
    // eight: bench/decode_bench's same-bytes fraction) and two accumulator chains run
    // side by side; the tile is finished once for its 2P columns. Each accumulator sees
    // the same steps in the same order as below. While a group computes, the next
    // group's columns are fetched (the next tile's first for the last group), 4 lines
    // per 32 k: one stream just ahead of the reads. The accumulators stay in registers
    // through the loop (with one stored every step the products reached 68-77% of a
    // plain read of the same bytes at this VM's ~60 GB/s moments, 85-89% without:
    // bench/README.md session 15).
    constexpr int G = kOneRowPairs;
    static_assert(P % G == 0, "one-row tiles run whole groups of pairs");
    for (int p = 0; p < P; p += G) {
      const uint16_t* wa = wq + (2 * p) * K;
      LineCursor pf(group_ahead(wq, K * static_cast<int64_t>(sizeof(uint16_t)), p, G, P, ahead), wa);
      int64_t k = 0;
      __m512 c[G];
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) c[g] = acc[0][p + g];
      for (; k + 32 <= K16; k += 32) {
        pf.fetch<2 * G>();
        const __m512i xlo = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k)));
        const __m512i xhi = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k + 16)));
        __m512i a[G], b[G];
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          a[g] = _mm512_loadu_si512(wa + 2 * g * K + k);
          b[g] = _mm512_loadu_si512(wa + (2 * g + 1) * K + k);
        }
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g)
          c[g] = _mm512_dpbf16_ps(c[g], (__m512bh)xlo, (__m512bh)_mm512_permutex2var_epi16(a[g], idx_lo, b[g]));
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g)
          c[g] = _mm512_dpbf16_ps(c[g], (__m512bh)xhi, (__m512bh)_mm512_permutex2var_epi16(a[g], idx_hi, b[g]));
      }
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) acc[0][p + g] = c[g];
      for (int q = p; q < p + G; ++q) {
        const uint16_t* qa = wq + (2 * q) * K;
        const uint16_t* qb = qa + K;
        for (int64_t k2 = k; k2 < K16; k2 += 16) {
          const __m512i raw = join_lines(qa + k2, qb + k2);
          const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k2)));
          acc[0][q] = _mm512_dpbf16_ps(acc[0][q], (__m512bh)xv, (__m512bh)_mm512_permutexvar_epi16(idx, raw));
        }
        if (K8 > K16) {
          const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + K16)));
          const __m512i lone = _mm512_castps_si512(load_pair(w + (2 * q) * K + K16, w + (2 * q + 1) * K + K16));
          acc[0][q] = _mm512_dpbf16_ps(acc[0][q], (__m512bh)xv, (__m512bh)lone);
        }
      }
    }
    finish_pair_tile<1, P>(acc, x, w, K, out);
    return;
  }
  // 32 k at a time: each column's whole 64-byte line loaded once, and one vpermt2w per
  // pair and 16 k builds the interleaved pair from two columns' lines (the same
  // registers as the 16-k step below, so the same instructions on the same operands in
  // the same order: the same bits), half the shuffles and loads of two 16-k steps.
  //
  // Tiles of kColumnFetchRows rows or more fetch the next tile as they read their own:
  // each 32-k step one line of each of the next tile's 2P columns at the same k (T1), so
  // that the next tile streams in at the pace this one reads, with no cursor, branch or
  // store in the loop (fetch_ahead's). With this, finish_pair_tile's lane sets in
  // registers and columns()' rounding 16 at a time, the 8-row bf16 decode step at this
  // VM's ~82 GB/s moments went from 28-32 ms to 25.2-25.7 ms (bench/README.md session
  // 21); at ~50 GB/s moments it is bound by the memory either way.
  int64_t k = 0;
  ColumnAhead<2 * P> next;
  if constexpr (R >= kColumnFetchRows) next = ColumnAhead<2 * P>(ahead, wq, K * static_cast<int64_t>(sizeof(uint16_t)));
  for (; k + 32 <= K16; k += 32) {
    if constexpr (R >= kColumnFetchRows)
      next.fetch(k * static_cast<int64_t>(sizeof(uint16_t)));
    else
      fetch_ahead<R>(ahead, 4 * ahead.per_step);
    __m512i hi[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const __m512i a = _mm512_loadu_si512(wq + (2 * p) * K + k), b = _mm512_loadu_si512(wq + (2 * p + 1) * K + k);
      wv[p] = _mm512_permutex2var_epi16(a, idx_lo, b);
      hi[p] = _mm512_permutex2var_epi16(a, idx_hi, b);
    }
    step(wv, k);
    step(hi, k + 16);
  }
  for (; k < K16; k += 16) {
    if constexpr (R < kColumnFetchRows) fetch_ahead<R>(ahead, 2 * ahead.per_step);
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      wv[p] = _mm512_permutexvar_epi16(idx, join_lines(wq + (2 * p) * K + k, wq + (2 * p + 1) * K + k));
    }
    step(wv, k);
  }
  if (K8 > K16) {  // one lone step of 8: (0, w[k+u]) is the bf16 widened to fp32's bits
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) wv[p] = _mm512_castps_si512(load_pair(w + (2 * p) * K + K16, w + (2 * p + 1) * K + K16));
    step(wv, K16);
  }
  finish_pair_tile<R, P>(acc, x, w, K, out);
}

// One row x one group of a copy in kDpPairs order: tile_dp<1, P>'s pairs (0, 1) and (2, 3)
// (the same vdpbf16ps per accumulator on the same operands in the same order). A 32-k
// step's four lines hold the operands as the instruction takes them (pack_weight), so
// the step is two x broadcasts and four dot products straight from memory; the lines of
// k >= 32J are in kLines order and take tile_dp's tail steps. Returns the four columns'
// sums (group_sums), the scalar k >= K8 steps included.
inline __attribute__((always_inline)) __m128 group_dpp(const uint16_t* xq, const float* x,
                                                       PackedCols<c10::BFloat16> w, int64_t K) {
  static_assert(kPackCols == 4, "two column pairs");
  const int64_t K8 = K - K % kLanes, K16 = K8 - K8 % 16;
  const uint16_t* p = reinterpret_cast<const uint16_t*>(w.g);
  __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K16; k += 32, p += 4 * 32) {
    const __m512i xlo = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k)));
    const __m512i xhi = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k + 16)));
    c0 = _mm512_dpbf16_ps(c0, (__m512bh)xlo, (__m512bh)_mm512_load_si512(p));
    c1 = _mm512_dpbf16_ps(c1, (__m512bh)xlo, (__m512bh)_mm512_load_si512(p + 32));
    c0 = _mm512_dpbf16_ps(c0, (__m512bh)xhi, (__m512bh)_mm512_load_si512(p + 64));
    c1 = _mm512_dpbf16_ps(c1, (__m512bh)xhi, (__m512bh)_mm512_load_si512(p + 96));
  }
  if (k < K8) {  // the kLines tail: a 16-step, a lone 8-step (K = 1024, 2048, 3072: none)
    const __m512i idx = dp_interleave();
    for (; k < K16; k += 16) {
      const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k)));
      c0 = _mm512_dpbf16_ps(c0, (__m512bh)xv, (__m512bh)_mm512_permutexvar_epi16(idx, join_lines(w.at(0, k), w.at(1, k))));
      c1 = _mm512_dpbf16_ps(c1, (__m512bh)xv, (__m512bh)_mm512_permutexvar_epi16(idx, join_lines(w.at(2, k), w.at(3, k))));
    }
    if (K8 > K16) {
      const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + K16)));
      c0 = _mm512_dpbf16_ps(c0, (__m512bh)xv, (__m512bh)_mm512_castps_si512(load_pair(w.at(0, K16), w.at(1, K16))));
      c1 = _mm512_dpbf16_ps(c1, (__m512bh)xv, (__m512bh)_mm512_castps_si512(load_pair(w.at(2, K16), w.at(3, K16))));
    }
  }
  return group_sums(c0, c1, x, w, K);
}

// f (+ float(b[j])) rounded to bf16 as c10 rounds (to nearest even, NaN to 0x7fc0) into
// y[j] for the lanes j of m: the same integer steps, so the same bits.
inline __attribute__((always_inline)) void round16_to_bf16(__m512 f, const c10::BFloat16* b, c10::BFloat16* y,
                                                           __mmask16 m) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  if (b != nullptr)
    f = _mm512_add_ps(f, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, b)), 16)));
  const __m512i u = _mm512_castps_si512(f);
  const __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  _mm256_mask_storeu_epi16(y, m, _mm256_mask_blend_epi16(nan, _mm512_cvtepi32_epi16(r), _mm256_set1_epi16(0x7fc0)));
}

// y[o0, o1) (+ b) of one row from a kDpPairs copy (`group` elements per group; o0 a
// multiple of kPackCols): four groups' sums at a time rounded and stored from registers,
// so the groups run back to back with no memory round trip between them.
void groups_dpp(const uint16_t* xq, const float* x, const c10::BFloat16* base, int64_t group, int64_t K,
                const c10::BFloat16* b, c10::BFloat16* y, int64_t o0, int64_t o1) {
  const int64_t ge = (o1 + kPackCols - 1) / kPackCols;
  for (int64_t g = o0 / kPackCols; g < ge; g += 4) {
    __m128 s[4];
    for (int q = 0; q < 4; ++q)
      s[q] = g + q < ge ? group_dpp(xq, x, PackedCols<c10::BFloat16>{base + (g + q) * group}, K) : _mm_setzero_ps();
    const __m512 f = join_sums(s[0], s[1], s[2], s[3]);
    const int64_t c0 = g * kPackCols, n = std::min<int64_t>(16, o1 - c0);
    round16_to_bf16(f, b == nullptr ? nullptr : b + c0, y + c0, n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1));
  }
}

// y[j] = BFloat16(v[j] (+ float(b[j]))) for j < n: c10's rounding (to nearest even, NaN to
// 0x7fc0), 16 at a time; the same integer steps, so the same bits.
void round_to_bf16(const float* v, const c10::BFloat16* b, c10::BFloat16* y, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    round16_to_bf16(_mm512_maskz_loadu_ps(m, v + j), b == nullptr ? nullptr : b + j, y + j, m);
  }
}

#pragma GCC pop_options

// Column pairs of the AVX-512 BF16 tiles: the AVX-512 tiles' (3 at 5-8 rows), except 4 at
// 2 rows. Measured on the real tiles with the weights in the cache (one thread, K = 1024
// and 3072, bench/README.md session 15): 8 x 3 computes 174-201 GFLOP/s against 165-177
// for 8 x 2 (7 and 6 rows alike, 5 even), and 2 x 4 109-117 against 94-110 for 2 x 6.
// 8 x 3's 32-k step wants 33 vector registers (24 accumulators, 3 + 3 pairs, x, two
// indices), one more than there are, and is faster all the same. (Session 14 had chosen
// 2 pairs at 5-8 rows from a scratch kernel whose accumulators the compiler had left in
// memory.)
constexpr int dp_pairs_for(int rows) { return rows == 2 ? 4 : pairs_for(rows); }

using DpTileFn = void (*)(const uint16_t* xq, const float* x, const c10::BFloat16* w, int64_t K, float* out,
                          Ahead& ahead);

DpTileFn dp_tile(int rr) {
  static const DpTileFn table[kTileRows512] = {tile_dp<1, dp_pairs_for(1)>, tile_dp<2, dp_pairs_for(2)>,
                                               tile_dp<3, dp_pairs_for(3)>, tile_dp<4, dp_pairs_for(4)>,
                                               tile_dp<5, dp_pairs_for(5)>, tile_dp<6, dp_pairs_for(6)>,
                                               tile_dp<7, dp_pairs_for(7)>, tile_dp<8, dp_pairs_for(8)>};
  return table[rr - 1];
}

bool cpu_has_avx512_bf16() {
  static const bool has = cpu_has_avx512() && __builtin_cpu_supports("avx512bf16");
  return has;
}

// The end of silu_mul_impl 16 lanes at a time (the same IEEE division, products and
// roundings to T, so the same bits): g[i] = T(T(v[i] / (1 + e[i])) * u[i]) for i < m
// rounded down to 16; returns how many it did.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")
template <typename T>
int64_t silu_finish_avx512(const float* v, const float* e, const T* u, T* g, int64_t m) {
  using namespace avx512;
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= m; i += 16) {
    const __m512 s = round16<T>(_mm512_div_ps(_mm512_loadu_ps(v + i), _mm512_add_ps(one, _mm512_loadu_ps(e + i))));
    store16<T>(g + i, round16<T>(_mm512_mul_ps(s, load16f(u + i))));
  }
  return i;
}
#pragma GCC pop_options

#else
bool cpu_has_avx512() { return false; }
bool cpu_has_avx512_bf16() { return false; }
template <typename T>
int64_t silu_finish_avx512(const float*, const float*, const T*, T*, int64_t) { return 0; }
bool cpu_has_avx2_fma() {
  static const bool warned = [] {
    AGENTR1_LOG(WARN) << "row_linear: built without the AVX2 kernel (not x86-64 GCC); the batch-invariant products "
                         "run the portable kernel (same results, several times slower; HINT: "
                         "rollout.batch_invariant=false)";
    return true;
  }();
  (void)warned;
  return false;
}
#endif

std::atomic<bool> g_prefetch{true};
std::atomic<int64_t> g_piece_bytes{0};  // 0: kPieceBytes
constexpr int64_t kWarmBytes = int64_t{512} << 10;
std::atomic<int64_t> g_warm_bytes{kWarmBytes};

// y[:, o0:o1) for all N rows. Rows are taken in blocks whose x slice stays in the L2
// cache while every column tile of the range passes over it; within a block, groups of
// the ISA's tile rows, then the last rows with wider tiles. Every element is computed by
// the contract's arithmetic whichever tile holds it: the choice of tiles changes speed,
// never bits.
//   x [N,K] fp32, w [O,K], b [O] or null, y [N,O] (row-major, contiguous)
//   xq: x_dp's output (its tiles of 8 rows at xq + r * Kp) when isa is kAvx512Bf16 and T
//   is bfloat16, else null.
//   o_ahead >= o1: the tiles' prefetch may reach into [o1, o_ahead) (the columns this
//   thread will likely compute next), never beyond.
template <typename T>
void columns(const float* x, const uint16_t* xq, int64_t Kp, int64_t N, int64_t K, const T* w, const T* b, T* y,
             int64_t O, int64_t o0, int64_t o1, int64_t o_ahead, RowLinearIsa isa) {
  // A multiple of kTileRows512, so that row tiles start at multiples of 8 as x_dp's do.
  const int64_t row_block =
      std::max<int64_t>(kTileRows512, (int64_t{256} * 1024 / (K * 4)) / kTileRows512 * kTileRows512);
  float tile[kTileRows512 * 16];
  auto store = [&](int64_t r, int rr, int64_t o, int cc) {
    for (int i = 0; i < rr; ++i)
      for (int j = 0; j < cc; ++j) {
        float s = tile[i * cc + j];
        if (b != nullptr) s += widen(b[o + j]);
        y[(r + i) * O + o + j] = static_cast<T>(s);
      }
  };
  // The next `cw` columns after o (below o_ahead) as the prefetch target of a tile of
  // `cw` columns at o; none when `first` is false (a later row group finds the columns
  // in the cache already).
  const bool prefetch = g_prefetch.load(std::memory_order_relaxed);
  auto ahead_of = [&](int64_t o, int cw, bool first) {
    Ahead a;
    a.within = prefetch;
    if (!first || !prefetch) return a;
    const int64_t next = o + cw, end = std::min(o_ahead, next + cw);
    if (next >= end) return a;
    a.p = reinterpret_cast<const char*>(w + next * K);
    a.end = reinterpret_cast<const char*>(w + end * K);
    a.per_step = static_cast<int>((cw * static_cast<int64_t>(sizeof(T)) + 7) / 8);
    return a;
  };
  // Rows [r, r + rr) x columns [oa, ob) with the portable or AVX2 tiles (rr <= kTileRows
  // per tile).
  auto narrow_tiles = [&](int64_t r, int64_t rr_all, int64_t oa, int64_t ob, bool first) {
    for (int64_t r2 = r; r2 < r + rr_all; r2 += kTileRows) {
      const int rr = static_cast<int>(std::min<int64_t>(kTileRows, r + rr_all - r2));
      const int cw = cols_for(rr);
      for (int64_t o = oa; o < ob; o += cw) {
        const int cc = static_cast<int>(std::min<int64_t>(cw, ob - o));
#if AGENTR1_ROW_LINEAR_AVX2
        if (isa != RowLinearIsa::kPortable) {
          Ahead a = ahead_of(o, cc, first && r2 == r);
          avx2_tile<T>(rr, cc)(x + r2 * K, w + o * K, K, tile, a);
        } else
#endif
          tile_portable(x + r2 * K, w + o * K, K, tile, rr, cc);
        store(r2, rr, o, cc);
      }
    }
  };
#if AGENTR1_ROW_LINEAR_AVX2
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (xq != nullptr) {
      // AVX-512 BF16: every row count (one row too) and every column through tile_dp, so
      // that the instruction's flushing of denormals is the same whatever the batch. The
      // last chunk's columns short of a whole tile are copied beside zero columns first.
      thread_local std::vector<c10::BFloat16> spare;
      for (int64_t r0 = 0; r0 < N; r0 += row_block) {
        const int64_t r1 = std::min(N, r0 + row_block);
        for (int64_t c0 = o0; c0 < o1; c0 += kColUnit) {
          const int64_t c1 = std::min(o1, c0 + kColUnit);
          for (int64_t r = r0; r < r1; r += kTileRows512) {
            const int rr = static_cast<int>(std::min<int64_t>(kTileRows512, r1 - r));
            const int cw = 2 * dp_pairs_for(rr);
            const DpTileFn fn = dp_tile(rr);
            const bool first = r == r0;
            int64_t o = c0;
            for (; o + cw <= c1; o += cw) {
              Ahead a = ahead_of(o, cw, first);
              fn(xq + r * Kp, x + r * K, w + o * K, K, tile, a);
              // store()'s steps 16 at a time (the same bits; c10's scalar rounding per
              // output was ~9% of the 8-row tiles' time with the weights in the cache)
              for (int i = 0; i < rr; ++i) round_to_bf16(tile + i * cw, b == nullptr ? nullptr : b + o, y + (r + i) * O + o, cw);
            }
            if (o < c1) {
              const int cc = static_cast<int>(c1 - o);
              spare.assign(static_cast<size_t>(cw * K), c10::BFloat16(0.0f));
              std::copy(w + o * K, w + (o + cc) * K, spare.begin());
              Ahead none;
              none.within = prefetch;
              fn(xq + r * Kp, x + r * K, spare.data(), K, tile, none);
              // tile holds rr x cw; store() reads rr x cc row-major: compact it first.
              for (int i = 0; i < rr; ++i)
                for (int j = 0; j < cc; ++j) tile[i * cc + j] = tile[i * cw + j];
              store(r, rr, o, cc);
            }
          }
        }
      }
      return;
    }
  }
#endif
  for (int64_t r0 = 0; r0 < N; r0 += row_block) {
    const int64_t r1 = std::min(N, r0 + row_block);
#if AGENTR1_ROW_LINEAR_AVX2
    // One row (batch-1 decode) takes the 8-column tile that streams kOneRowPairs pairs
    // at a time (tile_avx512's one-row path); the arithmetic is the same.
    if ((isa == RowLinearIsa::kAvx512 || isa == RowLinearIsa::kAvx512Bf16) && N >= 1) {
      // Column chunks of kColUnit (a multiple of every tile width; its weights stay in
      // the L2 cache), and within a chunk groups of 8 rows, then the last 1-7: weights
      // come from memory once per call whatever the rows. Columns short of a whole tile
      // go to the AVX2 tiles.
      for (int64_t c0 = o0; c0 < o1; c0 += kColUnit) {
        const int64_t c1 = std::min(o1, c0 + kColUnit);
        for (int64_t r = r0; r < r1; r += kTileRows512) {
          const int rr = static_cast<int>(std::min<int64_t>(kTileRows512, r1 - r));
          const int cw = 2 * pairs_for(rr);
          const TileFn<T> fn = avx512_tile<T>(rr);
          const bool first = r == r0;
          int64_t o = c0;
          for (; o + cw <= c1; o += cw) {
            Ahead a = ahead_of(o, cw, first);
            fn(x + r * K, w + o * K, K, tile, a);
            store(r, rr, o, cw);
          }
          if (o < c1) narrow_tiles(r, rr, o, c1, first);
        }
      }
      continue;
    }
#endif
    // kTileRows rows at a time over each column tile, then the last 1-3 rows.
    const int64_t full = r0 + (r1 - r0) / kTileRows * kTileRows;
    const int cw = cols_for(kTileRows);
    for (int64_t o = o0; o < o1; o += cw) {
      const int64_t oe = std::min(o1, o + cw);
      for (int64_t r = r0; r < full; r += kTileRows) narrow_tiles(r, kTileRows, o, oe, r == r0);
    }
    if (full < r1) narrow_tiles(full, r1 - full, o0, o1, full == r0);
  }
}

// One row's y[0, o0:o1) from w's copy in the decode layout (o0 a multiple of kPackCols):
// group by group, each group's kernel the one-row tile's arithmetic for its columns (so
// the same bits as columns() above). The last group's padding columns are computed and
// dropped. No software prefetch: a thread's range is one sequential stream, which the
// hardware prefetchers follow; fetching the next group (T0, as the row-major one-row
// tiles do) or 4-8 KiB ahead made it slower (bf16 products of the 0.6B shape at ~62 GB/s
// moments: 86-88% of a read of the same bytes with no fetch, 79-82% fetching the next
// group, 82-85% 4 KiB ahead; row-major 75-76%; bench/README.md session 17).
template <typename T>
void packed_columns(const float* x, const uint16_t* xq, int64_t K, const PackedWeight& pw, const T* b, T* y,
                    int64_t o0, int64_t o1, RowLinearIsa isa) {
  const T* base = static_cast<const T*>(pw.data);
  const int64_t group = packed_weight_elems(kPackCols, K, pw.dtype);  // elements per group
  enum class Path { kPortable, kAvx2, kAvx512, kDp } path = Path::kPortable;
  if (isa == RowLinearIsa::kAvx512 || isa == RowLinearIsa::kAvx512Bf16)
    path = Path::kAvx512;
  else if (isa == RowLinearIsa::kAvx2)
    path = Path::kAvx2;
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (xq != nullptr) path = Path::kDp;  // AVX-512 BF16 (as columns(): every row count takes those tiles there)
  }
#if AGENTR1_ROW_LINEAR_AVX2
  // row_linear_impl reads a copy only in the order of the ISA's kernels (pack_order_for):
  // kDpPairs for bf16 there, kFmaPairs for fp32 on AVX-512.
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (path == Path::kDp) {
      groups_dpp(xq, x, base, group, K, b, y, o0, o1);
      return;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (path == Path::kAvx512) {
      groups_fma(x, base, group, K, b, y, o0, o1);
      return;
    }
  }
#endif
  float out[kPackCols];
  for (int64_t o = o0; o < o1; o += kPackCols) {
    const int64_t g = o / kPackCols;
    const PackedCols<T> w{base + g * group};
    switch (path) {
#if AGENTR1_ROW_LINEAR_AVX2
      case Path::kAvx512: group_avx512(x, w, K, out); break;
      case Path::kAvx2: group_avx2(x, w, K, out); break;
#endif
      default:
        for (int c = 0; c < kPackCols; ++c) out[c] = dot_portable_at(x, K, [&](int64_t k) { return *w.at(c, k); });
    }
    for (int64_t j = 0; j < std::min<int64_t>(kPackCols, o1 - o); ++j) {
      float v = out[j];
      if (b != nullptr) v += widen(b[o + j]);
      y[o + j] = static_cast<T>(v);
    }
  }
}

// x [N,K] against several weights ws[i] [O_i,K] (bs[i] [O_i] or undefined) -> one
// [N,O_i] output each; isa: the tiles; parallel: split the columns over threads. The
// products share one parallel region over all their column units (one thread hand-off,
// x widened once), and every output element is computed as row_linear computes it
// alone: the split never reaches inside an element.
template <typename T>
std::vector<at::Tensor> row_linear_impl(const at::Tensor& x, const std::vector<at::Tensor>& ws,
                                        const std::vector<at::Tensor>& bs, SpinPool* pool, RowLinearIsa isa,
                                        bool parallel, const std::vector<const PackedWeight*>& packed) {
  const int64_t N = x.size(0), K = x.size(1);
  const T* xp = x.data_ptr<T>();
  std::vector<float> xbuf;
  const float* xf = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    xf = xp;
  } else {  // widened once, not once per column tile
    xbuf.resize(static_cast<size_t>(N * K));
    widen_to_float(xp, xbuf.data(), N * K);
    xf = xbuf.data();
  }
  // x interleaved for the AVX-512 BF16 tiles (bf16 only).
  std::vector<uint16_t> xqbuf;
  int64_t Kp = 0;
#if AGENTR1_ROW_LINEAR_AVX2
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (isa == RowLinearIsa::kAvx512Bf16) {
      const int64_t K8 = K - K % kLanes;
      Kp = (K8 + 15) / 16 * 16;
      xqbuf.resize(static_cast<size_t>(std::max<int64_t>(1, N * Kp)));
      x_dp(xp, N, K, xqbuf.data(), Kp);
    }
  }
#endif
  const uint16_t* xq = xqbuf.empty() ? nullptr : xqbuf.data();
  // Product i owns the column units [first[i], first[i + 1]) of the joint range. One row
  // has no row groups to keep weights in the cache for, so its units are one 8-column
  // tile (a split then falls on any tile, not only every 48 columns: a k/v, o or down
  // product of 1024 columns is 21.3 units of 48).
  const int64_t unit = N == 1 ? 8 : kColUnit;
  const size_t P = ws.size();
  std::vector<at::Tensor> ys(P);
  std::vector<int64_t> first(P + 1, 0);
  int64_t macs = 0;
  for (size_t i = 0; i < P; ++i) {
    const int64_t O = ws[i].size(0);
    ys[i] = at::empty({N, O}, x.options());
    first[i + 1] = first[i] + (O + unit - 1) / unit;
    macs += N * K * O;
  }
  std::vector<const T*> wp(P), bp(P);
  std::vector<T*> yp(P);
  for (size_t i = 0; i < P; ++i) {
    wp[i] = ws[i].data_ptr<T>();
    bp[i] = bs[i].defined() ? bs[i].data_ptr<T>() : nullptr;
    yp[i] = ys[i].data_ptr<T>();
  }
  // Units [u0, u1), the tiles prefetching up to unit u_ahead (>= u1) of the same product.
  auto run_ahead = [&](int64_t u0, int64_t u1, int64_t u_ahead) {
    for (size_t i = 0; i < P; ++i) {
      const int64_t lo = std::max(u0, first[i]) - first[i], hi = std::min(u1, first[i + 1]) - first[i];
      if (lo >= hi) continue;
      const int64_t O = ws[i].size(0), ahead = std::min(u_ahead, first[i + 1]) - first[i];
      if (N == 1 && !packed.empty() && packed[i] != nullptr)
        packed_columns<T>(xf, xq, K, *packed[i], bp[i], yp[i], lo * unit, std::min(O, hi * unit), isa);
      else
        columns<T>(xf, xq, Kp, N, K, wp[i], bp[i], yp[i], O, lo * unit, std::min(O, hi * unit),
                   std::min(O, ahead * unit), isa);
    }
  };
  auto run = [&](int64_t u0, int64_t u1) { run_ahead(u0, u1, u1); };
  const int64_t units = first[P];
  if (!parallel || macs < kSerialMacs) {
    run(0, units);
  } else if (pool != nullptr) {
    // Pieces of ~kPieceBytes of weights (at least 4 per thread), balanced between the
    // threads as they run (SpinPool::parallel_chunks): each thread streams its own range
    // from the front and one done early takes pieces from the back of the others', so
    // none waits more than a piece for another. A piece's tiles prefetch into the rest
    // of the thread's range, as one static range did.
    const int64_t unit_bytes = unit * K * static_cast<int64_t>(sizeof(T));
    const int64_t piece = g_piece_bytes.load(std::memory_order_relaxed);
    const int64_t grain = std::min((piece > 0 ? piece : kPieceBytes) / unit_bytes, units / (4 * pool->threads()));
    pool->parallel_chunks(units, std::max<int64_t>(1, grain), run_ahead);
    // The next region (the next copy in the decode layout) starts with helper 1 at its
    // front: it reads that front while the caller runs the norms and attention between.
    const PackedWeight* last = N == 1 && !packed.empty() ? packed.back() : nullptr;
    const int64_t warm = g_warm_bytes.load(std::memory_order_relaxed);
    if (last != nullptr && last->next != nullptr && warm > 0)
      pool->warm(last->next, std::min(warm, last->next_bytes / pool->threads()), last->next_owner);
  } else {
    at::parallel_for(0, units, std::max<int64_t>(1, kSerialMacs / (N * K * unit)), run);
  }
  return ys;
}

std::vector<at::Tensor> dispatch(const at::Tensor& x, const std::vector<at::Tensor>& ws,
                                 const std::vector<at::Tensor>& bs, SpinPool* pool, RowLinearIsa isa, bool parallel,
                                 const std::vector<const PackedWeight*>& packed = {}) {
  AGENTR1_CHECK(packed.empty() || packed.size() == ws.size(),
                "row_linear: one packed copy (or null) per weight, got " << packed.size() << " for " << ws.size()
                                                                          << " weights");
  AGENTR1_CHECK(!ws.empty() && bs.size() == ws.size(),
                "row_linear: one bias (or an undefined tensor) per weight, got " << ws.size() << " weights and "
                                                                                  << bs.size() << " biases");
  AGENTR1_CHECK(x.dim() == 2 && x.is_contiguous() && x.device().is_cpu(),
                "row_linear: x must be [N, K], a contiguous CPU tensor, got " << x.sizes() << " on " << x.device());
  AGENTR1_CHECK(x.size(1) >= 1, "row_linear: K (x.size(1)) must be >= 1, got " << x.sizes());
  for (size_t i = 0; i < ws.size(); ++i) {
    const at::Tensor& w = ws[i];
    const at::Tensor& b = bs[i];
    AGENTR1_CHECK(w.dim() == 2 && x.size(1) == w.size(1) && w.is_contiguous() && w.scalar_type() == x.scalar_type() &&
                      w.device().is_cpu(),
                  "row_linear: x must be [N, K] and w [O, K], contiguous CPU tensors of one dtype, got x "
                      << x.sizes() << " " << x.scalar_type() << ", w" << (ws.size() > 1 ? " #" + std::to_string(i) : "")
                      << " " << w.sizes() << " " << w.scalar_type());
    AGENTR1_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0) && b.is_contiguous() &&
                                   b.scalar_type() == x.scalar_type() && b.device().is_cpu()),
                  "row_linear: b" << (ws.size() > 1 ? " #" + std::to_string(i) : "") << " must be [O] of x's dtype, got "
                                  << b.sizes() << " " << b.scalar_type());
  }
  for (size_t i = 0; i < packed.size(); ++i) {
    const PackedWeight* pw = packed[i];
    if (pw == nullptr) continue;
    const at::Tensor& w = ws[i];
    AGENTR1_CHECK(pw->O == w.size(0) && pw->K == w.size(1) && pw->dtype == w.scalar_type() &&
                      pw->source == w.data_ptr() && pw->data != nullptr &&
                      reinterpret_cast<uintptr_t>(pw->data) % 64 == 0,
                  "row_linear: the packed copy" << (ws.size() > 1 ? " #" + std::to_string(i) : "") << " is of a ["
                                                << pw->O << ", " << pw->K << "] " << pw->dtype << " weight at "
                                                << pw->source << ", but w is " << w.sizes() << " " << w.scalar_type()
                                                << " at " << w.data_ptr()
                                                << " (or its data is null or not 64-byte aligned); pack the weight "
                                                   "again (model::DecodeLayout::repack) after moving or reshaping it");
  }
  // A copy in another order than this ISA's kernels read (an ISA forced after packing):
  // w is read instead, the same bits.
  // (The copy of the vector only then: this runs for every product of a decode step.)
  const bool foreign = std::any_of(packed.begin(), packed.end(), [&](const PackedWeight* pw) {
    return pw != nullptr && pw->order != pack_order_for(pw->dtype, isa);
  });
  std::vector<const PackedWeight*> readable;
  if (foreign)
    for (const PackedWeight* pw : packed)
      readable.push_back(pw != nullptr && pw->order == pack_order_for(pw->dtype, isa) ? pw : nullptr);
  const std::vector<const PackedWeight*>& use = foreign ? readable : packed;
  switch (x.scalar_type()) {
    case at::kFloat: return row_linear_impl<float>(x, ws, bs, pool, isa, parallel, use);
    case at::kBFloat16: return row_linear_impl<c10::BFloat16>(x, ws, bs, pool, isa, parallel, use);
    case at::kHalf: return row_linear_impl<c10::Half>(x, ws, bs, pool, isa, parallel, use);
    default: AGENTR1_CHECK(false, "row_linear: unsupported dtype " << x.scalar_type() << " (float, bfloat16, half)");
  }
  return {};
}

// g, u: n elements each; g[i] = T(T(silu(g[i])) * u[i]).
// exp(-v) is core::exp_f (vectorised, the same bits on every CPU and for every chunking,
// so results stay batch-invariant), within 2 ulp of exp.
template <typename T>
void silu_mul_impl(T* g, const T* u, int64_t n) {
  constexpr int64_t kChunk = 256;
  float v[kChunk], e[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    for (int64_t i = 0; i < m; ++i) {
      v[i] = widen(g[i0 + i]);
      e[i] = -v[i];
    }
    core::exp_shifted(e, 0.0f, e, m);
    const int64_t done = cpu_has_avx512() ? silu_finish_avx512(v, e, u + i0, g + i0, m) : 0;
    for (int64_t i = done; i < m; ++i) {
      const float s = widen(static_cast<T>(v[i] / (1.0f + e[i])));  // silu rounded to T, as at::silu_
      g[i0 + i] = static_cast<T>(s * widen(u[i0 + i]));
    }
  }
}

}  // namespace

namespace {
std::atomic<int> g_forced_isa{-1};  // -1: the best the CPU has
}  // namespace

bool row_linear_isa_supported(RowLinearIsa isa) {
  switch (isa) {
    case RowLinearIsa::kPortable: return true;
    case RowLinearIsa::kAvx2: return cpu_has_avx2_fma();
    case RowLinearIsa::kAvx512: return cpu_has_avx512();
    case RowLinearIsa::kAvx512Bf16: return cpu_has_avx512_bf16();
  }
  return false;
}

RowLinearIsa row_linear_isa() {
  const int forced = g_forced_isa.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<RowLinearIsa>(forced);
  static const RowLinearIsa best = [] {
    const char* env = std::getenv("AGENTR1_ROW_LINEAR_ISA");
    if (env != nullptr && *env != '\0') {
      const std::string v = env;
      const RowLinearIsa want = v == "portable" ? RowLinearIsa::kPortable
                                : v == "avx2"   ? RowLinearIsa::kAvx2
                                : v == "avx512" ? RowLinearIsa::kAvx512
                                : v == "avx512bf16"
                                    ? RowLinearIsa::kAvx512Bf16
                                    : throw Error("AGENTR1_ROW_LINEAR_ISA='" + v +
                                                  "': expected portable, avx2, avx512 or avx512bf16 (or unset for "
                                                  "the best this CPU has)");
      AGENTR1_CHECK(row_linear_isa_supported(want), "AGENTR1_ROW_LINEAR_ISA=" << v
                                                        << ": this CPU lacks it; unset the variable or pick "
                                                           "one it has (portable always works)");
      return want;
    }
    return cpu_has_avx512_bf16() ? RowLinearIsa::kAvx512Bf16
           : cpu_has_avx512()    ? RowLinearIsa::kAvx512
           : cpu_has_avx2_fma()  ? RowLinearIsa::kAvx2
                                 : RowLinearIsa::kPortable;
  }();
  return best;
}

const char* row_linear_isa_name(RowLinearIsa isa) {
  switch (isa) {
    case RowLinearIsa::kPortable: return "portable";
    case RowLinearIsa::kAvx2: return "avx2";
    case RowLinearIsa::kAvx512: return "avx512";
    case RowLinearIsa::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

template <typename T>
void widen_any(const T* src, float* dst, int64_t n) {
#if AGENTR1_ROW_LINEAR_AVX2
  if (cpu_has_avx2_fma()) {
    widen_avx2(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = widen(src[i]);
}
void widen_to_float(const c10::BFloat16* src, float* dst, int64_t n) { widen_any(src, dst, n); }
void widen_to_float(const c10::Half* src, float* dst, int64_t n) { widen_any(src, dst, n); }

void set_row_linear_prefetch(bool on) { g_prefetch.store(on, std::memory_order_relaxed); }
void set_decode_warm_bytes(int64_t bytes) { g_warm_bytes.store(bytes < 0 ? kWarmBytes : bytes, std::memory_order_relaxed); }
void set_row_linear_piece_bytes(int64_t bytes) { g_piece_bytes.store(std::max<int64_t>(0, bytes), std::memory_order_relaxed); }

void force_row_linear_isa(std::optional<RowLinearIsa> isa) {
  if (isa)
    AGENTR1_CHECK(row_linear_isa_supported(*isa),
                  "force_row_linear_isa: this CPU lacks " << row_linear_isa_name(*isa));
  g_forced_isa.store(isa ? static_cast<int>(*isa) : -1, std::memory_order_relaxed);
}

at::Tensor row_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, SpinPool* pool) {
  return dispatch(x, {w}, {b}, pool, row_linear_isa(), /*parallel=*/true)[0];
}

at::Tensor row_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, SpinPool* pool,
                      const PackedWeight* packed) {
  return dispatch(x, {w}, {b}, pool, row_linear_isa(), /*parallel=*/true, {packed})[0];
}

std::vector<at::Tensor> row_linear_many(const at::Tensor& x, const std::vector<at::Tensor>& ws,
                                        const std::vector<at::Tensor>& bs, SpinPool* pool,
                                        const std::vector<const PackedWeight*>& packed) {
  return dispatch(x, ws, bs, pool, row_linear_isa(), /*parallel=*/true, packed);
}

int64_t packed_weight_elems(int64_t O, int64_t K, at::ScalarType dtype) {
  AGENTR1_CHECK(O >= 1 && K >= 1, "packed_weight_elems: O and K must be >= 1, got " << O << " and " << K);
  AGENTR1_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf,
                "packed_weight_elems: unsupported dtype " << dtype << " (float, bfloat16, half)");
  const int64_t L = 64 / static_cast<int64_t>(c10::elementSize(dtype));
  return (O + kPackCols - 1) / kPackCols * ((K + L - 1) / L) * kPackCols * L;
}

PackOrder pack_order_for(at::ScalarType dtype, RowLinearIsa isa) {
  const bool avx512 = isa == RowLinearIsa::kAvx512 || isa == RowLinearIsa::kAvx512Bf16;
  if (dtype == at::kBFloat16 && isa == RowLinearIsa::kAvx512Bf16) return PackOrder::kDpPairs;
  if (dtype == at::kFloat && avx512) return PackOrder::kFmaPairs;
  return PackOrder::kLines;
}

void pack_weight(const at::Tensor& w, void* dst, SpinPool* pool, PackOrder order) {
  AGENTR1_CHECK(w.dim() == 2 && w.is_contiguous() && w.device().is_cpu() && w.numel() > 0 &&
                    (w.scalar_type() == at::kFloat || w.scalar_type() == at::kBFloat16 ||
                     w.scalar_type() == at::kHalf),
                "pack_weight: w must be a non-empty 2-D contiguous CPU tensor of float, bfloat16 or half, got "
                    << w.sizes() << " " << w.scalar_type() << " on " << w.device());
  AGENTR1_CHECK(dst != nullptr && reinterpret_cast<uintptr_t>(dst) % 64 == 0,
                "pack_weight: dst must be 64-byte aligned, got " << dst);
  const int64_t O = w.size(0), K = w.size(1), es = static_cast<int64_t>(w.element_size());
  const int64_t L = 64 / es, Kl = (K + L - 1) / L, groups = (O + kPackCols - 1) / kPackCols;
  const auto* src = static_cast<const uint8_t*>(w.data_ptr());
  auto* out = static_cast<uint8_t*>(dst);
  AGENTR1_CHECK(order == PackOrder::kLines || (order == PackOrder::kDpPairs && w.scalar_type() == at::kBFloat16) ||
                    (order == PackOrder::kFmaPairs && w.scalar_type() == at::kFloat),
                "pack_weight: the " << (order == PackOrder::kDpPairs ? "kDpPairs order is for bf16" : "kFmaPairs order is for float")
                                    << " weights, got " << w.scalar_type() << "; pack it in pack_order_for(its dtype, the ISA)");
  // The steps j < J in the instructions' order (row_linear.h), the rest as kLines: a
  // step's line holds half a step (`half` k) of two columns, a column's half either in
  // the dot product's word order (k+8+u, k+u) or as it is.
  const int64_t J = order == PackOrder::kDpPairs ? K / 32 : order == PackOrder::kFmaPairs ? K / 16 : 0;
  const int64_t half = L / 2;
  auto run = [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t j = 0; j < J; ++j)
        for (int line = 0; line < kPackCols; ++line) {
          uint8_t* o = out + ((g * Kl + j) * kPackCols + line) * 64;
          const int64_t k0 = L * j + half * (line / 2);
          for (int cc = 0; cc < 2; ++cc) {
            const int64_t col = g * kPackCols + 2 * (line % 2) + cc;
            uint8_t* oc = o + cc * half * es;
            if (col >= O) {
              std::memset(oc, 0, static_cast<size_t>(half * es));
              continue;
            }
            const uint8_t* wc = src + (col * K + k0) * es;
            if (order == PackOrder::kFmaPairs) {
              std::memcpy(oc, wc, static_cast<size_t>(half * es));
              continue;
            }
            auto* o16 = reinterpret_cast<uint16_t*>(oc);
            const auto* w16 = reinterpret_cast<const uint16_t*>(wc);
            for (int u = 0; u < 8; ++u) {
              o16[2 * u] = w16[8 + u];
              o16[2 * u + 1] = w16[u];
            }
          }
        }
      for (int64_t j = J; j < Kl; ++j)
        for (int c = 0; c < kPackCols; ++c) {
          uint8_t* line = out + ((g * Kl + j) * kPackCols + c) * 64;
          const int64_t col = g * kPackCols + c, n = col < O ? std::min(L, K - j * L) : 0;
          if (n > 0) std::memcpy(line, src + (col * K + j * L) * es, static_cast<size_t>(n * es));
          std::memset(line + n * es, 0, static_cast<size_t>(64 - n * es));
        }
    }
  };
  if (pool != nullptr && groups > 1)
    pool->parallel_for(groups, run);
  else
    run(0, groups);
}

std::vector<at::Tensor> row_linear_many(const at::Tensor& x, const std::vector<at::Tensor>& ws,
                                        const std::vector<at::Tensor>& bs, SpinPool* pool) {
  return dispatch(x, ws, bs, pool, row_linear_isa(), /*parallel=*/true);
}

at::Tensor row_linear_portable(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return dispatch(x, {w}, {b}, nullptr, RowLinearIsa::kPortable, /*parallel=*/false)[0];
}

void silu_mul_rows_(at::Tensor& g, const at::Tensor& u, SpinPool* pool) {
  AGENTR1_CHECK(g.sizes() == u.sizes() && g.is_contiguous() && u.is_contiguous() &&
                    g.scalar_type() == u.scalar_type() && g.device().is_cpu() && u.device().is_cpu() &&
                    (g.scalar_type() == at::kFloat || g.scalar_type() == at::kBFloat16 ||
                     g.scalar_type() == at::kHalf),
                "silu_mul_rows_: g and u must be contiguous CPU tensors of one shape and dtype (float, bfloat16, "
                "half), got "
                    << g.sizes() << " " << g.scalar_type() << " and " << u.sizes() << " " << u.scalar_type());
  const int64_t n = g.numel();
  auto run = [&](int64_t i0, int64_t i1) {
    switch (g.scalar_type()) {
      case at::kFloat: silu_mul_impl(g.data_ptr<float>() + i0, u.data_ptr<float>() + i0, i1 - i0); break;
      case at::kBFloat16:
        silu_mul_impl(g.data_ptr<c10::BFloat16>() + i0, u.data_ptr<c10::BFloat16>() + i0, i1 - i0);
        break;
      case at::kHalf: silu_mul_impl(g.data_ptr<c10::Half>() + i0, u.data_ptr<c10::Half>() + i0, i1 - i0); break;
      default: AGENTR1_CHECK(false, "silu_mul_rows_: unsupported dtype " << g.scalar_type());
    }
  };
  const int64_t grain = 1 << 14;  // ~16k exps per task
  if (n <= grain)
    run(0, n);
  else if (pool != nullptr)
    pool->parallel_for(n, run);
  else
    at::parallel_for(0, n, grain, run);
}

}  // namespace agentr1::model::detail
