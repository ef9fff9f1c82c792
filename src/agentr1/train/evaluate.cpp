#include "agentr1/train/evaluate.h"

#include "agentr1/train/distributed/distributed.h"

#include <chrono>

#include "agentr1/flow/group_rollout.h"

namespace agentr1::train {

std::map<std::string, double> mean_trajectory_metrics(const std::vector<Trajectory>& trajs) {
  std::map<std::string, double> sum;
  for (const auto& t : trajs)
    for (auto it = t.metrics.begin(); it != t.metrics.end(); ++it)
      if (it.value().is_number() || it.value().is_boolean())
        sum[it.key()] += it.value().is_boolean() ? (it.value().get<bool>() ? 1.0 : 0.0)
                                                 : it.value().get<double>();
  if (!trajs.empty())
    for (auto& kv : sum) kv.second /= static_cast<double>(trajs.size());
  return sum;
}

json EvalResult::to_json() const {
  json j;
  j["num_prompts"] = num_prompts;
  j["greedy_success"] = greedy_success;
  j["greedy_reward"] = greedy_reward;
  j["greedy_tool_use"] = greedy_tool_use;
  j["greedy_success_with_tool"] = greedy_success_with_tool;
  j["mean_turns"] = mean_turns;
  j["mean_tool_calls"] = mean_tool_calls;
  j["mean_response_length"] = mean_response_length;
  j["k"] = k;
  j["mean@k"] = mean_at_k;
  j["pass@k"] = pass_at_k;
  j["wall_s"] = wall_s;
  j["infra_failures"] = infra_failures;
  if (!env_metrics.empty()) j["env_metrics"] = env_metrics;
  return j;
}

EvalResult EvalResult::from_json(const json& j) {
  EvalResult r;
  if (!j.is_object()) return r;
  auto num = [&](const char* k, double d) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : d; };
  r.num_prompts = static_cast<int64_t>(num("num_prompts", 0));
  r.greedy_success = num("greedy_success", 0);
  r.greedy_reward = num("greedy_reward", 0);
  r.greedy_tool_use = num("greedy_tool_use", 0);
  r.greedy_success_with_tool = num("greedy_success_with_tool", 0);
  r.mean_turns = num("mean_turns", 0);
  r.mean_tool_calls = num("mean_tool_calls", 0);
  r.mean_response_length = num("mean_response_length", 0);
  r.k = static_cast<int>(num("k", 0));
  r.mean_at_k = num("mean@k", 0);
  r.pass_at_k = num("pass@k", 0);
  if (j.contains("env_metrics") && j["env_metrics"].is_object())
    for (auto it = j["env_metrics"].begin(); it != j["env_metrics"].end(); ++it)
      if (it.value().is_number()) r.env_metrics[it.key()] = it.value().get<double>();
  r.wall_s = num("wall_s", 0);
  r.infra_failures = static_cast<int64_t>(num("infra_failures", 0));
  return r;
}

std::map<std::string, double> EvalResult::metrics() const {
  std::map<std::string, double> m;
  m["val/success/greedy"] = greedy_success;
  m["val/reward/greedy"] = greedy_reward;
  m["val/tool_use/greedy"] = greedy_tool_use;
  m["val/num_turns/mean"] = mean_turns;
  m["val/tool_calls/mean"] = mean_tool_calls;
  m["val/response_length/mean"] = mean_response_length;
  if (k > 0) {
    m["val/success/mean@" + std::to_string(k)] = mean_at_k;
    m["val/success/pass@" + std::to_string(k)] = pass_at_k;
  }
  m["timing/validation"] = wall_s;
  m["val/infra_failures"] = static_cast<double>(infra_failures);
  for (const auto& [key, v] : env_metrics) m["val/" + key + "/greedy"] = v;
  return m;
}

namespace {
bool succeeded(const Trajectory& t) { return t.metrics.value("success", 0) != 0; }
}  // namespace

EvalResult evaluate(const std::vector<Sample>& samples, const flow::FlowContext& ctx,
                    const flow::FlowOptions& opts, int k, double temperature, uint64_t seed,
                    ThreadPool& drivers, ProcessGroup* pg) {
  const auto run = [&](int n, const flow::FlowOptions& o, uint64_t sd) {
    return pg != nullptr ? run_group_rollouts_dp(samples, n, ctx, o, sd, drivers, *pg)
                         : flow::run_group_rollouts(samples, n, ctx, o, sd, drivers);
  };
  const auto t0 = std::chrono::steady_clock::now();
  EvalResult r;
  r.num_prompts = static_cast<int64_t>(samples.size());
  if (samples.empty()) return r;
  flow::FlowOptions greedy = opts;
  greedy.sampling.temperature = 0.0f;
  r.greedy_trajectories = run(1, greedy, seed);
  int64_t wins = 0, tool = 0, wins_tool = 0, valid = 0;
  double reward = 0;
  std::vector<Trajectory> counted;  // the greedy trajectories the infrastructure did not fail
  for (const auto& t : r.greedy_trajectories) {
    if (!t.infra_failure.empty()) {
      ++r.infra_failures;
      continue;
    }
    counted.push_back(t);
    ++valid;
    const bool used_tool = t.metrics.value("tool_calls", 0) > 0;
    wins += succeeded(t);
    tool += used_tool;
    wins_tool += succeeded(t) && used_tool;
    reward += t.total_reward();
  }
  const double n = static_cast<double>(std::max<int64_t>(valid, 1));
  r.greedy_success = wins / n;
  r.greedy_reward = reward / n;
  r.greedy_tool_use = tool / n;
  r.greedy_success_with_tool = wins > 0 ? static_cast<double>(wins_tool) / wins : 0.0;
  auto means = mean_trajectory_metrics(counted);
  r.mean_turns = means["num_turns"];
  r.mean_tool_calls = means["tool_calls"];
  r.mean_response_length = means["response_length"];
  // The env's namespaced metrics ("paper/recall"): means over the trajectories that report
  // them (one aborted before its first env step has none, and is not a 0).
  std::map<std::string, std::pair<double, int64_t>> env_sums;
  for (const auto& t : counted)
    for (auto it = t.metrics.begin(); it != t.metrics.end(); ++it)
      if (it.key().find('/') != std::string::npos && it.key().rfind("finish/", 0) != 0 && it.value().is_number()) {
        env_sums[it.key()].first += it.value().get<double>();
        ++env_sums[it.key()].second;
      }
  for (const auto& [key, s] : env_sums) r.env_metrics[key] = s.first / static_cast<double>(s.second);
  if (k > 0) {
    flow::FlowOptions sampled = opts;
    sampled.sampling.temperature = static_cast<float>(temperature);
    auto trajs = run(k, sampled, seed + 1);
    int64_t total = 0, prompts_solved = 0, tried = 0, prompts_tried = 0;
    for (size_t i = 0; i < samples.size(); ++i) {
      int solved = 0, ok = 0;
      for (int j = 0; j < k; ++j) {
        const Trajectory& t = trajs[i * k + j];
        if (!t.infra_failure.empty()) {
          ++r.infra_failures;
          continue;
        }
        ++ok;
        solved += succeeded(t);
      }
      total += solved;
      tried += ok;
      prompts_tried += ok > 0;
      prompts_solved += solved > 0;
    }
    r.k = k;
    r.mean_at_k = tried > 0 ? static_cast<double>(total) / static_cast<double>(tried) : 0.0;
    r.pass_at_k = prompts_tried > 0 ? static_cast<double>(prompts_solved) / static_cast<double>(prompts_tried) : 0.0;
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace agentr1::train
