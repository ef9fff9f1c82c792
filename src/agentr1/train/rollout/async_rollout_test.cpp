// Asynchronous rollout (async_rollout_source.h) end to end on a tiny random model:
// max_staleness 0 through the async machinery is the synchronous trainer (same
// trajectories, same parameters); with staleness every trained step is within the bound
// and the producer does run ahead; failures and stop requests end the run cleanly; and
// the busy-time bookkeeping behind the overlap metrics.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/model/transformer.h"
#include "agentr1/tasks/reward.h"
#include "agentr1/train/busy_clock.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/train_config.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using testing::read_jsonl;
using testing::step_metrics;

json tiny_run_tree(const std::string& dir, const std::string& run, const std::vector<std::string>& extra) {
  json tree = default_train_tree();
  std::vector<std::string> o = {
      "model.path=" + dir + "/model", "trainer.output_dir=" + run, "trainer.test_freq=0",
      "trainer.threads=1", "data.train_batch_size=2", "data.val_size=1", "rollout.n=2", "rollout.val_k=0",
      "rollout.max_new_tokens=6", "rollout.max_prompt_tokens=2048", "rollout.max_steps=2",
      "trainer.progress=false", "trainer.dump_trajectories=-1", "actor.optim.lr=1e-3"};
  o.insert(o.end(), extra.begin(), extra.end());
  for (const std::string& x : o) apply_override(tree, x);
  return tree;
}

RunSummary train(const json& tree) {
  RLTrainer t(load_train_config(tree), tree);
  return t.run(RunMode::kFresh);
}

double max_param_diff(const std::string& a, const std::string& b) {
  const model::Transformer x = model::load_pretrained(a, at::kFloat, at::kCPU);
  const model::Transformer y = model::load_pretrained(b, at::kFloat, at::kCPU);
  const auto px = x->parameters(), py = y->parameters();
  double d = 0;
  for (size_t i = 0; i < px.size(); ++i) d = std::max(d, (px[i] - py[i]).abs().max().item<double>());
  return d;
}

// The response ids of every step of every dumped trajectory of a step, in dump order.
std::vector<TokenIds> dumped_responses(const std::string& run, int step) {
  char name[32];
  std::snprintf(name, sizeof(name), "/trajectories/step_%06d.jsonl", step);
  std::vector<TokenIds> out;
  for (const json& t : read_jsonl(run + name))
    for (const json& s : t["steps"]) out.push_back(s["response_ids"].get<TokenIds>());
  return out;
}

// The behaviour log-probs of every step of every dumped trajectory of a step, in dump order.
std::vector<std::vector<float>> dumped_logprobs(const std::string& run, int step) {
  char name[32];
  std::snprintf(name, sizeof(name), "/trajectories/step_%06d.jsonl", step);
  std::vector<std::vector<float>> out;
  for (const json& t : read_jsonl(run + name))
    for (const json& s : t["steps"]) out.push_back(s["response_logprobs"].get<std::vector<float>>());
  return out;
}

// A reward that differs between samples of a group (the parity of a hash of the
// response), so GRPO has advantages to follow and the updates change the weights.
void register_parity_reward() {
  static bool once = [] {
    tasks::register_reward_fn("async_test_parity", [](const json&) -> tasks::RewardFn {
      return [](const std::string& response, const json&, const json&) -> float {
        return static_cast<float>(std::hash<std::string>{}(response) % 2);
      };
    });
    return true;
  }();
  (void)once;
}

