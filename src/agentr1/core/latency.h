// agentr1/core/latency.h — simulated latency for slow tools and environments, so the
// effect of a slow or remote environment on rollout and training can be measured on one
// machine (rollout.env_latency_ms, a tool env's tool_latency_ms).
//
//   Latency lat = Latency::from_ms({100, 300}, "rollout.env_latency_ms");  // uniform in [100, 300]
//   Rng rng(derive_seed(traj_seed, {kSeedLatency, turn}));
//   lat.sleep(rng);            // blocks this thread only; other trajectories keep running
//
// A spec is [] or [0] (none, the default), [ms] (fixed), or [lo, hi] (uniform in
// [lo, hi] ms, drawn from the caller's Rng, so a run's delays are reproducible).
#pragma once

#include <string>
#include <vector>

#include "agentr1/core/rng.h"

namespace agentr1 {

class Latency {
 public:
  Latency() = default;
  // Throws Error naming `key` unless ms is empty, [x] or [lo, hi] with 0 <= lo <= hi
  // <= 600000 (ten minutes), all finite.
  static Latency from_ms(const std::vector<double>& ms, const std::string& key);
  bool none() const { return hi_ms_ <= 0; }
  double lo_ms() const { return lo_ms_; }
  double hi_ms() const { return hi_ms_; }
  // One delay in ms: lo when fixed, else lo + (hi - lo) * rng.uniform(). Draws from rng
  // only when lo < hi.
  double draw_ms(Rng& rng) const;
  // Sleeps draw_ms(rng) milliseconds (nothing when none()); returns the ms slept.
  double sleep(Rng& rng) const;

 private:
  double lo_ms_ = 0;
  double hi_ms_ = 0;
};

}  // namespace agentr1
