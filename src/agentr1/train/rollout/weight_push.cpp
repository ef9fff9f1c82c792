#include "agentr1/train/rollout/weight_push.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/rollout/remote_generator.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/train/run_dir.h"

namespace agentr1::train {

namespace fs = std::filesystem;

std::string policy_dir_name(int64_t version) {
  AGENTR1_CHECK(version >= 0, "policy version must be >= 0, got " << version);
  char name[32];
  std::snprintf(name, sizeof(name), "policy_v%06lld", static_cast<long long>(version));
  return name;
}

WeightPusher::WeightPusher(model::Transformer policy, at::ScalarType dtype, std::string weights_dir,
                           std::string tokenizer_dir)
    : policy_(std::move(policy)),
      dtype_(dtype),
      weights_dir_(std::move(weights_dir)),
      tokenizer_dir_(std::move(tokenizer_dir)) {
  AGENTR1_CHECK(!weights_dir_.empty(), "WeightPusher: weights_dir is empty");
}

std::string WeightPusher::write(int64_t version) {
  const std::string dir = fs::absolute(fs::path(weights_dir_) / policy_dir_name(version)).lexically_normal().string();
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
  return dir;
}

void WeightPusher::load(rollout::RemoteGenerator& gen, const std::string& dir, int64_t version) {
  gen.update_weights(dir, version);  // stamps `version` once every server loaded it
  if (!loaded_dir_.empty() && loaded_dir_ != dir) discard(loaded_dir_);  // no server reads it any more
  loaded_dir_ = dir;
}

double WeightPusher::push(rollout::RemoteGenerator& gen, int64_t version) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = write(version);
  load(gen, dir, version);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  AGENTR1_LOG(DEBUG) << "remote engines loaded policy version " << version << " from " << dir << " in " << dt << " s";
  return dt;
}

void WeightPusher::discard(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace agentr1::train
