#include "agentr1/train/health.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

namespace agentr1::train {

const std::vector<std::string>& health_monitor_names() {
  static const std::vector<std::string> names = {"tool_call_collapse", "entropy_collapse", "length_blowup",
                                                 "clip_spike",         "kl_spike",         "grad_explosion",
                                                 "nan"};
  return names;
}

void HealthOptions::validate() const {
  AGENTR1_CHECK(warmup_steps >= 1, "health option 'warmup_steps' must be >= 1, got " << warmup_steps);
  const std::pair<const char*, double> thresholds[] = {{"tool_call_collapse", tool_call_collapse},
                                                       {"entropy_min", entropy_min},
                                                       {"length_blowup", length_blowup},
                                                       {"clipfrac_max", clipfrac_max},
                                                       {"kl_max", kl_max},
                                                       {"grad_norm_spike", grad_norm_spike}};
  for (const auto& [key, v] : thresholds)
    AGENTR1_CHECK(std::isfinite(v) && v >= 0, "health option '" << key << "' must be >= 0 (0 = off), got " << v);
  const auto& known = health_monitor_names();
  for (const auto& name : stop_on) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw Error("health option 'stop_on': unknown monitor '" + name + "'; known: " + list);
  }
}

HealthMonitor::HealthMonitor(HealthOptions opts) : opts_(std::move(opts)) { opts_.validate(); }

namespace {

double value_of(const std::map<std::string, double>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? NAN : it->second;
}

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

double HealthMonitor::reference(const std::string& key, const std::map<std::string, double>& m) {
  std::vector<double>& seen = warmup_[key];
  const double v = value_of(m, key);
  const size_t want = static_cast<size_t>(opts_.warmup_steps);
  if (seen.size() < want) {
    if (std::isfinite(v)) seen.push_back(v);
    return NAN;  // this step is part of the reference
  }
  double sum = 0;
  for (double x : seen) sum += x;
  return sum / static_cast<double>(seen.size());
}

std::vector<std::string> HealthMonitor::check(int64_t step, std::map<std::string, double>& m) {
  std::vector<std::string> fired;
  auto report = [&](const std::string& name, bool on, bool bad, const std::string& why) {
    if (!on) return;
    m["health/" + name] = bad ? 1.0 : 0.0;
    if (!bad) return;
    fired.push_back(name);
    AGENTR1_LOG(WARN) << "health: " << name << " at step " << step << ": " << why
                      << (should_stop({name}) ? " (trainer.health.stop_on: stopping)" : "");
  };
  // Relative monitors: below or above a multiple of the metric's early mean.
  const double calls = value_of(m, "env/tool_calls/mean");
  const double calls_ref = reference("env/tool_calls/mean", m);
  report("tool_call_collapse", opts_.tool_call_collapse > 0,
         std::isfinite(calls_ref) && calls_ref > 0 && calls < opts_.tool_call_collapse * calls_ref,
         "env/tool_calls/mean " + num(calls) + " < " + num(opts_.tool_call_collapse) + " x its reference " +
             num(calls_ref));
  const double len = value_of(m, "response_length/mean");
  const double len_ref = reference("response_length/mean", m);
  report("length_blowup", opts_.length_blowup > 0,
         std::isfinite(len_ref) && len_ref > 0 && len > opts_.length_blowup * len_ref,
         "response_length/mean " + num(len) + " > " + num(opts_.length_blowup) + " x its reference " + num(len_ref));
  const double gn = value_of(m, "actor/grad_norm");
  const double gn_ref = reference("actor/grad_norm", m);
  report("grad_explosion", opts_.grad_norm_spike > 0,
         std::isfinite(gn_ref) && gn_ref > 0 && gn > opts_.grad_norm_spike * gn_ref,
         "actor/grad_norm " + num(gn) + " > " + num(opts_.grad_norm_spike) + " x its reference " + num(gn_ref));
  // Absolute thresholds (only on steps that logged the metric, e.g. not critic warm-up).
  const double ent = value_of(m, "actor/entropy");
  report("entropy_collapse", opts_.entropy_min > 0, std::isfinite(ent) && ent < opts_.entropy_min,
         "actor/entropy " + num(ent) + " < " + num(opts_.entropy_min));
  const double clip = value_of(m, "actor/pg_clipfrac");
  report("clip_spike", opts_.clipfrac_max > 0, std::isfinite(clip) && clip > opts_.clipfrac_max,
         "actor/pg_clipfrac " + num(clip) + " > " + num(opts_.clipfrac_max));
  const double kl = value_of(m, "actor/ppo_kl");
  report("kl_spike", opts_.kl_max > 0, std::isfinite(kl) && kl > opts_.kl_max,
         "actor/ppo_kl " + num(kl) + " > " + num(opts_.kl_max));
  // NaN precursors: a non-finite loss or norm, or a skipped (non-finite) update.
  std::string bad_key;
  for (const char* key : {"actor/loss", "actor/pg_loss", "actor/entropy", "actor/ppo_kl", "actor/grad_norm",
                          "critic/vf_loss", "critic/grad_norm"}) {
    auto it = m.find(key);
    if (it != m.end() && !std::isfinite(it->second) && bad_key.empty()) bad_key = std::string(key) + " is " + num(it->second);
  }
  for (const char* key : {"actor/skipped_updates", "critic/skipped_updates"}) {
    const double v = value_of(m, key);
    if (std::isfinite(v) && v > 0 && bad_key.empty()) bad_key = std::string(key) + " " + num(v) + " (non-finite gradients)";
  }
  report("nan", opts_.nan_check, !bad_key.empty(), bad_key);
  return fired;
}

bool HealthMonitor::should_stop(const std::vector<std::string>& fired) const {
  for (const auto& f : fired)
    if (std::find(opts_.stop_on.begin(), opts_.stop_on.end(), f) != opts_.stop_on.end()) return true;
  return false;
}

}  // namespace agentr1::train
