// The distillation reward and loss (distill.h) on hand-made log-prob tables, each
// expected value written out from the formula in double.
#include "agentr1/algo/distill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "agentr1/core/error.h"

namespace agentr1::algo {
namespace {

DistillOptions opts(double max_clamp, double min_clamp, const std::string& loss = "k1_pg") {
  DistillOptions o;
  o.loss = loss;
  o.loss_max_clamp = max_clamp;
  o.log_prob_min_clamp = min_clamp;
  o.resolve("algorithm.distill.");
  return o;
}

at::Tensor t1(const std::vector<float>& v) { return at::tensor(v, at::kFloat); }

TEST(DistillTest, K1RewardIsTeacherMinusStudentWithoutClamps) {
  const std::vector<float> teacher{-0.1f, -2.5f, -0.7f, -13.0f};
  const std::vector<float> student{-0.4f, -0.2f, -0.7f, -1.0f};
  const K1Reward r = k1_distill_reward(t1(teacher), t1(student), opts(0, 0));
  for (size_t i = 0; i < teacher.size(); ++i) {
    EXPECT_NEAR(r.reward[static_cast<int64_t>(i)].item<double>(), double(teacher[i]) - double(student[i]), 1e-6) << i;
    EXPECT_EQ(r.clamped[static_cast<int64_t>(i)].item<float>(), 0.0f);
  }
}

TEST(DistillTest, K1RewardClampsLogProbsThenTheTerm) {
  // log_prob_min_clamp -10 raises -30 to -10; loss_max_clamp 3 bounds |s - t| to 3.
  const std::vector<double> teacher{-30.0, -0.5, -6.0, -1.0, -0.2};
  const std::vector<double> student{-1.0, -30.0, -1.0, -2.0, -0.2};
  const double lo = -10, c = 3;
  const K1Reward r = k1_distill_reward(at::tensor(teacher, at::kDouble), at::tensor(student, at::kDouble),
                                       opts(c, lo));
  for (size_t i = 0; i < teacher.size(); ++i) {
    const double k1 = std::max(student[i], lo) - std::max(teacher[i], lo);
    const double want = -std::min(c, std::max(-c, k1));
    EXPECT_NEAR(r.reward[static_cast<int64_t>(i)].item<double>(), want, 1e-6) << i;
    EXPECT_EQ(r.clamped[static_cast<int64_t>(i)].item<float>(), std::abs(k1) > c ? 1.0f : 0.0f) << i;
  }
  // Hand values: token 0: s=-1, t=-10 -> k1 9 -> clamped to 3 -> reward -3; token 1:
  // s=-10, t=-0.5 -> k1 -9.5 -> reward +3; token 3: reward -1 + 2 = +1.
  EXPECT_NEAR(r.reward[0].item<double>(), -3.0, 1e-6);
  EXPECT_NEAR(r.reward[1].item<double>(), 3.0, 1e-6);
  EXPECT_NEAR(r.reward[3].item<double>(), 1.0, 1e-6);
  EXPECT_NEAR(r.reward[4].item<double>(), 0.0, 1e-7);
}

TEST(DistillTest, K1RewardCarriesNoGradient) {
  at::Tensor s = t1({-0.5f, -1.5f}).requires_grad_(true);
  const K1Reward r = k1_distill_reward(t1({-0.2f, -0.3f}), s, opts(10, -10));
  EXPECT_FALSE(r.reward.requires_grad());
}

TEST(DistillTest, TopkForwardKlMatchesTheSumWrittenOut) {
  // Two tokens, k = 3. Teacher top-3 mass 0.9 and 0.6: the rest is the tail bucket.
  const std::vector<std::vector<double>> teacher{{std::log(0.5), std::log(0.3), std::log(0.1)},
                                                 {std::log(0.4), std::log(0.15), std::log(0.05)}};
  const std::vector<std::vector<double>> student{{std::log(0.2), std::log(0.2), std::log(0.4)},
                                                 {std::log(0.4), std::log(0.15), std::log(1e-9)}};
  std::vector<float> tf, sf;
  for (size_t i = 0; i < 2; ++i)
    for (size_t k = 0; k < 3; ++k) {
      tf.push_back(static_cast<float>(teacher[i][k]));
      sf.push_back(static_cast<float>(student[i][k]));
    }
  const at::Tensor tt = t1(tf).reshape({2, 3});
  at::Tensor st = t1(sf).reshape({2, 3}).requires_grad_(true);
  const at::Tensor kl = topk_forward_kl(st, tt, opts(0, -10, "topk_fkl"));  // the floor is k1_pg's only
  ASSERT_EQ(kl.sizes(), (at::IntArrayRef{2}));
  std::vector<double> tail_t(2), tail_s(2);
  for (size_t i = 0; i < 2; ++i) {
    double want = 0, mt = 0, ms = 0;
    for (size_t k = 0; k < 3; ++k) {
      want += std::exp(teacher[i][k]) * (teacher[i][k] - student[i][k]);
      mt += std::exp(teacher[i][k]);
      ms += std::exp(student[i][k]);
    }
    tail_t[i] = 1 - mt;
    tail_s[i] = 1 - ms;
    want += tail_t[i] * std::log(tail_t[i] / tail_s[i]);
    EXPECT_NEAR(kl[static_cast<int64_t>(i)].item<double>(), want, 1e-5) << i;
  }
  // Token 0 by hand: 0.5 ln(0.5/0.2) + 0.3 ln(0.3/0.2) + 0.1 ln(0.1/0.4) + 0.1 ln(0.1/0.2).
  EXPECT_NEAR(kl[0].item<double>(),
              0.5 * std::log(2.5) + 0.3 * std::log(1.5) + 0.1 * std::log(0.25) + 0.1 * std::log(0.5), 1e-5);
  // d kl_i / d s_ik = -p_T(k) + p_T(tail) p_S(k) / p_S(tail).
  kl.sum().backward();
  const at::Tensor g = st.grad();
  for (size_t i = 0; i < 2; ++i)
    for (size_t k = 0; k < 3; ++k) {
      const double want = -std::exp(teacher[i][k]) + tail_t[i] * std::exp(student[i][k]) / tail_s[i];
      EXPECT_NEAR(g[static_cast<int64_t>(i)][static_cast<int64_t>(k)].item<double>(), want, 1e-5) << i << "," << k;
    }
}

TEST(DistillTest, TopkForwardKlIsZeroWithZeroGradientWhenTheStudentIsTheTeacher) {
  const at::Tensor t = at::log_softmax(at::tensor({1.0f, 0.3f, -2.0f, 0.9f}), 0).slice(0, 0, 3).reshape({1, 3});
  at::Tensor s = t.clone().requires_grad_(true);
  const at::Tensor kl = topk_forward_kl(s, t, opts(10, -10, "topk_fkl"));
  EXPECT_NEAR(kl[0].item<double>(), 0.0, 1e-7);
  kl.sum().backward();
  // -p_T(k) + p_T(tail) p_S(k) / p_S(tail) with equal tails: 0 up to float rounding.
  EXPECT_LT(s.grad().abs().max().item<double>(), 1e-6);
}

TEST(DistillTest, TopkForwardKlIsPositiveAndClamped) {
  const at::Tensor t = t1({std::log(0.9f)}).reshape({1, 1});
  const at::Tensor s = t1({-40.0f}).reshape({1, 1});
  // 0.9 (ln 0.9 + 40) + 0.1 ln(0.1 / (1 - e^-40)) = 35.9 - 0.32 -> 2 with loss_max_clamp 2.
  const double want = 0.9 * (std::log(0.9) + 40.0) + 0.1 * std::log(0.1);
  EXPECT_NEAR(topk_forward_kl(s, t, opts(0, 0, "topk_fkl"))[0].item<double>(), want, 1e-4);
  EXPECT_NEAR(topk_forward_kl(s, t, opts(2, 0, "topk_fkl"))[0].item<double>(), 2.0, 1e-6);
}

TEST(DistillTest, OptionsRejectBadValuesNamingTheKey) {
  DistillOptions o;
  o.loss = "reverse_kl";
  try {
    o.resolve("algorithm.distill.");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("algorithm.distill.loss"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("k1_pg"), std::string::npos) << e.what();
  }
  o.loss = "topk_fkl";
  o.topk = 0;
  EXPECT_THROW(o.resolve("algorithm.distill."), Error);
  o.topk = 32;
  o.coef = -1;
  EXPECT_THROW(o.resolve("algorithm.distill."), Error);
}

}  // namespace
}  // namespace agentr1::algo
