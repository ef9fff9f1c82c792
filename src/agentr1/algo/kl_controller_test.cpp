// Fixed and adaptive KL-in-reward controllers against tests/ref/algo_estimators_ref.py.
#include <gtest/gtest.h>

#include "agentr1/algo/estimator_test_util.h"
#include "agentr1/algo/kl_controller.h"
#include "agentr1/core/error.h"

namespace agentr1::algo {
namespace {

using testing::estimators_reference;

TEST(KlControllerTest, MatchesReference) {
  for (const auto& c : estimators_reference()["kl_ctrl"]) {
    KlControllerOptions o;
    o.type = c["type"].get<std::string>();
    o.kl_coef = c["kl_coef"].get<double>();
    o.target_kl = c["target_kl"].get<double>();
    o.horizon = c["horizon"].get<double>();
    auto ctl = make_kl_controller(o);
    EXPECT_DOUBLE_EQ(ctl->value(), o.kl_coef);
    for (size_t k = 0; k < c["updates"].size(); ++k) {
      ctl->update(c["updates"][k][0].get<double>(), c["updates"][k][1].get<int64_t>());
      EXPECT_NEAR(ctl->value(), c["values"][k].get<double>(), 1e-15) << o.type << " update " << k;
    }
  }
}

TEST(KlControllerTest, HandWorkedAndErrors) {
  // KL 3x the target: error clipped to 0.2; 100 samples over horizon 1000 -> x1.02.
  AdaptiveKlController a(0.1, 0.05, 1000);
  a.update(0.15, 100);
  EXPECT_NEAR(a.value(), 0.1 * 1.02, 1e-15);
  KlControllerOptions o;
  o.type = "pid";
  EXPECT_THROW(make_kl_controller(o), Error);
  o.type = "adaptive";
  o.horizon = 0;
  EXPECT_THROW(make_kl_controller(o), Error);
}

}  // namespace
}  // namespace agentr1::algo