TEST(AsyncRolloutTest, StalenessZeroIsTheSynchronousTrainer) {
  register_parity_reward();
  const std::string dir = testing::make_tiny_model_dir("async0");
  // The engines batch and cache by timing; they are batch-invariant (the default), so a
  // row's numbers do not depend on it. (Before that mode this test decoded one sequence
  // at a time without the prefix cache: a row decoded beside 1-3 others took the per-row
  // product path and beside more the BLAS one, which round differently in the last bit.)
  const std::vector<std::string> common = {"trainer.total_steps=3", "rollout.temperature=1.0",
                                           "rollout.reward_fn=async_test_parity"};
  train(tiny_run_tree(dir, dir + "/sync", common));
  std::vector<std::string> a = common;
  a.push_back("rollout.async=true");  // the async source, at max_staleness 0
  train(tiny_run_tree(dir, dir + "/async", a));
  for (int s = 1; s <= 3; ++s) {
    const auto x = dumped_responses(dir + "/sync", s), y = dumped_responses(dir + "/async", s);
    ASSERT_FALSE(x.empty());
    EXPECT_EQ(x, y) << "step " << s << ": the same trajectories";
    EXPECT_EQ(dumped_logprobs(dir + "/sync", s), dumped_logprobs(dir + "/async", s))
        << "step " << s << ": the same behaviour log-probs, bit for bit";
  }
  // Same trajectories and the same updates: the same parameters (bit for bit; both
  // engines compute the same products on one thread).
  EXPECT_EQ(max_param_diff(dir + "/sync/checkpoints/step_000003", dir + "/async/checkpoints/step_000003"), 0.0);
  EXPECT_GT(max_param_diff(dir + "/sync/checkpoints/step_000003", dir + "/model"), 0.0) << "training changed them";
  for (const json& m : step_metrics(dir + "/async")) {
    EXPECT_EQ(m["async/staleness_max"], 0.0);
    EXPECT_EQ(m["async/dropped_trajectories"], 0.0);
  }
  // Every step of step s's trajectories came from version s - 1, as synchronously.
  for (int s = 1; s <= 3; ++s) {
    char name[32];
    std::snprintf(name, sizeof(name), "/trajectories/step_%06d.jsonl", s);
    for (const json& t : read_jsonl(dir + "/async" + name))
      for (const json& st : t["steps"]) EXPECT_EQ(st["policy_version"], s - 1);
  }
  fs::remove_all(dir);
}

// max_staleness 2 with slow tools: the producer runs ahead (some consumed step is
// stale), never past the bound, under each correction and with partial rollouts on and
// off; the importance-weight metrics are logged with a correction.
TEST(AsyncRolloutTest, EveryTrainedStepIsWithinTheBound) {
  register_parity_reward();
  const std::string dir = testing::make_tiny_model_dir("async2");
  struct Case {
    std::string name;
    std::vector<std::string> extra;
  };
  const std::vector<Case> cases = {
      {"tis", {"actor.off_policy.method=tis", "rollout.partial_rollout=true"}},
      {"decoupled", {"actor.off_policy.method=decoupled_ppo", "rollout.partial_rollout=false"}},
      {"none_fresh", {"rollout.prefer_fresh=true", "rollout.env_latency_ms=[5,20]"}},
  };
  for (const Case& c : cases) {
    const std::string run = dir + "/" + c.name;
    std::vector<std::string> o = {"trainer.total_steps=6", "rollout.max_staleness=2", "rollout.reward_fn=async_test_parity",
                                  "+rollout.env_kwargs.tool_latency_ms=[10,40]", "trainer.tool_threads=16"};
    o.insert(o.end(), c.extra.begin(), c.extra.end());
    EXPECT_EQ(train(tiny_run_tree(dir, run, o)).steps, 6) << c.name;
    const std::vector<json> ms = step_metrics(run);
    ASSERT_EQ(ms.size(), 6u) << c.name;
    double most = 0;
    for (const json& m : ms) {
      EXPECT_LE(m["async/staleness_max"].get<double>(), 2.0) << c.name;
      most = std::max(most, m["async/staleness_max"].get<double>());
      if (c.name != "none_fresh") {
        EXPECT_TRUE(m.contains("off_policy/is_weight_mean")) << c.name;
        EXPECT_TRUE(m.contains("off_policy/capped_frac")) << c.name;
      }
      EXPECT_TRUE(m.contains("async/overlap_s"));
    }
    EXPECT_GE(most, 1.0) << c.name << ": the producer never ran ahead of the learner";
    // The dumps say the same, step by step: version >= (step - 1) - 2.
    for (int s = 1; s <= 6; ++s) {
      char name[32];
      std::snprintf(name, sizeof(name), "/trajectories/step_%06d.jsonl", s);
      const auto trajs = read_jsonl(run + name);
      EXPECT_EQ(trajs.size(), 4u) << c.name << " step " << s;
      for (const json& t : trajs)
        for (const json& st : t["steps"]) {
          EXPECT_GE(st["policy_version"].get<int64_t>(), s - 1 - 2) << c.name << " step " << s;
          EXPECT_LE(st["policy_version"].get<int64_t>(), s - 1) << c.name << " step " << s;
        }
    }
  }
  fs::remove_all(dir);
}

std::atomic<int>& g_calls = testing::FailingReward::calls;
std::atomic<int>& g_fail_on = testing::FailingReward::fail_on;
void register_failing_reward() { testing::FailingReward::register_once(); }

