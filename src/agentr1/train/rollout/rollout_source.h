// agentr1/train/rollout/rollout_source.h — where the trainer's trajectories come from:
// a scheduler over a backend (rollout_backend.h: the in-process engine, a copy of it, or
// remote servers).
//
//   SharedEngineBackend backend(engine);
//   SyncRolloutSource rollouts(backend, ctx, cfg.rollout.flow, cfg.rollout.n, seed, prompts, drivers);
//   RolloutBatch b = rollouts.collect(step);             // n trajectories per prompt of the step
//   rollouts.with_weights_exclusive([&] { learner.update(rows, true); });
//   rollouts.push_weights(step);                         // later rollouts: policy_version = step
//
// Two schedulers implement the interface the trainer's loop needs, on any backend:
//   SyncRolloutSource   generates a step's trajectories on demand; push_weights hands the
//                       new version over before it returns: every trajectory of step s
//                       comes from version s - 1.
//   AsyncRolloutSource  (async_rollout_source.h) keeps generating the next steps'
//                       trajectories while the learner updates, within
//                       rollout.max_staleness versions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agentr1/core/thread_pool.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/train/rollout/rollout_backend.h"

namespace agentr1::train {

class PromptSource;
class ProcessGroup;

struct RolloutBatch {
  std::vector<Trajectory> trajectories;  // n per prompt, prompt-major (GRPO groups adjacent)
  std::map<std::string, double> metrics; // timing/gen, the backend's rollout/* or remote/*,
                                         // perf/gen_tokens_per_s, timing/weight_sync (sync),
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
  // Blocks until the backend's generator holds the version last pushed (the trainer
  // calls it before validating through the same generator). Synchronous: at once.
  virtual void wait_weights_loaded() {}
};

class SyncRolloutSource : public RolloutSource {
 public:
  // backend: generates for ctx (ctx.generator must be &backend.generator()); prompts:
  // each step's prompts; drivers: the pool that runs the agent loops. None is owned.
  SyncRolloutSource(RolloutBackend& backend, flow::FlowContext ctx, flow::FlowOptions opts, int n, uint64_t seed,
                    const PromptSource& prompts, ThreadPool& drivers);
  // Metrics: timing/gen, the backend's counters for these rollouts (rollout/*, remote/*),
  // perf/gen_tokens_per_s, timing/weight_sync (the push before these rollouts).
  RolloutBatch collect(int64_t step) override;
  // The backend's (the shared engine pauses for fn; the others run it at once).
  void with_weights_exclusive(const std::function<void()>& fn) override;
  // Stages and applies `version` on the backend before returning (remote: written, and
  // loaded by every server). Throws Error naming a server that failed; a collective
  // under data parallelism when the backend is one.
  void push_weights(int64_t version) override;
  // Data parallelism (distributed.h): this rank generates its block of the step's
  // trajectories and collect() gathers all of them. nullptr (default) = one process.
  void set_process_group(ProcessGroup* pg) { pg_ = pg; }

 private:
  RolloutBackend& backend_;
  flow::FlowContext ctx_;
  flow::FlowOptions opts_;
  int n_;
  uint64_t seed_;
  const PromptSource& prompts_;
  ThreadPool& drivers_;
  ProcessGroup* pg_ = nullptr;
  double last_push_s_ = 0;
};

// The seed of step `step`'s prompt batch (both sources; run_group_rollouts' seed).
uint64_t step_rollout_seed(uint64_t run_seed, int64_t step);

}  // namespace agentr1::train
