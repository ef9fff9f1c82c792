#include "agentr1/model/row_splitter.h"

#include <chrono>

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

namespace agentr1::model {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

RowSplitter::RowSplitter(int64_t idle_us) : idle_us_(idle_us) {
  helper_ = std::thread([this] {
    at::set_num_threads(1);  // its BLAS calls stay on this thread
    at::NoGradGuard no_grad;  // inference only (grad mode is per thread)
    helper_loop();
  });
}

RowSplitter::~RowSplitter() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  helper_.join();
}

void RowSplitter::helper_loop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin for new work, then sleep until some is posted.
    const auto t0 = std::chrono::steady_clock::now();
    while (posted_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed)) {
      cpu_relax();
      const auto waited = std::chrono::steady_clock::now() - t0;
      if (waited > std::chrono::microseconds(50)) std::this_thread::yield();  // a busy machine runs others
      if (waited > std::chrono::microseconds(idle_us_)) {
        std::unique_lock<std::mutex> lk(mu_);
        sleeping_.store(true, std::memory_order_seq_cst);
        cv_.wait(lk, [&] { return posted_.load(std::memory_order_acquire) != seen || stop_.load(); });
        sleeping_.store(false, std::memory_order_relaxed);
        break;
      }
    }
    if (stop_.load()) return;
    seen = posted_.load(std::memory_order_acquire);
    try {
      (*job_)();
    } catch (...) {
      error_ = std::current_exception();
    }
    done_.store(seen, std::memory_order_release);
  }
}

void RowSplitter::run(const std::function<void()>& a, const std::function<void()>& b) {
  error_ = nullptr;
  job_ = &b;
  const uint64_t gen = posted_.load(std::memory_order_relaxed) + 1;
  {
    // Publishing under the mutex pairs with the helper's sleep check, so a helper that
    // is just falling asleep cannot miss the job.
    std::lock_guard<std::mutex> lk(mu_);
    posted_.store(gen, std::memory_order_release);
  }
  if (sleeping_.load(std::memory_order_seq_cst)) cv_.notify_one();
  std::exception_ptr mine;
  try {
    a();
  } catch (...) {
    mine = std::current_exception();
  }
  // The helper's half is as long as ours: spin briefly, then yield (on a busy machine
  // the helper may be waiting for this core).
  for (int spins = 0; done_.load(std::memory_order_acquire) != gen; ++spins) {
    cpu_relax();
    if (spins > 2000) std::this_thread::yield();
  }
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace agentr1::model
