// Packing and the learner: merged (prefix-shared) rows give the same log-probs as
// per-step rows; updates move log-probs the way the advantages say; non-finite
// updates are skipped and counted.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "agentr1/core/error.h"
#include "agentr1/train/learner/actor.h"
#include "agentr1/train/learner/batch.h"

namespace agentr1::train {
namespace {

model::ModelConfig tiny_config() {
  model::ModelConfig c;
  c.arch = model::Arch::kQwen3;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.qk_norm = true;
  c.tie_word_embeddings = true;
  c.max_position_embeddings = 256;
  c.rope_theta = 10000.0;
  return c;
}

// A two-turn append-only trajectory: step 2's prompt = step 1 prompt + response + feedback.
Trajectory two_turn(int seed) {
  Trajectory t;
  t.uid = "t" + std::to_string(seed);
  t.group = "g";
  Step a;
  a.prompt_ids = {1, 2, 3, static_cast<TokenId>(4 + seed)};
  a.response_ids = {10, 11, 12};
  a.response_logprobs = {-1.f, -2.f, -3.f};
  Step b;
  b.prompt_ids = a.prompt_ids;
  b.prompt_ids.insert(b.prompt_ids.end(), a.response_ids.begin(), a.response_ids.end());
  b.prompt_ids.insert(b.prompt_ids.end(), {20, 21});
  b.response_ids = {30, 31};
  b.response_logprobs = {-4.f, -5.f};
  t.steps = {a, b};
  return t;
}

TEST(PackTest, MergesAppendOnlyStepsIntoOneRow) {
  std::vector<Trajectory> trajs = {two_turn(0)};
  auto merged = pack_trajectories(trajs, {0.5f}, true);
  auto split = pack_trajectories(trajs, {0.5f}, false);
  ASSERT_EQ(merged.size(), 1u);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(merged[0].tokens, (TokenIds{1, 2, 3, 4, 10, 11, 12, 20, 21, 30, 31}));
  EXPECT_EQ(merged[0].num_action_tokens(), 5);
  EXPECT_EQ(merged[0].rollout_logprob[9], -4.f);
  EXPECT_EQ(merged[0].step_of[10], 1);
  EXPECT_EQ(merged[0].step_of[7], -1);
  // A step whose prompt does not extend the previous one starts a new row.
  trajs[0].steps[1].prompt_ids[0] = 9;
  EXPECT_EQ(pack_trajectories(trajs, {0.5f}, true).size(), 2u);
}

TEST(PackTest, MiniBatchesKeepATrajectorysRowsTogether) {
  // Unmerged: each trajectory gives 2 rows; rows of trajectories 0,1,2 interleaved.
  auto rows = pack_trajectories({two_turn(0), two_turn(1), two_turn(2)}, {1.f, 2.f, 3.f}, false);
  std::vector<PackedRow> shuffled = {rows[2], rows[0], rows[4], rows[3], rows[1], rows[5]};
  auto minis = trajectory_mini_batches(shuffled, 2);  // indices into shuffled
  ASSERT_EQ(minis.size(), 2u);
  // Trajectories 1 and 0 (first-appearance order), each trajectory's rows in row order.
  EXPECT_EQ(minis[0], (std::vector<int64_t>{0, 3, 1, 4}));
  EXPECT_EQ(minis[1], (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(trajectory_mini_batches(shuffled, 0).size(), 1u);
  EXPECT_EQ(trajectory_mini_batches(shuffled, 0)[0].size(), 6u);
}

// Micro-batches of a subset are indices into the whole row list, and the same
// micro-batches as packing a copy of the subset would give.
TEST(PackTest, MicroBatchesOfASubsetAreIndicesIntoTheRows) {
  auto rows = pack_trajectories({two_turn(0), two_turn(1), two_turn(2)}, {1.f, 2.f, 3.f}, false);
  const std::vector<int64_t> subset = {5, 1, 2, 4};
  std::vector<PackedRow> copy;
  for (int64_t r : subset) copy.push_back(rows[static_cast<size_t>(r)]);
  for (bool by_prefix : {false, true}) {
    const auto got = make_micro_batches(rows, subset, 3, 0, by_prefix);
    const auto want = make_micro_batches(copy, 3, 0, by_prefix);
    ASSERT_EQ(got.size(), want.size());
    for (size_t m = 0; m < got.size(); ++m) {
      ASSERT_EQ(got[m].size(), want[m].size());
      for (size_t i = 0; i < got[m].size(); ++i)
        EXPECT_EQ(got[m][i], subset[static_cast<size_t>(want[m][i])]) << m << " " << i;
    }
  }
}

TEST(PackTest, CollateShiftsTargets) {
  auto rows = pack_trajectories({two_turn(0)}, {2.0f}, false);
  TrainBatch b = collate(rows, {0, 1});
  // Row 0: prompt 4 tokens, response 3 -> targets 1..6, actions at target idx 3,4,5.
  EXPECT_EQ(b.input_ids.size(1), 11);
  EXPECT_EQ(b.action_mask[0].sum().item<float>(), 3.f);
  EXPECT_EQ(b.action_mask[0][3].item<float>(), 1.f);
  EXPECT_EQ(b.action_mask[0][2].item<float>(), 0.f);
  EXPECT_EQ(b.targets[0][3].item<int64_t>(), 10);
  EXPECT_EQ(b.rollout_logprobs[0][4].item<float>(), -2.f);
  EXPECT_EQ(b.advantages[0][5].item<float>(), 2.f);
  EXPECT_EQ(b.segment_ids[0][7].item<int64_t>(), -1);  // padding of the shorter row
  EXPECT_EQ(b.num_action_tokens, 5);
}

TEST(PackTest, MergedRowLogprobsEqualPerStepRows) {
  auto model = model::init_random(tiny_config(), 7);
  ActorOptions o;
  o.loop.micro_batch_size = 3;
  Actor actor(model, o);
  std::vector<Trajectory> trajs = {two_turn(0), two_turn(1), two_turn(2)};
  auto merged = pack_trajectories(trajs, {1.f, 1.f, 1.f}, true);
  auto split = pack_trajectories(trajs, {1.f, 1.f, 1.f}, false);
  actor.fill_logprobs(merged, &PackedRow::old_logprob);
  actor.fill_logprobs(split, &PackedRow::old_logprob);
  // Action log-probs of each trajectory, in order, must agree between the layouts.
  auto action_lps = [](const std::vector<PackedRow>& rows, int64_t traj) {
    std::vector<float> out;
    for (const auto& r : rows)
      if (r.trajectory == traj)
        for (size_t t = 0; t < r.tokens.size(); ++t)
          if (r.action[t]) out.push_back(r.old_logprob[t]);
    return out;
  };
  double max_diff = 0;
  int compared = 0;
  for (int64_t k = 0; k < 3; ++k) {
    auto a = action_lps(merged, k), b = action_lps(split, k);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i, ++compared)
      max_diff = std::max<double>(max_diff, std::abs(a[i] - b[i]));
  }
  EXPECT_EQ(compared, 15);
  EXPECT_LT(max_diff, 1e-5);
}

// A trajectory whose prompt starts with `common` tokens every such trajectory shares
// (a system prompt), then its own question tokens.
Trajectory with_system_prompt(int seed, int common) {
  Trajectory t = two_turn(seed);
  TokenIds sys;
  for (int i = 0; i < common; ++i) sys.push_back(static_cast<TokenId>(40 + (i * 7) % 23));
  for (Step& st : t.steps) st.prompt_ids.insert(st.prompt_ids.begin(), sys.begin(), sys.end());
  return t;
}

TEST(PackTest, SharedPrefixStopsBeforeTheFirstScoredLogit) {
  // Rows: 12 common tokens, then 1 2 3 (4+seed), then the response at index 16.
  auto rows = pack_trajectories({with_system_prompt(0, 12), with_system_prompt(1, 12)}, {1.f, 1.f}, true);
  // Common prefix is 15 tokens (12 + "1 2 3"); the first response token is at 16, so
  // its predecessor (15) must stay out: P = 15 exactly.
  EXPECT_EQ(shared_prefix_length(rows, {0, 1}), 15);
  // Identical rows: the cap is the first response token - 1.
  EXPECT_EQ(shared_prefix_length(rows, {0, 0}), 15);
  rows[1].tokens[5] = 63;  // diverge inside the system prompt
  EXPECT_EQ(shared_prefix_length(rows, {0, 1}), 5);
  // A response token right after the common part: P stops one before it.
  auto r2 = pack_trajectories({with_system_prompt(0, 12)}, {1.f}, true);
  r2[0].action[10] = 1;
  EXPECT_EQ(shared_prefix_length(r2, {0}), 9);

  rows = pack_trajectories({with_system_prompt(0, 12), with_system_prompt(1, 12)}, {2.f, 3.f}, true);
  TrainBatch full = collate(rows, {0, 1}, 0), shared = collate(rows, {0, 1}, 8);
  ASSERT_EQ(full.prefix_len, 0);
  ASSERT_EQ(shared.prefix_len, 15);
  EXPECT_TRUE(shared.prefix_ids.equal(full.input_ids[0].narrow(0, 0, 15)));
  EXPECT_EQ(shared.positions[1][0].item<int64_t>(), 15);
  EXPECT_EQ(shared.num_action_tokens, full.num_action_tokens);
  // Column c of the shared batch is column c + P of the full one.
  const int64_t cols = shared.targets.size(1);
  for (auto name : {"targets", "action_mask", "advantages", "rollout_logprobs"}) {
    auto get = [&](const TrainBatch& b) {
      std::string n = name;
      return n == "targets" ? b.targets.to(at::kFloat)
             : n == "action_mask" ? b.action_mask
             : n == "advantages" ? b.advantages : b.rollout_logprobs;
    };
    EXPECT_TRUE(get(shared).equal(get(full).narrow(1, 15, cols))) << name;
  }
  // min_shared_prefix above the common length: no sharing.
  EXPECT_EQ(collate(rows, {0, 1}, 16).prefix_len, 0);
  EXPECT_EQ(collate(rows, {0}, 8).prefix_len, 0);  // one row: nothing to share
}

TEST(ActorTest, SharedPrefixGivesTheSameLogprobsAndUpdate) {
  std::vector<Trajectory> trajs = {with_system_prompt(0, 20), with_system_prompt(1, 20),
                                   with_system_prompt(2, 20)};
  std::vector<std::vector<PackedRow>> rows(2);
  std::vector<model::Transformer> models;
  for (int k = 0; k < 2; ++k) {
    auto model = model::init_random(tiny_config(), 5);
    ActorOptions o;
    o.optim.lr = 1e-2;
    o.loop.micro_batch_size = 3;
    o.loop.min_shared_prefix = k == 0 ? 0 : 8;
    Actor actor(model, o);
    rows[k] = pack_trajectories(trajs, {1.f, -0.5f, 0.25f}, true);
    actor.fill_logprobs(rows[k], &PackedRow::old_logprob);
    EXPECT_EQ(actor.update(rows[k])["actor/updates"], 1.0);
    models.push_back(model);
  }
  double lp_diff = 0;
  int scored = 0;
  for (size_t r = 0; r < rows[0].size(); ++r)
    for (size_t t = 0; t < rows[0][r].tokens.size(); ++t)
      if (rows[0][r].action[t]) {
        lp_diff = std::max<double>(lp_diff, std::abs(rows[0][r].old_logprob[t] - rows[1][r].old_logprob[t]));
        ++scored;
      }
  EXPECT_EQ(scored, 15);
  EXPECT_LT(lp_diff, 1e-5);
  auto p0 = models[0]->named_parameters(), p1 = models[1]->named_parameters();
  double wdiff = 0, moved = 0;
  auto init = model::init_random(tiny_config(), 5)->named_parameters();
  for (const auto& kv : p0) {
    wdiff = std::max(wdiff, (kv.value() - p1[kv.key()]).abs().max().item<double>());
    moved = std::max(moved, (kv.value() - init[kv.key()]).abs().max().item<double>());
  }
  EXPECT_GT(moved, 1e-3);   // the update did something
  EXPECT_LT(wdiff, 1e-5);   // and the same thing with the shared prefix
}

// With a sampling temperature the learner scores log_softmax(logits / T), the
// distribution the engine sampled from (checked against a direct computation).
TEST(ActorTest, LogprobsUseTheSamplingTemperature) {
  auto model = model::init_random(tiny_config(), 4);
  ActorOptions o;
  o.temperature = 0.5;
  Actor actor(model, o);
  auto rows = pack_trajectories({two_turn(0)}, {1.f}, true);
  actor.fill_logprobs(rows, &PackedRow::old_logprob);
  at::NoGradGuard ng;
  const TokenIds& toks = rows[0].tokens;
  at::Tensor ids = at::tensor(std::vector<int64_t>(toks.begin(), toks.end())).unsqueeze(0);
  at::Tensor logp = at::log_softmax(model->forward(ids)[0] / 0.5, -1);
  double max_diff = 0, vs_t1 = 0;
  for (size_t t = 1; t < toks.size(); ++t) {
    const double want = logp[t - 1][toks[t]].item<double>();
    max_diff = std::max(max_diff, std::abs(rows[0].old_logprob[t] - want));
    vs_t1 = std::max(vs_t1, std::abs(want - at::log_softmax(model->forward(ids)[0], -1)[t - 1][toks[t]].item<double>()));
  }
  EXPECT_LT(max_diff, 1e-5);
  EXPECT_GT(vs_t1, 1e-3);  // T matters here, so the check can fail
  ActorOptions bad;
  bad.temperature = 0;
  EXPECT_THROW(bad.resolve(), Error);
}

TEST(ActorTest, PositiveAdvantageRaisesLogprob) {
  auto model = model::init_random(tiny_config(), 3);
  ActorOptions o;
  o.optim.lr = 1e-2;
  Actor actor(model, o);
  std::vector<Trajectory> trajs = {two_turn(0), two_turn(1)};
  auto rows = pack_trajectories(trajs, {1.f, -1.f}, true);
  actor.fill_logprobs(rows, &PackedRow::old_logprob);
  auto before = rows;
  auto m = actor.update(rows);
  EXPECT_EQ(m["actor/updates"], 1.0);
  EXPECT_NEAR(m["actor/ppo_kl"], 0.0, 1e-6);  // first step: pi == pi_old
  actor.fill_logprobs(rows, &PackedRow::old_logprob);
  double up = 0, down = 0;
  for (size_t t = 0; t < rows[0].tokens.size(); ++t)
    if (rows[0].action[t]) up += rows[0].old_logprob[t] - before[0].old_logprob[t];
  for (size_t t = 0; t < rows[1].tokens.size(); ++t)
    if (rows[1].action[t]) down += rows[1].old_logprob[t] - before[1].old_logprob[t];
  EXPECT_GT(up, 0.0);
  EXPECT_LT(down, 0.0);
}

TEST(ActorTest, PolicyLossIsSelectable) {
  for (const char* name : {"vanilla", "gspo", "reinforce"}) {
    auto model = model::init_random(tiny_config(), 3);
    ActorOptions o;
    o.optim.lr = 1e-2;
    o.policy_loss = name;
    Actor actor(model, o);
    auto rows = pack_trajectories({two_turn(0)}, {1.f}, true);
    actor.fill_logprobs(rows, &PackedRow::old_logprob);
    auto before = rows;
    EXPECT_EQ(actor.update(rows)["actor/updates"], 1.0) << name;
    actor.fill_logprobs(rows, &PackedRow::old_logprob);
    double up = 0;
    for (size_t t = 0; t < rows[0].tokens.size(); ++t)
      if (rows[0].action[t]) up += rows[0].old_logprob[t] - before[0].old_logprob[t];
    EXPECT_GT(up, 0.0) << name;  // positive advantage raises the sampled tokens
  }
  ActorOptions bad;
  bad.policy_loss = "ppo2";
  EXPECT_THROW(bad.resolve(), Error);
}

TEST(ActorTest, NonFiniteUpdatesAreSkippedThenStop) {
  auto model = model::init_random(tiny_config(), 3);
  ActorOptions o;
  o.loop.max_consecutive_skips = 2;
  Actor actor(model, o);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto rows = pack_trajectories({two_turn(0)}, {nan}, true);
  actor.fill_logprobs(rows, &PackedRow::old_logprob);
  auto params_before = model->parameters()[0].clone();
  auto m = actor.update(rows);
  EXPECT_EQ(m["actor/updates"], 0.0);
  EXPECT_EQ(m["actor/skipped_updates"], 1.0);
  EXPECT_TRUE(model->parameters()[0].equal(params_before));
  EXPECT_THROW(actor.update(rows), Error);
}

}  // namespace
}  // namespace agentr1::train
