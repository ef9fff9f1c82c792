#include "agentr1/train/remote_rollout_source.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/flow/group_rollout.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/train/prompt_source.h"
#include "agentr1/train/run_dir.h"

namespace agentr1::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

RemoteRolloutSource::RemoteRolloutSource(std::unique_ptr<rollout::RemoteGenerator> generator,
                                         model::Transformer policy, at::ScalarType dtype, std::string weights_dir,
                                         std::string tokenizer_dir, flow::FlowContext ctx, flow::FlowOptions opts,
                                         int n, uint64_t seed, const PromptSource& prompts, ThreadPool& drivers)
    : gen_(std::move(generator)),
      policy_(std::move(policy)),
      dtype_(dtype),
      weights_dir_(std::move(weights_dir)),
      tokenizer_dir_(std::move(tokenizer_dir)),
      ctx_(std::move(ctx)),
      opts_(std::move(opts)),
      n_(n),
      seed_(seed),
      prompts_(prompts),
      drivers_(drivers) {
  AGENTR1_CHECK(gen_ != nullptr, "RemoteRolloutSource: no generator");
  AGENTR1_CHECK(n_ >= 1, "rollout.n must be >= 1, got " << n_);
  AGENTR1_CHECK(ctx_.generator == gen_.get(), "RemoteRolloutSource: ctx.generator must be the remote generator");
  AGENTR1_CHECK(!weights_dir_.empty(), "RemoteRolloutSource: weights_dir is empty");
}

RemoteRolloutSource::~RemoteRolloutSource() = default;

RolloutBatch RemoteRolloutSource::collect(int64_t step) {
  const auto t0 = Clock::now();
  gen_->reset_stats();
  RolloutBatch b;
  const std::vector<Sample> prompts = prompts_.batch(step);
  b.trajectories = flow::run_group_rollouts(prompts, n_, ctx_, opts_, step_rollout_seed(seed_, step), drivers_);
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  const rollout::RemoteGenerator::Stats st = gen_->stats();
  b.metrics["timing/gen"] = dt;
  b.metrics["rollout/generated_tokens"] = static_cast<double>(st.generated_tokens);
  b.metrics["perf/gen_tokens_per_s"] = static_cast<double>(st.generated_tokens) / std::max(1e-9, dt);
  b.metrics["remote/requests"] = static_cast<double>(st.requests);
  b.metrics["remote/retries"] = static_cast<double>(st.retries);
  b.metrics["remote/unknown_logprobs"] = static_cast<double>(st.unknown_logprobs);
  const int64_t busiest = st.per_server.empty() ? 0 : *std::max_element(st.per_server.begin(), st.per_server.end());
  b.metrics["remote/server_share_max"] =
      st.requests > 0 ? static_cast<double>(busiest) / static_cast<double>(st.requests) : 0.0;
  b.metrics["timing/weight_sync"] = last_push_s_;
  return b;
}

void RemoteRolloutSource::push_weights(int64_t version) {
  const auto t0 = Clock::now();
  char name[32];
  std::snprintf(name, sizeof(name), "policy_v%06lld", static_cast<long long>(version));
  const std::string dir = fs::absolute(fs::path(weights_dir_) / name).lexically_normal().string();
  const std::string tmp = dir + ".tmp";
  with_context("writing the policy for the remote engines to '" + dir + "' (rollout.remote.weights_dir)", [&] {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    make_dirs(tmp);
    model::save_pretrained(policy_, tmp, dtype_);
    copy_tokenizer_files(tokenizer_dir_, tmp);
    fs::remove_all(dir, ec);
    fs::rename(tmp, dir);
  });
  gen_->update_weights(dir, version);  // stamps `version` once every server loaded it
  if (!loaded_dir_.empty() && loaded_dir_ != dir) {
    std::error_code ec;
    fs::remove_all(loaded_dir_, ec);  // no server reads it any more
  }
  loaded_dir_ = dir;
  last_push_s_ = std::chrono::duration<double>(Clock::now() - t0).count();
  AGENTR1_LOG(DEBUG) << "remote engines loaded policy version " << version << " from " << dir << " in "
                     << last_push_s_ << " s";
}

}  // namespace agentr1::train
