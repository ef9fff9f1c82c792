// agentr1/flow/group_rollout.h — many trajectories at once: samples x n, one driver
// task per trajectory, so the engine sees many requests in flight and batches them.
//
//   ThreadPool drivers(64);          // drivers mostly block on Generator futures
//   ThreadPool tools(8);             // ctx.tool_pool: a DIFFERENT pool (else deadlock)
//   std::vector<Trajectory> trajs = run_group_rollouts(batch, /*n=*/8, ctx, opts,
//                                                      /*seed=*/step_seed, drivers);
//   // trajs[i * n + r]: sample i, repeat r
//
// Seeds: trajectory (i, r) runs with trajectory_seed(seed, i, r) and each of its turns
// with turn_seed(...) (trajectory_builder.h), so results are the same however the
// drivers are scheduled (given a Generator whose output depends only on the request).
// Ids: group = "<seed>:<i>" (the n repeats of a sample share it, as GRPO needs),
// uid = "<seed>:<i>:<r>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentr1/core/thread_pool.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/flow/agent_flow.h"

namespace agentr1::flow {

// The seed of repeat `repeat` of sample `sample_index` in a call with `seed`.
uint64_t trajectory_seed(uint64_t seed, uint64_t sample_index, uint64_t repeat);

// One trajectory of such a call: repeat `repeat` of `sample`, the sample_index-th of the
// call with `seed`, with group and uid set as above. What run_group_rollouts runs per
// trajectory (an asynchronous producer runs it per trajectory too, and gets the same
// trajectories). Throws what the flow throws.
Trajectory run_trajectory(const Sample& sample, uint64_t sample_index, int repeat, const FlowContext& ctx,
                          const FlowOptions& opts, uint64_t seed);

// Runs make_flow_for(samples[i], opts)->run(...) for every sample i and repeat r < n on
// `drivers` and waits for all. Returns samples.size() * n trajectories, sample-major
// (index i * n + r), with group and uid set. Throws Error if n < 1, ctx or opts are
// invalid, ctx.tool_pool is `drivers`; if any trajectory throws, waits for the others,
// then throws the first error with "sample i, repeat r: " in front. Must not be called
// from a task running on `drivers` itself.
std::vector<Trajectory> run_group_rollouts(const std::vector<Sample>& samples, int n,
                                           const FlowContext& ctx, const FlowOptions& opts,
                                           uint64_t seed, ThreadPool& drivers);

// The same for some of them: trajectory indices[k] = i * n + r (sample i, repeat r),
// returned in the order of `indices` (data parallelism: each rank runs its block).
std::vector<Trajectory> run_group_rollouts_subset(const std::vector<Sample>& samples, int n,
                                                  const std::vector<int64_t>& indices, const FlowContext& ctx,
                                                  const FlowOptions& opts, uint64_t seed, ThreadPool& drivers);

}  // namespace agentr1::flow
