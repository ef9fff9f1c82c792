#include <ATen/Parallel.h>

#include <mutex>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "command.h"

namespace agentr1::cli {

void set_threads(int n) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // More threads than 4x the cores only oversubscribes (and a huge count makes OpenMP
  // spend minutes creating threads).
  AGENTR1_CHECK(n >= 0 && n <= 4 * cores, "threads must be in 0.." << 4 * cores << " (0 = all " << cores
                                                                  << " cores; at most 4x the cores), got " << n);
  if (n == 0) n = cores;
  at::set_num_threads(n);
  // The inter-op pool can be sized only once per process (torch throws after that).
  static std::once_flag interop_once;
  std::call_once(interop_once, [] { at::set_num_interop_threads(1); });
  AGENTR1_LOG(DEBUG) << "torch threads: " << n;
}

}  // namespace agentr1::cli
