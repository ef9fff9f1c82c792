#include "agentr1/flow/group_rollout.h"

#include <future>

#include "agentr1/core/error.h"
#include "agentr1/core/rng.h"

namespace agentr1::flow {
namespace {
constexpr uint64_t kSeedTrajectory = 0x7472616aULL;  // "traj": separates trajectory seeds
constexpr uint64_t kSeedAffinity = 0x67726f75ULL;    // "grou": a group's affinity key
}  // namespace

uint64_t trajectory_seed(uint64_t seed, uint64_t sample_index, uint64_t repeat) {
  return derive_seed(seed, {kSeedTrajectory, sample_index, repeat});
}

Trajectory run_trajectory(const Sample& sample, uint64_t sample_index, int repeat, const FlowContext& ctx,
                          const FlowOptions& opts, uint64_t seed) {
  std::unique_ptr<AgentFlow> flow = make_flow_for(sample, opts);
  // The n repeats of a sample share a prompt: one affinity key per group (never 0).
  FlowContext group_ctx = ctx;
  group_ctx.affinity_key = derive_seed(seed, {kSeedAffinity, sample_index}) | 1;
  Trajectory t =
      flow->run(sample, group_ctx, opts, trajectory_seed(seed, sample_index, static_cast<uint64_t>(repeat)));
  t.group = std::to_string(seed) + ":" + std::to_string(sample_index);
  t.uid = t.group + ":" + std::to_string(repeat);
  t.data_source = sample.data_source;
  return t;
}

std::vector<Trajectory> run_group_rollouts_subset(const std::vector<Sample>& samples, int n,
                                                  const std::vector<int64_t>& indices, const FlowContext& ctx,
                                                  const FlowOptions& opts, uint64_t seed, ThreadPool& drivers) {
  AGENTR1_CHECK(n >= 1, "rollout n (trajectories per sample) must be >= 1, got " << n);
  ctx.validate();
  opts.validate();
  AGENTR1_CHECK(ctx.tool_pool != &drivers,
                "FlowContext.tool_pool is the driver pool; drivers block on tool calls, so "
                "the tools need a separate ThreadPool (else every thread can end up waiting)");
  const int64_t total = static_cast<int64_t>(samples.size()) * n;
  std::vector<std::future<Trajectory>> futures;
  futures.reserve(indices.size());
  for (int64_t t : indices) {
    AGENTR1_CHECK(t >= 0 && t < total, "trajectory index " << t << " is not in 0.." << total - 1);
    const size_t i = static_cast<size_t>(t / n);
    const int r = static_cast<int>(t % n);
    futures.push_back(drivers.submit([&samples, &ctx, &opts, seed, i, r]() -> Trajectory {
      return run_trajectory(samples[i], i, r, ctx, opts, seed);
    }));
  }

  std::vector<Trajectory> out;
  out.reserve(indices.size());
  std::string first_error;
  for (size_t k = 0; k < futures.size(); ++k) {
    try {
      out.push_back(futures[k].get());
    } catch (const std::exception& e) {
      if (first_error.empty())
        first_error = "sample " + std::to_string(indices[k] / n) + ", repeat " + std::to_string(indices[k] % n) +
                      ": " + e.what();
    }
  }
  if (!first_error.empty()) throw Error(first_error);
  return out;
}

std::vector<Trajectory> run_group_rollouts(const std::vector<Sample>& samples, int n,
                                           const FlowContext& ctx, const FlowOptions& opts,
                                           uint64_t seed, ThreadPool& drivers) {
  std::vector<int64_t> all(samples.size() * static_cast<size_t>(std::max(n, 0)));
  for (size_t t = 0; t < all.size(); ++t) all[t] = static_cast<int64_t>(t);
  return run_group_rollouts_subset(samples, n, all, ctx, opts, seed, drivers);
}

}  // namespace agentr1::flow
