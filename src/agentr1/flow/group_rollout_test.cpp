// run_group_rollouts: many trajectories in flight give the same results as sequential
// runs, in sample-major order, with shared groups and unique uids.
#include "agentr1/flow/group_rollout.h"

#include <map>
#include <random>
#include <set>

#include "agentr1/core/thread_pool.h"
#include "agentr1/flow/test_support.h"
#include "agentr1/flow/trajectory_builder.h"

namespace agentr1::flow {
namespace {

using namespace testing;

// A stateless policy: its answer depends only on the request (prompt + seed), like a
// seeded engine. It sleeps a little so that concurrent runs interleave differently.
TokenIds policy(const GenRequest& req) {
  const TokenId tr = special("<tool_response>");
  const auto turn = std::count(req.prompt_ids.begin(), req.prompt_ids.end(), tr);
  std::mt19937_64 rng(req.sampling.seed);
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
  const int a = static_cast<int>(rng() % 10), b = static_cast<int>(rng() % 10);
  if (turn == 0 || (turn == 1 && rng() % 2 == 0))
    return turn_ids(call_text("adder", "{\"a\": " + std::to_string(a) + ", \"b\": " +
                                           std::to_string(b) + "}"));
  return turn_ids("#### " + std::to_string(a + b));
}

std::vector<Sample> samples() {
  std::vector<Sample> out;
  for (int i = 0; i < 6; ++i) out.push_back(make_sample("q" + std::to_string(i), std::to_string(i)));
  out[3].agent_name = "single_step";
  return out;
}

std::vector<std::string> dump(const std::vector<Trajectory>& ts) {
  std::vector<std::string> out;
  for (const auto& t : ts) out.push_back(t.to_json().dump());
  return out;
}

TEST(GroupRollout, ConcurrentEqualsSequential) {
  register_fakes();
  FlowOptions o;
  o.env_kwargs = {{"tools", {"adder"}}};
  o.max_steps = 3;
  const auto batch = samples();
  const int n = 4;

  ScriptedGenerator gen1(policy);
  ThreadPool tools1(2), one_driver(1);
  FlowContext ctx1 = make_context(&gen1, &tools1);
  auto seq = run_group_rollouts(batch, n, ctx1, o, /*seed=*/99, one_driver);

  ScriptedGenerator gen2(policy);
  ThreadPool tools2(4), drivers(16);
  FlowContext ctx2 = make_context(&gen2, &tools2);
  auto par = run_group_rollouts(batch, n, ctx2, o, /*seed=*/99, drivers);

  ASSERT_EQ(seq.size(), batch.size() * n);
  EXPECT_EQ(dump(seq), dump(par));
  EXPECT_EQ(gen1.requests().size(), gen2.requests().size());

  // Order, groups, uids, and agreement with a direct run.
  std::set<std::string> uids;
  for (size_t i = 0; i < batch.size(); ++i) {
    for (int r = 0; r < n; ++r) {
      const Trajectory& t = par[i * n + r];
      EXPECT_EQ(t.group, "99:" + std::to_string(i));
      EXPECT_EQ(t.uid, t.group + ":" + std::to_string(r));
      EXPECT_EQ(t.data_source, batch[i].data_source);  // routes the row to a teacher
      uids.insert(t.uid);
      ASSERT_FALSE(t.steps.empty());
      EXPECT_EQ(tok().decode(t.steps[0].prompt_ids).find("q" + std::to_string(i)) !=
                    std::string::npos,
                true);
    }
  }
  EXPECT_EQ(uids.size(), batch.size() * n);
  ScriptedGenerator gen3(policy);
  FlowContext ctx3 = make_context(&gen3, &tools1);
  Trajectory direct = make_flow_for(batch[2], o)->run(batch[2], ctx3, o, trajectory_seed(99, 2, 1));
  EXPECT_EQ(direct.to_json()["steps"], par[2 * n + 1].to_json()["steps"]);
  EXPECT_EQ(par[3 * n].steps.size(), 1u) << "sample 3 runs the single_step flow";

  // Repeats of one sample differ (different seeds), and some trajectories are right.
  EXPECT_NE(dump({par[0]}), dump({par[1]}));
  // A different run seed gives different trajectories.
  ScriptedGenerator gen4(policy);
  FlowContext ctx4 = make_context(&gen4, &tools2);
  auto other = run_group_rollouts(batch, n, ctx4, o, /*seed=*/100, drivers);
  EXPECT_NE(dump(other), dump(par));
}

// Every turn of every repeat of a sample carries one nonzero affinity key (a remote
// generator keeps the group on one server); different samples get different keys.
TEST(GroupRollout, GroupsShareOneAffinityKey) {
  register_fakes();
  FlowOptions o;
  o.env_kwargs = {{"tools", {"adder"}}};
  o.max_steps = 3;
  const auto batch = samples();
  ScriptedGenerator gen(policy);
  ThreadPool tools(2), drivers(8);
  FlowContext ctx = make_context(&gen, &tools);
  run_group_rollouts(batch, /*n=*/3, ctx, o, /*seed=*/5, drivers);
  std::map<size_t, std::set<uint64_t>> keys;  // sample -> keys its requests carried
  for (const GenRequest& r : gen.requests()) {
    const std::string text = tok().decode(r.prompt_ids);
    for (size_t i = 0; i < batch.size(); ++i)
      if (text.find("q" + std::to_string(i)) != std::string::npos) keys[i].insert(r.affinity_key);
  }
  ASSERT_EQ(keys.size(), batch.size());
  std::set<uint64_t> all;
  for (const auto& [i, k] : keys) {
    ASSERT_EQ(k.size(), 1u) << "sample " << i;
    EXPECT_NE(*k.begin(), 0u);
    all.insert(*k.begin());
  }
  EXPECT_EQ(all.size(), batch.size());
  EXPECT_GT(gen.requests().size(), batch.size() * 3) << "later turns were generated too";
}

TEST(GroupRollout, ErrorsNameTheSampleAndPoolsMustDiffer) {
  register_fakes();
  FlowOptions o;
  o.env_kwargs = {{"tools", {"adder"}}};
  auto batch = samples();
  batch[4].env_kwargs = {{"bogus", 1}};
  ScriptedGenerator gen(policy);
  ThreadPool tools(2), drivers(4);
  FlowContext ctx = make_context(&gen, &tools);
  try {
    run_group_rollouts(batch, 2, ctx, o, 1, drivers);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "sample 4, repeat 0: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "'bogus'")) << e.what();
  }
  FlowContext same = make_context(&gen, &drivers);
  EXPECT_THROW(run_group_rollouts(samples(), 1, same, o, 1, drivers), Error);
  EXPECT_THROW(run_group_rollouts(samples(), 0, ctx, o, 1, drivers), Error);
}

}  // namespace
}  // namespace agentr1::flow
