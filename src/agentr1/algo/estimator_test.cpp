// Advantage estimators: registry, hand-worked cases, loop vs tensor agreement, and every
// estimator against tests/ref/algo_estimators_ref.py (verl's formulas in verl's padded
// layout with observation tokens between steps).
#include <gtest/gtest.h>

#include <cmath>

#include "agentr1/algo/advantage.h"
#include "agentr1/algo/estimator.h"
#include "agentr1/algo/estimator_test_util.h"
#include "agentr1/algo/returns.h"
#include "agentr1/core/error.h"

namespace agentr1::algo {
namespace {

using testing::estimators_reference;
using testing::trajectories_from;

EstimatorOptions options_from(const json& o) {
  EstimatorOptions e;
  e.gamma = o["gamma"].get<double>();
  e.lam = o["lam"].get<double>();
  e.norm_adv_by_std_in_grpo = o["norm_adv_by_std_in_grpo"].get<bool>();
  e.eps = o["eps"].get<double>();
  e.kl_coef = o["kl_coef"].get<double>();
  e.whiten_advantages = o["whiten_advantages"].get<bool>();
  e.turn_norm_by_std = o["turn_norm_by_std"].get<bool>();
  e.gigpo_step_weight = o["gigpo_step_weight"].get<double>();
  e.gigpo_mode = o["gigpo_mode"].get<std::string>();
  e.whiten_level = o["whiten_level"].get<std::string>();
  return e;
}

// Single-token steps make hand-worked cases short.
TrajectoryTokens traj(const std::string& group, float outcome, std::vector<float> step_rewards,
                      std::vector<int64_t> tokens = {}) {
  TrajectoryTokens t;
  t.group = group;
  t.outcome_reward = outcome;
  for (size_t i = 0; i < step_rewards.size(); ++i) {
    StepTokens s;
    s.reward = step_rewards[i];
    s.n_tokens = tokens.empty() ? 1 : tokens[i];
    t.steps.push_back(s);
  }
  return t;
}

TEST(EstimatorRegistryTest, KnownNamesUnknownAndDuplicate) {
  const std::vector<std::string> want = {"gae", "gigpo", "grpo", "reinforce", "reinforce_plus_plus",
                                         "reinforce_plus_plus_baseline", "rloo", "token_gae",
                                         "turn_rloo"};
  for (const auto& n : want) {
    auto e = make_estimator(n);
    EXPECT_EQ(e->name(), n);
    EXPECT_EQ(e->needs_values(), n == "gae" || n == "token_gae") << n;
  }
  try {
    make_estimator("ppo");
    FAIL() << "unknown name accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'ppo'"), std::string::npos) << msg;
    for (const auto& n : want) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
  EXPECT_THROW(register_estimator("grpo", [] { return make_estimator("rloo"); }), Error);
  register_estimator("test_alias_rloo", [] { return make_estimator("rloo"); });
  EXPECT_THROW(register_estimator("test_alias_rloo", [] { return make_estimator("rloo"); }), Error);
  EXPECT_EQ(make_estimator("test_alias_rloo")->name(), "rloo");
}

TEST(EstimatorTest, RejectsBadBatchesAndOptions) {
  auto grpo = make_estimator("grpo");
  EstimatorOptions o;
  EXPECT_THROW(grpo->compute({}, o), Error);
  EXPECT_THROW(grpo->compute({traj("g", 1, {})}, o), Error);                 // no steps
  EXPECT_THROW(grpo->compute({traj("g", 1, {0.f}, {0})}, o), Error);         // 0 tokens
  auto bad_kl = traj("g", 1, {0.f}, {3});
  const std::vector<float> one_kl = {0.1f};
  bad_kl.steps[0].token_kl = one_kl;
  EXPECT_THROW(grpo->compute({bad_kl}, o), Error);
  EXPECT_THROW(make_estimator("token_gae")->compute({traj("g", 1, {0.f}, {2})}, o), Error);
  o.gamma = 1.5;
  EXPECT_THROW(grpo->compute({traj("g", 1, {0.f})}, o), Error);
  o.gamma = 1.0;
  o.kl_coef = -1;
  EXPECT_THROW(grpo->compute({traj("g", 1, {0.f})}, o), Error);
  try {
    make_estimator("token_gae")->compute({traj("g", 1, {0.f}, {2})}, EstimatorOptions{});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token_values"), std::string::npos) << e.what();
  }
  o.kl_coef = 0;
  o.whiten_level = "steps";
  EXPECT_THROW(grpo->compute({traj("g", 1, {0.f})}, o), Error);
  o.whiten_level = "step";  // one advantage per step: gae only
  auto tg = traj("g", 1, {0.f}, {2});
  const std::vector<float> tg_values = {0.1f, 0.2f};
  tg.steps[0].token_values = tg_values;
  EXPECT_THROW(make_estimator("token_gae")->compute({tg}, o), Error);
}

// compute_into writes each step's outputs through its pointers and nothing else: here
// into one buffer with gaps between the steps (as a packed row's observation tokens),
// equal to what compute() returns; returns may be left unwritten (null).
TEST(EstimatorTest, ComputeIntoWritesThroughEachStepsPointers) {
  std::vector<TrajectoryTokens> b = {traj("a", 1, {0.5f, 0.f}, {2, 3}), traj("a", 0, {0.f}, {1})};
  std::vector<float> buf(12, -7.0f);  // step 0 at 1..2, step 1 at 5..7, trajectory 1 at 10
  b[0].steps[0].advantages = buf.data() + 1;
  b[0].steps[1].advantages = buf.data() + 5;
  b[1].steps[0].advantages = buf.data() + 10;
  EstimatorOptions o;
  o.gamma = 0.9;
  auto est = make_estimator("reinforce_plus_plus");
  const AdvantageOutput want = est->compute(b, o);
  const EstimatorMetrics m = est->compute_into(b, o);
  const std::vector<float> expect = {-7.0f, want.advantages[0][0][0], want.advantages[0][0][1], -7.0f, -7.0f,
                                     want.advantages[0][1][0], want.advantages[0][1][1], want.advantages[0][1][2],
                                     -7.0f, -7.0f, want.advantages[1][0][0], -7.0f};
  EXPECT_EQ(buf, expect);
  EXPECT_EQ(m, want.metrics);
  b[1].steps[0].advantages = nullptr;
  EXPECT_THROW(est->compute_into(b, o), Error);  // an output is required
}

// whiten_level=step counts each step once: a long step does not outweigh a short one.
TEST(EstimatorTest, StepWhiteningCountsEachStepOnce) {
  // Two single-step trajectories, values 0: raw advantages 1 (1 token) and 0 (9 tokens).
  std::vector<TrajectoryTokens> b = {traj("a", 1, {0.f}, {1}), traj("b", 0, {0.f}, {9})};
  EstimatorOptions o;
  o.whiten_level = "step";
  const AdvantageOutput s = make_estimator("gae")->compute(b, o);
  const double inv = 1.0 / std::sqrt(0.5 + 1e-8);  // mean 0.5, unbiased var 0.5 over 2 steps
  EXPECT_NEAR(s.advantages[0][0][0], 0.5 * inv, 1e-5);
  for (float x : s.advantages[1][0]) EXPECT_NEAR(x, -0.5 * inv, 1e-5);
  o.whiten_level = "token";  // over 10 tokens: mean 0.1
  const AdvantageOutput t = make_estimator("gae")->compute(b, o);
  EXPECT_GT(t.advantages[0][0][0], 2.5);
}

TEST(EstimatorTest, HandWorkedOutcomeEstimators) {
  // Group g: scores 1+0.5=1.5 (2 steps), 0, 0.5 (3 tokens); group h: singleton 2.
  std::vector<TrajectoryTokens> b = {traj("g", 1, {0.5f, 0.f}), traj("g", 0, {0.f}),
                                     traj("g", 0.5f, {0.f}, {3}), traj("h", 2, {0.f})};
  EstimatorOptions o;
  o.norm_adv_by_std_in_grpo = false;
  auto dr = make_estimator("grpo")->compute(b, o);  // mean 2/3
  EXPECT_NEAR(dr.advantages[0][1][0], 1.5 - 2.0 / 3, 1e-6);
  EXPECT_NEAR(dr.advantages[2][0][2], 0.5 - 2.0 / 3, 1e-6);
  EXPECT_NEAR(dr.advantages[3][0][0], 2.0, 1e-6);   // singleton: mean 0
  auto rl = make_estimator("rloo")->compute(b, o);
  EXPECT_NEAR(rl.advantages[0][0][0], 1.5 - 0.25, 1e-6);  // others {0, 0.5}
  EXPECT_NEAR(rl.advantages[1][0][0], 0.0 - 1.0, 1e-6);   // others {1.5, 0.5}
  EXPECT_NEAR(rl.advantages[3][0][0], 2.0, 1e-6);         // singleton keeps its score
  EXPECT_EQ(rl.returns, rl.advantages);
  // metrics over all 7 action tokens
  EXPECT_NEAR(rl.metrics["critic/advantages/max"], 2.0, 1e-6);
  EXPECT_NEAR(rl.metrics["critic/advantages/min"], -1.0, 1e-6);
  EXPECT_NEAR(rl.metrics["critic/advantages/mean"],
              (2 * 1.25 + -1.0 + 3 * (0.5 - 0.75) + 2.0) / 7.0, 1e-6);
}

TEST(EstimatorTest, HandWorkedReinforcePlusPlusReturns) {
  // Tokens: step 0 has 2 tokens (reward 1 at its last), step 1 has 1 token (+ outcome 2);
  // KL 0.5 on the first token, kl_coef 0.2 -> token rewards [-0.1, 1, 2].
  auto t = traj("g", 2, {1.f, 0.f}, {2, 1});
  const std::vector<float> kl = {0.5f, 0.f};
  t.steps[0].token_kl = kl;
  EstimatorOptions o;
  o.gamma = 0.5;
  o.kl_coef = 0.2;
  auto out = make_estimator("reinforce_plus_plus")->compute({t}, o);
  EXPECT_NEAR(out.returns[0][1][0], 2.0, 1e-6);
  EXPECT_NEAR(out.returns[0][0][1], 1.0 + 0.5 * 2.0, 1e-6);
  EXPECT_NEAR(out.returns[0][0][0], -0.1 + 0.5 * 2.0, 1e-6);
  // whitened: mean 1.6333, unbiased std of {0.9, 2, 2}
  const double m = (0.9 + 2 + 2) / 3, sd = std::sqrt(((0.9 - m) * (0.9 - m) + 2 * (2 - m) * (2 - m)) / 2);
  EXPECT_NEAR(out.advantages[0][0][0], (0.9 - m) / sd, 1e-5);
  EXPECT_NEAR(out.metrics["actor/reward_kl_penalty"], 0.5 / 3, 1e-6);
}

TEST(EstimatorTest, HandWorkedVanillaReinforce) {
  // Two trajectories of one group: rewards as above for the first ([-0.1, 1, 2] token
  // rewards, gamma 0.5), outcome 0 and no step reward for the second (2 tokens).
  auto t = traj("g", 2, {1.f, 0.f}, {2, 1});
  const std::vector<float> kl = {0.5f, 0.f};
  t.steps[0].token_kl = kl;
  auto u = traj("g", 0, {0.f}, {2});
  EstimatorOptions o;
  o.gamma = 0.5;
  o.kl_coef = 0.2;
  auto out = make_estimator("reinforce")->compute({t, u}, o);
  // G = [-0.1 + 0.5 * 2, 1 + 0.5 * 2, 2] = [0.9, 2, 2]; no baseline, no whitening.
  EXPECT_NEAR(out.advantages[0][0][0], 0.9, 1e-6);
  EXPECT_NEAR(out.advantages[0][0][1], 2.0, 1e-6);
  EXPECT_NEAR(out.advantages[0][1][0], 2.0, 1e-6);
  EXPECT_NEAR(out.returns[0][0][0], 0.9, 1e-6);
  EXPECT_NEAR(out.advantages[1][0][0], 0.0, 1e-12);
  EXPECT_NEAR(out.advantages[1][0][1], 0.0, 1e-12);
  EXPECT_FALSE(make_estimator("reinforce")->needs_values());
}

TEST(EstimatorTest, HandWorkedStepGae) {
  // Two steps, V = (0.5, 0.2), rewards (0, 1 + outcome 1) = (0, 2), gamma 0.9, lam 0.5:
  // delta_1 = 2 - 0.2 = 1.8;  delta_0 = 0 + 0.9*0.2 - 0.5 = -0.32
  // A_1 = 1.8;  A_0 = -0.32 + 0.45*1.8 = 0.49;  R = A + V = (0.99, 2.0)
  auto t = traj("g", 1, {0.f, 1.f}, {2, 3});
  t.steps[0].value = 0.5f;
  t.steps[1].value = 0.2f;
  EstimatorOptions o;
  o.gamma = 0.9;
  o.lam = 0.5;
  o.whiten_advantages = false;
  auto out = make_estimator("gae")->compute({t}, o);
  EXPECT_NEAR(out.advantages[0][0][1], 0.49, 1e-6);
  EXPECT_NEAR(out.advantages[0][1][2], 1.8, 1e-6);
  EXPECT_NEAR(out.returns[0][0][0], 0.99, 1e-6);
  EXPECT_NEAR(out.returns[0][1][0], 2.0, 1e-6);
  EXPECT_NEAR(out.metrics["critic/values/mean"], (2 * 0.5 + 3 * 0.2) / 5, 1e-6);
}

TEST(EstimatorTest, HandWorkedTokenGaeCarriesAcrossSteps) {
  // Tokens (step 0: 1 token, step 1: 1 token), values (1, 0.5), rewards (0, 1), gamma = lam = 1:
  // A_1 = 1 - 0.5 = 0.5; A_0 = (0 + 0.5 - 1) + 0.5 = 0  (the recursion crosses the step boundary)
  auto t = traj("g", 1, {0.f, 0.f});
  const std::vector<float> v0 = {1.f}, v1 = {0.5f};
  t.steps[0].token_values = v0;
  t.steps[1].token_values = v1;
  EstimatorOptions o;
  o.whiten_advantages = false;
  auto out = make_estimator("token_gae")->compute({t}, o);
  EXPECT_NEAR(out.advantages[0][1][0], 0.5, 1e-6);
  EXPECT_NEAR(out.advantages[0][0][0], 0.0, 1e-6);
  EXPECT_NEAR(out.returns[0][0][0], 1.0, 1e-6);
}

// Packs a batch into verl's padded layout with `gap` observation tokens (mask 0, junk
// values) before every step, so the tensor forms must skip them.
struct Packed {
  at::Tensor rewards, values, mask;          // [B,T]
  std::vector<std::vector<int64_t>> cols;    // action-token columns per trajectory
};
Packed pack(const std::vector<TrajectoryTokens>& b, double kl_coef, int64_t gap) {
  int64_t T = 0;
  for (const auto& tr : b) {
    int64_t n = 0;
    for (const auto& s : tr.steps) n += gap + s.n_tokens;
    T = std::max(T, n + 1);
  }
  Packed p;
  const int64_t B = static_cast<int64_t>(b.size());
  p.rewards = at::zeros({B, T}, at::kDouble);
  p.values = at::full({B, T}, 7.0, at::kDouble);  // junk on non-action tokens
  p.mask = at::zeros({B, T}, at::kDouble);
  for (int64_t i = 0; i < B; ++i) {
    const auto r = token_rewards(b[i], kl_coef);
    int64_t col = 0, k = 0;
    std::vector<int64_t> cols;
    for (const auto& s : b[i].steps) {
      col += gap;
      for (int64_t j = 0; j < s.n_tokens; ++j, ++col, ++k) {
        p.rewards[i][col] = r[k];
        p.values[i][col] = s.token_values.empty() ? 0.0 : s.token_values[j];
        p.mask[i][col] = 1.0;
        cols.push_back(col);
      }
    }
    p.cols.push_back(cols);
  }
  return p;
}

double max_diff_nested(const std::vector<std::vector<std::vector<float>>>& got,
                       const at::Tensor& want, const Packed& p) {
  double d = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    size_t k = 0;
    for (const auto& st : got[i])
      for (float x : st) d = std::max(d, std::abs(x - want[i][p.cols[i][k++]].item<double>()));
  }
  return d;
}

