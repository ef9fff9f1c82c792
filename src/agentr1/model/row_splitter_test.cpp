// RowSplitter: both halves run (one on the helper), exceptions cross back, the helper
// wakes after sleeping; and forward_cached with a splitter equals it without.
#include "agentr1/model/row_splitter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "agentr1/model/model_test_util.h"
#include "agentr1/model/transformer.h"

namespace agentr1::model {
namespace {

TEST(RowSplitter, RunsBothHalvesOnTwoThreadsAndWakesAfterSleeping) {
  RowSplitter split(/*idle_us=*/100);
  const std::thread::id me = std::this_thread::get_id();
  for (int round = 0; round < 3; ++round) {
    long a = 0, b = 0;
    std::thread::id where_b;
    for (int i = 0; i < 1000; ++i)
      split.run([&] { a += i; }, [&] { b += 2 * i, where_b = std::this_thread::get_id(); });
    EXPECT_EQ(a, 499500);
    EXPECT_EQ(b, 999000);
    EXPECT_NE(where_b, me);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the helper falls asleep
  }
}

TEST(RowSplitter, ExceptionsFromEitherHalfReachTheCaller) {
  RowSplitter split;
  EXPECT_THROW(split.run([] {}, [] { throw std::runtime_error("helper"); }), std::runtime_error);
  EXPECT_THROW(split.run([] { throw std::runtime_error("caller"); }, [] {}), std::runtime_error);
  int ok = 0;
  split.run([&] { ++ok; }, [&] { ++ok; });  // still usable
  EXPECT_EQ(ok, 2);
}

TEST(RowSplitter, ForwardCachedWithASplitterEqualsWithout) {
  at::NoGradGuard ng;
  for (Arch arch : {Arch::kQwen2, Arch::kQwen3, Arch::kLlama}) {
    Transformer m = testing::spicy_model(testing::tiny_config(arch), 3);
    at::Tensor ids = testing::random_ids(1, 12, m->config().vocab_size, 2)[0];
    const std::vector<int32_t> ta = {0, 1, 2}, tb = {3, 4, 5};
    KVCache cache(m->config(), 6, 4, at::kFloat, at::kCPU);
    RowSplitter split;
    m->forward_cached(ids.narrow(0, 0, 8), {CachedRow{0, 8, &ta}}, cache);
    m->forward_cached(ids.narrow(0, 0, 8), {CachedRow{0, 8, &tb}}, cache, &split);
    for (int64_t t = 8; t < 12; ++t) {
      at::Tensor x = m->forward_cached(ids.narrow(0, t, 1), {CachedRow{t, 1, &ta}}, cache);
      at::Tensor y = m->forward_cached(ids.narrow(0, t, 1), {CachedRow{t, 1, &tb}}, cache, &split);
      EXPECT_LE((x - y).abs().max().item<double>(), 1e-5) << arch_name(arch) << " position " << t;
    }
  }
}

}  // namespace
}  // namespace agentr1::model
