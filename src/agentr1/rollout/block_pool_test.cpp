// BlockPool: the radix tree of cached prefixes, reference counts, reservations and LRU
// eviction, checked against hand-worked block layouts (block size 4).
#include "agentr1/rollout/block_pool.h"

#include <gtest/gtest.h>

#include "agentr1/core/error.h"

namespace agentr1::rollout {
namespace {

// Starts a sequence on prompt ids as the engine does, writes the whole prompt, and
// returns it.
BlockPool::Seq run(BlockPool& pool, const TokenIds& ids, int need, BlockPool::Copy* copy = nullptr) {
  BlockPool::Match m = pool.longest_prefix(ids, static_cast<int>(ids.size()) - 1);
  BlockPool::Seq s;
  BlockPool::Copy c;
  EXPECT_TRUE(pool.start(s, m, need, &c));
  if (copy) *copy = c;
  pool.grow(s, static_cast<int>(ids.size()));
  pool.append(s, ids.data() + s.len, static_cast<int>(ids.size()) - s.len);
  return s;
}

TEST(BlockPool, GroupSharesFullBlocksAndCopiesThePartialOne) {
  BlockPool pool(16, 4, /*share=*/true);
  const TokenIds prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // blocks [1..4] [5..8] [9 10]
  BlockPool::Seq a = run(pool, prompt, 14);
  ASSERT_EQ(a.table.size(), 3u);
  EXPECT_EQ(pool.n_in_use(), 3);
  EXPECT_EQ(pool.reserved(), 1);  // 14 positions = 4 blocks, 3 allocated

  // A second sample: the cap (prompt - 1 = 9 tokens) stops inside the third block.
  BlockPool::Match m = pool.longest_prefix(prompt, 9);
  EXPECT_EQ(m.shared, (std::vector<int32_t>{a.table[0], a.table[1]}));
  EXPECT_EQ(m.copy_src, a.table[2]);
  EXPECT_EQ(m.copy_len, 1);
  EXPECT_FALSE(m.take_over);  // a's block is referenced: copy, don't adopt
  BlockPool::Copy c;
  BlockPool::Seq b = run(pool, prompt, 14, &c);
  EXPECT_EQ(c.src, a.table[2]);
  EXPECT_EQ(c.n, 1);
  EXPECT_EQ(b.table[0], a.table[0]);
  EXPECT_EQ(b.table[1], a.table[1]);
  EXPECT_NE(b.table[2], a.table[2]);
  EXPECT_EQ(pool.ref_count(a.table[0]), 2);
  EXPECT_EQ(pool.tokens(b.table[2]), (TokenIds{9, 10}));
  EXPECT_EQ(pool.n_in_use(), 4);  // 2 shared + 2 private partial blocks

  // Decoding into the private blocks; the first full one gets a child.
  pool.grow(a, 13);
  const TokenIds gen = {11, 12, 13};
  pool.append(a, gen.data(), 3);
  EXPECT_EQ(pool.tokens(a.table[2]), (TokenIds{9, 10, 11, 12}));
  EXPECT_EQ(pool.tokens(a.table[3]), (TokenIds{13}));
  EXPECT_THROW(pool.grow(a, 17), Error);  // beyond its reservation of 14 positions

  // A later turn extending a's text finds all of it.
  m = pool.longest_prefix({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 99}, 13);
  EXPECT_EQ(m.shared.size(), 3u);
  EXPECT_EQ(m.copy_src, a.table[3]);
  EXPECT_EQ(m.copy_len, 1);
}

TEST(BlockPool, ReleasedBlocksStayCachedAndAreAdoptedOrEvictedLeastRecentlyUsed) {
  BlockPool pool(4, 4, true);
  BlockPool::Seq a = run(pool, {1, 2, 3, 4, 5, 6}, 8);  // 2 blocks
  pool.release(a);
  EXPECT_EQ(pool.n_cached(), 2);
  EXPECT_EQ(pool.n_free(), 2);
  // Same prefix again: the full block is shared, the cached partial leaf adopted (no copy).
  BlockPool::Match m = pool.longest_prefix({1, 2, 3, 4, 5, 6, 7}, 6);
  EXPECT_TRUE(m.take_over);
  EXPECT_EQ(m.len(4), 6);
  BlockPool::Copy c;
  BlockPool::Seq b = run(pool, {1, 2, 3, 4, 5, 6, 7}, 8, &c);
  EXPECT_EQ(c.src, -1);
  EXPECT_EQ(pool.n_cached(), 0);
  pool.release(b);
  // Two unrelated prompts fill the pool: the least recently used cached leaf goes first.
  BlockPool::Seq d = run(pool, {20, 21, 22}, 4);
  BlockPool::Seq e = run(pool, {30, 31, 32}, 4);
  EXPECT_EQ(pool.n_free(), 0);
  pool.release(d);
  pool.release(e);
  BlockPool::Seq f = run(pool, {40, 41, 42}, 4);  // evicts the oldest leaf: b's [5 6 7]
  EXPECT_EQ(pool.longest_prefix({1, 2, 3, 4, 5, 6, 7}, 7).len(4), 4);
  EXPECT_EQ(pool.longest_prefix({20, 21, 22}, 3).len(4), 3);
  pool.release(f);
}

TEST(BlockPool, ReservationsMakeRequestsWaitInsteadOfRunningOut) {
  BlockPool pool(4, 4, true);
  BlockPool::Seq a = run(pool, {1, 2}, 12);  // reserves 3 blocks, holds 1
  BlockPool::Match m = pool.longest_prefix({7, 8}, 1);
  BlockPool::Seq b;
  BlockPool::Copy c;
  EXPECT_FALSE(pool.start(b, m, 8, &c));  // 2 blocks needed, 1 left unreserved
  EXPECT_TRUE(b.table.empty());
  EXPECT_TRUE(pool.start(b, m, 4, &c));
  EXPECT_EQ(pool.n_free(), 3);    // a holds 1 block, b none yet
  EXPECT_EQ(pool.reserved(), 3);  // but all 3 free ones are promised: 2 to a, 1 to b
  pool.release(b);
  pool.release(a);
  EXPECT_EQ(pool.reserved(), 0);
}

TEST(BlockPool, ClearCachedForgetsEverythingAndDetachesRunning) {
  BlockPool pool(8, 4, true);
  BlockPool::Seq a = run(pool, {1, 2, 3, 4, 5}, 8);
  BlockPool::Seq b = run(pool, {9, 9, 9, 9, 9}, 8);
  pool.release(b);
  pool.clear_cached();
  EXPECT_EQ(pool.n_cached(), 0);
  EXPECT_EQ(pool.longest_prefix({1, 2, 3, 4, 5}, 4).len(4), 0);  // a runs, but is not matched
  pool.release(a);  // its blocks are freed, not cached
  EXPECT_EQ(pool.n_free(), 8);
}

TEST(BlockPool, WithoutSharingNothingIsMatchedOrKept) {
  BlockPool pool(4, 4, /*share=*/false);
  BlockPool::Seq a = run(pool, {1, 2, 3, 4, 5}, 8);
  EXPECT_EQ(pool.longest_prefix({1, 2, 3, 4, 5}, 4).len(4), 0);
  pool.release(a);
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_EQ(pool.n_cached(), 0);
}

}  // namespace
}  // namespace agentr1::rollout
