#include "agentr1/train/rollout/rollout_source.h"

#include <chrono>

#include "agentr1/core/error.h"
#include "agentr1/core/rng.h"
#include "agentr1/core/timing.h"
#include "agentr1/flow/group_rollout.h"
#include "agentr1/train/distributed/distributed.h"
#include "agentr1/train/prompt_source.h"

namespace agentr1::train {

uint64_t step_rollout_seed(uint64_t run_seed, int64_t step) {
  return derive_seed(run_seed, {static_cast<uint64_t>(step)});
}

SyncRolloutSource::SyncRolloutSource(RolloutBackend& backend, flow::FlowContext ctx, flow::FlowOptions opts, int n,
                                     uint64_t seed, const PromptSource& prompts, ThreadPool& drivers)
    : backend_(backend),
      ctx_(std::move(ctx)),
      opts_(std::move(opts)),
      n_(n),
      seed_(seed),
      prompts_(prompts),
      drivers_(drivers) {
  AGENTR1_CHECK(n_ >= 1, "rollout.n must be >= 1, got " << n_);
  AGENTR1_CHECK(ctx_.generator == &backend_.generator(), "SyncRolloutSource: ctx.generator must be the backend's");
}

RolloutBatch SyncRolloutSource::collect(int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  (void)backend_.take_metrics();  // what came before (a validation) is not these rollouts'
  RolloutBatch b;
  const std::vector<Sample> prompts = prompts_.batch(step);
  const uint64_t seed = step_rollout_seed(seed_, step);
  b.trajectories = pg_ != nullptr ? run_group_rollouts_dp(prompts, n_, ctx_, opts_, seed, drivers_, *pg_)
                                  : flow::run_group_rollouts(prompts, n_, ctx_, opts_, seed, drivers_);
  const double dt = seconds_since(t0);
  b.metrics = backend_.take_metrics();
  b.metrics["timing/gen"] = dt;
  b.metrics["perf/gen_tokens_per_s"] = b.metrics["rollout/generated_tokens"] / std::max(1e-9, dt);
  b.metrics["timing/weight_sync"] = last_push_s_;
  return b;
}

void SyncRolloutSource::with_weights_exclusive(const std::function<void()>& fn) { backend_.with_weights_exclusive(fn); }

void SyncRolloutSource::push_weights(int64_t version) {
  const auto t0 = std::chrono::steady_clock::now();
  backend_.apply(backend_.stage(version), /*in_flight=*/false);
  last_push_s_ = seconds_since(t0);
}

}  // namespace agentr1::train
