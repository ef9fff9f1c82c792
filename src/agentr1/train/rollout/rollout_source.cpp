#include "agentr1/train/rollout/rollout_source.h"

#include <chrono>

#include "agentr1/core/error.h"
#include "agentr1/core/rng.h"
#include "agentr1/flow/group_rollout.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/train/distributed/distributed.h"
#include "agentr1/train/prompt_source.h"

namespace agentr1::train {

uint64_t step_rollout_seed(uint64_t run_seed, int64_t step) {
  return derive_seed(run_seed, {static_cast<uint64_t>(step)});
}

SyncRolloutSource::SyncRolloutSource(rollout::Engine& engine, flow::FlowContext ctx, flow::FlowOptions opts, int n,
                                     uint64_t seed, const PromptSource& prompts, ThreadPool& drivers)
    : engine_(engine),
      ctx_(std::move(ctx)),
      opts_(std::move(opts)),
      n_(n),
      seed_(seed),
      prompts_(prompts),
      drivers_(drivers) {
  AGENTR1_CHECK(n_ >= 1, "rollout.n must be >= 1, got " << n_);
  AGENTR1_CHECK(ctx_.generator == &engine_, "SyncRolloutSource: ctx.generator must be the engine");
}

RolloutBatch SyncRolloutSource::collect(int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  engine_.reset_stats();
  RolloutBatch b;
  const std::vector<Sample> prompts = prompts_.batch(step);
  const uint64_t seed = step_rollout_seed(seed_, step);
  b.trajectories = pg_ != nullptr ? run_group_rollouts_dp(prompts, n_, ctx_, opts_, seed, drivers_, *pg_)
                                  : flow::run_group_rollouts(prompts, n_, ctx_, opts_, seed, drivers_);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto es = engine_.stats();
  b.metrics["timing/gen"] = dt;
  b.metrics["rollout/prefix_reuse_rate"] = es.prefix_reuse_rate();
  b.metrics["rollout/mean_decode_batch"] = es.mean_decode_batch();
  b.metrics["rollout/generated_tokens"] = static_cast<double>(es.generated_tokens);
  b.metrics["perf/gen_tokens_per_s"] = static_cast<double>(es.generated_tokens) / std::max(1e-9, dt);
  return b;
}

void SyncRolloutSource::with_weights_exclusive(const std::function<void()>& fn) {
  engine_.with_model([&](model::Transformer&) { fn(); });
}

void SyncRolloutSource::push_weights(int64_t version) {
  engine_.clear_prefix_cache();
  engine_.set_policy_version(version);
}

}  // namespace agentr1::train
