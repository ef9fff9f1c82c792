// agentr1/train/rollout_source.h — where the trainer's trajectories come from.
//
//   SyncRolloutSource rollouts(engine, ctx, cfg.rollout.flow, cfg.rollout.n, seed, drivers);
//   RolloutBatch b = rollouts.collect(prompts, step);   // n trajectories per prompt
//   rollouts.with_weights_exclusive([&] { learner.update(rows, true); });
//   rollouts.push_weights(step);                         // later rollouts: policy_version = step
//
// The interface is what the trainer's loop needs from any rollout source; the
// synchronous one below generates a step's trajectories on demand with the in-process
// engine, which shares the policy module with the learner (no copy). An asynchronous
// sibling keeps generating for the next steps while the learner updates: it gets the
// new weights in push_weights (a copy into its own engine, by version) and hands out
// trajectories no staler than allowed in collect; with_weights_exclusive then need
// not block at all.
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

struct RolloutBatch {
  std::vector<Trajectory> trajectories;  // n per prompt, prompt-major (GRPO groups adjacent)
  std::map<std::string, double> metrics; // timing/gen, rollout/*, perf/gen_tokens_per_s
};

class RolloutSource {
 public:
  virtual ~RolloutSource() = default;
  // The trajectories of RL step `step` for `prompts`. Sampling seeds are derived from
  // the run seed and the step (and each trajectory's index), so the same step gives the
  // same trajectories whenever it runs.
  virtual RolloutBatch collect(const std::vector<Sample>& prompts, int64_t step) = 0;
  // Runs fn while no rollout reads the policy's weights (fn changes them).
  virtual void with_weights_exclusive(const std::function<void()>& fn) = 0;
  // The policy's weights changed: rollouts from now on are stamped `version`.
  virtual void push_weights(int64_t version) = 0;
};

class SyncRolloutSource : public RolloutSource {
 public:
  // engine: generates for ctx (ctx.generator must be &engine); drivers: the pool that
  // runs the agent loops. Neither is owned.
  SyncRolloutSource(rollout::Engine& engine, flow::FlowContext ctx, flow::FlowOptions opts, int n, uint64_t seed,
                    ThreadPool& drivers);
  RolloutBatch collect(const std::vector<Sample>& prompts, int64_t step) override;
  // The engine is paused for fn (it shares the module being updated).
  void with_weights_exclusive(const std::function<void()>& fn) override;
  // Clears the engine's prefix cache (keys/values of the old weights) and sets the version.
  void push_weights(int64_t version) override;

 private:
  rollout::Engine& engine_;
  flow::FlowContext ctx_;
  flow::FlowOptions opts_;
  int n_;
  uint64_t seed_;
  ThreadPool& drivers_;
};

}  // namespace agentr1::train
