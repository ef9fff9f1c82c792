#include "agentr1/train/rollout/async_rollout_source.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include <torch/nn/module.h>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/timing.h"
#include "agentr1/flow/group_rollout.h"
#include "agentr1/train/prompt_source.h"
#include "agentr1/train/rollout/remote_rollout_source.h"

namespace agentr1::train {

namespace {
using Clock = std::chrono::steady_clock;

// Copies src's parameters into dst's (same architecture), in place. The engine must not
// be computing (paused or drained).
void copy_parameters(const std::vector<at::Tensor>& src, model::Transformer& dst) {
  at::NoGradGuard no_grad;
  auto params = dst->parameters();
  AGENTR1_CHECK(params.size() == src.size(), "weight swap: " << src.size() << " tensors for a model with "
                                                             << params.size() << " parameters");
  for (size_t i = 0; i < src.size(); ++i) params[i].copy_(src[i]);
}

std::vector<at::Tensor> snapshot(const model::Transformer& m) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  for (const auto& p : m->parameters()) out.push_back(p.detach().clone());
  return out;
}
}  // namespace

// The flows' Generator: forwards to the engine until stop(), then refuses new requests
// (so a stopping source never waits for whole trajectories, only for the responses
// already being generated).
class AsyncRolloutSource::Gate : public Generator {
 public:
  explicit Gate(Generator& inner) : inner_(inner) {}
  std::future<GenResult> submit(GenRequest request) override {
    if (stopped_.load()) throw Error("the asynchronous rollout is stopping; request not started");
    return inner_.submit(std::move(request));
  }
  int max_context() const override { return inner_.max_context(); }
  void stop() { stopped_.store(true); }

 private:
  Generator& inner_;
  std::atomic<bool> stopped_{false};
};

struct AsyncRolloutSource::Group {
  int64_t batch = 0;
  int64_t index = 0;
  Sample sample;
  uint64_t seed = 0;
  std::vector<std::optional<Trajectory>> trajectories;
  int finished = 0;
  std::string error;
};

AsyncRolloutSource::AsyncRolloutSource(flow::FlowContext ctx, flow::FlowOptions opts, int n, int64_t batch_size,
                                       uint64_t seed, const PromptSource& prompts, ThreadPool& drivers,
                                       AsyncRolloutOptions a)
    : ctx_(std::move(ctx)),
      opts_(std::move(opts)),
      n_(n),
      batch_size_(batch_size),
      seed_(seed),
      prompts_(prompts),
      drivers_(drivers),
      a_(a) {
  AGENTR1_CHECK(n_ >= 1, "rollout.n must be >= 1, got " << n_);
  AGENTR1_CHECK(batch_size_ >= 1, "data.train_batch_size must be >= 1, got " << batch_size_);
  AGENTR1_CHECK(a_.max_staleness >= 0, "rollout.max_staleness must be >= 0, got " << a_.max_staleness);
  last_return_ = Clock::now();
}

AsyncRolloutSource::AsyncRolloutSource(const model::Transformer& policy, rollout::EngineOptions eo,
                                       flow::FlowContext ctx, flow::FlowOptions opts, int n, int64_t batch_size,
                                       uint64_t seed, const PromptSource& prompts, ThreadPool& drivers,
                                       AsyncRolloutOptions a)
    : AsyncRolloutSource(std::move(ctx), std::move(opts), n, batch_size, seed, prompts, drivers, a) {
  policy_ = policy;
  // The engine's own copy of the weights, same dtype and device as the learner's.
  const at::Tensor first = policy_->parameters().front();
  copy_ = model::init_random(policy_->config(), /*seed=*/0);
  copy_->to(first.device(), first.scalar_type());
  copy_parameters(snapshot(policy_), copy_);
  copy_->eval();
  for (auto& p : copy_->parameters()) p.requires_grad_(false);
  engine_ = std::make_unique<rollout::Engine>(copy_, std::move(eo));
  gate_ = std::make_unique<Gate>(*engine_);
  ctx_.generator = gate_.get();
}

