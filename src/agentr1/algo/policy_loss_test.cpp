// GSPO and REINFORCE losses (values, metrics and gradients) against
// tests/ref/algo_estimators_ref.py; the policy-loss registry; hand-worked GSPO.
#include <gtest/gtest.h>

#include <cmath>

#include "agentr1/algo/estimator_test_util.h"
#include "agentr1/algo/policy_loss.h"
#include "agentr1/core/error.h"

namespace agentr1::algo {
namespace {

using testing::estimators_reference;
using testing::tensor_from;

TEST(GspoLossTest, HandWorkedSequenceRatio) {
  // One row, two tokens with log-ratios 0.1 and 0.3 -> sequence ratio e^0.2 = 1.2214,
  // A = 1, clip 0.2 -> ratio clipped to 1.2 at both tokens: loss -1.2, clipfrac 1, and no
  // gradient (the clipped branch is constant).
  PolicyLossOptions o;
  o.agg = LossAgg::kSeqMeanTokenMean;
  at::Tensor lp = at::tensor({0.1, 0.3}, at::kDouble).reshape({1, 2}).requires_grad_(true);
  at::Tensor old = at::zeros({1, 2}, at::kDouble);
  at::Tensor adv = at::ones({1, 2}, at::kDouble);
  auto out = gspo_loss(lp, old, adv, at::ones({1, 2}, at::kDouble), o);
  EXPECT_NEAR(out.loss.item<double>(), -1.2, 1e-12);
  EXPECT_NEAR(out.metrics["actor/pg_clipfrac"], 1.0, 1e-12);
  out.loss.backward();
  EXPECT_NEAR(lp.grad().abs().max().item<double>(), 0.0, 1e-12);
  // Unclipped (A = -1, ratio above 1 is not clipped for A < 0 from above): loss = e^0.2,
  // d loss / d logprob_t = -A * s / T per token (seq-mean-token-mean over T = 2 tokens).
  at::Tensor lp2 = at::tensor({0.1, 0.3}, at::kDouble).reshape({1, 2}).requires_grad_(true);
  auto out2 = gspo_loss(lp2, old, -adv, at::ones({1, 2}, at::kDouble), o);
  EXPECT_NEAR(out2.loss.item<double>(), std::exp(0.2), 1e-12);
  out2.loss.backward();
  EXPECT_NEAR(lp2.grad()[0][0].item<double>(), std::exp(0.2) / 2, 1e-12);
}

TEST(GspoLossTest, MatchesReference) {
  for (const auto& c : estimators_reference()["gspo"]) {
    PolicyLossOptions o;
    o.clip_ratio_low = c["low"].get<double>();
    o.clip_ratio_high = c["high"].get<double>();
    o.agg = loss_agg_from_string(c["mode"].get<std::string>());
    at::Tensor lp = tensor_from(c["logp"]).requires_grad_(true);
    auto out = gspo_loss(lp, tensor_from(c["old"]), tensor_from(c["adv"]), tensor_from(c["mask"]), o);
    out.loss.backward();
    EXPECT_NEAR(out.loss.item<double>(), c["loss"].get<double>(), 1e-10) << c["mode"];
    EXPECT_NEAR(out.metrics["actor/pg_clipfrac"], c["pg_clipfrac"].get<double>(), 1e-12);
    EXPECT_NEAR(out.metrics["actor/ppo_kl"], c["ppo_kl"].get<double>(), 1e-12);
    EXPECT_LT((lp.grad() - tensor_from(c["grad"])).abs().max().item<double>(), 1e-10);
  }
}

TEST(ReinforceLossTest, MatchesReference) {
  for (const auto& c : estimators_reference()["reinforce"]) {
    PolicyLossOptions o;
    o.agg = loss_agg_from_string(c["mode"].get<std::string>());
    at::Tensor lp = tensor_from(c["logp"]).requires_grad_(true);
    auto out = make_policy_loss("reinforce")->compute(lp, tensor_from(c["old"]), tensor_from(c["adv"]),
                                                      tensor_from(c["mask"]), o);
    out.loss.backward();
    EXPECT_NEAR(out.loss.item<double>(), c["loss"].get<double>(), 1e-10) << c["mode"];
    EXPECT_NEAR(out.metrics["actor/ppo_kl"], c["ppo_kl"].get<double>(), 1e-12);
    EXPECT_LT((lp.grad() - tensor_from(c["grad"])).abs().max().item<double>(), 1e-10);
  }
}

TEST(PolicyLossRegistryTest, NamesAndErrors) {
  EXPECT_EQ(policy_loss_names(), (std::vector<std::string>{"gspo", "reinforce", "vanilla"}));
  EXPECT_EQ(make_policy_loss("vanilla")->name(), "vanilla");
  try {
    make_policy_loss("ppo");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gspo, reinforce, vanilla"), std::string::npos) << e.what();
  }
  // vanilla through the interface equals ppo_clip_loss
  at::Tensor x = at::randn({2, 3}, at::kDouble), y = at::randn({2, 3}, at::kDouble);
  at::Tensor a = at::randn({2, 3}, at::kDouble), m = at::ones({2, 3}, at::kDouble);
  PolicyLossOptions o;
  EXPECT_DOUBLE_EQ(make_policy_loss("vanilla")->compute(x, y, a, m, o).loss.item<double>(),
                   ppo_clip_loss(x, y, a, m, o).loss.item<double>());
  EXPECT_THROW(gspo_loss(x, y, a, at::ones({2, 4}), o), Error);
}

}  // namespace
}  // namespace agentr1::algo
