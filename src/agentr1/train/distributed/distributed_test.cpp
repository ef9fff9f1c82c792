// Data parallelism's pieces (distributed.h), with ranks as threads over Gloo on
// 127.0.0.1: the torchrun environment, the collectives, what is split and gathered,
// and failures that name the rank responsible. The update's equivalence to one process
// is in learner_test.cpp (DataParallelTest), whole runs in tests/dp_test.sh.
#include "agentr1/train/distributed/distributed.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

using testing::free_local_port;
using testing::run_ranks;

using agentr1::testing::error_of;

std::optional<DistEnv> env_of(const std::map<std::string, std::string>& vars) {
  return dist_env_from_environment([&](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(DistEnvTest, ReadsTorchrunVariables) {
  EXPECT_FALSE(env_of({}).has_value());
  const auto e = env_of({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "1234"}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->master_addr, "10.1.2.3");
  EXPECT_EQ(e->master_port, 1234);
  const auto d = env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(d->local_rank, 1);
  EXPECT_EQ(d->local_world_size, 2);
  EXPECT_EQ(d->master_addr, "127.0.0.1");
  EXPECT_EQ(d->master_port, 29500);
}

TEST(DistEnvTest, BadVariablesNameTheVariable) {
  auto err = [](std::map<std::string, std::string> v) { return error_of([&] { env_of(v); }); };
  EXPECT_NE(err({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK='2' must be an integer in 0..1"), std::string::npos);
  EXPECT_NE(err({{"RANK", "0"}, {"WORLD_SIZE", "two"}}).find("WORLD_SIZE='two'"), std::string::npos);
  EXPECT_NE(err({{"WORLD_SIZE", "2"}}).find("RANK is not"), std::string::npos);
  EXPECT_NE(err({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT='70000'"),
            std::string::npos);
}

TEST(DistributedTest, OwnershipIsContiguousAndCoversEverything) {
  for (int world : {1, 2, 3, 5})
    for (int64_t total : {0, 1, 4, 7, 128}) {
      int prev = 0;
      std::vector<int> count(world, 0);
      for (int64_t t = 0; t < total; ++t) {
        const int o = rollout_owner(t, total, world);
        ASSERT_GE(o, prev);
        ASSERT_LT(o, world);
        prev = o;
        count[o]++;
      }
      for (int r = 0; r < world; ++r)  // near-equal blocks
        EXPECT_LE(count[r], total / world + 1) << world << " " << total;
    }
}

TEST(DistributedTest, CollectivesGatherAndReduce) {
  run_ranks(3, [](ProcessGroup& pg) {
    const int r = pg.rank();
    // Bytes of different lengths (rank 0 sends nothing), in rank order.
    const std::string mine = r == 0 ? "" : std::string(static_cast<size_t>(1000 * r), static_cast<char>('a' + r));
    const auto all = pg.all_gather_bytes(mine, "bytes");
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0], "");
    EXPECT_EQ(all[1], std::string(1000, 'b'));
    EXPECT_EQ(all[2], std::string(2000, 'c'));
    EXPECT_EQ(pg.all_reduce_sum(1.5 * (r + 1), "sum"), 9.0);
    EXPECT_EQ(pg.all_reduce_max(static_cast<double>(10 - r), "max"), 10.0);
    // Metrics: timings and *max* the maximum, listed keys the sum, the rest the mean.
    std::map<std::string, double> m{{"timing/gen", 1.0 + r}, {"rollout/logprob_max_diff", 0.1 * r},
                                    {"rollout/generated_tokens", 10.0 * (r + 1)}, {"reward/mean", 3.0 * r}};
    if (r == 2) m["only/two"] = 7;
    const auto red = reduce_metrics(m, {"rollout/generated_tokens"}, pg, "metrics");
    EXPECT_DOUBLE_EQ(red.at("timing/gen"), 3.0);
    EXPECT_DOUBLE_EQ(red.at("rollout/logprob_max_diff"), 0.2);
    EXPECT_DOUBLE_EQ(red.at("rollout/generated_tokens"), 60.0);
    EXPECT_DOUBLE_EQ(red.at("reward/mean"), 3.0);
    EXPECT_DOUBLE_EQ(red.at("only/two"), 7.0);  // the mean over the ranks that report it
    EXPECT_DOUBLE_EQ(sum_metrics({{"a", 1.0 + r}}, pg, "sum").at("a"), 6.0);
  });
}

TEST(DistributedTest, TrajectoriesAndRowColumnsComeBackExact) {
  std::vector<Trajectory> trajs(7);
  for (int t = 0; t < 7; ++t) {
    trajs[t].uid = "u" + std::to_string(t);
    trajs[t].group = "g" + std::to_string(t / 3);
    for (int s = 0; s <= t % 3; ++s) {
      Step st;
      st.prompt_ids = {1, 2, 3 + t};
      st.response_ids = {4 + s, 5, 6};
      st.response_logprobs = {-0.1f / (t + 1), std::nextafter(-1.0f / 3.0f, 0.0f), -1e-7f * (s + 1)};
      st.reward = 0.25f * s;
      st.info = {{"tool", "calc"}, {"n", t}};
      st.policy_version = 4;
      trajs[t].steps.push_back(st);
    }
    trajs[t].outcome_reward = t % 2;
    trajs[t].metrics = {{"num_turns", t % 3 + 1}};
  }
  const std::string want = [&] {
    json j = json::array();
    for (const auto& t : trajs) j.push_back(t.to_json());
    return j.dump();
  }();
  run_ranks(2, [&](ProcessGroup& pg) {
    std::vector<Trajectory> mine;
    const std::vector<int64_t> idx = owned_indices(7, pg);
    for (int64_t t : idx) mine.push_back(trajs[static_cast<size_t>(t)]);
    const std::vector<Trajectory> all = gather_trajectories(mine, idx, 7, pg);
    json j = json::array();
    for (const auto& t : all) j.push_back(t.to_json());
    EXPECT_EQ(j.dump(), want);
    for (size_t t = 0; t < 7; ++t)
      for (size_t s = 0; s < all[t].steps.size(); ++s)
        EXPECT_EQ(all[t].steps[s].response_logprobs, trajs[t].steps[s].response_logprobs);  // bit for bit

    // Columns: each rank fills its own rows with a rank-specific pattern.
    std::vector<PackedRow> rows(5);
    std::vector<uint8_t> owned(5);
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].tokens.assign(3 + i, 1);
      rows[i].trajectory = static_cast<int64_t>(i);
      owned[i] = rollout_owner(static_cast<int64_t>(i), 5, pg.world_size()) == pg.rank();
      if (owned[i])
        for (size_t k = 0; k < rows[i].tokens.size(); ++k) rows[i].old_logprob.push_back(-0.5f * i - 1e-3f * k);
    }
    share_row_columns(rows, owned, {&PackedRow::old_logprob, &PackedRow::ref_logprob}, pg);
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_EQ(rows[i].old_logprob.size(), rows[i].tokens.size());
      for (size_t k = 0; k < rows[i].tokens.size(); ++k) EXPECT_EQ(rows[i].old_logprob[k], -0.5f * i - 1e-3f * k);
      EXPECT_TRUE(rows[i].ref_logprob.empty());  // computed by no rank: left alone
    }
  });
}

TEST(DistributedTest, MismatchedParametersAreCaught) {
  run_ranks(2, [](ProcessGroup& pg) {
    std::vector<at::Tensor> p{at::ones({3, 4}), at::arange(5, at::kFloat)};
    check_same_parameters(p, pg, "same");  // no throw
    if (pg.rank() == 1) p[1][2] = 2.5f;
    const std::string e = error_of([&] { check_same_parameters(p, pg, "after step 7"); });
    EXPECT_NE(e.find("after step 7: the parameters of rank(s) 1"), std::string::npos) << e;
  });
}

// A rank that never reaches a collective: the waiting rank fails within the timeout,
// naming it as alive but absent.
TEST(DistributedTest, HangingRankIsNamedWithinTheTimeout) {
  std::string error;
  double waited = 0;
  std::mutex mu;
  std::atomic<bool> done{false};
  run_ranks(
      2,
      [&](ProcessGroup& pg) {
        pg.barrier("start");
        if (pg.rank() == 1) {  // hangs (but its heartbeat goes on) until rank 0 gave up
          while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        const std::string e = error_of([&] { pg.all_reduce_sum(1.0, "the step's gradients"); });
        std::lock_guard<std::mutex> lock(mu);
        waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        error = e;
        done.store(true);
      },
      /*timeout_s=*/3);
  EXPECT_NE(error.find("rank 0: collective #2 (the step's gradients) failed"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1 is alive but has not reached collective #2"), std::string::npos) << error;
  EXPECT_LT(waited, 3 + 2 + 5) << "timeout 3 s, plus 2 s of diagnosis";
}

// A rank that failed records why: the others name it and quote its error.
TEST(DistributedTest, FailedRankIsNamedWithItsError) {
  std::string error;
  run_ranks(2, [&](ProcessGroup& pg) {
    pg.barrier("start");
    if (pg.rank() == 1) {
      pg.report_failure("sample 3, repeat 1: tool 'calc' crashed");
      pg.barrier("reported");
      return;  // leaves: its process group closes
    }
    pg.barrier("reported");
    error = error_of([&] {
      for (int i = 0; i < 3; ++i) pg.all_reduce_sum(1.0, "gradients");
    });
  }, /*timeout_s=*/5);
  EXPECT_NE(error.find("rank 1 failed: sample 3, repeat 1: tool 'calc' crashed"), std::string::npos) << error;
}

TEST(DistributedTest, RendezvousFailureNamesTheAddress) {
  DistEnv e;
  e.rank = 1;  // nobody hosts the store on this port
  e.world_size = 2;
  e.master_port = free_local_port();
  const std::string err = error_of([&] { ProcessGroup pg(e, 1); });
  EXPECT_NE(err.find("rank 1 of 2 could not join the process group at 127.0.0.1:" + std::to_string(e.master_port)),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("HINT"), std::string::npos);
}

}  // namespace
}  // namespace agentr1::train
