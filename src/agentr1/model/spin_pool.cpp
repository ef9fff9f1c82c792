#include "agentr1/model/spin_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include "agentr1/core/error.h"

namespace agentr1::model {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

bool set_thread_nice(int nice) {
  if (nice == 0) return true;
#if defined(__linux__)
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  return setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) == 0;
#else
  return false;
#endif
}

SpinPool::SpinPool(int threads, int64_t idle_us, int nice) : idle_us_(idle_us) {
  AGENTR1_CHECK(threads >= 1, "SpinPool: threads must be >= 1, got " << threads);
  for (int i = 1; i < threads; ++i)
    helpers_.emplace_back([this, i, nice] {
      set_thread_nice(nice);
      at::set_num_threads(1);   // its BLAS calls stay on this thread
      at::NoGradGuard no_grad;  // inference only (grad mode is per thread)
      helper_loop(i);
    });
}

SpinPool::~SpinPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : helpers_) t.join();
}

void SpinPool::helper_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin for new work (yielding once it takes a while), then sleep until some comes.
    const auto t0 = std::chrono::steady_clock::now();
    while (posted_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed)) {
      cpu_relax();
      const auto waited = std::chrono::steady_clock::now() - t0;
      if (waited > std::chrono::microseconds(50)) std::this_thread::yield();
      if (waited > std::chrono::microseconds(idle_us_)) {
        std::unique_lock<std::mutex> lk(mu_);
        ++sleeping_;
        cv_.wait(lk, [&] { return posted_.load(std::memory_order_acquire) != seen || stop_.load(); });
        --sleeping_;
        break;
      }
    }
    if (stop_.load()) return;
    seen = posted_.load(std::memory_order_acquire);
    const int parts = threads();
    const int64_t begin = n_ * index / parts, end = n_ * (index + 1) / parts;
    if (begin < end) {
      try {
        (*job_)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lk(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    finished_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void SpinPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int parts = threads();
  if (parts == 1 || n == 1) {
    fn(0, n);
    return;
  }
  error_ = nullptr;
  job_ = &fn;
  n_ = n;
  finished_.store(0, std::memory_order_relaxed);
  {
    // Published under the mutex the helpers sleep on: a helper falling asleep either
    // sees the new generation in its wait predicate or is woken below.
    std::lock_guard<std::mutex> lk(mu_);
    posted_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (sleeping_.load() > 0) cv_.notify_all();
  std::exception_ptr mine;
  try {
    fn(0, n / parts);
  } catch (...) {
    mine = std::current_exception();
  }
  // The helpers' chunks are as long as ours: spin briefly, then yield (on a busy
  // machine a helper may be waiting for this core).
  for (int spins = 0; finished_.load(std::memory_order_acquire) != parts - 1; ++spins) {
    cpu_relax();
    if (spins > 2000) std::this_thread::yield();
  }
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace agentr1::model
