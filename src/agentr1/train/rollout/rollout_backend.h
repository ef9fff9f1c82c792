// agentr1/train/rollout/rollout_backend.h — where rollouts are generated and how the
// learner's weights reach that place. The two schedulers (SyncRolloutSource in
// rollout_source.h, AsyncRolloutSource in async_rollout_source.h) run on any of them:
//
//   SharedEngineBackend  the in-process engine over the learner's own module (no copy):
//                        nothing to hand over; a new version only clears the prefix cache
//   EngineCopyBackend    an in-process engine over its own copy of the weights (the
//                        asynchronous trainer): a version is a snapshot, copied in later
//   RemoteBackend        OpenAI-compatible servers (rollout.engine=remote): a version is
//                        written to disk (weight_push.h), then every server loads it
//
//   SharedEngineBackend b(engine);
//   SyncRolloutSource rollouts(b, ctx, opts, n, seed, prompts, drivers);   // ctx.generator = &b.generator()
//   StagedWeights w = b.stage(step);      // the learner's thread: snapshot / write / nothing
//   b.apply(std::move(w), false);         // into service: copy in / servers load / clear cache
//
// Handing a version over is two calls so that an asynchronous scheduler can stage on the
// learner's thread (which goes on at once) and apply at its own safe point; a
// synchronous one calls both in turn.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/core/generator.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/rollout/remote_generator.h"
#include "agentr1/train/rollout/weight_push.h"

namespace agentr1::train {

class ProcessGroup;

// rollout.remote.*: the client's options plus where the trainer hands weights over.
struct RemoteRolloutOptions {
  rollout::RemoteOptions client;  // servers, wire format, timeouts, retries, in-flight cap
  std::string weights_dir;        // where the trainer writes the policy for the servers to
                                  // load (a path they read under the same name: a shared
                                  // file system when they run elsewhere); "" = <run
                                  // dir>/remote_weights
  template <class V>
  void visit(V& v) {
    client.visit(v);
    v.field("weights_dir", weights_dir,
            "where weights are written for the servers to load (same path on their side); empty = "
            "<run dir>/remote_weights");
  }
  // Throws Error naming the rollout.remote.* key. Called by RolloutConfig::validate only
  // when rollout.engine=remote (so not named validate(): bind_config would call that
  // for every run).
  void validate_remote() const { client.validate("rollout.remote."); }
};

// The remote/* metrics of a generator's counters: remote/requests, remote/retries,
// remote/unknown_logprobs, remote/server_share_max (the busiest server's share of the
// requests), rollout/generated_tokens.
std::map<std::string, double> remote_metrics(const rollout::RemoteGenerator::Stats& st);

// One version of the learner's weights on its way to the generator.
struct StagedWeights {
  int64_t version = 0;
  std::vector<at::Tensor> tensors;  // EngineCopyBackend: the parameters' snapshot
  std::string dir;                  // RemoteBackend: the directory written (rank 0)
  std::string error;                // RemoteBackend under data parallelism: rank 0's write error
};

class RolloutBackend {
 public:
  virtual ~RolloutBackend() = default;
  // What the flows generate with.
  virtual Generator& generator() = 0;
  // The generator's counters since the previous call (the first call: since it was
  // made): rollout/generated_tokens and either the engine's rollout/prefix_reuse_rate and
  // rollout/mean_decode_batch or remote_metrics(). One caller at a time.
  virtual std::map<std::string, double> take_metrics() = 0;
  // On the learner's thread: takes the policy's current weights as `version`. Throws
  // Error when they cannot be taken (a write that failed).
  virtual StagedWeights stage(int64_t version) = 0;
  // Puts staged weights into service; later results are stamped w.version. in_flight:
  // other requests may be running (they finish on the old weights first). Throws Error
  // (naming a server that failed to load; every rank's apply throws under data
  // parallelism).
  virtual void apply(StagedWeights w, bool in_flight) = 0;
  // Staged weights replaced before they were applied.
  virtual void discard(StagedWeights&) {}
  // Runs fn while no generation reads the weights fn changes (the shared engine pauses;
  // the others hold their own copy: fn runs at once).
  virtual void with_weights_exclusive(const std::function<void()>& fn) { fn(); }
  // True when the generator's weights are unknown until the first apply (remote servers).
  virtual bool needs_first_push() const { return false; }
  // A one-line description for the log.
  virtual std::string describe() const = 0;
};

// The in-process engine that shares the learner's module.
class SharedEngineBackend : public RolloutBackend {
 public:
  explicit SharedEngineBackend(rollout::Engine& engine);  // not owned
  Generator& generator() override { return engine_; }
  std::map<std::string, double> take_metrics() override;
  StagedWeights stage(int64_t version) override;
  // Clears the prefix cache (keys/values of the old weights) and sets the version.
  void apply(StagedWeights w, bool in_flight) override;
  void with_weights_exclusive(const std::function<void()>& fn) override;
  std::string describe() const override { return "the in-process engine (shares the learner's weights)"; }

