// The learner core: micro-batching never changes an update (loss and every parameter
// gradient, for each loss_agg_mode, actor and critic), the guarded optimiser step, and
// reference scoring against a direct per-row computation.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <mutex>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/model/model_test_util.h"
#include "agentr1/train/learner/actor.h"
#include "agentr1/train/advantages.h"
#include "agentr1/train/learner/critic.h"
#include "agentr1/train/distributed/distributed.h"
#include "agentr1/train/learner/learner.h"
#include "agentr1/train/learner/optimizer.h"
#include "agentr1/train/learner/scoring.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

using model::testing::spicy_model;
using model::testing::tiny_config;
using testing::run_ranks;

TokenIds range_ids(int64_t from, int64_t n) {
  TokenIds t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((from + 13 * i) % 90 + 3));
  return t;
}

Step make_step(const TokenIds& prompt, const TokenIds& response) {
  Step s;
  s.prompt_ids = prompt;
  s.response_ids = response;
  s.response_logprobs.assign(response.size(), -1.0f);
  return s;
}

// Five trajectories behind a shared 12-token prefix, of different lengths; trajectory 0
// has two append-only steps (one merged row), trajectory 3 a second step that does not
// extend the first (its own row).
std::vector<Trajectory> make_trajs() {
  const TokenIds sys = range_ids(1, 12);
  std::vector<Trajectory> out(5);
  for (int i = 0; i < 5; ++i) {
    out[i].uid = "t" + std::to_string(i);
    out[i].group = "g" + std::to_string(i / 3);
    TokenIds p = sys;
    const TokenIds q = range_ids(100 + i, 3 + i);
    p.insert(p.end(), q.begin(), q.end());
    out[i].steps.push_back(make_step(p, range_ids(200 + i, 2 + 2 * i)));
  }
  TokenIds p2 = out[0].steps[0].prompt_ids;
  p2.insert(p2.end(), out[0].steps[0].response_ids.begin(), out[0].steps[0].response_ids.end());
  const TokenIds obs = range_ids(300, 4);
  p2.insert(p2.end(), obs.begin(), obs.end());
  out[0].steps.push_back(make_step(p2, range_ids(400, 5)));
  out[3].steps.push_back(make_step(range_ids(500, 9), range_ids(600, 3)));
  return out;
}

// Packed rows with pseudo-random advantages, and old / ref log-probs near the model's
// (so ratios differ from 1 and some tokens clip).
std::vector<PackedRow> make_rows(model::Transformer& m, uint64_t seed) {
  const auto trajs = make_trajs();
  StepTokenValues adv(trajs.size());
  uint64_t x = seed;
  auto next = [&] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((x >> 33) % 2001) / 1000.0f - 1.0f;  // [-1, 1]
  };
  for (size_t i = 0; i < trajs.size(); ++i)
    for (const Step& st : trajs[i].steps) {
      adv[i].emplace_back();
      for (size_t k = 0; k < st.response_ids.size(); ++k) adv[i].back().push_back(next());
    }
  auto rows = pack_trajectories(trajs, /*merge_prefix_steps=*/true);
  scatter_step_tokens(rows, adv, &PackedRow::advantage);
  ScoringOptions so;
  so.min_shared_prefix = 0;
  score_logprobs(m, rows, &PackedRow::old_logprob, so);
  for (auto& r : rows) {
    r.ref_logprob = r.old_logprob;
    for (size_t t = 0; t < r.tokens.size(); ++t) {
      if (!r.action[t]) continue;
      r.old_logprob[t] += 0.4f * next();
      r.ref_logprob[t] += 0.3f * next();
    }
  }
  return rows;
}

// Pseudo-random critic targets in [-1, 1] and old values at half of them.
void fill_returns(std::vector<PackedRow>& rows, uint64_t x) {
  for (auto& r : rows) {
    r.value.assign(r.tokens.size(), 0.0f);
    r.returns.assign(r.tokens.size(), 0.0f);
    for (size_t t = 0; t < r.tokens.size(); ++t) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      r.returns[t] = static_cast<float>((x >> 40) % 1000) / 500.0f - 1.0f;
      r.value[t] = 0.5f * r.returns[t];
    }
  }
}

