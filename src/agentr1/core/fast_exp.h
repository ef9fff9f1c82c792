// fast_exp — exp of float arrays at vector speed, with one set of bits on every CPU.
//
// Softmax over 152k logits per sampled token, an attention block's scores and the MLP's
// SiLU call exp millions of times per decode step; libm's exp is one value at a time.
// exp_f is defined by one sequence of IEEE float operations (Cephes' expf scheme):
//
//   n = nearest_even(x * log2(e))             x first clamped to [-104, 89]
//   r = fma(-n, C2, fma(-n, C1, x))           C1 + C2 = ln 2 (C1 exact in 9 bits)
//   p = P0; p = fma(p, r, Pk) for k = 1..5    Cephes' degree-5 coefficients
//   y = fma(p, r * r, r) + 1
//   exp_f(x) = (y * 2^h) * 2^(n - h)          h = floor(n / 2), so 2^n never overflows
//                                             an exponent and tiny results come out as
//                                             denormals, not flushed
//
// The scalar code and the AVX2 and AVX-512 loops perform exactly these operations, so
// they give the same bits (tested); the widest the CPU has is chosen at run time. Under
// MXCSR's flush-to-zero all three flush alike.
//
// Accuracy (tested against std::exp in double): within 2 ulp where the result is a
// normal float; exp_f(x) = +inf for x > 88.7228 (overflow), 0 below about -103.97,
// NaN for NaN.
#pragma once

#include <cstdint>

namespace agentr1::core {

float exp_f(float x);

// y[i] = exp_f(x[i] - shift), the subtraction in float. y may equal x.
void exp_shifted(const float* x, float shift, float* y, int64_t n);

// sum_i exp_f(x[i] - shift) in double, in a fixed order whatever the CPU: element i goes
// to partial sum i % 16 (in index order), then the 16 partials are added in order.
// When y is not null it also receives exp_f(x[i] - shift) (y may equal x).
double sum_exp_shifted(const float* x, float shift, int64_t n, float* y = nullptr);

// For tests and benches: the implementations by name, each callable where supported.
enum class ExpIsa { kScalar, kAvx2, kAvx512 };
bool exp_isa_supported(ExpIsa isa);
void exp_shifted_isa(ExpIsa isa, const float* x, float shift, float* y, int64_t n);
double sum_exp_shifted_isa(ExpIsa isa, const float* x, float shift, int64_t n, float* y);

}  // namespace agentr1::core
