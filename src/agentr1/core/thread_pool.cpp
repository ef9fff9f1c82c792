#include "agentr1/core/thread_pool.h"

#include "agentr1/core/error.h"

namespace agentr1 {

ThreadPool::ThreadPool(int n_threads) {
  AGENTR1_CHECK(n_threads >= 1, "thread pool size must be >= 1, got " << n_threads);
  workers_.reserve(n_threads);
  for (int i = 0; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::enqueue(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    AGENTR1_CHECK(!stopping_, "submit() on a thread pool that is shutting down");
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void ThreadPool::worker_loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace agentr1