AsyncRolloutSource::AsyncRolloutSource(std::unique_ptr<rollout::RemoteGenerator> generator, WeightPusher weights,
                                       flow::FlowContext ctx, flow::FlowOptions opts, int n, int64_t batch_size,
                                       uint64_t seed, const PromptSource& prompts, ThreadPool& drivers,
                                       AsyncRolloutOptions a)
    : AsyncRolloutSource(std::move(ctx), std::move(opts), n, batch_size, seed, prompts, drivers, a) {
  AGENTR1_CHECK(generator != nullptr, "AsyncRolloutSource: no remote generator");
  remote_ = std::move(generator);
  weights_ = std::make_unique<WeightPusher>(std::move(weights));
  gate_ = std::make_unique<Gate>(*remote_);
  ctx_.generator = gate_.get();
}

AsyncRolloutSource::~AsyncRolloutSource() { stop(); }

void AsyncRolloutSource::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ && !producer_.joinable() && inflight_trajectories_ == 0) return;
    stop_ = true;
  }
  cv_.notify_all();
  gate_->stop();
  if (producer_.joinable()) producer_.join();
  std::unique_lock<std::mutex> lk(mu_);
  const auto t0 = Clock::now();
  while (!cv_.wait_for(lk, std::chrono::seconds(10), [this] { return inflight_trajectories_ == 0; }))
    AGENTR1_LOG(WARN) << "asynchronous rollout: still waiting for " << inflight_trajectories_
                      << " trajectories to end (" << static_cast<int>(seconds_since(t0))
                      << " s; a tool or env step that does not return holds them)";
}

int64_t AsyncRolloutSource::engine_version() const {
  std::lock_guard<std::mutex> lk(mu_);
  return applied_version_;
}

bool AsyncRolloutSource::swap_ready() const {
  return pending_.has_value() && (a_.partial_rollout || inflight_trajectories_ == 0);
}

bool AsyncRolloutSource::can_start() const {
  if (pending_.has_value() && !a_.partial_rollout) return false;  // let the trajectories drain
  const int64_t batch = first_batch_ + next_group_ / batch_size_;
  return batch <= applied_version_ + 1 + a_.max_staleness;
}

void AsyncRolloutSource::producer_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    cv_.wait(lk, [this] { return stop_ || !error_.empty() || swap_ready() || can_start(); });
    if (stop_ || !error_.empty()) return;
    try {
      if (swap_ready())
        apply_swap(lk);
      else
        start_group(lk);
    } catch (const std::exception& e) {
      if (error_.empty()) error_ = std::string("asynchronous rollout: ") + e.what();
      cv_.notify_all();
      return;
    }
  }
}

void AsyncRolloutSource::apply_swap(std::unique_lock<std::mutex>& lk) {
  Pending p = std::move(*pending_);
  pending_.reset();
  lk.unlock();
  const auto t0 = Clock::now();
  try {
    if (remote_) {
      // Every server loads it (draining its in-flight requests, see the top); then the
      // client stamps it on responses that carry no version.
      weights_->load(*remote_, p.dir, p.version);
    } else {
      auto swap = [&](model::Transformer& m) {
        copy_parameters(p.tensors, m);
        engine_->clear_prefix_cache();  // keys/values of the old weights
        engine_->set_policy_version(p.version);
      };
      if (a_.partial_rollout)
        engine_->with_model_drained(swap);  // no response straddles the swap
      else
        engine_->with_model(swap);          // nothing in flight: the engine is idle
    }
  } catch (...) {
    lk.lock();
    throw;
  }
  const double dt = seconds_since(t0);
  lk.lock();
  applied_version_ = p.version;
  ++swaps_;
  swap_seconds_ += dt;
  cv_.notify_all();
}

void AsyncRolloutSource::start_group(std::unique_lock<std::mutex>& lk) {
  const int64_t g = next_group_++;
  const int64_t batch = first_batch_ + g / batch_size_;
  const int64_t index = g % batch_size_;
  auto it = prompt_cache_.find(batch);
  if (it == prompt_cache_.end()) it = prompt_cache_.emplace(batch, prompts_.batch(batch)).first;
  AGENTR1_CHECK(static_cast<int64_t>(it->second.size()) == batch_size_,
                "prompt batch of step " << batch << " has " << it->second.size() << " prompts, expected "
                                        << batch_size_);
  auto group = std::make_shared<Group>();
  group->batch = batch;
  group->index = index;
  group->sample = it->second[static_cast<size_t>(index)];
  group->seed = step_rollout_seed(seed_, batch);
  group->trajectories.resize(static_cast<size_t>(n_));
  if (index + 1 == batch_size_) prompt_cache_.erase(it);
  if (inflight_trajectories_ == 0) rollout_busy_.start(Clock::now());
  inflight_trajectories_ += n_;
  lk.unlock();
  for (int r = 0; r < n_; ++r) {
    drivers_.submit([this, group, r] {
      std::optional<Trajectory> t;
      std::string error;
      try {
        t = flow::run_trajectory(group->sample, static_cast<uint64_t>(group->index), r, ctx_, opts_, group->seed);
      } catch (const std::exception& e) {
        error = e.what();
      }
      finish_trajectory(group, r, std::move(t), error);
    });
  }
  lk.lock();
}

