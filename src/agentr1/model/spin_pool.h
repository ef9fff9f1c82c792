// agentr1/model/spin_pool.h — a fork/join pool of spinning helper threads for the
// inference engine's forward passes.
//
//   model::SpinPool pool(/*threads=*/2);        // the caller + 1 helper
//   pool.parallel_for(n, [&](int64_t begin, int64_t end) { ... });  // all done on return
//   pool.parallel_chunks(n, grain, [&](int64_t begin, int64_t end, int64_t ahead) { ... });
//                                          // the same, balanced between the threads as it runs
//
// Why not OpenMP: the learner (main thread) and the engine's worker thread would each
// own an OpenMP team. With more OpenMP threads than cores, libgomp stops spinning
// between parallel regions and each region pays futex wake-ups (tens of microseconds
// in a VM), more than a decode step's small products cost; the learner's own regions
// are throttled the same way. The engine therefore runs its worker with one OpenMP
// thread and gets the other cores from this pool: helpers spin between calls (a decode
// step issues one every few microseconds), yield when the machine is busy, and sleep
// after `idle_us` without work, so an idle engine leaves the cores to the learner.
// Calls must come from one thread at a time; helpers run with autograd off and one
// OpenMP thread each (inference only).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace agentr1::model {

// Lowers the calling thread's scheduling priority to `nice` (Linux: per thread; 1..19,
// higher = yields more readily to other threads of the machine). 0 does nothing. Returns
// false (and changes nothing) where the system refuses; never throws.
bool set_thread_nice(int nice);

class SpinPool {
 public:
  // threads >= 1 (1 = no helpers: parallel_for and parallel_chunks run inline).
  // nice > 0: the helpers run at that lower scheduling priority (set_thread_nice).
  explicit SpinPool(int threads, int64_t idle_us = 2000, int nice = 0);
  ~SpinPool();
  SpinPool(const SpinPool&) = delete;
  SpinPool& operator=(const SpinPool&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }
  // Splits [0, n) into threads() contiguous chunks (empty ones skipped); chunk 0 runs
  // on the caller. Returns when all are done; rethrows the first exception thrown.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

  // [0, n) balanced while it runs: cut into pieces of `grain` (the last one shorter),
  // the pieces into threads() contiguous ranges, each range consumed from its front by
  // its own thread; a thread whose range is empty takes pieces from the back of the
  // range with the most left. fn(begin, end, ahead_end) runs each piece once (begin <
  // end <= ahead_end <= n); with one thread, or n <= grain, fn(0, n, n) runs once on the
  // caller (nothing to balance). Past 2^31 pieces the grain is raised to fit.
  // [end, ahead_end) is what this thread will likely run next (the rest of its own
  // range when it claimed the piece; empty for a piece taken from another's back): a
  // kernel may prefetch into it, nothing more. Why: a decode step's products are split
  // over two threads that share the memory bus, and which one streams faster changes
  // from moment to moment; with a fixed split the faster one waited ~12% of a bf16
  // batch-1 step for the slower (bench/README.md, session 16). Rethrows the first
  // exception thrown (the other pieces still run). grain >= 1 (Error otherwise).
  // The ranges go to the threads in this order: range 0 (the front of [0, n)) to helper
  // 1, range t to helper t + 1, the last to the caller; so the helper that warms (below)
  // starts every call at its front.
  void parallel_chunks(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int64_t)>& fn);

  // A hint for the time between calls: helper 1 reads [p, p + bytes) into its caches
  // while it has no job (a byte of each 64-byte line, 8 lines at a time, pausing for the
  // jobs that arrive), until done or replaced by the next warm() call. `keep` owns the
  // memory: helper 1 takes it when it next spins, holds it while it reads and drops it
  // when done; the pool keeps no reference after. While a helper sleeps (idle past
  // idle_us) the hint is dropped, so nothing holds `keep` asleep. Meant for a few hundred
  // KiB (helper 1 reads it before it yields). Changes no result; writes to the memory
  // meanwhile (a DecodeLayout::repack) race only with reads whose bytes are discarded.
  // Why: a batch-1 decode step runs ~110 regions that each stream a new weight, with
  // norms and attention on the caller between them while the memory bus idles; the
  // decode layout puts the next region's weights right after the last ones, so the helper
  // that starts the next region at its front reads that front during the gap
  // (bench/README.md, session 19). No-op without helpers.
  void warm(const void* p, int64_t bytes, std::shared_ptr<const void> keep);
  // Lines helper 1 has read for warm() so far (tests, benches).
  uint64_t warmed_lines() const { return warmed_lines_.load(std::memory_order_relaxed); }

 private:
  void helper_loop(int index);
  void run_job(int index);  // this thread's share of the posted job
  void post();              // publishes the job set up in the members to the helpers
  void wait_helpers();      // until every helper has finished the posted job
  void note_error();        // records the current exception if it is the first
  // Piece claims of parallel_chunks: range t's unclaimed pieces [lo, hi) packed as
  // (lo << 32) | hi, on its own cache line.
  struct alignas(64) Range {
    std::atomic<uint64_t> lohi{0};
  };
  bool claim_front(int t, int64_t* piece, int64_t* range_end);
  bool claim_back(int t, int64_t* piece);
  std::unique_ptr<Range[]> ranges_;
  const std::function<void(int64_t, int64_t, int64_t)>* chunk_job_ = nullptr;
  int64_t grain_ = 1;

  const int64_t idle_us_;
  std::atomic<uint64_t> posted_{0};    // generation of the last posted job
  std::atomic<int> finished_{0};       // helpers done with the current job
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0;
  std::exception_ptr error_;
  std::mutex error_mu_;
  // warm(): the target under warm_mu_, its generation bumped with each call.
  std::mutex warm_mu_;
  std::atomic<uint64_t> warm_gen_{0};
  const void* warm_p_ = nullptr;
  int64_t warm_bytes_ = 0;
  std::shared_ptr<const void> warm_keep_;
  std::atomic<uint64_t> warmed_lines_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleeping_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> helpers_;
};

}  // namespace agentr1::model
