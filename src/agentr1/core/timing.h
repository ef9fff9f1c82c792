// agentr1/core/timing.h — elapsed wall-clock seconds on the monotonic clock.
//
//   const auto t0 = std::chrono::steady_clock::now();
//   run_step();
//   metrics["timing/step"] = seconds_since(t0);
#pragma once

#include <chrono>

namespace agentr1 {

// Seconds from t0 to now on std::chrono::steady_clock, as a double (>= 0: the clock
// never goes back).
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace agentr1