TEST(EstimatorTest, LoopMatchesTensorFormsOnReferenceBatches) {
  for (const auto& c : estimators_reference()["estimators"]) {
    const std::string name = c["estimator"].get<std::string>();
    const testing::RefBatch ref = trajectories_from(c["trajs"]);
    const auto& batch = ref.trajs;
    const EstimatorOptions o = options_from(c["options"]);
    const Packed p = pack(batch, o.kl_coef, /*gap=*/2);
    if (name == "token_gae") {
      auto [adv, ret] = gae_masked(p.rewards, p.values, p.mask, o.gamma, o.lam);
      if (o.whiten_advantages) adv = masked_whiten(adv, p.mask);
      const auto out = make_estimator(name)->compute(batch, o);
      EXPECT_LT(max_diff_nested(out.advantages, adv, p), 2e-5);
      EXPECT_LT(max_diff_nested(out.returns, ret, p), 2e-5);
    } else if (name == "reinforce_plus_plus") {
      const at::Tensor ret = discounted_returns_masked(p.rewards, p.mask, o.gamma);
      const auto out = make_estimator(name)->compute(batch, o);
      EXPECT_LT(max_diff_nested(out.returns, ret, p), 2e-5);
      EXPECT_LT(max_diff_nested(out.advantages, masked_whiten(ret, p.mask), p), 2e-5);
    } else if (name == "rloo" || name == "grpo") {
      std::vector<float> scores;
      std::vector<std::string> groups;
      for (const auto& tr : batch) {
        scores.push_back(static_cast<float>(trajectory_score(tr, o.kl_coef)));
        groups.push_back(tr.group);
      }
      int64_t g = 0;
      const auto idx = group_indices(groups, &g);
      const at::Tensor gi = at::tensor(std::vector<int64_t>(idx.begin(), idx.end()));
      const at::Tensor vec =
          name == "rloo" ? rloo_advantages_vectorized(at::tensor(scores), gi, g)
                         : grpo_advantages_vectorized(at::tensor(scores), gi, g,
                                                      o.norm_adv_by_std_in_grpo, o.eps);
      const auto loop = name == "rloo" ? rloo_advantages(scores, groups)
                                       : grpo_advantages(scores, groups, o.norm_adv_by_std_in_grpo, o.eps);
      for (size_t i = 0; i < loop.size(); ++i) EXPECT_NEAR(vec[i].item<double>(), loop[i], 1e-5);
    }
  }
}

