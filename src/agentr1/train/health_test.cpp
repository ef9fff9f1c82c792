// Health monitors on hand-made metric sequences: each fires on the step its rule says
// and not before (relative ones only after the warm-up that sets their reference),
// thresholds of 0 turn them off, stop_on is checked against the known names.
#include "agentr1/train/health.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "agentr1/core/error.h"

namespace agentr1::train {
namespace {

using M = std::map<std::string, double>;

// A healthy step: 1 tool call, 30 tokens, entropy 0.5, small clip fraction and KL.
M healthy() {
  return {{"env/tool_calls/mean", 1.0}, {"response_length/mean", 30.0}, {"actor/entropy", 0.5},
          {"actor/pg_clipfrac", 0.01},  {"actor/ppo_kl", 0.001},        {"actor/grad_norm", 0.4},
          {"actor/loss", 0.01},         {"actor/skipped_updates", 0.0}};
}

HealthOptions warmup(int n) {
  HealthOptions o;
  o.warmup_steps = n;
  return o;
}

TEST(HealthMonitorTest, HealthyStepsFireNothingAndLogZeros) {
  HealthMonitor h(warmup(3));
  for (int step = 1; step <= 10; ++step) {
    M m = healthy();
    EXPECT_TRUE(h.check(step, m).empty()) << step;
    if (step > 3) {
      for (const auto& name : health_monitor_names()) EXPECT_EQ(m.at("health/" + name), 0.0) << name;
    }
  }
}

// Relative monitors: the reference is the mean of the first warmup_steps values
// (tool calls 1, 1, 1 -> 1.0; lengths 20, 30, 40 -> 30; grad norms 0.2, 0.4, 0.6 -> 0.4).
TEST(HealthMonitorTest, RelativeMonitorsCompareWithTheWarmupMean) {
  HealthMonitor h(warmup(3));
  const double lengths[] = {20, 30, 40};
  const double norms[] = {0.2, 0.4, 0.6};
  for (int step = 1; step <= 3; ++step) {
    M m = healthy();
    m["response_length/mean"] = lengths[step - 1];
    m["actor/grad_norm"] = norms[step - 1];
    if (step == 3) m["env/tool_calls/mean"] = 0.0;  // during the warm-up: part of the reference, no alarm
    EXPECT_TRUE(h.check(step, m).empty()) << step;
    EXPECT_EQ(m.count("health/tool_call_collapse"), 1u);
  }
  // Reference tool calls = (1 + 1 + 0) / 3 = 2/3; collapse below 0.5 x 2/3 = 1/3.
  M m = healthy();
  m["env/tool_calls/mean"] = 0.34;
  EXPECT_TRUE(h.check(4, m).empty());
  m = healthy();
  m["env/tool_calls/mean"] = 0.32;
  EXPECT_EQ(h.check(5, m), std::vector<std::string>{"tool_call_collapse"});
  EXPECT_EQ(m.at("health/tool_call_collapse"), 1.0);
  // Length: > 3 x 30 = 90.
  m = healthy();
  m["response_length/mean"] = 90;
  EXPECT_TRUE(h.check(6, m).empty());
  m = healthy();
  m["response_length/mean"] = 91;
  EXPECT_EQ(h.check(7, m), std::vector<std::string>{"length_blowup"});
  // Gradient norm: > 10 x 0.4 = 4.
  m = healthy();
  m["actor/grad_norm"] = 4.1;
  EXPECT_EQ(h.check(8, m), std::vector<std::string>{"grad_explosion"});
}

TEST(HealthMonitorTest, AbsoluteMonitorsAndNanPrecursors) {
  HealthMonitor h(warmup(1));
  M m = healthy();
  m["actor/entropy"] = 5e-5;  // < 1e-4
  m["actor/pg_clipfrac"] = 0.6;
  m["actor/ppo_kl"] = 1.5;
  EXPECT_EQ(h.check(1, m), (std::vector<std::string>{"entropy_collapse", "clip_spike", "kl_spike"}));
  m = healthy();
  m["actor/loss"] = NAN;
  EXPECT_EQ(h.check(2, m), std::vector<std::string>{"nan"});
  m = healthy();
  m["actor/skipped_updates"] = 1;
  EXPECT_EQ(h.check(3, m), std::vector<std::string>{"nan"});
  m = healthy();
  m["critic/vf_loss"] = INFINITY;
  EXPECT_EQ(h.check(4, m), std::vector<std::string>{"nan"});
  // A step without actor metrics (critic warm-up) does not fire the actor monitors.
  M critic_only = {{"env/tool_calls/mean", 1.0}, {"response_length/mean", 30.0}, {"critic/vf_loss", 0.1}};
  EXPECT_TRUE(h.check(5, critic_only).empty());
}

TEST(HealthMonitorTest, ZeroTurnsAMonitorOffAndStopOnIsChecked) {
  HealthOptions o = warmup(1);
  o.kl_max = 0;
  o.nan_check = false;
  o.stop_on = {"kl_spike", "clip_spike"};
  HealthMonitor h(o);
  M m = healthy();
  m["actor/ppo_kl"] = 100;
  m["actor/loss"] = NAN;
  EXPECT_TRUE(h.check(1, m).empty());
  EXPECT_EQ(m.count("health/kl_spike"), 0u) << "an off monitor logs nothing";
  EXPECT_EQ(m.count("health/nan"), 0u);
  EXPECT_TRUE(h.should_stop({"clip_spike"}));
  EXPECT_FALSE(h.should_stop({"entropy_collapse"}));

  HealthOptions bad;
  bad.stop_on = {"nan", "kl_spikes"};
  try {
    bad.validate();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("unknown monitor 'kl_spikes'"), std::string::npos) << w;
    EXPECT_NE(w.find("known: tool_call_collapse, entropy_collapse"), std::string::npos) << w;
  }
  bad = HealthOptions();
  bad.length_blowup = -1;
  EXPECT_THROW(bad.validate(), Error);
  bad = HealthOptions();
  bad.warmup_steps = 0;
  EXPECT_THROW(HealthMonitor{bad}, Error);
}

}  // namespace
}  // namespace agentr1::train
