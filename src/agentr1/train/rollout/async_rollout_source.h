// agentr1/train/rollout/async_rollout_source.h — rollout and training at once, with bounded
// staleness (Agent-R1's second limit; AReaL's and verl's fully asynchronous trainers).
//
//   AsyncRolloutOptions a;  a.max_staleness = 1;
//   AsyncRolloutSource rollouts(std::make_unique<EngineCopyBackend>(policy, engine_opts), ctx,
//                               cfg.rollout.flow, n, batch_size, seed, prompts, drivers, a);
//   RolloutBatch b = rollouts.collect(step);   // waits only if the producer is behind
//   learner.update(...);                        // the producer keeps generating meanwhile
//   rollouts.push_weights(step);                // a snapshot; the engine swaps it in soon
//
//   // rollout.engine=remote: the servers generate and hold the weights.
//   auto backend = std::make_unique<RemoteBackend>(std::move(remote_generator),
//                                                  WeightPusher(policy, dtype, wdir, model_dir));
//   AsyncRolloutSource remote(std::move(backend), ctx, cfg.rollout.flow, n, batch_size, seed, prompts, drivers, a);
//   remote.push_weights(0);  remote.wait_weights_loaded();   // the servers start from the learner's
//
// How it runs. A producer thread starts GRPO groups (n trajectories of one prompt) in the
// order of the prompt batches (step s's batch is PromptSource::batch(s), group i its
// sample i, seeded exactly as SyncRolloutSource seeds it) on the driver pool, against its
// own engine that holds a COPY of the policy's weights. It may start a group of step s's
// batch only while the engine's weights are version >= s - 1 - max_staleness (AReaL's
// rule): so at max_staleness 0 it starts step s only once the learner has pushed
// version s - 1, which is the synchronous trainer (same trajectories, same parameters).
//
// Weights travel by version (rollout_backend.h): push_weights stages them on the
// learner's thread (EngineCopyBackend: a snapshot of the parameters; the learner goes on
// at once) and the producer applies them at the next safe point:
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
// Remote servers (RemoteBackend; rollout.engine=remote). The producer generates
// through the RemoteGenerator and the servers hold the only other copy of the weights.
// push_weights(v) writes the policy to <weights_dir>/policy_v<NNNNNN> on the calling
// (learner's) thread: that write is all it costs the learner (timing/weight_write). The
// producer then asks every server to load it (POST /update_weights_from_disk, weight_push.h)
// at its next safe point, as above, and counts version v as loaded (the staleness rule's
// version) only once every server answered; a version replaced before it was loaded is
// deleted unloaded. The safe points, remotely:
//   partial_rollout = true:  at once, with trajectories and requests in flight. The
//                            server drains: `agentr1 serve` lets the requests it admitted
//                            finish on the old weights, holds new ones until the copy is
//                            done, and stamps each response with the version that sampled
//                            it (choices[0].policy_version), so every step keeps its exact
//                            version. A server that does not report the version (vLLM,
//                            SGLang) gets the client's stamp: the old version until every
//                            server answered the reload, which is exact or older than the
//                            truth (never newer) when the server finishes in-flight
//                            requests before it answers.
//   partial_rollout = false: no trajectory is in flight while the reload happens (no new
//                            group starts while one waits; the reload is sent once the
//                            last trajectory ended): every trajectory comes from one
//                            version, whatever the server does with requests.
// wait_weights_loaded() blocks until the servers hold the learner's current version (the
// trainer calls it before validating, which generates through the same servers). A
// server that fails to load stops the producer; collect() then throws its error.
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

#include "agentr1/train/busy_clock.h"
#include "agentr1/train/rollout/rollout_backend.h"
#include "agentr1/train/rollout/rollout_source.h"

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
  // backend: where the producer generates; owned; it replaces ctx's generator. An
  // in-process one must hold its own copy of the weights (EngineCopyBackend), since the
  // learner updates while the producer generates. prompts, drivers: not owned, must
  // outlive this. Throws Error on bad options. With a backend that needs_first_push()
  // (remote servers) collect() before the first push_weights throws Error.
  AsyncRolloutSource(std::unique_ptr<RolloutBackend> backend, flow::FlowContext ctx, flow::FlowOptions opts, int n,
                     int64_t batch_size, uint64_t seed, const PromptSource& prompts, ThreadPool& drivers,
                     AsyncRolloutOptions a);
  ~AsyncRolloutSource() override;

  // Step `step`'s batch (the first call starts the producer at that step's prompts).
  // Metrics: timing/gen (time spent waiting here), async/staleness_mean / _max (over the
  // batch's steps: current version - the step's policy_version), async/dropped_trajectories
  // (this call) and _total, async/buffered_groups (left for later steps), async/
  // weight_swaps and timing/weight_swap (since the last call), async/rollout_busy_s,
  // async/learner_busy_s and async/overlap_s (between the previous call's return and this
  // one's: rollout = some trajectory in flight, learner = outside collect), the backend's
  // counters since the last call (rollout_backend.h: the engine's rollout/*, or remote/*,
  // which include the requests of a validation run in between, as the trainer validates
  // through the same client) and timing/weight_write (the learner's share of the pushes
  // since the last call: snapshots or writes).
  // Throws Error if a trajectory failed (its sample and repeat) or a server failed to load
  // a version.
  RolloutBatch collect(int64_t step) override;
  // fn runs at once: the backend has its own copy of the weights.
  void with_weights_exclusive(const std::function<void()>& fn) override { fn(); }
  // Stages the policy's weights as `version` (the learner's current version from now on):
  // a snapshot, or remote a write to disk (Error naming the directory if that fails); the
  // producer applies them at its next safe point.
  void push_weights(int64_t version) override;
  // Blocks until the generator holds the learner's current version: before the first
  // collect() it swaps a pushed version in on the calling thread, later it waits for the
  // producer to (with partial_rollout=false that includes the trajectories in flight
  // ending). Throws the producer's error, or Error after stop().
  void wait_weights_loaded() override;
  // Stops the producer and waits for the trajectories in flight (idempotent).
  void stop();

  // For tests: the version the backend's generator holds.
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

  std::unique_ptr<RolloutBackend> backend_;
  std::unique_ptr<Gate> gate_;         // the flows' generator: the backend's, until stop()
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
  bool pushed_ = false;                 // push_weights was called
  std::optional<StagedWeights> pending_;  // the version to apply next
  double write_seconds_ = 0;            // push_weights' staging since the last collect
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
