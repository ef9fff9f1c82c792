// agentr1/train/evaluate.h — validation on held-out samples.
//
//   EvalResult r = evaluate(val, ctx, opts, /*k=*/4, /*temperature=*/1.0, seed, drivers);
//   r.greedy_success;   // fraction solved with greedy decoding (one trajectory each)
//   r.mean_at_k;        // mean success over k sampled trajectories per prompt
//
// Success is outcome_reward >= opts.success_threshold (the flow's "success" metric).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/flow/agent_flow.h"

namespace agentr1::train {

struct EvalResult {
  int64_t num_prompts = 0;
  double greedy_success = 0;          // success rate, greedy decoding
  double greedy_reward = 0;           // mean total reward, greedy
  double greedy_tool_use = 0;         // fraction of greedy trajectories with >= 1 tool call
  double greedy_success_with_tool = 0;  // fraction of greedy successes that called the tool
  double mean_turns = 0;              // greedy
  double mean_tool_calls = 0;         // greedy
  double mean_response_length = 0;    // greedy, tokens over all turns
  int k = 0;                          // samples per prompt for mean@k (0 = not measured)
  double mean_at_k = 0;               // mean success over k samples per prompt
  double pass_at_k = 0;               // fraction of prompts with >= 1 success among k
  double wall_s = 0;
  int64_t infra_failures = 0;         // trajectories (greedy and sampled) the infrastructure
                                      // failed (Trajectory::infra_failure): left out of every
                                      // rate above, which are over the rest
  // An environment's own episode metrics (namespaced trajectory metrics such as
  // "paper/recall", from Step info "episode_metrics"), greedy means over the counted
  // trajectories that have them; logged as "val/<name>/greedy".
  std::map<std::string, double> env_metrics;
  std::vector<Trajectory> greedy_trajectories;  // for dumps
  json to_json() const;               // flat: greedy_success, mean@k, ...
  // The fields to_json writes (missing ones keep their defaults; no trajectories).
  static EvalResult from_json(const json& j);
  // "val/..." metric names for metrics.jsonl.
  std::map<std::string, double> metrics() const;
};

class ProcessGroup;

// pg (data parallelism): the episodes are split over the ranks and gathered; every rank
// returns the same result, equal to one process's.
EvalResult evaluate(const std::vector<Sample>& samples, const flow::FlowContext& ctx,
                    const flow::FlowOptions& opts, int k, double temperature, uint64_t seed,
                    ThreadPool& drivers, ProcessGroup* pg = nullptr);

// Mean of each numeric entry of Trajectory::metrics over `trajs` (keys as given).
std::map<std::string, double> mean_trajectory_metrics(const std::vector<Trajectory>& trajs);

}  // namespace agentr1::train
