// agentr1/model/avx512_util.h — 16-lane helpers shared by the AVX-512 forms of the fused
// kernels (paged_attention.cpp, row_linear.cpp); internal to the model layer. Each is
// compiled for AVX-512 here, so callers must run only where the CPU has it (and sit in a
// region with at least this target).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define AGENTR1_HAVE_AVX512_UTIL 1

#include <immintrin.h>

#include <type_traits>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")

namespace agentr1::model::detail::avx512 {

// 16 values as floats (exact for every T).
inline __m512 load16f(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16f(const c10::BFloat16* p) {  // the 16 bits moved up
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
inline __m512 load16f(const c10::Half* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

// Per lane, the float value static_cast<T>(x) holds: bf16 by c10's rule (round to
// nearest even on the upper 16 bits, NaN to 0x7FC0), half by the hardware's
// round-to-nearest-even (as c10's conversion). Bit for bit the scalar conversion, except
// a half NaN's payload (the hardware keeps its top bits, c10 writes 0x7E00).
template <typename T>
inline __m512 round16(__m512 x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, c10::Half>) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i bias = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)),
                                          _mm512_set1_epi32(0x7FFF));
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(u, bias), _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_castsi512_ps(_mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC00000)));
  }
}

// Stores 16 floats that already hold T values (round16's results) as T: exact.
template <typename T>
inline void store16(T* p, __m512 x) {
  if constexpr (std::is_same_v<T, float>) {
    _mm512_storeu_ps(p, x);
  } else if constexpr (std::is_same_v<T, c10::Half>) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(x), 16)));
  }
}

}  // namespace agentr1::model::detail::avx512

#pragma GCC pop_options

#else
#define AGENTR1_HAVE_AVX512_UTIL 0
#endif