void AsyncRolloutSource::finish_trajectory(const std::shared_ptr<Group>& g, int repeat,
                                           std::optional<Trajectory> t, const std::string& error) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!error.empty() && g->error.empty())
    g->error = "step " + std::to_string(g->batch) + ", sample " + std::to_string(g->index) + ", repeat " +
               std::to_string(repeat) + ": " + error;
  g->trajectories[static_cast<size_t>(repeat)] = std::move(t);
  if (++g->finished == n_) {
    if (!g->error.empty()) {
      if (error_.empty() && !stop_) error_ = g->error;
    } else {
      Ready r;
      r.batch = g->batch;
      r.index = g->index;
      r.min_version = INT64_MAX;
      for (auto& x : g->trajectories) {
        for (const Step& s : x->steps) r.min_version = std::min(r.min_version, s.policy_version);
        r.trajectories.push_back(std::move(*x));
      }
      if (r.min_version == INT64_MAX) r.min_version = applied_version_;  // no steps at all
      ready_.push_back(std::move(r));
    }
  }
  if (--inflight_trajectories_ == 0) rollout_busy_.stop(Clock::now());
  cv_.notify_all();
}

void AsyncRolloutSource::push_weights(int64_t version) {
  Pending p;
  p.version = version;
  const auto t0 = Clock::now();
  if (remote_)
    p.dir = weights_->write(version);  // the servers load it on the producer's side
  else
    p.tensors = snapshot(policy_);
  const double dt = seconds_since(t0);
  std::string unloaded;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (pending_.has_value() && pending_->dir != p.dir) unloaded = pending_->dir;  // replaced before it was loaded
    pending_.emplace(std::move(p));
    learner_version_ = version;
    pushed_ = true;
    write_seconds_ += remote_ ? dt : 0.0;
  }
  cv_.notify_all();
  if (!unloaded.empty()) weights_->discard(unloaded);
}

void AsyncRolloutSource::wait_weights_loaded() {
  std::unique_lock<std::mutex> lk(mu_);
  AGENTR1_CHECK(error_.empty(), error_);
  AGENTR1_CHECK(!stop_, "asynchronous rollout: wait_weights_loaded() after stop()");
  if (!started_) {
    if (pending_.has_value()) apply_swap(lk);  // no producer yet, nothing in flight: here
    return;
  }
  cv_.wait(lk, [this] { return stop_ || !error_.empty() || applied_version_ >= learner_version_; });
  AGENTR1_CHECK(error_.empty(), error_);
  AGENTR1_CHECK(applied_version_ >= learner_version_,
                "asynchronous rollout stopped before policy version " << learner_version_ << " was loaded");
}

