// agentr1/train/async_rollout_source.h — rollout and training at once, with bounded
// staleness (Agent-R1's second limit; AReaL's and verl's fully asynchronous trainers).
//
//   AsyncRolloutOptions a;  a.max_staleness = 1;
//   AsyncRolloutSource rollouts(policy, engine_opts, ctx, cfg.rollout.flow, n, batch_size, seed,
//                               prompts, drivers, a);
//   RolloutBatch b = rollouts.collect(step);   // waits only if the producer is behind
//   learner.update(...);                        // the producer keeps generating meanwhile
//   rollouts.push_weights(step);                // a snapshot; the engine swaps it in soon
//
// How it runs. A producer thread starts GRPO groups (n trajectories of one prompt) in the
// order of the prompt batches (step s's batch is PromptSource::batch(s), group i its
// sample i, seeded exactly as SyncRolloutSource seeds it) on the driver pool, against its
// own engine that holds a COPY of the policy's weights. It may start a group of step s's
// batch only while the engine's weights are version >= s - 1 - max_staleness (AReaL's
// rule): so at max_staleness 0 it starts step s only once the learner has pushed
// version s - 1, which is the synchronous trainer (same trajectories, same parameters).
//
// Weights travel by version: push_weights copies the learner's parameters (a snapshot;
// the learner goes on at once) and the producer swaps them into its engine at the next
// safe point:
//   partial_rollout = true:  as soon as no generation request is running
//                            (Engine::with_model_drained): trajectories in flight keep
//                            going, each step stamped with the version that sampled it;
//   partial_rollout = false: once no trajectory is in flight (no new group starts while a
//                            swap waits): every trajectory comes from one version.
// Every response is sampled by one set of weights either way, and its behaviour
// log-probs are stored with its Step (the off-policy correction's pi_behav).
//
// collect(step) takes train_batch_size finished groups whose oldest step is at most
// max_staleness versions behind the learner's current version (the last push_weights);
// groups beyond the bound are dropped and counted. Among eligible groups it takes the
// oldest first (earliest deadline, so nothing the producer made goes stale waiting), or
// with prefer_fresh the freshest first (what is left behind may then be dropped).
//
// Shutdown: the destructor (and stop()) stops the producer, refuses new generation
// requests, waits for the trajectories in flight to end (a response in progress
// finishes; the next request of that trajectory fails) and joins. A trajectory that
// throws stops the producer; collect() then throws its error.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/train/busy_clock.h"
#include "agentr1/train/rollout_source.h"

namespace agentr1::train {

class PromptSource;

struct AsyncRolloutOptions {
  int max_staleness = 1;         // versions a consumed trajectory's oldest step may lag the
                                 // learner's current version; >= 0
  bool partial_rollout = true;   // trajectories may cross a weight swap (see the top)
  bool prefer_fresh = false;     // take the freshest eligible groups first (default: oldest)
};

class AsyncRolloutSource : public RolloutSource {
 public:
  // policy: the learner's module (read here for the copy, and in push_weights). eo: the
  // engine of the copy. ctx: flow context whose generator is replaced by this source's
  // engine. prompts, drivers: not owned, must outlive this. Throws Error on bad options.
  AsyncRolloutSource(const model::Transformer& policy, rollout::EngineOptions eo, flow::FlowContext ctx,
                     flow::FlowOptions opts, int n, int64_t batch_size, uint64_t seed,
                     const PromptSource& prompts, ThreadPool& drivers, AsyncRolloutOptions a);
  ~AsyncRolloutSource() override;

  // Step `step`'s batch (the first call starts the producer at that step's prompts).
  // Metrics: timing/gen (time spent waiting here), async/staleness_mean / _max (over the
  // batch's steps: current version - the step's policy_version), async/dropped_trajectories
  // (this call) and _total, async/buffered_groups (left for later steps), async/
  // weight_swaps and timing/weight_swap (since the last call), async/rollout_busy_s,
  // async/learner_busy_s and async/overlap_s (between the previous call's return and this
  // one's: rollout = some trajectory in flight, learner = outside collect), the engine's
  // rollout/* counters. Throws Error if a trajectory failed (its sample and repeat).
  RolloutBatch collect(int64_t step) override;
  // fn runs at once: the engine has its own copy of the weights.
  void with_weights_exclusive(const std::function<void()>& fn) override { fn(); }
  // Snapshots the policy's parameters as `version` (the learner's current version from
  // now on); the producer swaps them in at its next safe point.
  void push_weights(int64_t version) override;
  // Stops the producer and waits for the trajectories in flight (idempotent).
  void stop();

  // For tests: the engine's current weights version.
  int64_t engine_version() const;

 private:
  struct Group;
  struct Ready {
    int64_t batch = 0;        // the step whose prompt batch it answers
    int64_t index = 0;        // sample index within the batch
    int64_t min_version = 0;  // oldest policy_version of its steps
    std::vector<Trajectory> trajectories;
  };
  class Gate;

  void producer_loop();
  bool swap_ready() const;   // mu_ held
  bool can_start() const;    // mu_ held
  void apply_swap(std::unique_lock<std::mutex>& lk);
  void start_group(std::unique_lock<std::mutex>& lk);
  void finish_trajectory(const std::shared_ptr<Group>& g, int repeat, std::optional<Trajectory> t,
                         const std::string& error);

  model::Transformer policy_;          // the learner's (read only)
  model::Transformer copy_{nullptr};   // the engine's
  std::unique_ptr<rollout::Engine> engine_;
  std::unique_ptr<Gate> gate_;         // the flows' generator: the engine, until stop()
  flow::FlowContext ctx_;
  flow::FlowOptions opts_;
  int n_;
  int64_t batch_size_;
  uint64_t seed_;
  const PromptSource& prompts_;
  ThreadPool& drivers_;
  AsyncRolloutOptions a_;

  mutable std::mutex mu_;
  std::condition_variable cv_;          // any state change below
  std::thread producer_;
  bool started_ = false;
  bool stop_ = false;
  std::string error_;                   // first trajectory failure
  int64_t first_batch_ = 1;             // the step of the first collect()
  int64_t next_group_ = 0;              // groups started: g -> batch first + g / B, index g % B
  std::map<int64_t, std::vector<Sample>> prompt_cache_;  // batches being started
  int64_t applied_version_ = 0;         // the engine's weights
  int64_t learner_version_ = 0;         // the last push_weights
  std::optional<std::pair<int64_t, std::vector<at::Tensor>>> pending_;  // snapshot to swap in
  int64_t inflight_trajectories_ = 0;
  std::deque<Ready> ready_;
  int64_t dropped_total_ = 0;
  int64_t swaps_ = 0;
  double swap_seconds_ = 0;
  BusyClock rollout_busy_;              // some trajectory in flight
  BusyClock learner_busy_;              // outside collect() (the trainer thread's work)
  std::chrono::steady_clock::time_point last_return_;
};

}  // namespace agentr1::train
