#include <ATen/Parallel.h>

#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "command.h"

namespace agentr1::cli {

void set_threads(int n) {
  AGENTR1_CHECK(n >= 0, "--threads must be >= 0 (0 = all cores), got " << n);
  if (n == 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(n);
  at::set_num_interop_threads(1);
  AGENTR1_LOG(DEBUG) << "torch threads: " << n;
}

}  // namespace agentr1::cli
