#include "agentr1/core/latency.h"

#include <gtest/gtest.h>

#include <chrono>

#include "agentr1/core/error.h"

namespace agentr1 {
namespace {

TEST(LatencyTest, SpecsAndErrors) {
  EXPECT_TRUE(Latency::from_ms({}, "k").none());
  EXPECT_TRUE(Latency::from_ms({0}, "k").none());
  const Latency fixed = Latency::from_ms({25}, "k");
  EXPECT_FALSE(fixed.none());
  Rng rng(1);
  EXPECT_EQ(fixed.draw_ms(rng), 25.0);
  EXPECT_EQ(rng.next_u64(), Rng(1).next_u64()) << "a fixed delay draws nothing";
  auto msg = [](std::vector<double> v) {
    try {
      Latency::from_ms(v, "rollout.env_latency_ms");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg({300, 100}).find("lo <= hi"), std::string::npos);
  EXPECT_NE(msg({1, 2, 3}).find("rollout.env_latency_ms"), std::string::npos);
  EXPECT_NE(msg({-1}).find("[0, 600000]"), std::string::npos);
}

TEST(LatencyTest, UniformDrawsStayInRangeAndFollowTheRng) {
  const Latency u = Latency::from_ms({100, 300}, "k");
  Rng a(7), b(7);
  double lo = 1e9, hi = 0, sum = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    const double x = u.draw_ms(a);
    EXPECT_EQ(x, 100 + 200 * b.uniform());  // the documented transform
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  EXPECT_GE(lo, 100.0);
  EXPECT_LT(hi, 300.0);
  EXPECT_NEAR(sum / n, 200.0, 5.0);  // uniform mean; sd of the mean is 200/sqrt(12 n) = 0.9
}

TEST(LatencyTest, SleepBlocksAboutThatLong) {
  Rng rng(3);
  const auto t0 = std::chrono::steady_clock::now();
  const double ms = Latency::from_ms({30}, "k").sleep(rng);
  const double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(ms, 30.0);
  EXPECT_GE(took, 29.0);
}

}  // namespace
}  // namespace agentr1
