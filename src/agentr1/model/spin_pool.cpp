#include "agentr1/model/spin_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
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
  ranges_ = std::make_unique<Range[]>(static_cast<size_t>(threads));
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
  // warm(): the target last seen, how far it is read and what keeps it alive (helper 1).
  uint64_t warm_seen = 0;
  uintptr_t warm_at = 0, warm_end = 0;
  std::shared_ptr<const void> warm_keep;
  auto warm_some = [&] {
    if (warm_gen_.load(std::memory_order_acquire) != warm_seen) {
      std::lock_guard<std::mutex> lk(warm_mu_);
      warm_seen = warm_gen_.load(std::memory_order_relaxed);
      warm_at = reinterpret_cast<uintptr_t>(warm_p_);
      warm_end = warm_at + static_cast<uintptr_t>(warm_bytes_);
      warm_keep = std::move(warm_keep_);  // the pool holds no reference once taken
    }
    if (warm_at >= warm_end) {
      if (warm_keep) warm_keep.reset();
      return false;
    }
    // One byte of each of the next 8 lines, loaded: the loads are independent, so the
    // core keeps many lines in flight, and the loop goes at the memory's pace. (Prefetch
    // instructions ran ahead of it: most were dropped with the miss buffers full, and a
    // 20 us gap warmed ~2 us of the next product instead of ~9.)
    int lines = 0;
    for (; lines < 8 && warm_at < warm_end; ++lines, warm_at += 64) (void)*reinterpret_cast<const volatile uint8_t*>(warm_at);
    warmed_lines_.fetch_add(static_cast<uint64_t>(lines), std::memory_order_relaxed);
    return true;
  };
  for (;;) {
    // Spin for new work (yielding once it takes a while), then sleep until some comes.
    const auto t0 = std::chrono::steady_clock::now();
    while (posted_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed)) {
      if (index == 1 && warm_some()) continue;
      cpu_relax();
      const auto waited = std::chrono::steady_clock::now() - t0;
      if (waited > std::chrono::microseconds(50)) std::this_thread::yield();
      if (waited > std::chrono::microseconds(idle_us_)) {
        std::unique_lock<std::mutex> lk(mu_);
        if (index == 1) {  // a target posted since the last look is dropped, not held asleep
          std::lock_guard<std::mutex> w(warm_mu_);
          warm_keep_.reset();
          warm_p_ = nullptr;
          warm_bytes_ = 0;
        }
        ++sleeping_;
        cv_.wait(lk, [&] { return posted_.load(std::memory_order_acquire) != seen || stop_.load(); });
        --sleeping_;
        break;
      }
    }
    if (stop_.load()) return;
    seen = posted_.load(std::memory_order_acquire);
    run_job(index);
    finished_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void SpinPool::note_error() {
  std::lock_guard<std::mutex> lk(error_mu_);
  if (!error_) error_ = std::current_exception();
}

namespace {
constexpr uint64_t pack(int64_t lo, int64_t hi) { return (static_cast<uint64_t>(lo) << 32) | static_cast<uint64_t>(hi); }
constexpr int64_t lo_of(uint64_t v) { return static_cast<int64_t>(v >> 32); }
constexpr int64_t hi_of(uint64_t v) { return static_cast<int64_t>(v & 0xffffffffu); }
}  // namespace

bool SpinPool::claim_front(int t, int64_t* piece, int64_t* range_end) {
  std::atomic<uint64_t>& r = ranges_[static_cast<size_t>(t)].lohi;
  uint64_t v = r.load(std::memory_order_relaxed);
  while (lo_of(v) < hi_of(v))
    if (r.compare_exchange_weak(v, pack(lo_of(v) + 1, hi_of(v)), std::memory_order_relaxed)) {
      *piece = lo_of(v);
      *range_end = hi_of(v);
      return true;
    }
  return false;
}

bool SpinPool::claim_back(int t, int64_t* piece) {
  std::atomic<uint64_t>& r = ranges_[static_cast<size_t>(t)].lohi;
  uint64_t v = r.load(std::memory_order_relaxed);
  while (lo_of(v) < hi_of(v))
    if (r.compare_exchange_weak(v, pack(lo_of(v), hi_of(v) - 1), std::memory_order_relaxed)) {
      *piece = hi_of(v) - 1;
      return true;
    }
  return false;
}

