// Clipped value loss against tests/ref/algo_estimators_ref.py and a hand-worked case.
#include <gtest/gtest.h>

#include "agentr1/algo/estimator_test_util.h"
#include "agentr1/algo/value_loss.h"
#include "agentr1/core/error.h"

namespace agentr1::algo {
namespace {

using testing::estimators_reference;
using testing::tensor_from;

TEST(ValueLossTest, HandWorkedClip) {
  // old value 0, new prediction 1, return 2, clip 0.5: unclipped (1-2)^2 = 1, clipped
  // prediction 0.5 -> (0.5-2)^2 = 2.25; loss = 0.5 * max = 1.125, clipfrac 1.
  auto one = [](double v) { return at::full({1, 1}, v, at::kDouble); };
  at::Tensor vp = one(1.0).requires_grad_(true);
  auto out = value_loss(vp, one(2.0), one(0.0), one(1.0), ValueLossOptions{});
  EXPECT_NEAR(out.loss.item<double>(), 1.125, 1e-12);
  EXPECT_NEAR(out.metrics["critic/vf_clipfrac"], 1.0, 1e-12);
  EXPECT_NEAR(out.metrics["critic/vpred_mean"], 1.0, 1e-12);
  out.loss.backward();  // the clipped branch is flat in vpreds
  EXPECT_NEAR(vp.grad().item<double>(), 0.0, 1e-12);
  ValueLossOptions bad;
  bad.cliprange_value = 0;
  EXPECT_THROW(value_loss(vp, one(2.0), one(0.0), one(1.0), bad), Error);
}

TEST(ValueLossTest, MatchesReference) {
  for (const auto& c : estimators_reference()["value"]) {
    ValueLossOptions o;
    o.cliprange_value = c["clip"].get<double>();
    o.agg = loss_agg_from_string(c["mode"].get<std::string>());
    at::Tensor vp = tensor_from(c["vpreds"]).requires_grad_(true);
    auto out = value_loss(vp, tensor_from(c["returns"]), tensor_from(c["values"]),
                          tensor_from(c["mask"]), o);
    out.loss.backward();
    EXPECT_NEAR(out.loss.item<double>(), c["loss"].get<double>(), 1e-10) << c["mode"];
    EXPECT_NEAR(out.metrics["critic/vf_loss"], c["loss"].get<double>(), 1e-10);
    EXPECT_NEAR(out.metrics["critic/vf_clipfrac"], c["clipfrac"].get<double>(), 1e-12);
    EXPECT_NEAR(out.metrics["critic/vpred_mean"], c["vpred_mean"].get<double>(), 1e-12);
    EXPECT_LT((vp.grad() - tensor_from(c["grad"])).abs().max().item<double>(), 1e-10);
  }
}

}  // namespace
}  // namespace agentr1::algo