TEST(EstimatorTest, MatchesReference) {
  const json& cases = estimators_reference()["estimators"];
  ASSERT_GE(cases.size(), 18u);
  std::map<std::string, double> worst;
  for (const auto& c : cases) {
    const std::string name = c["estimator"].get<std::string>();
    const testing::RefBatch ref = trajectories_from(c["trajs"]);
    const auto& batch = ref.trajs;
    const auto out = make_estimator(name)->compute(batch, options_from(c["options"]));
    double d = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      ASSERT_EQ(out.advantages[i].size(), batch[i].steps.size());
      for (size_t t = 0; t < batch[i].steps.size(); ++t) {
        ASSERT_EQ(static_cast<int64_t>(out.advantages[i][t].size()), batch[i].steps[t].n_tokens);
        for (int64_t k = 0; k < batch[i].steps[t].n_tokens; ++k) {
          d = std::max(d, std::abs(out.advantages[i][t][k] - c["advantages"][i][t][k].get<double>()));
          d = std::max(d, std::abs(out.returns[i][t][k] - c["returns"][i][t][k].get<double>()));
        }
      }
    }
    worst[name] = std::max(worst[name], d);
    EXPECT_LT(d, 5e-5) << name << " options " << c["options"].dump();
    for (const auto& [key, want] : c["metrics"].items()) {
      ASSERT_TRUE(out.metrics.count(key)) << name << " lacks metric " << key;
      EXPECT_NEAR(out.metrics.at(key), want.get<double>(), 5e-5) << name << " " << key;
    }
  }
  for (const auto& [n, d] : worst) std::cerr << "[ref] " << n << " max |diff| = " << d << "\n";
}

}  // namespace
}  // namespace agentr1::algo
