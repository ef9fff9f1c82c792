// SpinPool: every index is covered once across the threads (parallel_for's fixed split
// and parallel_chunks' balanced one, whose pieces move to whichever thread is free),
// exceptions cross back, the helpers wake after sleeping; and forward_cached with a pool
// equals it without.
#include "agentr1/model/spin_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/model/model_test_util.h"
#include "agentr1/model/transformer.h"

namespace agentr1::model {
namespace {

TEST(SpinPool, CoversEveryIndexOnceOnAllThreadsAndWakesAfterSleeping) {
  for (int threads : {1, 2, 3}) {
    SpinPool pool(threads, /*idle_us=*/100);
    EXPECT_EQ(pool.threads(), threads);
    for (int round = 0; round < 3; ++round) {
      for (int64_t n : {1, 2, 5, 1000}) {
        std::vector<int> hits(static_cast<size_t>(n), 0);
        std::mutex mu;
        std::set<std::thread::id> who;
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
          std::lock_guard<std::mutex> lk(mu);
          who.insert(std::this_thread::get_id());
        });
        for (int h : hits) EXPECT_EQ(h, 1);
        if (n >= threads) EXPECT_EQ(static_cast<int>(who.size()), threads) << "n " << n;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the helpers fall asleep
    }
  }
}

TEST(SpinPool, ExceptionsFromAnyChunkReachTheCaller) {
  SpinPool pool(2);
  EXPECT_THROW(pool.parallel_for(10, [](int64_t b, int64_t) { if (b > 0) throw std::runtime_error("helper"); }),
               std::runtime_error);
  EXPECT_THROW(pool.parallel_for(10, [](int64_t b, int64_t) { if (b == 0) throw std::runtime_error("caller"); }),
               std::runtime_error);
  int64_t sum = 0;
  std::mutex mu;
  pool.parallel_for(10, [&](int64_t b, int64_t e) {  // still usable
    std::lock_guard<std::mutex> lk(mu);
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum, 45);
}

// parallel_chunks: every index once, pieces of at most `grain` (one call of the whole
// range where there is nothing to balance), ahead_end within [end, n], on 1-4 threads,
// and the pool usable for parallel_for between calls.
TEST(SpinPool, ChunksCoverEveryIndexOnceInPiecesOfAtMostGrain) {
  for (int threads : {1, 2, 3, 4}) {
    SpinPool pool(threads, /*idle_us=*/100);
    for (int64_t n : {1, 2, 5, 7, 1000, 4097}) {
      for (int64_t grain : {1, 3, 64, 5000}) {
        std::vector<int> hits(static_cast<size_t>(n), 0);
        std::mutex mu;
        bool bad_piece = false;
        int calls = 0;
        pool.parallel_chunks(n, grain, [&](int64_t b, int64_t e, int64_t ahead) {
          std::lock_guard<std::mutex> lk(mu);
          ++calls;
          if (!(0 <= b && b < e && e <= ahead && ahead <= n)) bad_piece = true;
          if (threads > 1 && n > grain && e - b > grain) bad_piece = true;
          for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
        });
        for (int h : hits) ASSERT_EQ(h, 1) << threads << " threads, n " << n << ", grain " << grain;
        EXPECT_FALSE(bad_piece) << threads << " threads, n " << n << ", grain " << grain;
        if (threads == 1 || n <= grain) EXPECT_EQ(calls, 1) << "nothing to balance: one call";
        else EXPECT_EQ(calls, (n + grain - 1) / grain);
        int64_t sum = 0;  // parallel_for between parallel_chunks calls
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          std::lock_guard<std::mutex> lk(mu);
          for (int64_t i = b; i < e; ++i) sum += i;
        });
        EXPECT_EQ(sum, n * (n - 1) / 2);
      }
    }
    EXPECT_THROW(pool.parallel_chunks(10, 0, [](int64_t, int64_t, int64_t) {}), Error);
  }
}

