// Token entropy from logits against tests/ref/algo_estimators_ref.py (-sum p log p).
#include <gtest/gtest.h>

#include <cmath>

#include "agentr1/algo/entropy.h"
#include "agentr1/algo/estimator_test_util.h"

namespace agentr1::algo {
namespace {

using testing::estimators_reference;
using testing::tensor_from;

TEST(EntropyTest, UniformIsLogV) {
  at::Tensor z = at::zeros({1, 1, 8}, at::kDouble);
  EXPECT_NEAR(entropy_from_logits(z).item<double>(), std::log(8.0), 1e-12);
}

TEST(EntropyTest, MatchesReference) {
  for (const auto& c : estimators_reference()["entropy"]) {
    const at::Tensor logits = tensor_from(c["logits"]);
    EXPECT_LT((entropy_from_logits(logits) - tensor_from(c["entropy"])).abs().max().item<double>(),
              1e-10);
    auto out = entropy_loss(logits, tensor_from(c["mask"]), LossAgg::kTokenMean);
    EXPECT_NEAR(out.loss.item<double>(), c["loss"].get<double>(), 1e-10);
    EXPECT_NEAR(out.metrics["actor/entropy"], c["loss"].get<double>(), 1e-10);
  }
}

}  // namespace
}  // namespace agentr1::algo
