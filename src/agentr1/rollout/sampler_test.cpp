#include "agentr1/rollout/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "agentr1/core/error.h"

namespace agentr1::rollout {
namespace {

SamplingParams params(float t, int top_k = 0, float top_p = 1.0f, uint64_t seed = 0) {
  SamplingParams p;
  p.temperature = t;
  p.top_k = top_k;
  p.top_p = top_p;
  p.seed = seed;
  return p;
}

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::vector<int> support(const std::vector<double>& d) {
  std::vector<int> s;
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] > 0) s.push_back(static_cast<int>(i));
  return s;
}

TEST(Sampler, TopKKeepsTheKLargestTiesTowardsLowestId) {
  const std::vector<float> l = {1, 3, 2, 0, 3};
  auto d = Sampler::distribution(l.data(), 5, params(1.0f, 2));
  EXPECT_EQ(support(d), (std::vector<int>{1, 4}));
  EXPECT_NEAR(d[1], 0.5, 1e-12);
  EXPECT_NEAR(d[4], 0.5, 1e-12);
  d = Sampler::distribution(l.data(), 5, params(1.0f, 1));
  EXPECT_EQ(support(d), (std::vector<int>{1}));
  d = Sampler::distribution(l.data(), 5, params(1.0f, 3));
  EXPECT_EQ(support(d), (std::vector<int>{1, 2, 4}));
  // e^3 / (2 e^3 + e^2)
  EXPECT_NEAR(d[1], std::exp(3.0) / (2 * std::exp(3.0) + std::exp(2.0)), 1e-7);
  // top_k >= vocab disables.
  d = Sampler::distribution(l.data(), 5, params(1.0f, 99));
  EXPECT_EQ(support(d).size(), 5u);
}

TEST(Sampler, TopPKeepsSmallestSetReachingMass) {
  // probabilities 0.5, 0.2, 0.15, 0.1, 0.05 (deliberately not in id order)
  const std::vector<double> pr = {0.1, 0.5, 0.05, 0.2, 0.15};
  const auto l = logits_of(pr);
  auto d = Sampler::distribution(l.data(), 5, params(1.0f, 0, 0.65f));
  EXPECT_EQ(support(d), (std::vector<int>{1, 3}));  // 0.5 + 0.2 = 0.7 >= 0.65
  EXPECT_NEAR(d[1], 0.5 / 0.7, 1e-6);
  EXPECT_NEAR(d[3], 0.2 / 0.7, 1e-6);
  d = Sampler::distribution(l.data(), 5, params(1.0f, 0, 0.75f));
  EXPECT_EQ(support(d), (std::vector<int>{1, 3, 4}));  // 0.85 >= 0.75
  d = Sampler::distribution(l.data(), 5, params(1.0f, 0, 0.3f));
  EXPECT_EQ(support(d), (std::vector<int>{1}));  // the top token alone already has 0.5
  d = Sampler::distribution(l.data(), 5, params(1.0f, 0, 0.01f));
  EXPECT_EQ(support(d), (std::vector<int>{1}));  // the top token is always kept
  d = Sampler::distribution(l.data(), 5, params(1.0f, 0, 1.0f));
  EXPECT_EQ(support(d).size(), 5u);
  d = Sampler::distribution(l.data(), 5, params(1.0f, 0, 0.97f));
  EXPECT_EQ(support(d).size(), 5u);  // 0.95 < 0.97: needs the last one too
}

TEST(Sampler, TopKThenTopPOnTheRenormalisedSet) {
  const std::vector<double> pr = {0.5, 0.2, 0.15, 0.1, 0.05};
  const auto l = logits_of(pr);
  // top-k 3 leaves mass 0.85; renormalised 0.588, 0.235, 0.176: 0.8235 >= 0.8 with two.
  auto d = Sampler::distribution(l.data(), 5, params(1.0f, 3, 0.8f));
  EXPECT_EQ(support(d), (std::vector<int>{0, 1}));
  EXPECT_NEAR(d[0], 0.5 / 0.7, 1e-6);
  // top-p 0.8 alone needs three (0.7 < 0.8 <= 0.85).
  d = Sampler::distribution(l.data(), 5, params(1.0f, 0, 0.8f));
  EXPECT_EQ(support(d), (std::vector<int>{0, 1, 2}));
}

TEST(Sampler, TemperatureScalesLogits) {
  const std::vector<float> l = {0.0f, 1.0f, 2.0f};
  auto d = Sampler::distribution(l.data(), 3, params(2.0f));
  const double z = 1 + std::exp(0.5) + std::exp(1.0);
  EXPECT_NEAR(d[0], 1 / z, 1e-7);
  EXPECT_NEAR(d[1], std::exp(0.5) / z, 1e-7);
  EXPECT_NEAR(d[2], std::exp(1.0) / z, 1e-7);
}

TEST(Sampler, GreedyArgmaxLowestIdAndFullLogprob) {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f};
  Sampler s(params(0.0f));
  SampledToken t = s.sample(l.data(), 4);
  EXPECT_EQ(t.id, 1);
  const double lse = std::log(std::exp(0.5) + 2 * std::exp(2.0) + std::exp(-1.0));
  EXPECT_NEAR(t.logprob, 2.0 - lse, 1e-6);
}