// A trajectory that throws in the producer (here its reward) fails collect() with its
// error; the run stops with its logs and checkpoint, nothing hangs, and --resume goes on.
TEST(AsyncRolloutTest, AFailingTrajectoryStopsTheRunCleanly) {
  register_failing_reward();
  const std::string dir = testing::make_tiny_model_dir("asyncf");
  const std::string run = dir + "/run";
  const json tree = tiny_run_tree(dir, run, {"trainer.total_steps=4", "trainer.save_freq=1", "rollout.max_staleness=1",
                                             "rollout.reward_fn=test_failing"});
  g_calls = 0;
  g_fail_on = 12;  // 1 baseline call, then 4 per batch: batches 1-2 make calls 2-9, so call 12 is
                   // in batch 3, which starts only after step 1 (and its checkpoint) is done
  const auto t0 = Clock::now();
  {
    RLTrainer t(load_train_config(tree), tree);
    try {
      t.run(RunMode::kFresh);
      FAIL() << "expected the reward's error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("reward backend went away"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--resume"), std::string::npos) << e.what();
    }
  }  // the destructor stops the producer and waits for the trajectories in flight
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 60.0);
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000001/model.safetensors"));
  EXPECT_NO_THROW(model::load_pretrained(run + "/checkpoints/step_000001", at::kFloat, at::kCPU));
  g_fail_on = 0;
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kResume).steps, 4);
  }
  fs::remove_all(dir);
}

// Ctrl-C (the stop flag) with trajectories of the next steps in flight behind slow
// tools: the run stops after the step with an intact checkpoint, promptly, and resumes.
TEST(AsyncRolloutTest, AStopRequestCheckpointsWhileTheProducerRuns) {
  const std::string dir = testing::make_tiny_model_dir("asyncs");
  const std::string run = dir + "/run";
  const json tree = tiny_run_tree(dir, run, {"trainer.total_steps=3", "rollout.max_staleness=2",
                                             "rollout.env_latency_ms=[100,200]"});
  std::atomic<int> flag{2};
  const auto t0 = Clock::now();
  {
    RLTrainer t(load_train_config(tree), tree);
    t.set_stop_flag(&flag);
    try {
      t.run(RunMode::kFresh);
      FAIL() << "expected StopRequested";
    } catch (const StopRequested& e) {
      EXPECT_EQ(e.step, 1);
    }
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 60.0);
  EXPECT_NO_THROW(model::load_pretrained(run + "/checkpoints/step_000001", at::kFloat, at::kCPU));
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kResume).steps, 3);
  }
  fs::remove_all(dir);
}

TEST(BusyClockTest, BusyTimeAndOverlapInAWindow) {
  const Clock::time_point t0 = Clock::now();
  auto at = [&](double s) { return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
  BusyClock a, b;
  a.start(at(1));
  a.start(at(1.5));  // already busy: no-op
  a.stop(at(3));
  a.start(at(5));    // open until read
  b.start(at(2));
  b.stop(at(6));
  b.stop(at(7));     // already idle: no-op
  EXPECT_NEAR(a.busy_in(at(0), at(10)), 2 + 5, 1e-9);
  EXPECT_NEAR(a.busy_in(at(2), at(5.5)), 1 + 0.5, 1e-9);
  EXPECT_NEAR(b.busy_in(at(0), at(10)), 4, 1e-9);
  // a: [1,3] + [5,10]; b: [2,6] -> both in [2,3] and [5,6].
  EXPECT_NEAR(BusyClock::overlap(a, b, at(0), at(10)), 2, 1e-9);
  EXPECT_NEAR(BusyClock::overlap(a, b, at(2.5), at(5.5)), 0.5 + 0.5, 1e-9);
  a.forget_before(at(4));
  EXPECT_NEAR(a.busy_in(at(0), at(10)), 5, 1e-9);
}

TEST(AsyncRolloutTest, ConfigErrorsNameTheKey) {
  auto err = [](const std::string& o) {
    json tree = default_train_tree();
    try {
      apply_override(tree, o);
      load_train_config(tree);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("rollout.max_staleness=-1").find("rollout.max_staleness must be in 0..1000"), std::string::npos);
  EXPECT_NE(err("actor.off_policy.method=vtrace").find("actor.off_policy.method: unknown 'vtrace'"), std::string::npos);
  EXPECT_NE(err("rollout.env_latency_ms=[300,100]").find("lo <= hi"), std::string::npos);
  EXPECT_EQ(err("rollout.max_staleness=2"), "");
}

}  // namespace
}  // namespace agentr1::train