RolloutBatch AsyncRolloutSource::collect(int64_t step) {
  const auto t_enter = Clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  learner_busy_.stop(t_enter);
  if (!started_) {
    AGENTR1_CHECK(!remote_ || pushed_, "asynchronous rollout on remote servers: collect() before the first "
                                       "push_weights (the servers' weights are unknown)");
    started_ = true;
    first_batch_ = step;
    if (remote_)
      remote_seen_ = remote_->stats();
    else
      engine_->reset_stats();
    producer_ = std::thread([this] { producer_loop(); });
  }
  RolloutBatch b;
  int64_t dropped = 0;
  while (true) {
    AGENTR1_CHECK(error_.empty(), error_);
    AGENTR1_CHECK(!stop_, "asynchronous rollout: collect() after stop()");
    const int64_t oldest_allowed = learner_version_ - a_.max_staleness;
    for (auto it = ready_.begin(); it != ready_.end();) {
      if (it->min_version < oldest_allowed) {
        dropped += static_cast<int64_t>(it->trajectories.size());
        it = ready_.erase(it);
      } else {
        ++it;
      }
    }
    if (static_cast<int64_t>(ready_.size()) >= batch_size_) break;
    cv_.wait(lk);
  }
  // Oldest first (earliest deadline), or the freshest with prefer_fresh; ties in the
  // order of the prompt batches, so max_staleness 0 gives the synchronous order.
  const bool fresh = a_.prefer_fresh;
  std::stable_sort(ready_.begin(), ready_.end(), [fresh](const Ready& x, const Ready& y) {
    if (x.min_version != y.min_version) return fresh ? x.min_version > y.min_version : x.min_version < y.min_version;
    if (x.batch != y.batch) return x.batch < y.batch;
    return x.index < y.index;
  });
  double stale_sum = 0, stale_max = 0, n_steps = 0;
  for (int64_t k = 0; k < batch_size_; ++k) {
    for (Trajectory& t : ready_.front().trajectories) {
      for (const Step& s : t.steps) {
        const double st = static_cast<double>(learner_version_ - s.policy_version);
        stale_sum += st;
        stale_max = std::max(stale_max, st);
        n_steps += 1;
      }
      b.trajectories.push_back(std::move(t));
    }
    ready_.pop_front();
  }
  dropped_total_ += dropped;
  const auto t_out = Clock::now();
  b.metrics["timing/gen"] = std::chrono::duration<double>(t_out - t_enter).count();
  b.metrics["async/staleness_mean"] = n_steps > 0 ? stale_sum / n_steps : 0.0;
  b.metrics["async/staleness_max"] = stale_max;
  b.metrics["async/dropped_trajectories"] = static_cast<double>(dropped);
  b.metrics["async/dropped_total"] = static_cast<double>(dropped_total_);
  b.metrics["async/buffered_groups"] = static_cast<double>(ready_.size());
  b.metrics["async/weight_swaps"] = static_cast<double>(swaps_);
  b.metrics["timing/weight_swap"] = swap_seconds_;
  swaps_ = 0;
  swap_seconds_ = 0;
  b.metrics["async/rollout_busy_s"] = rollout_busy_.busy_in(last_return_, t_out);
  b.metrics["async/learner_busy_s"] = learner_busy_.busy_in(last_return_, t_out);
  b.metrics["async/overlap_s"] = BusyClock::overlap(rollout_busy_, learner_busy_, last_return_, t_out);
  b.metrics["async/window_s"] = std::chrono::duration<double>(t_out - last_return_).count();
  rollout_busy_.forget_before(t_out);
  learner_busy_.forget_before(t_out);
  last_return_ = t_out;
  learner_busy_.start(t_out);
  if (remote_) {
    b.metrics["timing/weight_write"] = write_seconds_;
    write_seconds_ = 0;
  }
  lk.unlock();
  if (remote_) {
    // Counters since the last call: a difference of running totals (a reset after the
    // read would lose the answers that arrive in between; the producer keeps going).
    const rollout::RemoteGenerator::Stats now = remote_->stats();
    rollout::RemoteGenerator::Stats d = now;
    d.requests -= remote_seen_.requests;
    d.retries -= remote_seen_.retries;
    d.generated_tokens -= remote_seen_.generated_tokens;
    d.unknown_logprobs -= remote_seen_.unknown_logprobs;
    for (size_t i = 0; i < d.per_server.size() && i < remote_seen_.per_server.size(); ++i)
      d.per_server[i] -= remote_seen_.per_server[i];
    remote_seen_ = now;
    for (const auto& kv : remote_metrics(d)) b.metrics[kv.first] = kv.second;
  } else {
    const auto es = engine_->stats();
    engine_->reset_stats();
    b.metrics["rollout/prefix_reuse_rate"] = es.prefix_reuse_rate();
    b.metrics["rollout/mean_decode_batch"] = es.mean_decode_batch();
    b.metrics["rollout/generated_tokens"] = static_cast<double>(es.generated_tokens);
  }
  b.metrics["perf/gen_tokens_per_s"] = b.metrics["rollout/generated_tokens"] / std::max(1e-9, b.metrics["async/window_s"]);
  return b;
}

}  // namespace agentr1::train