TEST(Sampler, LogprobIsBeforeTruncationWithTemperature) {
  const std::vector<float> l = {0.0f, 1.0f, 3.0f};
  Sampler s(params(0.5f, /*top_k=*/1));
  SampledToken t = s.sample(l.data(), 3);
  EXPECT_EQ(t.id, 2);  // only candidate
  // log_softmax(l / 0.5)[2] over the full vocabulary, not 0.
  const double lse = std::log(std::exp(0.0) + std::exp(2.0) + std::exp(6.0));
  EXPECT_NEAR(t.logprob, 6.0 - lse, 1e-6);
}

// Independent reference: full stable sort, top-k, nucleus, renormalise.
std::vector<double> reference(const std::vector<float>& l, float t, int k, float p) {
  const size_t v = l.size();
  std::vector<double> x(v);
  for (size_t i = 0; i < v; ++i) x[i] = static_cast<double>(l[i]) / t;
  std::vector<size_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] > x[b]; });
  const double m = x[order[0]];
  size_t keep = (k > 0 && static_cast<size_t>(k) < v) ? static_cast<size_t>(k) : v;
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += std::exp(x[order[i]] - m);
  if (p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < keep) {
      cum += std::exp(x[order[n]] - m);
      ++n;
      if (cum >= p * mass) break;
    }
    keep = n;
  }
  double z = 0;
  for (size_t i = 0; i < keep; ++i) z += std::exp(x[order[i]] - m);
  std::vector<double> d(v, 0.0);
  for (size_t i = 0; i < keep; ++i) d[order[i]] = std::exp(x[order[i]] - m) / z;
  return d;
}

TEST(Sampler, DistributionMatchesReferenceOnLargeVocab) {
  std::mt19937_64 g(7);
  std::normal_distribution<float> n(0.0f, 3.0f);
  std::vector<float> l(5000);
  for (auto& x : l) x = n(g);
  struct Case { float t; int k; float p; };
  for (Case c : {Case{1.0f, 0, 0.9f}, Case{0.7f, 0, 0.99f}, Case{1.3f, 40, 1.0f},
                 Case{1.0f, 300, 0.5f}, Case{2.0f, 0, 1.0f}}) {
    const auto d = Sampler::distribution(l.data(), 5000, params(c.t, c.k, c.p));
    const auto r = reference(l, c.t, c.k, c.p);
    double maxdiff = 0;
    for (size_t i = 0; i < l.size(); ++i) {
      ASSERT_EQ(d[i] > 0, r[i] > 0) << "token " << i << " t=" << c.t << " k=" << c.k << " p=" << c.p;
      maxdiff = std::max(maxdiff, std::abs(d[i] - r[i]));
    }
    EXPECT_LT(maxdiff, 1e-6) << "t=" << c.t << " k=" << c.k << " p=" << c.p;
  }
}

// Empirical frequencies over many draws against the truncated, renormalised
// distribution (from the reference), Pearson chi-square with a generous bound.
TEST(Sampler, EmpiricalFrequenciesMatchTruncatedDistribution) {
  const std::vector<float> l = {1.0f, 0.2f, -0.5f, 2.0f, 0.9f, -2.0f, 1.5f, 0.0f};
  struct Case { float t; int k; float p; };
  for (Case c : {Case{1.0f, 0, 1.0f}, Case{0.8f, 5, 1.0f}, Case{1.0f, 0, 0.8f},
                 Case{1.2f, 6, 0.9f}}) {
    const auto expect = reference(l, c.t, c.k, c.p);
    Sampler s(params(c.t, c.k, c.p, /*seed=*/1234));
    const int n = 100000;
    std::vector<int> count(l.size(), 0);
    for (int i = 0; i < n; ++i) ++count[s.sample(l.data(), 8).id];
    double chi2 = 0;
    int df = -1;
    for (size_t i = 0; i < l.size(); ++i) {
      if (expect[i] == 0) {
        EXPECT_EQ(count[i], 0) << "token " << i << " is outside the kept set";
        continue;
      }
      const double e = expect[i] * n;
      chi2 += (count[i] - e) * (count[i] - e) / e;
      ++df;
    }
    // df <= 7; P(chi2 > 30) < 1e-4 for df = 7.
    EXPECT_LT(chi2, 30.0) << "df=" << df << " t=" << c.t << " k=" << c.k << " p=" << c.p;
  }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferent) {
  const std::vector<float> l = {0.1f, 0.2f, 0.3f, 0.4f, 0.0f, -0.1f};
  auto draw = [&](uint64_t seed) {
    Sampler s(params(1.0f, 0, 1.0f, seed));
    std::vector<int> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(l.data(), 6).id);
    return out;
  };
  EXPECT_EQ(draw(5), draw(5));
  EXPECT_NE(draw(5), draw(6));
}

TEST(Sampler, ValidationNamesTheValue) {
  auto msg = [](const SamplingParams& p) {
    try {
      validate_sampling(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg(params(-0.5f)).find("temperature must be >= 0"), std::string::npos);
  EXPECT_NE(msg(params(1.0f, 0, 0.0f)).find("top_p must be in (0, 1]"), std::string::npos);
  EXPECT_NE(msg(params(1.0f, 0, 1.5f)).find("1.5"), std::string::npos);
  EXPECT_NE(msg(params(1.0f, -1)).find("top_k must be >= 0 (0 disables top-k), got -1"), std::string::npos);
  SamplingParams p;
  p.max_new_tokens = 0;
  EXPECT_NE(msg(p).find("max_new_tokens must be >= 1, got 0"), std::string::npos);
  EXPECT_EQ(msg(params(0.0f)), "");
}

}  // namespace
}  // namespace agentr1::rollout
