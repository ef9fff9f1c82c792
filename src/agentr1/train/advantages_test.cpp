// KL in the reward: token_kl and the score against hand-computed numbers and against a
// direct per-row log-prob computation with a policy that differs from the reference;
// the adaptive controller's direction; gae through estimate_advantages.
#include "agentr1/train/advantages.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "agentr1/algo/kl_controller.h"
#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/model/model_test_util.h"
#include "agentr1/train/learner/actor.h"

namespace agentr1::train {
namespace {

Trajectory one_step(const TokenIds& prompt, const TokenIds& response, float outcome, const std::string& group) {
  Trajectory t;
  t.uid = group + "-" + std::to_string(prompt.size());
  t.group = group;
  Step s;
  s.prompt_ids = prompt;
  s.response_ids = response;
  s.response_logprobs.assign(response.size(), 0.0f);
  t.steps.push_back(s);
  t.outcome_reward = outcome;
  return t;
}

TEST(KlInRewardTest, HandComputedTokenKlScoreAndReturns) {
  // Prompt [5,6,7], response [8,9]: row tokens 3 and 4 are actions.
  std::vector<Trajectory> trajs = {one_step({5, 6, 7}, {8, 9}, 1.0f, "g")};
  std::vector<PackedRow> rows = pack_trajectories(trajs, true);
  ASSERT_EQ(rows.size(), 1u);
  rows[0].old_logprob = {0, -0.3f, -0.7f, -1.0f, -2.0f};
  rows[0].ref_logprob = {0, -9.0f, -9.0f, -1.5f, -1.9f};  // prompt entries must not matter
  const RowTokenValues k1 = reward_token_kl(rows, algo::KlType::kK1);
  ASSERT_EQ(k1.size(), 1u);
  ASSERT_EQ(k1[0].size(), 5u);
  for (size_t t = 0; t < 3; ++t) EXPECT_EQ(k1[0][t], 0.0f) << "prompt token " << t;
  EXPECT_NEAR(k1[0][3], 0.5, 1e-6);   // -1.0 - (-1.5)
  EXPECT_NEAR(k1[0][4], -0.1, 1e-6);  // -2.0 - (-1.9)
  const RowTokenValues ab = reward_token_kl(rows, algo::KlType::kAbs);
  EXPECT_NEAR(ab[0][4], 0.1, 1e-6);
  const RowTokenValues k2 = reward_token_kl(rows, algo::KlType::kK2);
  EXPECT_NEAR(k2[0][3], 0.125, 1e-6);  // 0.5 * 0.5^2

  AlgorithmOptions a;
  a.adv_estimator = "reinforce_plus_plus";
  a.estimator.gamma = 1.0;
  AdvantageInputs in;
  in.token_kl = &k1;
  in.kl_coef = 0.1;
  AdvantageResult r = estimate_advantages(trajs, rows, a, in);
  // Token rewards: [-0.1*0.5, -0.1*(-0.1) + 1] = [-0.05, 1.01]; score 0.96.
  EXPECT_NEAR(r.rewards[0], 0.96, 1e-6);
  ASSERT_EQ(rows[0].returns.size(), 5u);
  EXPECT_NEAR(rows[0].returns[3], 0.96, 1e-6);  // -0.05 + 1.01
  EXPECT_NEAR(rows[0].returns[4], 1.01, 1e-6);
  for (size_t t = 0; t < 3; ++t) EXPECT_EQ(rows[0].returns[t], 0.0f) << "prompt token " << t;
  EXPECT_NEAR(r.mean_kl, 0.2, 1e-6);  // token mean (0.5 - 0.1) / 2
  EXPECT_NEAR(r.metrics.at("actor/reward_kl_penalty"), 0.2, 1e-6);
  EXPECT_NEAR(r.metrics.at("actor/reward_kl_penalty_coeff"), 0.1, 1e-12);
  // Without KL in the reward the score is the plain reward.
  AdvantageResult plain = estimate_advantages(trajs, rows, a, AdvantageInputs{});
  EXPECT_NEAR(plain.rewards[0], 1.0, 1e-6);
  EXPECT_EQ(plain.metrics.count("actor/reward_kl_penalty"), 0u);
}

TEST(KlInRewardTest, PolicyDifferentFromReferenceMatchesDirectLogprobs) {
  using model::testing::spicy_model;
  using model::testing::tiny_config;
  model::Transformer policy = spicy_model(tiny_config(model::Arch::kQwen2), 1);
  model::Transformer reference = spicy_model(tiny_config(model::Arch::kQwen2), 2);
  std::vector<Trajectory> trajs = {one_step({3, 4, 5, 6, 7, 8}, {10, 11, 12}, 1.0f, "a"),
                                   one_step({3, 4, 5, 6, 9}, {20, 21}, 0.0f, "a")};
  std::vector<PackedRow> rows = pack_trajectories(trajs, true);
  ActorOptions ao;
  ao.loop.min_shared_prefix = 2;  // the shared-prefix path too
  Actor pa(policy, ao), ra(reference, ao);
  pa.fill_logprobs(rows, &PackedRow::old_logprob);
  ra.fill_logprobs(rows, &PackedRow::ref_logprob);
  const RowTokenValues kl = reward_token_kl(rows, algo::KlType::kK1);
  ASSERT_EQ(rows.size(), trajs.size());
  double total_expected_penalty = 0;
  for (size_t i = 0; i < trajs.size(); ++i) {
    ASSERT_EQ(rows[i].trajectory, static_cast<int64_t>(i));
    TokenIds full = trajs[i].steps[0].prompt_ids;
    const TokenIds& resp = trajs[i].steps[0].response_ids;
    full.insert(full.end(), resp.begin(), resp.end());
    at::Tensor ids = at::empty({1, static_cast<int64_t>(full.size())}, at::kLong);
    for (size_t t = 0; t < full.size(); ++t) ids[0][static_cast<int64_t>(t)] = full[t];
    torch::NoGradGuard ng;
    at::Tensor lp = model::token_logprobs(policy, ids), lr = model::token_logprobs(reference, ids);
    const size_t p = trajs[i].steps[0].prompt_ids.size();
    ASSERT_EQ(kl[i].size(), full.size());
    for (size_t k = 0; k < resp.size(); ++k) {
      const int64_t col = static_cast<int64_t>(p + k - 1);  // logit predicting response token k
      const double expect = lp[0][col].item<double>() - lr[0][col].item<double>();
      EXPECT_NEAR(kl[i][p + k], expect, 1e-4) << "trajectory " << i << " token " << k;
      if (i == 0) total_expected_penalty += expect;
    }
  }
  EXPECT_GT(std::abs(total_expected_penalty), 1e-3) << "policy and reference must differ";
  AlgorithmOptions a;
  a.adv_estimator = "grpo";
  AdvantageInputs in;
  in.token_kl = &kl;
  in.kl_coef = 0.05;
  AdvantageResult r = estimate_advantages(trajs, rows, a, in);
  EXPECT_NEAR(r.rewards[0], 1.0 - 0.05 * total_expected_penalty, 1e-4);
}

TEST(KlInRewardTest, AdaptiveCoefficientFollowsTheMeasuredKl) {
  std::vector<Trajectory> trajs = {one_step({5, 6}, {8, 9}, 1.0f, "g"), one_step({5, 7}, {8}, 0.0f, "g")};
  AlgorithmOptions a;
  a.adv_estimator = "rloo";
  a.kl_ctrl.type = "adaptive";
  a.kl_ctrl.kl_coef = 0.1;
  a.kl_ctrl.target_kl = 0.05;
  a.kl_ctrl.horizon = 10;
  auto ctl = algo::make_kl_controller(a.kl_ctrl);
  std::vector<PackedRow> rows = pack_trajectories(trajs, true);  // [5,6,8,9] and [5,7,8]
  auto run = [&](float kl_value) {
    RowTokenValues kl = {{0, 0, kl_value, kl_value}, {0, 0, kl_value}};
    AdvantageInputs in;
    in.token_kl = &kl;
    in.kl_coef = ctl->value();
    AdvantageResult r = estimate_advantages(trajs, rows, a, in);
    EXPECT_NEAR(r.mean_kl, kl_value, 1e-6);
    ctl->update(r.mean_kl, static_cast<int64_t>(trajs.size()));
  };
  run(0.5f);  // far above target: error clipped to +0.2 -> value *= 1 + 0.2 * 2 / 10
  EXPECT_NEAR(ctl->value(), 0.1 * 1.04, 1e-9);
  const double up = ctl->value();
  run(0.0f);  // below target: -0.2 -> value *= 0.96
  EXPECT_NEAR(ctl->value(), up * 0.96, 1e-9);
  EXPECT_LT(ctl->value(), up);
}

TEST(EstimateAdvantagesTest, StepGaeUsesTheValueAtEachStepsFirstToken) {
  // Two one-step trajectories; gae with lam = gamma = 1 gives A = R - V(s_0).
  std::vector<Trajectory> trajs = {one_step({5, 6}, {8, 9}, 1.0f, "g"), one_step({5, 7}, {8}, 0.0f, "g")};
  std::vector<PackedRow> rows = pack_trajectories(trajs, true);  // [5,6,8,9] and [5,7,8]
  rows[0].value = {7.0f, 7.0f, 0.25f, 99.0f};  // only the first action token's value counts
  rows[1].value = {7.0f, 7.0f, 0.5f};
  AlgorithmOptions a;
  a.adv_estimator = "gae";
  AdvantageResult r = estimate_advantages(trajs, rows, a, AdvantageInputs{});
  EXPECT_NEAR(rows[0].returns[2], 1.0, 1e-6);
  EXPECT_NEAR(rows[0].returns[3], 1.0, 1e-6);
  EXPECT_NEAR(rows[1].returns[2], 0.0, 1e-6);
  EXPECT_NEAR(r.metrics.at("critic/values/mean"), (0.25 + 0.25 + 0.5) / 3, 1e-6);
  // Without values the critic estimators refuse.
  rows[1].value.clear();
  EXPECT_THROW(estimate_advantages(trajs, rows, a, AdvantageInputs{}), Error);
}

// The estimator reads its inputs from the rows and writes each step's outputs into the
// rows' columns in place: with a merged two-step row, a plain row and a step without
// response tokens, the columns equal algo's own compute() on the same batch built by
// hand, scattered with scatter_step_tokens (the same arithmetic, so exactly equal).
TEST(EstimateAdvantagesTest, WritesEachStepsSpanOfTheRowsInPlace) {
  Trajectory two = one_step({5, 6}, {8, 9}, 1.0f, "g");
  Step second;
  second.prompt_ids = {5, 6, 8, 9, 3};  // extends the first step: one merged row
  second.response_ids = {10, 11, 12};
  second.response_logprobs.assign(3, 0.0f);
  second.reward = 0.5f;
  two.steps.push_back(second);
  Step empty;  // no response tokens: no span, not in the estimator's batch
  empty.prompt_ids = {5, 6, 8, 9, 3, 10, 11, 12, 4};
  two.steps.push_back(empty);
  std::vector<Trajectory> trajs = {two, one_step({5, 7}, {8}, 0.0f, "g")};
  std::vector<PackedRow> rows = pack_trajectories(trajs, true);
  ASSERT_EQ(rows.size(), 2u);
  for (PackedRow& row : rows) {
    row.value.resize(row.tokens.size());
    for (size_t t = 0; t < row.tokens.size(); ++t) row.value[t] = 0.1f * static_cast<float>(t) - 0.3f;
  }
  const StepSpans spans = step_spans(rows, trajs);
  EXPECT_EQ(spans[0][0].row, 0);
  EXPECT_EQ(spans[0][0].begin, 2);
  EXPECT_EQ(spans[0][1].begin, 5);
  EXPECT_EQ(spans[0][1].n, 3);
  EXPECT_EQ(spans[0][2].n, 0);
  AlgorithmOptions a;
  a.adv_estimator = "token_gae";
  a.estimator.lam = 0.9;
  estimate_advantages(trajs, rows, a, AdvantageInputs{});

  // The same batch by hand, through algo's nested interface.
  std::vector<std::vector<float>> values = {{0.1f * 2 - 0.3f, 0.1f * 3 - 0.3f},
                                            {0.1f * 5 - 0.3f, 0.1f * 6 - 0.3f, 0.1f * 7 - 0.3f},
                                            {0.1f * 2 - 0.3f}};
  std::vector<algo::TrajectoryTokens> batch(2);
  batch[0].group = batch[1].group = "g";
  batch[0].outcome_reward = 1.0f;
  algo::StepTokens s0, s1, s2;
  s0.n_tokens = 2, s0.token_values = values[0];
  s1.n_tokens = 3, s1.token_values = values[1], s1.reward = 0.5f;
  s2.n_tokens = 1, s2.token_values = values[2];
  batch[0].steps = {s0, s1};
  batch[1].steps = {s2};
  const algo::AdvantageOutput want = algo::make_estimator("token_gae")->compute(batch, a.estimator);
  StepTokenValues adv = {{want.advantages[0][0], want.advantages[0][1], {}}, {want.advantages[1][0]}};
  StepTokenValues ret = {{want.returns[0][0], want.returns[0][1], {}}, {want.returns[1][0]}};
  std::vector<PackedRow> expect = rows;
  scatter_step_tokens(expect, adv, &PackedRow::advantage);
  scatter_step_tokens(expect, ret, &PackedRow::returns);
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r].advantage, expect[r].advantage) << "row " << r;
    EXPECT_EQ(rows[r].returns, expect[r].returns) << "row " << r;
  }
}

