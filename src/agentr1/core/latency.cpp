#include "agentr1/core/latency.h"

#include <chrono>
#include <cmath>
#include <thread>

#include "agentr1/core/error.h"

namespace agentr1 {

Latency Latency::from_ms(const std::vector<double>& ms, const std::string& key) {
  AGENTR1_CHECK(ms.size() <= 2, key << " must be [] (none), [ms] (fixed) or [lo, hi] (uniform, ms), got "
                                    << ms.size() << " numbers");
  for (double x : ms)
    AGENTR1_CHECK(std::isfinite(x) && x >= 0 && x <= 600000,
                  key << " values must be milliseconds in [0, 600000], got " << x);
  Latency l;
  if (ms.empty()) return l;
  l.lo_ms_ = ms[0];
  l.hi_ms_ = ms.size() == 2 ? ms[1] : ms[0];
  AGENTR1_CHECK(l.lo_ms_ <= l.hi_ms_, key << " is [lo, hi] with lo <= hi, got [" << l.lo_ms_ << ", " << l.hi_ms_
                                          << "]; HINT: swap the two numbers");
  return l;
}

double Latency::draw_ms(Rng& rng) const {
  if (lo_ms_ >= hi_ms_) return hi_ms_;
  return lo_ms_ + (hi_ms_ - lo_ms_) * rng.uniform();
}

double Latency::sleep(Rng& rng) const {
  if (none()) return 0;
  const double ms = draw_ms(rng);
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  return ms;
}

}  // namespace agentr1
