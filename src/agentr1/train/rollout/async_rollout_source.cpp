#include "agentr1/train/rollout/async_rollout_source.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/timing.h"
#include "agentr1/flow/group_rollout.h"
#include "agentr1/train/prompt_source.h"

namespace agentr1::train {

namespace {
using Clock = std::chrono::steady_clock;

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

AsyncRolloutSource::AsyncRolloutSource(std::unique_ptr<RolloutBackend> backend, flow::FlowContext ctx,
                                       flow::FlowOptions opts, int n, int64_t batch_size, uint64_t seed,
                                       const PromptSource& prompts, ThreadPool& drivers, AsyncRolloutOptions a)
    : backend_(std::move(backend)),
      ctx_(std::move(ctx)),
      opts_(std::move(opts)),
      n_(n),
      batch_size_(batch_size),
      seed_(seed),
      prompts_(prompts),
      drivers_(drivers),
      a_(a) {
  AGENTR1_CHECK(backend_ != nullptr, "AsyncRolloutSource: no backend");
  AGENTR1_CHECK(n_ >= 1, "rollout.n must be >= 1, got " << n_);
  AGENTR1_CHECK(batch_size_ >= 1, "data.train_batch_size must be >= 1, got " << batch_size_);
  AGENTR1_CHECK(a_.max_staleness >= 0, "rollout.max_staleness must be >= 0, got " << a_.max_staleness);
  gate_ = std::make_unique<Gate>(backend_->generator());
  ctx_.generator = gate_.get();
  last_return_ = Clock::now();
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
  StagedWeights w = std::move(*pending_);
  pending_.reset();
  const int64_t version = w.version;
  lk.unlock();
  const auto t0 = Clock::now();
  try {
    // partial_rollout: responses may be running (they end on the old weights first);
    // otherwise nothing is in flight (no group starts while a swap waits).
    backend_->apply(std::move(w), a_.partial_rollout);
  } catch (...) {
    lk.lock();
    throw;
  }
  const double dt = seconds_since(t0);
  lk.lock();
  applied_version_ = version;
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
  const auto t0 = Clock::now();
  StagedWeights w = backend_->stage(version);  // the producer applies it
  const double dt = seconds_since(t0);
  std::optional<StagedWeights> replaced;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (pending_.has_value()) replaced = std::move(pending_);  // replaced before it was applied
    pending_.emplace(std::move(w));
    learner_version_ = version;
    pushed_ = true;
    write_seconds_ += dt;
  }
  cv_.notify_all();
  if (replaced.has_value()) backend_->discard(*replaced);
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
    AGENTR1_CHECK(!backend_->needs_first_push() || pushed_,
                  "asynchronous rollout on " << backend_->describe()
                                             << ": collect() before the first push_weights (the weights are unknown)");
    started_ = true;
    first_batch_ = step;
    (void)backend_->take_metrics();  // counters from here on
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
  b.metrics["timing/weight_write"] = write_seconds_;
  write_seconds_ = 0;
  lk.unlock();
  // Counters since the last call (the producer keeps going meanwhile).
  for (const auto& kv : backend_->take_metrics()) b.metrics[kv.first] = kv.second;
  b.metrics["perf/gen_tokens_per_s"] = b.metrics["rollout/generated_tokens"] / std::max(1e-9, b.metrics["async/window_s"]);
  return b;
}

}  // namespace agentr1::train
