#include "agentr1/train/rollout/rollout_backend.h"

#include <algorithm>

#include <torch/nn/module.h>

#include "agentr1/core/error.h"
#include "agentr1/train/distributed/distributed.h"

namespace agentr1::train {

namespace {

std::map<std::string, double> engine_metrics(rollout::Engine& engine) {
  const auto es = engine.stats();
  engine.reset_stats();
  return {{"rollout/prefix_reuse_rate", es.prefix_reuse_rate()},
          {"rollout/mean_decode_batch", es.mean_decode_batch()},
          {"rollout/generated_tokens", static_cast<double>(es.generated_tokens)}};
}

// What a weight version consists of: every parameter, or under LoRA only the adapters
// (the frozen base is shared, see EngineCopyBackend's constructor).
std::vector<at::Tensor> versioned_parameters(const model::Transformer& m) {
  if (m->lora() == nullptr) return m->parameters();
  std::vector<at::Tensor> out;
  for (const auto& [name, t] : m->lora_parameters()) out.push_back(t);
  return out;
}

// Copies src's versioned parameters into dst's (same architecture), in place. The
// engine must not be computing (paused or drained).
void copy_parameters(const std::vector<at::Tensor>& src, model::Transformer& dst) {
  at::NoGradGuard no_grad;
  auto params = versioned_parameters(dst);
  AGENTR1_CHECK(params.size() == src.size(), "weight swap: " << src.size() << " tensors for a model with "
                                                             << params.size() << " parameters");
  for (size_t i = 0; i < src.size(); ++i) params[i].copy_(src[i]);
}

std::vector<at::Tensor> snapshot(const model::Transformer& m) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  for (const auto& p : versioned_parameters(m)) out.push_back(p.detach().clone());
  return out;
}

}  // namespace

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

// ---- SharedEngineBackend

SharedEngineBackend::SharedEngineBackend(rollout::Engine& engine) : engine_(engine) {}

std::map<std::string, double> SharedEngineBackend::take_metrics() { return engine_metrics(engine_); }

StagedWeights SharedEngineBackend::stage(int64_t version) {
  StagedWeights w;
  w.version = version;  // the engine reads the learner's module itself
  return w;
}

void SharedEngineBackend::apply(StagedWeights w, bool /*in_flight*/) {
  engine_.clear_prefix_cache();
  engine_.set_policy_version(w.version);
}

void SharedEngineBackend::with_weights_exclusive(const std::function<void()>& fn) {
  engine_.with_model([&](model::Transformer&) { fn(); });
}

// ---- EngineCopyBackend

EngineCopyBackend::EngineCopyBackend(const model::Transformer& policy, rollout::EngineOptions eo,
                                     std::optional<at::ScalarType> dtype)
    : policy_(policy) {
  const at::Tensor first = policy_->parameters().front();
  const at::ScalarType dt = dtype.value_or(first.scalar_type());
  copy_ = model::init_random(policy_->config(), /*seed=*/0);
  copy_->to(first.device(), dt);
  if (const model::LoraOptions* lora = policy_->lora()) {
    // The base never changes under LoRA: the copy shares the policy's base tensors
    // (its own are released) and owns only adapters, updated version by version.
    at::NoGradGuard no_grad;
    auto mine = copy_->named_parameters();
    for (const auto& kv : policy_->named_parameters()) {
      if (kv.value().requires_grad()) continue;  // an adapter
      at::Tensor* t = mine.find(kv.key());
      AGENTR1_CHECK(t != nullptr, "engine copy: no parameter '" << kv.key() << "'");
      // Shared when the dtypes agree; else converted once (the base never changes).
      t->set_data(kv.value().scalar_type() == dt ? kv.value() : kv.value().to(dt));
    }
    copy_->add_lora(*lora, /*seed=*/0);
  }
  copy_parameters(snapshot(policy_), copy_);
  copy_->eval();
  for (auto& p : copy_->parameters()) p.requires_grad_(false);
  engine_ = std::make_unique<rollout::Engine>(copy_, std::move(eo));
}

std::map<std::string, double> EngineCopyBackend::take_metrics() { return engine_metrics(*engine_); }

StagedWeights EngineCopyBackend::stage(int64_t version) {
  StagedWeights w;
  w.version = version;
  w.tensors = snapshot(policy_);
  return w;
}

void EngineCopyBackend::apply(StagedWeights w, bool in_flight) {
  auto swap = [&](model::Transformer& m) {
    copy_parameters(w.tensors, m);
    engine_->clear_prefix_cache();  // keys/values of the old weights
    engine_->set_policy_version(w.version);
  };
  if (in_flight)
    engine_->with_model_drained(swap);  // no response straddles the swap
  else
    engine_->with_model(swap);          // nothing in flight: the engine is idle
}

// ---- RemoteBackend

RemoteBackend::RemoteBackend(std::unique_ptr<rollout::RemoteGenerator> generator, WeightPusher weights)
    : gen_(std::move(generator)), weights_(std::move(weights)) {
  AGENTR1_CHECK(gen_ != nullptr, "RemoteBackend: no generator");
  seen_ = gen_->stats();
}

RemoteBackend::~RemoteBackend() = default;

std::map<std::string, double> RemoteBackend::take_metrics() {
  const rollout::RemoteGenerator::Stats now = gen_->stats();
  rollout::RemoteGenerator::Stats d = now;
  d.requests -= seen_.requests;
  d.retries -= seen_.retries;
  d.generated_tokens -= seen_.generated_tokens;
  d.unknown_logprobs -= seen_.unknown_logprobs;
  for (size_t i = 0; i < d.per_server.size() && i < seen_.per_server.size(); ++i) d.per_server[i] -= seen_.per_server[i];
  seen_ = now;
  return remote_metrics(d);
}

StagedWeights RemoteBackend::stage(int64_t version) {
  StagedWeights w;
  w.version = version;
  if (pg_ == nullptr) {
    w.dir = weights_.write(version);
  } else if (pg_->rank() == 0) {
    // apply() tells every rank how it went; throwing here would leave them waiting.
    try {
      w.dir = weights_.write(version);
    } catch (const std::exception& e) {
      w.error = e.what();
      if (w.error.empty()) w.error = "unknown error";
    }
  }
  return w;
}

void RemoteBackend::apply(StagedWeights w, bool /*in_flight: the servers drain*/) {
  if (pg_ == nullptr) {
    weights_.load(*gen_, w.dir, w.version);
    return;
  }
  // Rank 0 has the servers load the (identical) weights; the gather tells every rank.
  std::string error = w.error;
  if (pg_->rank() == 0 && error.empty()) {
    try {
      weights_.load(*gen_, w.dir, w.version);
    } catch (const std::exception& e) {
      error = e.what();
      if (error.empty()) error = "unknown error";
    }
  }
  const std::vector<std::string> outcome =
      pg_->all_gather_bytes(error, "policy version " + std::to_string(w.version) + " loaded by the remote engines");
  if (!outcome[0].empty()) {
    if (pg_->rank() == 0) throw Error(outcome[0]);
    throw Error("rank 0 failed to hand policy version " + std::to_string(w.version) + " to the remote engines: " +
                outcome[0]);
  }
  gen_->set_policy_version(w.version);  // rank 0's load stamped it already
}

void RemoteBackend::discard(StagedWeights& w) {
  if (!w.dir.empty()) weights_.discard(w.dir);
  w.dir.clear();
}

std::string RemoteBackend::describe() const {
  return "remote servers; weights handed over in " + weights_.weights_dir();
}

}  // namespace agentr1::train