// Captures each parameter's gradient at the optimiser step (before clipping).
class GradCapture : public GradientReducer {
 public:
  void reduce(std::vector<at::Tensor>& params) override {
    grads.clear();
    for (auto& p : params) grads.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
  }
  std::vector<at::Tensor> grads;
};

double max_rel_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, a[i].abs().max().item<double>());
    diff = std::max(diff, (a[i] - b[i]).abs().max().item<double>());
  }
  EXPECT_GT(scale, 0.0) << "the gradients must not vanish for the comparison to mean anything";
  return diff / scale;
}

model::Transformer copy_of(model::Transformer& m) {
  model::Transformer c = spicy_model(m->config(), 999);
  torch::NoGradGuard ng;
  auto dst = c->named_parameters();
  for (const auto& kv : m->named_parameters()) dst[kv.key()].copy_(kv.value());
  return c;
}

// An actor whose gradient has every term (clipped surrogate, KL loss, entropy) and whose
// step barely moves the weights; no clipping of the norm.
ActorOptions gradient_test_options(const char* loss_agg_mode) {
  ActorOptions o;
  o.loss_agg_mode = loss_agg_mode;
  o.optim.lr = 1e-6;
  o.optim.grad_clip = 0;
  o.use_kl_loss = true;
  o.kl_loss_coef = 0.1;
  o.entropy_coeff = 0.01;
  return o;
}

