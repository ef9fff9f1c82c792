// agentr1/model/row_splitter.h — two-way fork/join for small decode steps.
//
//   model::RowSplitter split;                    // starts one helper thread
//   split.run([&] { first_half(); }, [&] { second_half(); });   // both done on return
//
// Decoding a few rows is bound by reading the weights from memory; one core cannot
// saturate the memory system, two can. OpenMP would give the second core, but with two
// OpenMP teams alive in one process (the learner's and the engine's) on a machine with
// as many cores as one team, libgomp stops spinning and each parallel region pays
// futex wake-ups (tens of microseconds in a VM), more than a small matrix-vector
// product costs. The helper here spins between calls (a decode step issues one every
// few microseconds) and sleeps after `idle_us` without work, so an idle engine leaves
// the core to the learner. Calls must come from one thread at a time; the helper runs
// with autograd off (inference only).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace agentr1::model {

class RowSplitter {
 public:
  explicit RowSplitter(int64_t idle_us = 2000);
  ~RowSplitter();
  RowSplitter(const RowSplitter&) = delete;
  RowSplitter& operator=(const RowSplitter&) = delete;

  // Runs a on the calling thread and b on the helper; returns when both are done.
  // Rethrows the first exception either threw.
  void run(const std::function<void()>& a, const std::function<void()>& b);

 private:
  void helper_loop();

  const int64_t idle_us_;
  std::atomic<uint64_t> posted_{0};  // generation of the last posted job
  std::atomic<uint64_t> done_{0};    // generation of the last finished job
  const std::function<void()>* job_ = nullptr;
  std::exception_ptr error_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread helper_;
};

}  // namespace agentr1::model
