// agentr1/core/thread_pool.h — a fixed pool of worker threads.
//
//   ThreadPool pool(4);
//   std::future<int> f = pool.submit([] { return 42; });
//   f.get();   // rethrows what the task threw
//
// The destructor finishes queued tasks, then joins. Tasks must not block forever
// (a task that outlives its caller's timeout still occupies its worker until done).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace agentr1 {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);   // n_threads >= 1, else Error
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }

  template <typename Fn>
  auto submit(Fn&& fn) -> std::future<std::invoke_result_t<Fn>> {
    using R = std::invoke_result_t<Fn>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<Fn>(fn));
    std::future<R> fut = task->get_future();
    enqueue([task] { (*task)(); });
    return fut;
  }

 private:
  void enqueue(std::function<void()> job);
  void worker_loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace agentr1
