// GiGPO on a batch small enough to work by hand (the reference comparison is in
// estimator_test.cpp): episode and anchor-state groups, singletons, unknown anchors.
#include <gtest/gtest.h>

#include <cmath>

#include "agentr1/algo/estimator.h"
#include "agentr1/algo/gigpo.h"
#include "agentr1/core/error.h"

namespace agentr1::algo {
namespace {

TrajectoryTokens traj(const std::string& group, float outcome, std::vector<std::string> anchors) {
  TrajectoryTokens t;
  t.group = group;
  t.outcome_reward = outcome;
  for (auto& a : anchors) {
    StepTokens s;
    s.n_tokens = 2;
    s.anchor = a;
    t.steps.push_back(s);
  }
  return t;
}

// Group g: outcomes 1, 0, 0 (steps: <start>,A / <start>,A / <start>); gamma 0.5 gives
// returns [0.5, 1], [0, 0], [0]. Episode: mean 1/3, unbiased std sqrt(1/3).
// <start>: returns 0.5, 0, 0 -> mean 1/6, std sqrt(1/12); A: 1, 0 -> mean 0.5, std sqrt(0.5).
// Group h: one trajectory (GRPO's singleton rule: the score itself) whose anchors are
// alone in their groups or unknown, so its step part is 0.
TEST(GigpoTest, HandWorkedEpisodeAndAnchorGroups) {
  const std::vector<TrajectoryTokens> batch = {traj("g", 1, {"<start>", "A"}), traj("g", 0, {"<start>", "A"}),
                                               traj("g", 0, {"<start>"}), traj("h", 1, {"<start>", ""})};
  EstimatorOptions o;
  o.gamma = 0.5;
  o.eps = 1e-12;
  const AdvantageOutput out = make_estimator("gigpo")->compute(batch, o);
  const double e_hi = (2.0 / 3) / std::sqrt(1.0 / 3), e_lo = (-1.0 / 3) / std::sqrt(1.0 / 3);
  const double s_hi = (1.0 / 3) / std::sqrt(1.0 / 12), s_lo = (-1.0 / 6) / std::sqrt(1.0 / 12);
  const double a = 0.5 / std::sqrt(0.5);
  const std::vector<std::vector<double>> want = {
      {e_hi + s_hi, e_hi + a}, {e_lo + s_lo, e_lo - a}, {e_lo + s_lo}, {1.0, 1.0}};
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t t = 0; t < want[i].size(); ++t)
      for (float x : out.advantages[i][t]) EXPECT_NEAR(x, want[i][t], 1e-5) << i << " " << t;
  EXPECT_NEAR(out.returns[0][0][0], 0.5, 1e-6);
  EXPECT_NEAR(out.returns[0][1][1], 1.0, 1e-6);
  EXPECT_NEAR(out.returns[3][0][0], 0.5, 1e-6);
  EXPECT_EQ(out.metrics.at("gigpo/anchor_groups"), 2);  // <start> and A of group g
  EXPECT_NEAR(out.metrics.at("gigpo/grouped_step_fraction"), 5.0 / 7, 1e-9);
  EXPECT_NEAR(out.metrics.at("gigpo/known_anchor_fraction"), 6.0 / 7, 1e-9);

  // mean_norm with weight 0.5: differences from the means, no std division.
  o.gigpo_mode = "mean_norm";
  o.gigpo_step_weight = 0.5;
  const AdvantageOutput mn = make_estimator("gigpo")->compute(batch, o);
  EXPECT_NEAR(mn.advantages[0][0][0], 2.0 / 3 + 0.5 * (1.0 / 3), 1e-6);
  EXPECT_NEAR(mn.advantages[1][1][0], -1.0 / 3 + 0.5 * (-0.5), 1e-6);
  EXPECT_NEAR(mn.advantages[3][1][0], 1.0, 1e-6);  // a singleton group keeps its score
}

TEST(GigpoTest, StepWeightZeroIsGrpoAndBadOptionsAreNamed) {
  const std::vector<TrajectoryTokens> batch = {traj("g", 1, {"<start>", "A"}), traj("g", 0, {"<start>", "A"}),
                                               traj("g", 0.5f, {"<start>", "B", "A"})};
  EstimatorOptions o;
  o.gigpo_step_weight = 0;
  const AdvantageOutput g = make_estimator("gigpo")->compute(batch, o);
  const AdvantageOutput r = make_estimator("grpo")->compute(batch, o);
  for (size_t i = 0; i < batch.size(); ++i)
    for (size_t t = 0; t < batch[i].steps.size(); ++t) EXPECT_NEAR(g.advantages[i][t][0], r.advantages[i][t][0], 1e-6);
  o.gigpo_mode = "mean";
  try {
    make_estimator("gigpo")->compute(batch, o);
    FAIL() << "bad mode accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("algorithm.gigpo_mode must be mean_std_norm or mean_norm, got 'mean'"),
              std::string::npos)
        << e.what();
  }
  o.gigpo_mode = "mean_norm";
  o.gigpo_step_weight = -1;
  EXPECT_THROW(make_estimator("gigpo")->compute(batch, o), Error);
}

}  // namespace
}  // namespace agentr1::algo