// A thread that stalls inside its first piece: the others run the rest of its range
// (from the back) and the call still covers everything once. The caller blocks in its
// first piece until another thread has run a piece of the caller's own range, so this
// passes only if pieces move between threads (a bounded wait fails it otherwise).
TEST(SpinPool, ChunksOfAStalledThreadAreTakenByTheOthers) {
  for (int threads : {2, 3}) {
    SpinPool pool(threads);
    // The caller's range is the last: [own_begin, n).
    const int64_t n = 60, grain = 2, own_begin = (n / grain) * (threads - 1) / threads * grain;
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<bool> stolen{false};
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int64_t> stolen_ahead{-1};
    bool waited_out = false;
    pool.parallel_chunks(n, grain, [&](int64_t b, int64_t e, int64_t ahead) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      if (std::this_thread::get_id() != caller) {
        if (b >= own_begin) {
          stolen_ahead = ahead - e;
          stolen = true;
        }
        return;
      }
      if (b != own_begin) return;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!stolen && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      waited_out = !stolen;
    });
    EXPECT_FALSE(waited_out) << threads << " threads: no other thread took a piece of the stalled caller's range";
    EXPECT_EQ(stolen_ahead.load(), 0) << "a piece taken from another's back has nothing ahead";
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
  }
}

// Range 0 (the front) is helper 1's and the last range the caller's (the helper that
// warms the next region's front starts there). A handshake makes it deterministic: the
// caller records its first piece and then waits until piece 0 has started; piece 0 waits
// until the caller has recorded. Until both, no thread can have taken a piece from
// another's range (the caller is blocked in its first piece, helper 1 in piece 0), so the
// caller's first piece is its own range's front and piece 0 is helper 1's.
TEST(SpinPool, TheFirstRangeIsHelperOnesAndTheLastTheCallers) {
  SpinPool pool(2);
  const int64_t n = 40, grain = 4;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> first_started{false};
  std::atomic<int64_t> caller_first{-1};
  std::thread::id first_by{};
  bool waited_out = false;
  auto wait_for = [](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    return done();
  };
  pool.parallel_chunks(n, grain, [&](int64_t b, int64_t, int64_t) {
    const bool on_caller = std::this_thread::get_id() == caller;
    if (b == 0) {
      first_by = std::this_thread::get_id();
      first_started = true;
      if (!on_caller && !wait_for([&] { return caller_first.load() >= 0; })) waited_out = true;
      return;
    }
    if (!on_caller || caller_first.load() >= 0) return;
    caller_first = b;
    if (!wait_for([&] { return first_started.load(); })) waited_out = true;
  });
  EXPECT_FALSE(waited_out) << "the handshake between piece 0 and the caller's first piece timed out";
  EXPECT_NE(first_by, caller) << "piece 0 ran on the caller: range 0 should be helper 1's";
  EXPECT_EQ(caller_first.load(), n / 2) << "the caller's first piece should start its range, the back half";
}

