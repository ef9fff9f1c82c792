#include "agentr1/rollout/slot_pool.h"

#include <gtest/gtest.h>

namespace agentr1::rollout {
namespace {

using State = SlotPool::State;

TEST(SlotPool, LongestPrefixOverRunningAndCached) {
  SlotPool pool(4);
  int a = pool.acquire_free();
  pool.set_running(a);
  pool.tokens(a) = {1, 2, 3, 4, 5};
  int b = pool.acquire_free();
  ASSERT_NE(a, b);
  pool.set_running(b);
  pool.tokens(b) = {1, 2, 9};
  pool.release(b, /*keep=*/true);
  EXPECT_EQ(pool.state(b), State::kCached);

  auto m = pool.longest_prefix({1, 2, 3, 7}, 100);
  EXPECT_EQ(m.slot, a);
  EXPECT_EQ(m.len, 3);
  m = pool.longest_prefix({1, 2, 3, 4, 5, 6}, 4);  // capped
  EXPECT_EQ(m.slot, a);
  EXPECT_EQ(m.len, 4);
  m = pool.longest_prefix({1, 2, 9, 9}, 100);
  EXPECT_EQ(m.slot, b);
  EXPECT_EQ(m.len, 3);
  m = pool.longest_prefix({1, 2}, 100);  // tie a/b at 2: the cached one wins
  EXPECT_EQ(m.slot, b);
  EXPECT_EQ(m.len, 2);
  m = pool.longest_prefix({7}, 100);
  EXPECT_EQ(m.slot, -1);
  EXPECT_EQ(m.len, 0);
}

TEST(SlotPool, EvictsLeastRecentlyUsedCachedSlot) {
  SlotPool pool(3);
  for (int i = 0; i < 3; ++i) {
    int s = pool.acquire_free();
    ASSERT_EQ(s, i);
    pool.set_running(s);
    pool.tokens(s) = {i + 10};
  }
  EXPECT_EQ(pool.acquire_free(), -1);  // all running
  pool.release(1, true);
  pool.release(0, true);  // 1 is older than 0
  EXPECT_EQ(pool.acquire_free(/*keep=*/1), 0);  // 1 is protected
  EXPECT_EQ(pool.state(0), State::kFree);
  EXPECT_TRUE(pool.tokens(0).empty());
  pool.set_running(0);
  EXPECT_EQ(pool.acquire_free(), 1);
  pool.release(2, false);
  EXPECT_EQ(pool.state(2), State::kFree);
}

TEST(SlotPool, ClearCachedForgetsCachedAndStopsSharingRunning) {
  SlotPool pool(2);
  pool.set_running(0);
  pool.tokens(0) = {1, 2, 3};
  pool.set_running(1);
  pool.tokens(1) = {1, 2, 4};
  pool.release(1, true);
  EXPECT_EQ(pool.clear_cached(), std::vector<int>{1});
  EXPECT_EQ(pool.state(1), State::kFree);
  EXPECT_EQ(pool.longest_prefix({1, 2, 3}, 10).slot, -1);  // running 0 is stale
  pool.release(0, /*keep=*/true);
  EXPECT_EQ(pool.state(0), State::kFree);  // stale keys/values are not cached
  pool.set_running(0);
  pool.tokens(0) = {5};
  EXPECT_EQ(pool.longest_prefix({5}, 10).slot, 0);  // fresh again
}

}  // namespace
}  // namespace agentr1::rollout
