// agentr1/train/busy_clock.h — when a component was busy, for overlap metrics (how much
// of the learner's time the asynchronous rollout ran beside it).
//
//   BusyClock rollout;  rollout.start(t);  ...  rollout.stop(t2);
//   double s = rollout.busy_in(t0, t1);                    // busy seconds inside [t0, t1]
//   double both = BusyClock::overlap(rollout, learner, t0, t1);
//   rollout.forget_before(t1);                            // drop what no window needs
//
// Not thread-safe: the owner guards it. start() while busy and stop() while idle are
// no-ops, so nested callers need no bookkeeping of their own.
#pragma once

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace agentr1::train {

class BusyClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  void start(TimePoint t) {
    if (on_) return;
    on_ = true;
    since_ = t;
  }
  void stop(TimePoint t) {
    if (!on_) return;
    on_ = false;
    if (t > since_) spans_.emplace_back(since_, t);
  }
  bool busy() const { return on_; }

  // Busy seconds within [t0, t1] (an open span counts up to t1).
  double busy_in(TimePoint t0, TimePoint t1) const {
    double s = 0;
    for (const auto& [a, b] : spans_with_open(t1)) s += seconds(std::max(a, t0), std::min(b, t1));
    return s;
  }
  // Seconds within [t0, t1] when both clocks were busy.
  static double overlap(const BusyClock& x, const BusyClock& y, TimePoint t0, TimePoint t1) {
    double s = 0;
    const auto xs = x.spans_with_open(t1), ys = y.spans_with_open(t1);
    for (const auto& [a, b] : xs)
      for (const auto& [c, d] : ys) s += seconds(std::max({a, c, t0}), std::min({b, d, t1}));
    return s;
  }
  // Drops closed spans that end before t.
  void forget_before(TimePoint t) {
    spans_.erase(std::remove_if(spans_.begin(), spans_.end(), [t](const auto& p) { return p.second < t; }),
                 spans_.end());
  }

 private:
  static double seconds(TimePoint a, TimePoint b) {
    return b > a ? std::chrono::duration<double>(b - a).count() : 0.0;
  }
  std::vector<std::pair<TimePoint, TimePoint>> spans_with_open(TimePoint t1) const {
    auto v = spans_;
    if (on_ && t1 > since_) v.emplace_back(since_, t1);
    return v;
  }
  std::vector<std::pair<TimePoint, TimePoint>> spans_;
  bool on_ = false;
  TimePoint since_;
};

}  // namespace agentr1::train