// warm(): helper 1 reads every line of the memory with loads while it holds `keep`, then
// lets it go (the pool keeps no reference), and the calls after it compute as before.
// The caller drops its own reference at once, so a helper that read without holding
// `keep` would read freed memory (make test-sanitize reports it). The helpers never fall
// asleep here (idle 60 s): a sleeping helper drops the hint (tested below).
TEST(SpinPool, WarmReadsEveryLineWhileItHoldsTheMemoryAndThenLetsGo) {
  SpinPool pool(2, /*idle_us=*/60'000'000);
  const size_t bytes = (size_t{1} << 20) + 7;  // not whole lines: the last line is read too
  for (int round = 0; round < 20; ++round) {
    auto freed = std::make_shared<std::atomic<bool>>(false);
    const uint64_t before = pool.warmed_lines();
    {
      auto* buf = new std::vector<uint8_t>(bytes, 1);
      std::shared_ptr<const void> keep(buf, [freed](const void* p) {
        delete static_cast<const std::vector<uint8_t>*>(p);
        *freed = true;
      });
      pool.warm(buf->data(), static_cast<int64_t>(buf->size()), std::move(keep));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!*freed && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    ASSERT_TRUE(*freed) << "round " << round << ": the warmed memory was never released";
    EXPECT_EQ(pool.warmed_lines() - before, (bytes + 63) / 64) << "round " << round;
    std::atomic<int64_t> sum{0};
    pool.parallel_chunks(1000, 7, [&](int64_t b, int64_t e, int64_t) { sum += (b + e - 1) * (e - b) / 2; });
    EXPECT_EQ(sum.load(), 1000 * 999 / 2);
  }
  // Nothing to read: a null pointer, no bytes.
  const std::vector<uint8_t> small(100, 1);
  const uint64_t before = pool.warmed_lines();
  pool.warm(nullptr, 1 << 20, nullptr);
  pool.warm(small.data(), 0, nullptr);
  pool.warm(small.data(), -5, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(pool.warmed_lines(), before);
  // Without helpers warm() does nothing and keeps nothing.
  SpinPool alone(1);
  auto keep = std::make_shared<const int>(3);
  alone.warm(small.data(), 100, keep);
  EXPECT_EQ(keep.use_count(), 1);
}

// Helpers asleep (idle past idle_us): warm() keeps nothing, so no memory is held until
// the next job. Tried until the helpers are asleep (bounded): a pool that held the hint
// fails after 60 s.
TEST(SpinPool, AWarmWhileTheHelpersSleepKeepsNothing) {
  SpinPool pool(2, /*idle_us=*/1000);
  const std::vector<uint8_t> buf(1 << 16, 1);
  bool dropped = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!dropped && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto keep = std::make_shared<const int>(1);
    const uint64_t before = pool.warmed_lines();
    pool.warm(buf.data(), static_cast<int64_t>(buf.size()), keep);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // Read nothing (asleep, not merely done) and hold nothing.
    dropped = pool.warmed_lines() == before && keep.use_count() == 1;
  }
  EXPECT_TRUE(dropped) << "warm() kept its memory while the helpers slept";
  std::atomic<int64_t> sum{0};
  pool.parallel_chunks(100, 3, [&](int64_t b, int64_t e, int64_t) { sum += e - b; });
  EXPECT_EQ(sum.load(), 100);
}

TEST(SpinPool, ChunkExceptionsReachTheCallerAfterEveryOtherPieceRan) {
  SpinPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_chunks(100, 5,
                                    [&](int64_t b, int64_t, int64_t) {
                                      ++ran;
                                      if (b == 50) throw std::runtime_error("piece");
                                    }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 20);
  int64_t sum = 0;
  std::mutex mu;
  pool.parallel_chunks(10, 1, [&](int64_t b, int64_t e, int64_t) {  // still usable
    std::lock_guard<std::mutex> lk(mu);
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum, 45);
}

TEST(SpinPool, ForwardCachedWithAPoolEqualsWithout) {
  at::NoGradGuard ng;
  SpinPool pool(2);
  for (Arch arch : {Arch::kQwen2, Arch::kQwen3, Arch::kLlama}) {
    Transformer m = testing::spicy_model(testing::tiny_config(arch), 3);
    at::Tensor ids = testing::random_ids(1, 12, m->config().vocab_size, 2)[0];
    const std::vector<int32_t> ta = {0, 1, 2}, tb = {3, 4, 5};
    KVCache cache(m->config(), 6, 4, at::kFloat, at::kCPU);
    // Prefill (8 rows of products: split by rows), then decode (1 row: split by features).
    at::Tensor x = m->forward_cached(ids.narrow(0, 0, 8), {CachedRow{0, 8, &ta}}, cache);
    at::Tensor y = m->forward_cached(ids.narrow(0, 0, 8), {CachedRow{0, 8, &tb}}, cache, &pool);
    EXPECT_LE((x - y).abs().max().item<double>(), 1e-5) << arch_name(arch) << " prefill";
    for (int64_t t = 8; t < 12; ++t) {
      x = m->forward_cached(ids.narrow(0, t, 1), {CachedRow{t, 1, &ta}}, cache);
      y = m->forward_cached(ids.narrow(0, t, 1), {CachedRow{t, 1, &tb}}, cache, &pool);
      EXPECT_LE((x - y).abs().max().item<double>(), 1e-5) << arch_name(arch) << " position " << t;
    }
  }
}


// set_thread_nice lowers only the calling thread (Linux), as the asynchronous rollout
// engine's worker and helpers use it.
TEST(SpinPool, SetThreadNiceLowersOnlyTheCallingThread) {
  const int before = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  int inside = -100;
  std::thread t([&] {
    EXPECT_TRUE(set_thread_nice(before + 7 > 19 ? 19 : before + 7));
    inside = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  });
  t.join();
  EXPECT_EQ(inside, std::min(19, before + 7));
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))), before) << "this thread unchanged";
  EXPECT_TRUE(set_thread_nice(0));
}

}  // namespace
}  // namespace agentr1::model
