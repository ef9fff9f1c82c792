// SpinPool: every index is covered once across the threads, exceptions cross back, the
// helpers wake after sleeping; and forward_cached with a pool equals it without.
#include "agentr1/model/spin_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

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
