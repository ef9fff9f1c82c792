#include "agentr1/core/fast_exp.h"

#include <cmath>
#include <cstring>

// The vector forms rely on GCC's `#pragma GCC target` (clang ignores it, and the fuzz
// build uses clang): other compilers get the scalar form, which gives the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define AGENTR1_FAST_EXP_X86 1
#else
#define AGENTR1_FAST_EXP_X86 0
#endif

namespace agentr1::core {

namespace {

// The constants of the definition in fast_exp.h.
constexpr float kLo = -104.0f, kHi = 89.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kC1 = 0.693359375f, kC2 = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f, kP3 = 4.1665795894e-2f,
                kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

inline float pow2i(int32_t e) {  // 2^e for e in [-126, 127]
  const uint32_t bits = static_cast<uint32_t>(e + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float exp_scalar(float x) {
  if (std::isnan(x)) return x;
  const float xc = x < kLo ? kLo : (x > kHi ? kHi : x);
  const float t = xc * kLog2e;
  const float n = std::nearbyint(t);  // the default rounding: to nearest, ties to even
  const float nn = 0.0f - n;  // as the vector code negates
  float r = std::fma(nn, kC1, xc);
  r = std::fma(nn, kC2, r);
  float p = kP0;
  p = std::fma(p, r, kP1);
  p = std::fma(p, r, kP2);
  p = std::fma(p, r, kP3);
  p = std::fma(p, r, kP4);
  p = std::fma(p, r, kP5);
  const float z = r * r;
  const float y = std::fma(p, z, r) + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t h = ni >> 1;  // floor(n / 2): arithmetic shift
  return (y * pow2i(h)) * pow2i(ni - h);
}

void exp_shifted_scalar(const float* x, float shift, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_scalar(x[i] - shift);
}

// Element i into part[i % 16]; the caller starts at a multiple of 16.
void sum_tail_scalar(const float* x, float shift, int64_t i, int64_t n, float* y, double* part) {
  for (; i < n; ++i) {
    const float e = exp_scalar(x[i] - shift);
    if (y) y[i] = e;
    part[i % 16] += static_cast<double>(e);
  }
}

double add_parts(const double* part) {
  double s = 0.0;
  for (int u = 0; u < 16; ++u) s += part[u];
  return s;
}

double sum_exp_scalar(const float* x, float shift, int64_t n, float* y) {
  double part[16] = {0};
  sum_tail_scalar(x, shift, 0, n, y, part);
  return add_parts(part);
}

#if AGENTR1_FAST_EXP_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma")

inline __m256 exp8(__m256 x) {
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kLo)), _mm256_set1_ps(kHi));
  const __m256 t = _mm256_mul_ps(xc, _mm256_set1_ps(kLog2e));
  const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 nn = _mm256_sub_ps(_mm256_setzero_ps(), n);
  __m256 r = _mm256_fmadd_ps(nn, _mm256_set1_ps(kC1), xc);
  r = _mm256_fmadd_ps(nn, _mm256_set1_ps(kC2), r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  const __m256 z = _mm256_mul_ps(r, r);
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, z, r), _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i h = _mm256_srai_epi32(ni, 1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), bias), 23));
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
  return _mm256_blendv_ps(e, x, nan);
}

void exp_shifted_avx2(const float* x, float shift, float* y, int64_t n) {
  const __m256 s = _mm256_set1_ps(shift);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
  exp_shifted_scalar(x + i, shift, y + i, n - i);
}

double sum_exp_avx2(const float* x, float shift, int64_t n, float* y) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;  // partials 0-3, 4-7, 8-11, 12-15
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    const __m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), s));
    if (y) {
      _mm256_storeu_ps(y + i, e0);
      _mm256_storeu_ps(y + i + 8, e1);
    }
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e0)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e0, 1)));
    a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(e1)));
    a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(e1, 1)));
  }
  double part[16];
  _mm256_storeu_pd(part, a0);
  _mm256_storeu_pd(part + 4, a1);
  _mm256_storeu_pd(part + 8, a2);
  _mm256_storeu_pd(part + 12, a3);
  sum_tail_scalar(x, shift, i, n, y, part);
  return add_parts(part);
}