// Every estimator option is a config key of the algorithm section and reaches the
// estimator (they were dropped by a hand mapping before): with whitening off, gae's
// advantages are the raw R - V; with it on (the default) they are whitened.
TEST(EstimateAdvantagesTest, EstimatorOptionsAreConfigKeysThatReachTheEstimator) {
  json tree = default_train_tree();
  for (const char* o : {"algorithm.adv_estimator=gae", "algorithm.whiten_advantages=false", "algorithm.eps=0.001",
                        "algorithm.turn_norm_by_std=true", "algorithm.lam=0.9"})
    apply_override(tree, o);
  const TrainConfig cfg = load_train_config(tree);
  EXPECT_FALSE(cfg.algorithm.estimator.whiten_advantages);
  EXPECT_DOUBLE_EQ(cfg.algorithm.estimator.eps, 0.001);
  EXPECT_TRUE(cfg.algorithm.estimator.turn_norm_by_std);
  EXPECT_DOUBLE_EQ(cfg.algorithm.estimator.lam, 0.9);
  std::vector<Trajectory> trajs = {one_step({5, 6}, {8, 9}, 1.0f, "g"), one_step({5, 7}, {8}, 0.0f, "g")};
  std::vector<PackedRow> rows = pack_trajectories(trajs, true);  // [5,6,8,9] and [5,7,8]
  rows[0].value = {0.0f, 0.0f, 0.25f, 0.0f};
  rows[1].value = {0.0f, 0.0f, 0.5f};
  estimate_advantages(trajs, rows, cfg.algorithm, AdvantageInputs{});
  EXPECT_NEAR(rows[0].advantage[2], 1.0 - 0.25, 1e-6);  // one step: A = r - V, no whitening
  EXPECT_NEAR(rows[1].advantage[2], 0.0 - 0.5, 1e-6);
  AlgorithmOptions whitened = cfg.algorithm;
  whitened.estimator.whiten_advantages = true;
  estimate_advantages(trajs, rows, whitened, AdvantageInputs{});
  double sum = 0;
  for (const PackedRow& row : rows)
    for (float x : row.advantage) sum += x;
  EXPECT_NEAR(sum, 0.0, 1e-5);  // whitened over the batch's 3 action tokens
  EXPECT_THROW(apply_override(tree, "algorithm.whiten_advantage=false"), Error);
}

}  // namespace
}  // namespace agentr1::train