void SpinPool::warm(const void* p, int64_t bytes, std::shared_ptr<const void> keep) {
  if (helpers_.empty()) return;
  // Under mu_, as a helper falls asleep: either it drops this target on its way to sleep
  // or this call sees it asleep and drops it (a sleeping helper would hold `keep`).
  std::lock_guard<std::mutex> lk(mu_);
  if (sleeping_.load() > 0) return;
  std::lock_guard<std::mutex> w(warm_mu_);
  warm_p_ = p;
  warm_bytes_ = p != nullptr ? std::max<int64_t>(0, bytes) : 0;
  std::swap(warm_keep_, keep);  // the old target's owner is released after the locks
  warm_gen_.fetch_add(1, std::memory_order_release);
}

void SpinPool::run_job(int index) {
  const int parts = threads();
  if (chunk_job_ == nullptr) {
    const int64_t begin = n_ * index / parts, end = n_ * (index + 1) / parts;
    if (begin < end) {
      try {
        (*job_)(begin, end);
      } catch (...) {
        note_error();
      }
    }
    return;
  }
  // Pieces are claimed by compare-and-swap on a range's (lo, hi) word: the owner moves lo
  // up, others move hi down, so every piece goes to exactly one thread. The job's data
  // (fn, n, grain, the ranges' first values) was published with posted_.
  auto run = [&](int64_t piece, int64_t ahead_pieces) {
    const int64_t b = piece * grain_, e = std::min(n_, b + grain_);
    try {
      (*chunk_job_)(b, e, std::max(e, std::min(n_, ahead_pieces * grain_)));
    } catch (...) {
      note_error();
    }
  };
  // Range parts - 1 is the caller's (index 0), range i - 1 helper i's (see the header).
  const int own = (index + parts - 1) % parts;
  int64_t piece = 0, range_end = 0;
  while (claim_front(own, &piece, &range_end)) run(piece, range_end);
  for (;;) {
    int victim = -1;
    int64_t most = 0;
    for (int t = 0; t < parts; ++t) {
      const uint64_t v = ranges_[static_cast<size_t>(t)].lohi.load(std::memory_order_relaxed);
      if (hi_of(v) - lo_of(v) > most) {
        most = hi_of(v) - lo_of(v);
        victim = t;
      }
    }
    if (victim < 0) return;
    if (claim_back(victim, &piece)) run(piece, piece + 1);
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
  chunk_job_ = nullptr;
  n_ = n;
  post();
  std::exception_ptr mine;
  try {
    fn(0, n / parts);
  } catch (...) {
    mine = std::current_exception();
  }
  wait_helpers();
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void SpinPool::parallel_chunks(int64_t n, int64_t grain,
                               const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  AGENTR1_CHECK(grain >= 1, "SpinPool::parallel_chunks: grain must be >= 1, got " << grain);
  if (n <= 0) return;
  const int parts = threads();
  if (parts == 1 || n <= grain) {
    fn(0, n, n);
    return;
  }
  // Piece indices fit the 32-bit halves of a range's word.
  grain = std::max(grain, (n + (int64_t{1} << 31) - 1) >> 31);
  const int64_t pieces = (n + grain - 1) / grain;
  for (int t = 0; t < parts; ++t)
    ranges_[static_cast<size_t>(t)].lohi.store(pack(pieces * t / parts, pieces * (t + 1) / parts),
                                               std::memory_order_relaxed);
  error_ = nullptr;
  job_ = nullptr;
  chunk_job_ = &fn;
  grain_ = grain;
  n_ = n;
  post();
  run_job(0);
  wait_helpers();
  chunk_job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void SpinPool::post() {
  finished_.store(0, std::memory_order_relaxed);
  {
    // Published under the mutex the helpers sleep on: a helper falling asleep either
    // sees the new generation in its wait predicate or is woken below.
    std::lock_guard<std::mutex> lk(mu_);
    posted_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (sleeping_.load() > 0) cv_.notify_all();
}

void SpinPool::wait_helpers() {
  // The helpers' shares take about as long as ours (parallel_for's equal chunks; the
  // balanced pieces of parallel_chunks): spin briefly, then yield (on a busy machine a
  // helper may be waiting for this core).
  for (int spins = 0; finished_.load(std::memory_order_acquire) != threads() - 1; ++spins) {
    cpu_relax();
    if (spins > 2000) std::this_thread::yield();
  }
}

}  // namespace agentr1::model
