#include "agentr1/core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "agentr1/core/error.h"

namespace agentr1 {
namespace {

TEST(ThreadPoolTest, RunsAllTasksAndReturnsValues) {
  ThreadPool pool(3);
  std::vector<std::future<int>> fs;
  for (int i = 0; i < 100; ++i) fs.push_back(pool.submit([i] { return i * i; }));
  long sum = 0;
  for (auto& f : fs) sum += f.get();
  long expect = 0;
  for (int i = 0; i < 100; ++i) expect += i * i;
  EXPECT_EQ(sum, expect);
}

TEST(ThreadPoolTest, PropagatesExceptions) {
  ThreadPool pool(1);
  auto f = pool.submit([]() -> int { throw std::runtime_error("boom"); });
  EXPECT_THROW(f.get(), std::runtime_error);
}

TEST(ThreadPoolTest, DestructorDrainsQueue) {
  std::atomic<int> n{0};
  {
    ThreadPool pool(2);
    for (int i = 0; i < 50; ++i) pool.submit([&n] { n++; });
  }
  EXPECT_EQ(n.load(), 50);
}

TEST(ThreadPoolTest, RejectsZeroThreads) { EXPECT_THROW(ThreadPool(0), Error); }

}  // namespace
}  // namespace agentr1
