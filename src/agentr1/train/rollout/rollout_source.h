// agentr1/train/rollout_source.h — where the trainer's trajectories come from.
//
//   SyncRolloutSource rollouts(engine, ctx, cfg.rollout.flow, cfg.rollout.n, seed, prompts, drivers);
//   RolloutBatch b = rollouts.collect(step);             // n trajectories per prompt of the step
//   rollouts.with_weights_exclusive([&] { learner.update(rows, true); });
//   rollouts.push_weights(step);                         // later rollouts: policy_version = step
//
// Three sources implement the interface the trainer's loop needs:
//   SyncRolloutSource   generates a step's trajectories on demand with the in-process
//                       engine, which shares the policy module with the learner (no copy):
//                       every trajectory of step s comes from version s - 1.
//   AsyncRolloutSource  (async_rollout_source.h) keeps generating the next steps'
//                       trajectories with its own engine and a copy of the weights while
//                       the learner updates, within rollout.max_staleness versions.
//   RemoteRolloutSource (remote_rollout_source.h) generates on OpenAI-compatible servers
//                       (rollout.engine=remote) and hands them the weights after each update.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agentr1/core/thread_pool.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/flow/agent_flow.h"

namespace agentr1::rollout {
class Engine;
}

namespace agentr1::train {

class PromptSource;
class ProcessGroup;

struct RolloutBatch {
  std::vector<Trajectory> trajectories;  // n per prompt, prompt-major (GRPO groups adjacent)
  std::map<std::string, double> metrics; // timing/gen, rollout/*, perf/gen_tokens_per_s,
                                         // async/* (the asynchronous source)
};

class RolloutSource {
 public:
  virtual ~RolloutSource() = default;
  // The trajectories of RL step `step` (train_batch_size groups of n). Sampling seeds
  // are derived from the run seed, the step whose prompts a group answers and each
  // trajectory's index, so a prompt batch gives the same trajectories whenever it runs
  // with the same weights. Throws Error (with the sample and repeat) when a trajectory
  // fails.
  virtual RolloutBatch collect(int64_t step) = 0;
  // Runs fn while no rollout reads the policy's weights (fn changes them).
  virtual void with_weights_exclusive(const std::function<void()>& fn) = 0;
  // The policy's weights changed: rollouts from now on are stamped `version`.
  virtual void push_weights(int64_t version) = 0;
};

class SyncRolloutSource : public RolloutSource {
 public:
  // engine: generates for ctx (ctx.generator must be &engine); prompts: each step's
  // prompts; drivers: the pool that runs the agent loops. None is owned.
  SyncRolloutSource(rollout::Engine& engine, flow::FlowContext ctx, flow::FlowOptions opts, int n, uint64_t seed,
                    const PromptSource& prompts, ThreadPool& drivers);
  RolloutBatch collect(int64_t step) override;
  // The engine is paused for fn (it shares the module being updated).
  void with_weights_exclusive(const std::function<void()>& fn) override;
  // Clears the engine's prefix cache (keys/values of the old weights) and sets the version.
  void push_weights(int64_t version) override;
  // Data parallelism (distributed.h): this rank generates its block of the step's
  // trajectories and collect() gathers all of them. nullptr (default) = one process.
  void set_process_group(ProcessGroup* pg) { pg_ = pg; }

 private:
  rollout::Engine& engine_;
  flow::FlowContext ctx_;
  flow::FlowOptions opts_;
  int n_;
  uint64_t seed_;
  const PromptSource& prompts_;
  ThreadPool& drivers_;
  ProcessGroup* pg_ = nullptr;
};

// The seed of step `step`'s prompt batch (both sources; run_group_rollouts' seed).
uint64_t step_rollout_seed(uint64_t run_seed, int64_t step);

}  // namespace agentr1::train
