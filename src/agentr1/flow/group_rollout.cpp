#include "agentr1/flow/group_rollout.h"

#include <future>

#include "agentr1/core/error.h"
#include "agentr1/core/rng.h"

namespace agentr1::flow {
namespace {
constexpr uint64_t kSeedTrajectory = 0x7472616aULL;  // "traj": separates trajectory seeds
}  // namespace

uint64_t trajectory_seed(uint64_t seed, uint64_t sample_index, uint64_t repeat) {
  return derive_seed(seed, {kSeedTrajectory, sample_index, repeat});
}

Trajectory run_trajectory(const Sample& sample, uint64_t sample_index, int repeat, const FlowContext& ctx,
                          const FlowOptions& opts, uint64_t seed) {
  std::unique_ptr<AgentFlow> flow = make_flow_for(sample, opts);
  Trajectory t = flow->run(sample, ctx, opts, trajectory_seed(seed, sample_index, static_cast<uint64_t>(repeat)));
  t.group = std::to_string(seed) + ":" + std::to_string(sample_index);
  t.uid = t.group + ":" + std::to_string(repeat);
  return t;
}

std::vector<Trajectory> run_group_rollouts(const std::vector<Sample>& samples, int n,
                                           const FlowContext& ctx, const FlowOptions& opts,
                                           uint64_t seed, ThreadPool& drivers) {
  AGENTR1_CHECK(n >= 1, "rollout n (trajectories per sample) must be >= 1, got " << n);
  ctx.validate();
  opts.validate();
  AGENTR1_CHECK(ctx.tool_pool != &drivers,
                "FlowContext.tool_pool is the driver pool; drivers block on tool calls, so "
                "the tools need a separate ThreadPool (else every thread can end up waiting)");

  const size_t total = samples.size() * static_cast<size_t>(n);
  std::vector<std::future<Trajectory>> futures;
  futures.reserve(total);
  for (size_t i = 0; i < samples.size(); ++i) {
    for (int r = 0; r < n; ++r) {
      futures.push_back(drivers.submit([&samples, &ctx, &opts, seed, i, r]() -> Trajectory {
        return run_trajectory(samples[i], i, r, ctx, opts, seed);
      }));
    }
  }

  std::vector<Trajectory> out;
  out.reserve(total);
  std::string first_error;
  for (size_t k = 0; k < futures.size(); ++k) {
    try {
      out.push_back(futures[k].get());
    } catch (const std::exception& e) {
      if (first_error.empty())
        first_error = "sample " + std::to_string(k / static_cast<size_t>(n)) + ", repeat " +
                      std::to_string(k % static_cast<size_t>(n)) + ": " + e.what();
    }
  }
  if (!first_error.empty()) throw Error(first_error);
  return out;
}

}  // namespace agentr1::flow
