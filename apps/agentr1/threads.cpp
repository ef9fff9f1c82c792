#include <ATen/Parallel.h>

#include <mutex>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "command.h"

namespace agentr1::cli {

void set_threads(int n) {
  AGENTR1_CHECK(n >= 0, "--threads must be >= 0 (0 = all cores), got " << n);
  if (n == 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(n);
  // The inter-op pool can be sized only once per process (torch throws after that).
  static std::once_flag interop_once;
  std::call_once(interop_once, [] { at::set_num_interop_threads(1); });
  AGENTR1_LOG(DEBUG) << "torch threads: " << n;
}

}  // namespace agentr1::cli
