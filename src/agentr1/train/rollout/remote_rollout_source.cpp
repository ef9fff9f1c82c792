#include "agentr1/train/rollout/remote_rollout_source.h"

#include <algorithm>
#include <chrono>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/flow/group_rollout.h"
#include "agentr1/train/distributed/distributed.h"
#include "agentr1/train/prompt_source.h"

namespace agentr1::train {

using Clock = std::chrono::steady_clock;

std::map<std::string, double> remote_metrics(const rollout::RemoteGenerator::Stats& st) {
  std::map<std::string, double> m;
  m["rollout/generated_tokens"] = static_cast<double>(st.generated_tokens);
  m["remote/requests"] = static_cast<double>(st.requests);
  m["remote/retries"] = static_cast<double>(st.retries);
  m["remote/unknown_logprobs"] = static_cast<double>(st.unknown_logprobs);
  const int64_t busiest = st.per_server.empty() ? 0 : *std::max_element(st.per_server.begin(), st.per_server.end());
  m["remote/server_share_max"] =
      st.requests > 0 ? static_cast<double>(busiest) / static_cast<double>(st.requests) : 0.0;
  return m;
}

RemoteRolloutSource::RemoteRolloutSource(std::unique_ptr<rollout::RemoteGenerator> generator, WeightPusher weights,
                                         flow::FlowContext ctx, flow::FlowOptions opts, int n, uint64_t seed,
                                         const PromptSource& prompts, ThreadPool& drivers)
    : gen_(std::move(generator)),
      weights_(std::move(weights)),
      ctx_(std::move(ctx)),
      opts_(std::move(opts)),
      n_(n),
      seed_(seed),
      prompts_(prompts),
      drivers_(drivers) {
  AGENTR1_CHECK(gen_ != nullptr, "RemoteRolloutSource: no generator");
  AGENTR1_CHECK(n_ >= 1, "rollout.n must be >= 1, got " << n_);
  AGENTR1_CHECK(ctx_.generator == gen_.get(), "RemoteRolloutSource: ctx.generator must be the remote generator");
}

RemoteRolloutSource::~RemoteRolloutSource() = default;

RolloutBatch RemoteRolloutSource::collect(int64_t step) {
  const auto t0 = Clock::now();
  gen_->reset_stats();
  RolloutBatch b;
  const std::vector<Sample> prompts = prompts_.batch(step);
  const uint64_t seed = step_rollout_seed(seed_, step);
  b.trajectories = pg_ != nullptr ? run_group_rollouts_dp(prompts, n_, ctx_, opts_, seed, drivers_, *pg_)
                                  : flow::run_group_rollouts(prompts, n_, ctx_, opts_, seed, drivers_);
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  b.metrics = remote_metrics(gen_->stats());
  b.metrics["timing/gen"] = dt;
  b.metrics["perf/gen_tokens_per_s"] = b.metrics["rollout/generated_tokens"] / std::max(1e-9, dt);
  b.metrics["timing/weight_sync"] = last_push_s_;
  return b;
}

void RemoteRolloutSource::push_weights(int64_t version) {
  const auto t0 = Clock::now();
  if (pg_ == nullptr) {
    weights_.push(*gen_, version);
  } else {
    // Rank 0 hands the (identical) weights over; the gather tells every rank how it went.
    std::string error;
    if (pg_->rank() == 0) {
      try {
        weights_.push(*gen_, version);
      } catch (const std::exception& e) {
        error = e.what();
        if (error.empty()) error = "unknown error";
      }
    }
    const std::vector<std::string> outcome =
        pg_->all_gather_bytes(error, "policy version " + std::to_string(version) + " loaded by the remote engines");
    if (!outcome[0].empty()) {
      if (pg_->rank() == 0) throw Error(outcome[0]);
      throw Error("rank 0 failed to hand policy version " + std::to_string(version) + " to the remote engines: " +
                  outcome[0]);
    }
    gen_->set_policy_version(version);  // rank 0's update_weights stamped it already
  }
  last_push_s_ = std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace agentr1::train