const char* kAggModes[] = {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"};

TEST(MicroBatchingTest, ActorMicroBatchOfOneEqualsTheWholeMiniBatch) {
  for (const char* mode : kAggModes) {
    model::Transformer base = spicy_model(tiny_config(model::Arch::kQwen3), 21);
    const auto rows = make_rows(base, 5);
    ASSERT_EQ(rows.size(), 6u);
    std::vector<at::Tensor> grads[2];
    double loss[2] = {0, 0}, kl[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      ActorOptions o = gradient_test_options(mode);
      o.temperature = 0.8;
      o.loop.micro_batch_size = k == 0 ? 1 : 64;
      o.loop.min_shared_prefix = k == 0 ? 0 : 4;  // the whole batch also shares its prefix
      Actor actor(copy_of(base), o);
      GradCapture cap;
      actor.optimizer().set_gradient_reducer(&cap);
      Metrics m = actor.update(rows);
      ASSERT_EQ(m["actor/updates"], 1.0) << mode;
      loss[k] = m["actor/loss"];
      kl[k] = m["actor/kl_loss"];
      grads[k] = cap.grads;
    }
    EXPECT_NEAR(loss[0], loss[1], 1e-5 * std::max(1.0, std::abs(loss[1]))) << mode;
    if (std::string(mode) != "seq-mean-token-sum-norm")  // its metrics are token-share averages
      EXPECT_NEAR(kl[0], kl[1], 1e-5) << mode;
    EXPECT_LT(max_rel_diff(grads[0], grads[1]), 2e-5) << mode;
  }
}

TEST(MicroBatchingTest, CriticMicroBatchOfOneEqualsTheWholeMiniBatch) {
  for (const char* mode : kAggModes) {
    for (bool step_level : {false, true}) {
      model::Transformer base = spicy_model(tiny_config(model::Arch::kQwen3), 22);
      auto rows = make_rows(base, 6);
      fill_returns(rows, 17);
      set_value_mask(rows, step_level);
      std::vector<at::Tensor> grads[2];
      double loss[2] = {0, 0};
      for (int k = 0; k < 2; ++k) {
        CriticOptions o;
        o.loss_agg_mode = mode;
        o.optim.grad_clip = 0;
        o.cliprange_value = 0.2;
        o.loop.micro_batch_size = k == 0 ? 1 : 64;
        o.loop.min_shared_prefix = k == 0 ? 0 : 4;
        ValueModel vm(copy_of(base));
        {
          torch::NoGradGuard ng;
          vm->head()->weight.fill_(0.05);  // non-zero head: the body gets gradients too
        }
        Critic critic(vm, o);
        GradCapture cap;
        critic.optimizer().set_gradient_reducer(&cap);
        Metrics m = critic.update(rows);
        ASSERT_EQ(m["critic/updates"], 1.0) << mode;
        loss[k] = m["critic/loss"];
        grads[k] = cap.grads;
      }
      EXPECT_GT(loss[1], 0.0);
      EXPECT_NEAR(loss[0], loss[1], 1e-5 * std::max(1.0, loss[1])) << mode << " step_level " << step_level;
      EXPECT_LT(max_rel_diff(grads[0], grads[1]), 2e-5) << mode << " step_level " << step_level;
    }
  }
}

TEST(MicroBatchingTest, MiniBatchesSplitTrajectoriesIntoSteps) {
  model::Transformer base = spicy_model(tiny_config(model::Arch::kQwen3), 23);
  const auto rows = make_rows(base, 7);
  ActorOptions o;
  o.loop.ppo_mini_batch_size = 2;  // 5 trajectories -> 3 optimiser steps
  o.loop.ppo_epochs = 2;
  Actor actor(base, o);
  Metrics m = actor.update(rows);
  EXPECT_EQ(m["actor/updates"], 6.0);
  EXPECT_EQ(actor.optimizer().steps(), 6);
}

TEST(OptimizerTest, GuardedStepClipsSkipsAndWarmsUp) {
  at::Tensor w = at::zeros({3}, at::kFloat).set_requires_grad(true);
  OptimOptions oo;
  oo.lr = 0.1;
  oo.warmup_steps = 3;
  oo.grad_clip = 1.0;
  Optimizer opt({w}, oo, "actor", /*max_consecutive_skips=*/2);
  // Finite gradient of norm 5: clipped to 1, the pre-clip norm reported, lr 0.1 * 1/4.
  w.mutable_grad() = at::tensor({3.0f, 4.0f, 0.0f});
  Metrics m;
  ASSERT_TRUE(opt.step(m));
  EXPECT_NEAR(m["actor/grad_norm"], 5.0, 1e-6);
  EXPECT_NEAR(m["actor/lr"], 0.1 / 4, 1e-12);
  // AdamW's first step moves each coordinate by lr * g / (|g| + eps): -lr for g > 0.
  EXPECT_NEAR(w[0].item<double>(), -0.025, 1e-6);
  EXPECT_NEAR(w[2].item<double>(), 0.0, 1e-9);
  // Non-finite gradient: skipped, nothing recorded, weights unchanged.
  const at::Tensor before = w.detach().clone();
  w.mutable_grad() = at::tensor({NAN, 1.0f, 1.0f});
  Metrics m2;
  EXPECT_FALSE(opt.step(m2));
  EXPECT_EQ(m2.count("actor/grad_norm"), 0u);
  EXPECT_TRUE(w.detach().equal(before));
  EXPECT_EQ(opt.skipped(), 1);
  EXPECT_EQ(opt.steps(), 1);
  // The second skip in a row is one too many.
  EXPECT_THROW(opt.skip("non-finite loss"), Error);
}

TEST(OptimizerTest, TheReducerSeesTheGradientsBeforeClipping) {
  at::Tensor w = at::zeros({2}, at::kFloat).set_requires_grad(true);
  OptimOptions oo;
  oo.grad_clip = 0;  // measured, not clipped
  Optimizer opt({w}, oo, "critic", 5);
  struct Double : GradientReducer {
    void reduce(std::vector<at::Tensor>& ps) override {
      for (auto& p : ps) p.mutable_grad().mul_(2.0);
    }
  } twice;
  opt.set_gradient_reducer(&twice);
  w.mutable_grad() = at::tensor({0.3f, 0.4f});
  Metrics m;
  ASSERT_TRUE(opt.step(m));
  EXPECT_NEAR(m["critic/grad_norm"], 1.0, 1e-6);  // |2 * (0.3, 0.4)|
}

// Reference log-probs: the frozen reference scores every row token exactly as a direct
// forward of that row alone at the sampling temperature; no gradient, no change.
TEST(ReferenceScoringTest, MatchesADirectPerRowForward) {
  model::Transformer policy = spicy_model(tiny_config(model::Arch::kQwen3), 31);
  model::Transformer reference = spicy_model(tiny_config(model::Arch::kQwen3), 32);
  for (auto& p : reference->parameters()) p.requires_grad_(false);
  const at::Tensor ref_before = reference->parameters()[0].clone();
  auto rows = make_rows(policy, 8);
  for (auto& r : rows) {
    r.old_logprob.clear();
    r.ref_logprob.clear();
    r.rollout_logprob.assign(r.tokens.size(), 0.0f);
  }
  ActorOptions ao;
  ao.temperature = 0.7;
  ao.use_rollout_logprobs = false;  // score old log-probs too
  ao.loop.micro_batch_size = 4;  // two micro-batches, the first with a shared prefix
  ao.loop.min_shared_prefix = 4;
  Learner learner(policy, reference, nullptr, ao, at::Device(at::kCPU));
  ASSERT_TRUE(learner.has_reference());
  Metrics m = learner.score(rows);
  EXPECT_GT(m["batch/action_tokens"], 0.0);
  double max_ref = 0, max_old = 0;
  torch::NoGradGuard ng;
  for (const auto& r : rows) {
    const int64_t n = static_cast<int64_t>(r.tokens.size());
    at::Tensor ids = at::empty({1, n}, at::kLong);
    for (int64_t t = 0; t < n; ++t) ids[0][t] = r.tokens[static_cast<size_t>(t)];
    for (int which = 0; which < 2; ++which) {
      model::Transformer& mdl = which == 0 ? reference : policy;
      const at::Tensor logp = at::log_softmax(mdl->forward(ids)[0] / 0.7, /*dim=*/-1);  // [n,V]
      const std::vector<float>& got = which == 0 ? r.ref_logprob : r.old_logprob;
      ASSERT_EQ(static_cast<int64_t>(got.size()), n);
      for (int64_t t = 1; t < n; ++t) {
        if (!r.action[static_cast<size_t>(t)]) continue;
        const double want = logp[t - 1][r.tokens[static_cast<size_t>(t)]].item<double>();
        double& mx = which == 0 ? max_ref : max_old;
        mx = std::max(mx, std::abs(want - got[static_cast<size_t>(t)]));
      }
    }
  }
  EXPECT_LT(max_ref, 1e-5);
  EXPECT_LT(max_old, 1e-5);
  EXPECT_TRUE(reference->parameters()[0].equal(ref_before));
  EXPECT_FALSE(reference->parameters()[0].grad().defined());
}

// actor.use_rollout_logprobs: score() takes the engine's behaviour log-probs as the old
// ones without a forward pass, and the update's first micro-batch reports how far the
// policy's own log-probs are from them (the same weights: here a planted difference,
// 0.01 x (row + 1) on each row's first action token, against a direct forward).
TEST(RolloutLogprobBypassTest, OldAreTheBehaviourLogprobsAndTheUpdateMeasuresTheAgreement) {
  model::Transformer policy = spicy_model(tiny_config(model::Arch::kLlama), 41);
  auto rows = make_rows(policy, 3);
  double planted = 0;
  {
    torch::NoGradGuard ng;
    for (size_t i = 0; i < rows.size(); ++i) {
      PackedRow& r = rows[i];
      const int64_t n = static_cast<int64_t>(r.tokens.size());
      at::Tensor ids = at::empty({1, n}, at::kLong);
      for (int64_t t = 0; t < n; ++t) ids[0][t] = r.tokens[static_cast<size_t>(t)];
      const at::Tensor logp = at::log_softmax(policy->forward(ids)[0] / 0.7, -1);
      r.rollout_logprob.assign(r.tokens.size(), 0.0f);
      bool first = true;
      for (int64_t t = 1; t < n; ++t) {
        if (!r.action[static_cast<size_t>(t)]) continue;
        const float off = first ? 0.01f * static_cast<float>(i + 1) : 0.0f;
        r.rollout_logprob[static_cast<size_t>(t)] = logp[t - 1][r.tokens[static_cast<size_t>(t)]].item<float>() + off;
        planted = std::max(planted, static_cast<double>(off));
        first = false;
      }
      r.old_logprob.clear();
    }
  }
  ActorOptions ao;
  ao.temperature = 0.7;
  ao.loop.micro_batch_size = 64;  // every row in the first micro-batch
  ASSERT_TRUE(ao.use_rollout_logprobs);  // the default
  Learner learner(policy, nullptr, nullptr, ao, at::Device(at::kCPU));
  Metrics m = learner.score(rows);
  EXPECT_EQ(m.count("rollout/logprob_max_diff"), 0u);
  for (const auto& r : rows) EXPECT_EQ(r.old_logprob, r.rollout_logprob);
  Metrics u = learner.update(rows, /*update_actor=*/true);
  ASSERT_EQ(u.count("rollout/logprob_max_diff"), 1u);
  EXPECT_NEAR(u["rollout/logprob_max_diff"], planted, 1e-4);
  EXPECT_GT(planted, 0.04);
}


// Off-policy correction (actor.off_policy): with behaviour log-probs from another
// ("stale") model, score() scores pi_old itself, and its importance-weight statistics and
// the policy loss equal a direct computation from the stored log-probs: at the update's
// first micro-batch pi_theta = pi_old, so every ratio is 1 and the token-mean loss is
// -mean(A x min(pi_old / pi_behav, cap)).
TEST(OffPolicyLearnerTest, WeightsAndLossFromTheStoredBehaviourLogprobs) {
  model::Transformer policy = spicy_model(tiny_config(model::Arch::kLlama), 41);
  model::Transformer stale = spicy_model(tiny_config(model::Arch::kLlama), 42);
  auto rows = make_rows(policy, 3);
  std::vector<double> w_direct, adv_direct;
  const double cap = 1.5;
  {
    torch::NoGradGuard ng;
    for (PackedRow& r : rows) {
      const int64_t n = static_cast<int64_t>(r.tokens.size());
      at::Tensor ids = at::empty({1, n}, at::kLong);
      for (int64_t t = 0; t < n; ++t) ids[0][t] = r.tokens[static_cast<size_t>(t)];
      const at::Tensor behav = at::log_softmax(stale->forward(ids)[0], -1);
      const at::Tensor old = at::log_softmax(policy->forward(ids)[0], -1);
      r.rollout_logprob.assign(r.tokens.size(), 0.0f);
      for (int64_t t = 1; t < n; ++t) {
        if (!r.action[static_cast<size_t>(t)]) continue;
        const TokenId tok = r.tokens[static_cast<size_t>(t)];
        r.rollout_logprob[static_cast<size_t>(t)] = behav[t - 1][tok].item<float>();
        w_direct.push_back(std::exp(old[t - 1][tok].item<double>() - behav[t - 1][tok].item<double>()));
        adv_direct.push_back(r.advantage[static_cast<size_t>(t)]);
      }
      r.old_logprob.clear();
    }
  }
  ASSERT_GT(w_direct.size(), 20u);
  double mean = 0, mx = 0, capped = 0, loss = 0;
  for (size_t i = 0; i < w_direct.size(); ++i) {
    mean += w_direct[i] / static_cast<double>(w_direct.size());
    mx = std::max(mx, w_direct[i]);
    capped += w_direct[i] > cap ? 1.0 / static_cast<double>(w_direct.size()) : 0.0;
    loss -= adv_direct[i] * std::min(w_direct[i], cap) / static_cast<double>(w_direct.size());
  }
  ASSERT_GT(capped, 0.0) << "the two models should disagree enough for the cap to act";
  ASSERT_LT(capped, 1.0);
  ActorOptions ao;
  ao.off_policy.method = "tis";
  ao.off_policy.cap = cap;
  ao.loop.micro_batch_size = 64;  // one micro-batch: its loss is the whole batch's
  ASSERT_TRUE(ao.use_rollout_logprobs);  // the default, ignored under a correction
  Learner learner(policy, nullptr, nullptr, ao, at::Device(at::kCPU));
  Metrics m = learner.score(rows);
  for (const auto& r : rows) EXPECT_NE(r.old_logprob, r.rollout_logprob) << "pi_old is scored, not copied";
  EXPECT_NEAR(m.at("off_policy/is_weight_mean"), mean, 1e-4 * mean);
  EXPECT_NEAR(m.at("off_policy/is_weight_max"), mx, 1e-4 * mx);
  EXPECT_NEAR(m.at("off_policy/capped_frac"), capped, 1e-12);
  std::vector<int64_t> idx(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) idx[i] = static_cast<int64_t>(i);
  const TrainBatch b = collate(rows, idx);
  Metrics lm;
  const at::Tensor l = learner.actor().micro_batch_loss(b, MicroBatchScale{}, lm);
  EXPECT_NEAR(l.item<double>(), loss, 1e-5);
  // Decoupled PPO drops the tokens over the cap instead of truncating them.
  ActorOptions dp = ao;
  dp.off_policy.method = "decoupled_ppo";
  Learner dl(policy, nullptr, nullptr, dp, at::Device(at::kCPU));
  double dloss = 0;
  for (size_t i = 0; i < w_direct.size(); ++i)
    dloss -= adv_direct[i] * (w_direct[i] > cap ? 0.0 : w_direct[i]) / static_cast<double>(w_direct.size());
  Metrics dm;
  EXPECT_NEAR(dl.actor().micro_batch_loss(b, MicroBatchScale{}, dm).item<double>(), dloss, 1e-5);
}


// ---- Data parallelism: N ranks' updates sum to the one process's (distributed.h) ----

// Sums the ranks' gradients (the real all-reduce), then keeps a copy.
class ReducedCapture : public GradientReducer {
 public:
  explicit ReducedCapture(ProcessGroup& pg) : reduce_(pg, "test gradients") {}
  void reduce(std::vector<at::Tensor>& params) override {
    reduce_.reduce(params);
    grads.clear();
    // Undefined where no rank has a gradient (the critic body's unused lm_head), as in
    // one process.
    for (auto& p : params) grads.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
  }
  GradientAllReduce reduce_;
  std::vector<at::Tensor> grads;
};

// Every loss aggregation, mini-batches of 2 trajectories (the last one has a single
// trajectory, so one rank forwards nothing in it) and micro-batches of one row: the
// summed gradient of 2 and 3 ranks equals one process's, and so do the loss and the
// metrics. Tolerance 2e-5 relative, the micro-batching test's: the ranks add the same
// terms in another order.
TEST(DataParallelTest, ActorRanksSumToTheWholeBatch) {
  for (const char* mode : kAggModes) {
    model::Transformer base = spicy_model(tiny_config(model::Arch::kQwen3), 31);
    const auto rows = make_rows(base, 9);
    auto options = [&] {
      ActorOptions o = gradient_test_options(mode);
      o.loop.micro_batch_size = 1;
      o.loop.ppo_mini_batch_size = 2;
      return o;
    };
    Actor whole(copy_of(base), options());
    GradCapture cap;
    whole.optimizer().set_gradient_reducer(&cap);
    Metrics want = whole.update(rows);
    ASSERT_EQ(want["actor/updates"], 3.0) << mode;
    for (int world : {2, 3}) {
      std::vector<Metrics> got(world);
      std::vector<std::vector<at::Tensor>> grads(world);
      std::mutex mu;
      run_ranks(world, [&](ProcessGroup& pg) {
        model::Transformer mine{nullptr};
        {
          std::lock_guard<std::mutex> lock(mu);  // copy_of draws from torch's global generator
          mine = copy_of(base);
        }
        Actor actor(mine, options());
        actor.set_process_group(&pg);
        ReducedCapture rc(pg);
        actor.optimizer().set_gradient_reducer(&rc);
        got[pg.rank()] = actor.update(rows);
        grads[pg.rank()] = rc.grads;  // the last mini-batch's
      });
      for (int r = 0; r < world; ++r) {
        SCOPED_TRACE(std::string(mode) + ", " + std::to_string(world) + " ranks, rank " + std::to_string(r));
        EXPECT_EQ(got[r]["actor/updates"], 3.0);
        EXPECT_NEAR(got[r]["actor/loss"], want["actor/loss"], 2e-5 * std::max(1.0, std::abs(want["actor/loss"])));
        EXPECT_NEAR(got[r]["actor/grad_norm"], want["actor/grad_norm"], 2e-5 * want["actor/grad_norm"]);
        EXPECT_NEAR(got[r]["actor/entropy"], want["actor/entropy"], 2e-5 * std::abs(want["actor/entropy"]));
        EXPECT_LT(max_rel_diff(grads[r], cap.grads), 2e-5);
      }
    }
  }
}

TEST(DataParallelTest, CriticRanksSumToTheWholeBatch) {
  model::Transformer base = spicy_model(tiny_config(model::Arch::kQwen3), 32);
  auto rows = make_rows(base, 10);
  fill_returns(rows, 5);
  set_value_mask(rows, /*step_level=*/true);
  auto make = [&](model::Transformer m) {
    CriticOptions o;
    o.optim.grad_clip = 0;
    o.loop.micro_batch_size = 1;
    ValueModel vm(std::move(m));
    torch::NoGradGuard ng;
    vm->head()->weight.fill_(0.05);
    return std::make_unique<Critic>(vm, o);
  };
  auto whole = make(copy_of(base));
  GradCapture cap;
  whole->optimizer().set_gradient_reducer(&cap);
  Metrics want = whole->update(rows);
  ASSERT_GT(want["critic/loss"], 0.0);
  std::vector<Metrics> got(2);
  std::vector<std::vector<at::Tensor>> grads(2);
  std::mutex mu;
  run_ranks(2, [&](ProcessGroup& pg) {
    model::Transformer mine{nullptr};
    {
      std::lock_guard<std::mutex> lock(mu);
      mine = copy_of(base);
    }
    auto critic = make(mine);
    critic->set_process_group(&pg);
    ReducedCapture rc(pg);
    critic->optimizer().set_gradient_reducer(&rc);
    got[pg.rank()] = critic->update(rows);
    grads[pg.rank()] = rc.grads;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(got[r]["critic/loss"], want["critic/loss"], 2e-5 * want["critic/loss"]) << r;
    EXPECT_LT(max_rel_diff(grads[r], cap.grads), 2e-5) << r;
  }
}

// A non-finite loss on one rank skips the step on every rank (the step is collective).
TEST(DataParallelTest, NonFiniteLossOnOneRankSkipsTheStepEverywhere) {
  model::Transformer base = spicy_model(tiny_config(model::Arch::kQwen3), 33);
  auto rows = make_rows(base, 11);
  std::vector<Metrics> got(2);
  std::mutex mu;
  run_ranks(2, [&](ProcessGroup& pg) {
    model::Transformer mine{nullptr};
    {
      std::lock_guard<std::mutex> lock(mu);
      mine = copy_of(base);
    }
    ActorOptions o;
    o.loop.micro_batch_size = 1;
    Actor actor(mine, o);
    actor.set_process_group(&pg);
    std::vector<PackedRow> r = rows;
    // Rank 1's rows (the second half of the trajectories) get a NaN advantage.
    if (pg.rank() == 1)
      for (auto& row : r)
        if (row.trajectory >= 3)
          for (size_t t = 0; t < row.tokens.size(); ++t)
            if (row.action[t]) row.advantage[t] = std::nanf("");
    const auto before = mine->parameters()[0].clone();
    got[pg.rank()] = actor.update(r);
    EXPECT_TRUE(at::equal(before, mine->parameters()[0])) << "rank " << pg.rank() << " applied the step";
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[r]["actor/updates"], 0.0) << r;
    EXPECT_EQ(got[r]["actor/skipped_updates"], 1.0) << r;
  }
}
}  // namespace
}  // namespace agentr1::train