 private:
  rollout::Engine& engine_;
};

// An in-process engine over its own copy of the learner's weights.
class EngineCopyBackend : public RolloutBackend {
 public:
  // policy: the learner's module (read by stage()); the copy has its device and `dtype`
  // (unset: the policy's; bf16 under an fp32 policy halves the bytes decoding reads).
  EngineCopyBackend(const model::Transformer& policy, rollout::EngineOptions eo,
                    std::optional<at::ScalarType> dtype = std::nullopt);
  Generator& generator() override { return *engine_; }
  std::map<std::string, double> take_metrics() override;
  StagedWeights stage(int64_t version) override;  // a snapshot of the parameters
  // Copies the snapshot in while no response is being generated (in_flight: after the
  // running ones end; else the engine must be idle) and clears the prefix cache.
  void apply(StagedWeights w, bool in_flight) override;
  std::string describe() const override { return "an in-process engine over a copy of the weights"; }

 private:
  model::Transformer policy_{nullptr};
  model::Transformer copy_{nullptr};
  std::unique_ptr<rollout::Engine> engine_;
};

// OpenAI-compatible servers. Under data parallelism (set_process_group) every rank has
// its own client of the same servers; the weights are the same on every rank after an
// update, so rank 0 alone writes and the servers load once, and every rank learns the
// outcome (apply is then a collective: rank 0's error fails every rank).
class RemoteBackend : public RolloutBackend {
 public:
  RemoteBackend(std::unique_ptr<rollout::RemoteGenerator> generator, WeightPusher weights);
  ~RemoteBackend() override;
  Generator& generator() override { return *gen_; }
  // Differences of the client's running totals (nothing is lost while requests go on).
  std::map<std::string, double> take_metrics() override;
  StagedWeights stage(int64_t version) override;  // writes <weights_dir>/policy_v<N>
  // Every server loads w.dir (a server drains the requests it admitted first, see
  // weight_push.h), then the previous version's directory is removed.
  void apply(StagedWeights w, bool in_flight) override;
  void discard(StagedWeights& w) override;        // removes the unloaded directory
  bool needs_first_push() const override { return true; }
  std::string describe() const override;
  void set_process_group(ProcessGroup* pg) { pg_ = pg; }  // not owned; nullptr = one process

  rollout::RemoteGenerator& client() { return *gen_; }
  // The directory the servers loaded last ("" before the first apply, and on ranks > 0).
  const std::string& loaded_dir() const { return weights_.loaded_dir(); }

 private:
  std::unique_ptr<rollout::RemoteGenerator> gen_;
  WeightPusher weights_;
  ProcessGroup* pg_ = nullptr;
  rollout::RemoteGenerator::Stats seen_;  // the totals at the previous take_metrics
};

}  // namespace agentr1::train
