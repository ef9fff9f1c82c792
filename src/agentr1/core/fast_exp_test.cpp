#include "agentr1/core/fast_exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace agentr1::core {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Distance in representable floats between two finite non-negative floats.
int64_t ulps(float a, float b) { return std::llabs(static_cast<int64_t>(bits(a)) - static_cast<int64_t>(bits(b))); }

const std::vector<ExpIsa> kIsas = {ExpIsa::kScalar, ExpIsa::kAvx2, ExpIsa::kAvx512};

// The reference is libm's exp in double, rounded once to float.
TEST(FastExp, WithinTwoUlpOfExpInDoubleOverTheWholeRange) {
  int64_t worst = 0, checked = 0;
  float worst_x = 0;
  // Every 61st float from -104 to 89 (both signs' bit patterns walked separately).
  for (uint32_t u = bits(0.0f); u <= bits(89.0f); u += 61) {
    for (const float x : {from_bits(u), -from_bits(u)}) {
      if (x < -104.0f) continue;
      const double ref = std::exp(static_cast<double>(x));
      const float got = exp_f(x);
      if (ref > static_cast<double>(std::numeric_limits<float>::max())) {
        EXPECT_EQ(got, std::numeric_limits<float>::infinity()) << "x=" << x;
        continue;
      }
      const float want = static_cast<float>(ref);
      ASSERT_TRUE(std::isfinite(got)) << "x=" << x;
      if (want >= std::numeric_limits<float>::min()) {
        const int64_t d = ulps(got, want);
        if (d > worst) worst = d, worst_x = x;
      } else {
        // Denormal results: within 2 units of the smallest denormal (rounded twice).
        EXPECT_LE(std::fabs(static_cast<double>(got) - ref), 2.0 * 0x1.0p-149) << "x=" << x;
      }
      ++checked;
    }
  }
  EXPECT_LE(worst, 2) << "worst at x=" << worst_x;
  EXPECT_GT(checked, 2000000);
}

TEST(FastExp, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_f(0.0f), 1.0f);
  EXPECT_EQ(exp_f(-0.0f), 1.0f);
  EXPECT_EQ(exp_f(inf), inf);
  EXPECT_EQ(exp_f(-inf), 0.0f);
  EXPECT_EQ(exp_f(88.8f), inf);
  EXPECT_EQ(exp_f(1000.0f), inf);
  EXPECT_EQ(exp_f(-1000.0f), 0.0f);
  EXPECT_EQ(exp_f(-105.0f), 0.0f);
  EXPECT_GT(exp_f(-103.0f), 0.0f);  // a denormal, not flushed
  EXPECT_TRUE(std::isnan(exp_f(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_NEAR(exp_f(1.0f), 2.718281828f, 3e-7f);
  EXPECT_LE(ulps(exp_f(88.72f), static_cast<float>(std::exp(static_cast<double>(88.72f)))), 2);  // near overflow
}

std::vector<float> random_inputs(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> wide(-120.0f, 100.0f), narrow(-20.0f, 5.0f);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                            88.7228f, 88.7229f, -103.97f, -87.34f, -126.0f * 0.6931472f, 1e-30f, -1e-30f};
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = rng() % 10;
    x[i] = k == 0 ? specials[rng() % (sizeof specials / sizeof specials[0])] : k < 5 ? wide(rng) : narrow(rng);
  }
  return x;
}

TEST(FastExp, EveryIsaGivesTheScalarBits) {
  const std::vector<float> x = random_inputs(4099, 7);
  for (const ExpIsa isa : kIsas) {
    if (!exp_isa_supported(isa)) continue;
    for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 4099}) {
      for (const float shift : {0.0f, 3.5f, -2.25f}) {
        std::vector<float> got(static_cast<size_t>(n) + 1, -7.0f);
        exp_shifted_isa(isa, x.data(), shift, got.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          const float want = exp_f(x[i] - shift);
          ASSERT_TRUE(bits(got[i]) == bits(want) || (std::isnan(got[i]) && std::isnan(want)))
              << "isa " << static_cast<int>(isa) << " n=" << n << " i=" << i << " x=" << x[i] << ": " << got[i]
              << " vs " << want;
        }
        EXPECT_EQ(got[n], -7.0f) << "wrote past n";
      }
    }
  }
}

TEST(FastExp, SumMatchesLongDoubleAndIsTheSameOnEveryIsa) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> logit(0.0f, 4.0f);
  for (int64_t n : {1, 5, 16, 17, 100, 151936}) {
    std::vector<float> x(static_cast<size_t>(n));
    float m = -std::numeric_limits<float>::infinity();
    for (auto& v : x) v = logit(rng), m = std::max(m, v);
    long double ref = 0;
    for (float v : x) ref += std::exp(static_cast<long double>(v - m));
    const double s = sum_exp_shifted(x.data(), m, n);
    EXPECT_NEAR(s, static_cast<double>(ref), 1e-6 * static_cast<double>(ref)) << "n=" << n;
    for (const ExpIsa isa : kIsas) {
      if (!exp_isa_supported(isa)) continue;
      std::vector<float> y(static_cast<size_t>(n));
      const double si = sum_exp_shifted_isa(isa, x.data(), m, n, y.data());
      EXPECT_EQ(si, s) << "isa " << static_cast<int>(isa) << " n=" << n;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bits(y[i]), bits(exp_f(x[i] - m))) << "i=" << i;
    }
  }
}

TEST(FastExp, SumAddsSixteenPartialsInOrder) {
  // The specified order written out: element i into partial i % 16, partials added in
  // order. Values spread over 2^-60..2^60 make the double sum depend on the order (a
  // left-to-right sum or another lane count differs: checked below), so equality pins it.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> spread(-41.0f, 41.0f);
  for (int64_t n : {16, 33, 257, 4099}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = spread(rng);
    double part[16] = {0}, plain = 0.0, eight[8] = {0};
    for (int64_t i = 0; i < n; ++i) {
      const double e = static_cast<double>(exp_f(x[i]));
      part[i % 16] += e;
      eight[i % 8] += e;
      plain += e;
    }
    double want = 0.0, by8 = 0.0;
    for (double p : part) want += p;
    for (double p : eight) by8 += p;
    for (const ExpIsa isa : kIsas) {
      if (!exp_isa_supported(isa)) continue;
      EXPECT_EQ(sum_exp_shifted_isa(isa, x.data(), 0.0f, n, nullptr), want) << "isa " << static_cast<int>(isa) << " n=" << n;
    }
    if (n == 4099) {  // the data does tell the orders apart
      EXPECT_NE(want, plain);
      EXPECT_NE(want, by8);
    }
  }
}

}  // namespace
}  // namespace agentr1::core