#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx2,fma")
// GCC 12 warns inside its own intrinsics (_mm512_undefined_ps initialises itself).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

inline __m512 exp16(__m512 x) {
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kLo)), _mm512_set1_ps(kHi));
  const __m512 t = _mm512_mul_ps(xc, _mm512_set1_ps(kLog2e));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 nn = _mm512_sub_ps(_mm512_setzero_ps(), n);
  __m512 r = _mm512_fmadd_ps(nn, _mm512_set1_ps(kC1), xc);
  r = _mm512_fmadd_ps(nn, _mm512_set1_ps(kC2), r);
  __m512 p = _mm512_set1_ps(kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  const __m512 z = _mm512_mul_ps(r, r);
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, z, r), _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvtps_epi32(n);
  const __m512i h = _mm512_srai_epi32(ni, 1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(h, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(ni, h), bias), 23));
  const __m512 e = _mm512_mul_ps(_mm512_mul_ps(y, s1), s2);
  return _mm512_mask_blend_ps(nan, e, x);
}

void exp_shifted_avx512(const float* x, float shift, float* y, int64_t n) {
  const __m512 s = _mm512_set1_ps(shift);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s)));
  if (i < n) {  // the tail as one masked vector: same per-element operations
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s)));
  }
}

double sum_exp_avx512(const float* x, float shift, int64_t n, float* y) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512d a0 = _mm512_setzero_pd(), a1 = a0;  // partials 0-7, 8-15
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    if (y) _mm512_storeu_ps(y + i, e);
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
  }
  double part[16];
  _mm512_storeu_pd(part, a0);
  _mm512_storeu_pd(part + 8, a1);
  sum_tail_scalar(x, shift, i, n, y, part);
  return add_parts(part);
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

// Compiled for the baseline ISA (outside the target regions): they run on every CPU.
bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && cpu_has_avx2();
  return has;
}
#endif  // AGENTR1_FAST_EXP_X86

ExpIsa best_isa() {
#if AGENTR1_FAST_EXP_X86
  static const ExpIsa isa = cpu_has_avx512() ? ExpIsa::kAvx512 : cpu_has_avx2() ? ExpIsa::kAvx2 : ExpIsa::kScalar;
  return isa;
#else
  return ExpIsa::kScalar;
#endif
}

}  // namespace

bool exp_isa_supported(ExpIsa isa) {
  switch (isa) {
    case ExpIsa::kScalar: return true;
#if AGENTR1_FAST_EXP_X86
    case ExpIsa::kAvx2: return cpu_has_avx2();
    case ExpIsa::kAvx512: return cpu_has_avx512();
#endif
    default: return false;
  }
}

void exp_shifted_isa(ExpIsa isa, const float* x, float shift, float* y, int64_t n) {
  switch (isa) {
#if AGENTR1_FAST_EXP_X86
    case ExpIsa::kAvx512: exp_shifted_avx512(x, shift, y, n); return;
    case ExpIsa::kAvx2: exp_shifted_avx2(x, shift, y, n); return;
#endif
    default: exp_shifted_scalar(x, shift, y, n); return;
  }
}

double sum_exp_shifted_isa(ExpIsa isa, const float* x, float shift, int64_t n, float* y) {
  switch (isa) {
#if AGENTR1_FAST_EXP_X86
    case ExpIsa::kAvx512: return sum_exp_avx512(x, shift, n, y);
    case ExpIsa::kAvx2: return sum_exp_avx2(x, shift, n, y);
#endif
    default: return sum_exp_scalar(x, shift, n, y);
  }
}

float exp_f(float x) { return exp_scalar(x); }

void exp_shifted(const float* x, float shift, float* y, int64_t n) { exp_shifted_isa(best_isa(), x, shift, y, n); }

double sum_exp_shifted(const float* x, float shift, int64_t n, float* y) {
  return sum_exp_shifted_isa(best_isa(), x, shift, n, y);
}

}  // namespace agentr1::core
