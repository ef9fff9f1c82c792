// agentr1/train/health.h — per-step health monitors: the signs that an RL run is going
// wrong, as warning metrics and console lines, and optionally a clean stop.
//
//   HealthMonitor health(cfg.trainer.health);
//   std::vector<std::string> fired = health.check(step, m);  // adds health/<name> to m
//   if (health.should_stop(fired)) ...                        // trainer.health.stop_on
//
// Monitors (trainer.health.<key>; 0 turns a threshold off). "Reference" is the mean of
// the metric over the first warmup_steps steps that logged it; relative monitors start
// after that.
//   tool_call_collapse  env/tool_calls/mean < tool_call_collapse x reference   (0.5)
//   entropy_collapse    actor/entropy < entropy_min                            (1e-4)
//   length_blowup       response_length/mean > length_blowup x reference       (3)
//   clip_spike          actor/pg_clipfrac > clipfrac_max                       (0.5)
//   kl_spike            actor/ppo_kl > kl_max                                  (1)
//   grad_explosion      actor/grad_norm > grad_norm_spike x reference          (10)
//   nan                 a loss, entropy, KL or gradient norm (actor/, critic/) is
//                       not finite, or an optimiser step was skipped as non-finite
//                       (actor/skipped_updates, critic/skipped_updates > 0): the
//                       precursors of NaN weights                              (on)
// Each step logs health/<name> = 1 when the monitor fired, else 0, and one WARN line per
// firing with the value and the threshold. trainer.health.stop_on lists monitors that
// also end the run cleanly (a checkpoint, then StopRequested).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace agentr1::train {

struct HealthOptions {
  int warmup_steps = 5;             // steps whose means are the references
  double tool_call_collapse = 0.5;  // fraction of the reference tool-call rate
  double entropy_min = 1e-4;        // nats per token
  double length_blowup = 3.0;       // multiple of the reference response length
  double clipfrac_max = 0.5;        // fraction of clipped tokens
  double kl_max = 1.0;              // approximate KL between the old and the new policy
  double grad_norm_spike = 10.0;    // multiple of the reference gradient norm
  bool nan_check = true;
  std::vector<std::string> stop_on;  // monitor names (see above)

  template <class V>
  void visit(V& v) {
    v.field("warmup_steps", warmup_steps, "steps whose means are the references of the relative monitors");
    v.field("tool_call_collapse", tool_call_collapse,
            "warn when env/tool_calls/mean < this x its reference (0 = off)");
    v.field("entropy_min", entropy_min, "warn when actor/entropy < this (0 = off)");
    v.field("length_blowup", length_blowup, "warn when response_length/mean > this x its reference (0 = off)");
    v.field("clipfrac_max", clipfrac_max, "warn when actor/pg_clipfrac > this (0 = off)");
    v.field("kl_max", kl_max, "warn when actor/ppo_kl > this (0 = off)");
    v.field("grad_norm_spike", grad_norm_spike, "warn when actor/grad_norm > this x its reference (0 = off)");
    v.field("nan_check", nan_check, "warn on non-finite losses or gradient norms and skipped updates");
    v.field("stop_on", stop_on, "monitors that stop the run with a checkpoint, e.g. [nan, kl_spike]");
  }
  // Throws Error naming the key and the rule (thresholds >= 0, warmup_steps >= 1,
  // stop_on names known monitors, listing them); bound as trainer.health, the binder
  // prefixes "trainer.health: ".
  void validate() const;
};

// The monitors' names, in the order above.
const std::vector<std::string>& health_monitor_names();

class HealthMonitor {
 public:
  explicit HealthMonitor(HealthOptions opts);
  // Checks one step's metrics; sets m["health/<name>"] to 1 or 0 for every monitor that
  // is on and returns the names that fired (each also logged as a WARN line).
  std::vector<std::string> check(int64_t step, std::map<std::string, double>& m);
  // True when one of `fired` is in stop_on.
  bool should_stop(const std::vector<std::string>& fired) const;

 private:
  // The reference of `key`: the mean of its first warmup_steps values; NaN until then.
  double reference(const std::string& key, const std::map<std::string, double>& m);

  HealthOptions opts_;
  std::map<std::string, std::vector<double>> warmup_;  // key -> values seen so far (<= warmup_steps)
};

}  // namespace agentr1::train
