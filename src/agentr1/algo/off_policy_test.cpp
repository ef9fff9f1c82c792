// Off-policy corrections (off_policy.h) against hand computations: token and sequence
// TIS with truncation and rejection, AReaL's decoupled weights, and that weighting the
// advantages equals weighting each token's clipped surrogate.
#include <gtest/gtest.h>

#include <cmath>

#include "agentr1/algo/off_policy.h"
#include "agentr1/algo/policy_loss.h"
#include "agentr1/core/error.h"

namespace agentr1::algo {
namespace {

at::Tensor row(std::vector<double> v) { return at::tensor(v, at::kDouble).reshape({1, -1}); }

OffPolicyOptions opts(const std::string& method, double cap, const std::string& level = "token", bool reject = false) {
  OffPolicyOptions o;
  o.method = method;
  o.level = level;
  o.cap = cap;
  o.reject = reject;
  o.resolve();
  return o;
}

TEST(OffPolicyTest, TokenTisTruncatesAtTheCap) {
  // log-ratios old - behav = 0, 0.5, -0.5; the 4th token is off the mask.
  const at::Tensor old = row({0.0, 0.5, -0.2, 3.0});
  const at::Tensor behav = row({0.0, 0.0, 0.3, 0.0});
  const at::Tensor mask = row({1, 1, 1, 0});
  const OffPolicyWeights w = off_policy_weights(old, behav, mask, at::Tensor(), opts("tis", 1.5));
  const double e5 = std::exp(0.5), em5 = std::exp(-0.5);
  EXPECT_NEAR(w.weight[0][0].item<double>(), 1.0, 1e-6);
  EXPECT_NEAR(w.weight[0][1].item<double>(), 1.5, 1e-6);  // min(e^0.5 = 1.6487, 1.5)
  EXPECT_NEAR(w.weight[0][2].item<double>(), em5, 1e-6);
  EXPECT_EQ(w.weight[0][3].item<double>(), 0.0);
  EXPECT_TRUE(w.mask.equal(mask));
  EXPECT_NEAR(w.metrics.at("off_policy/is_weight_mean"), (1 + e5 + em5) / 3, 1e-12);
  EXPECT_NEAR(w.metrics.at("off_policy/is_weight_max"), e5, 1e-12);
  EXPECT_NEAR(w.metrics.at("off_policy/capped_frac"), 1.0 / 3, 1e-12);
  EXPECT_NEAR(w.metrics.at("off_policy/log_ratio_mean"), 0.0, 1e-12);
  EXPECT_EQ(w.metrics.count("off_policy/rejected_frac"), 0u);
}

TEST(OffPolicyTest, TokenTisRejectsOutsideTheBand) {
  const at::Tensor old = row({0.0, 0.5, -0.2});
  const at::Tensor behav = row({0.0, 0.0, 0.3});
  const at::Tensor mask = row({1, 1, 1});
  // [1/1.5, 1.5] = [0.667, 1.5]: e^0.5 is above, e^-0.5 = 0.607 below.
  const OffPolicyWeights w = off_policy_weights(old, behav, mask, at::Tensor(), opts("tis", 1.5, "token", true));
  EXPECT_TRUE(w.mask.equal(row({1, 0, 0})));
  EXPECT_NEAR(w.weight[0][0].item<double>(), 1.0, 1e-6);
  EXPECT_EQ(w.weight[0][1].item<double>(), 0.0);
  EXPECT_EQ(w.weight[0][2].item<double>(), 0.0);
  EXPECT_NEAR(w.metrics.at("off_policy/rejected_frac"), 2.0 / 3, 1e-12);
}

TEST(OffPolicyTest, SequenceTisSharesOneWeightPerStepAndRow) {
  // Row 0: step 0 has log-ratios 0.1, 0.2 (sum 0.3), step 1 has -0.4; row 1: step 0 has
  // 0.5 and 0.4 (sum 0.9, over the cap of 2). Row 1's step 0 is not row 0's.
  const at::Tensor old = at::tensor({0.1, 0.2, 0.0, -0.4, 0.5, 0.4, 0.0, 0.0}, at::kDouble).reshape({2, 4});
  const at::Tensor behav = at::zeros({2, 4}, at::kDouble);
  const at::Tensor mask = at::tensor({1, 1, 0, 1, 1, 1, 0, 0}, at::kDouble).reshape({2, 4});
  const at::Tensor ids = at::tensor({0, 0, -1, 1, 0, 0, -1, -1}, at::kLong).reshape({2, 4});
  const OffPolicyWeights w = off_policy_weights(old, behav, mask, ids, opts("tis", 2.0, "sequence"));
  const double s00 = std::exp(0.3), s01 = std::exp(-0.4);
  EXPECT_NEAR(w.weight[0][0].item<double>(), s00, 1e-6);
  EXPECT_NEAR(w.weight[0][1].item<double>(), s00, 1e-6);
  EXPECT_EQ(w.weight[0][2].item<double>(), 0.0);
  EXPECT_NEAR(w.weight[0][3].item<double>(), s01, 1e-6);
  EXPECT_NEAR(w.weight[1][0].item<double>(), 2.0, 1e-6);  // e^0.9 = 2.46, truncated
  EXPECT_NEAR(w.weight[1][1].item<double>(), 2.0, 1e-6);
  EXPECT_NEAR(w.metrics.at("off_policy/is_weight_max"), std::exp(0.9), 1e-12);
  EXPECT_NEAR(w.metrics.at("off_policy/capped_frac"), 2.0 / 5, 1e-12);
  // Rejection drops the whole sequence: row 1 step 0 (2.46 > 2) and nothing else
  // (e^-0.4 = 0.67 is inside [0.5, 2]).
  const OffPolicyWeights r = off_policy_weights(old, behav, mask, ids, opts("tis", 2.0, "sequence", true));
  EXPECT_TRUE(r.mask.equal(at::tensor({1, 1, 0, 1, 0, 0, 0, 0}, at::kDouble).reshape({2, 4})));
}

TEST(OffPolicyTest, DecoupledDropsTokensOverTheCapButKeepsTheMask) {
  const at::Tensor old = row({0.0, 0.5, -0.2});
  const at::Tensor behav = row({0.0, 0.0, 0.3});
  const at::Tensor mask = row({1, 1, 1});
  const OffPolicyWeights w = off_policy_weights(old, behav, mask, at::Tensor(), opts("decoupled_ppo", 1.5));
  EXPECT_NEAR(w.weight[0][0].item<double>(), 1.0, 1e-6);
  EXPECT_EQ(w.weight[0][1].item<double>(), 0.0);  // pi_prox / pi_behav = 1.65 > 1.5: dropped
  EXPECT_NEAR(w.weight[0][2].item<double>(), std::exp(-0.5), 1e-6);
  EXPECT_TRUE(w.mask.equal(mask)) << "AReaL keeps the token in the denominator";
  EXPECT_NEAR(w.metrics.at("off_policy/capped_frac"), 1.0 / 3, 1e-12);
}

TEST(OffPolicyTest, NoneIsTheMask) {
  const at::Tensor mask = row({1, 0, 1});
  const OffPolicyWeights w = off_policy_weights(row({1, 2, 3}), row({0, 0, 0}), mask, at::Tensor(), opts("none", 2));
  EXPECT_TRUE(w.weight.to(at::kDouble).equal(mask));
  EXPECT_TRUE(w.metrics.empty());
}

TEST(OffPolicyTest, WeightedAdvantagesWeightEachTokensSurrogate) {
  // The decoupled objective by hand: token t contributes w_t * max(-A r_t, -A clip(r_t)),
  // dual-clipped for A < 0, r_t = exp(logp - prox); token-mean over the mask.
  const at::Tensor lp = row({0.3, -0.1, 0.05, 2.0});
  const at::Tensor prox = row({0.0, 0.0, 0.0, 0.0});
  const at::Tensor adv = row({1.0, -1.0, 2.0, -0.5});
  const at::Tensor w = row({0.8, 1.7, 0.0, 1.2});
  const at::Tensor mask = row({1, 1, 1, 1});
  PolicyLossOptions o;  // clip 0.2, dual clip 3
  const double got = ppo_clip_loss(lp, prox, adv * w, mask, o).loss.item<double>();
  const double lpv[] = {0.3, -0.1, 0.05, 2.0}, av[] = {1.0, -1.0, 2.0, -0.5}, wv[] = {0.8, 1.7, 0.0, 1.2};
  double want = 0;
  for (int t = 0; t < 4; ++t) {
    const double r = std::exp(lpv[t]);
    const double rc = std::min(std::max(r, 0.8), 1.2);
    double l = std::max(-av[t] * r, -av[t] * rc);
    if (av[t] < 0) l = std::min(l, -av[t] * 3.0);
    want += wv[t] * l;
  }
  EXPECT_NEAR(got, want / 4, 1e-12);
}

TEST(OffPolicyTest, OptionErrorsNameTheKey) {
  auto err = [](const std::string& m, double cap, const std::string& level, bool reject) {
    try {
      opts(m, cap, level, reject);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("is", 2, "token", false).find("actor.off_policy.method: unknown 'is'"), std::string::npos);
  EXPECT_NE(err("tis", 1.0, "token", false).find("actor.off_policy.cap"), std::string::npos);
  EXPECT_NE(err("tis", 2, "seq", false).find("actor.off_policy.level"), std::string::npos);
  EXPECT_NE(err("decoupled_ppo", 2, "token", true).find("reject=true applies to method tis"), std::string::npos);
  EXPECT_NE(err("decoupled_ppo", 2, "sequence", false).find("level=sequence"), std::string::npos);
  EXPECT_EQ(err("tis", 2, "sequence", true), "");
}

}  // namespace
}  // namespace agentr1::algo
