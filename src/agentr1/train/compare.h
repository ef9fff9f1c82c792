// agentr1/train/compare.h — Agent-R1's headline experiment: several RL algorithms on
// one task with the same model, seeds and budget, against the training-free baseline.
//
//   CompareOptions o;                          // methods grpo, ppo, rloo, reinforce_plus_plus
//   o.out_dir = "runs/compare";
//   CompareResult r = run_comparison(base_tree, o);   // one RLTrainer run per method
//   std::cout << format_comparison(r);                // markdown table
//   // out_dir/<method>/ holds each run directory; out_dir/comparison.{md,json},
//   // out_dir/val_accuracy.{dat,gp,png} the table and the plot (PNG needs gnuplot).
//
// A method is a name plus config overrides applied on top of the shared tree (see
// method_overrides): "ppo" = GAE with a critic, the others select an advantage
// estimator. Every run starts from the same checkpoint with the same data and
// sampling seeds, so the runs' step-0 validations are the same training-free
// baseline; the table reports the first one (and the spread, which should be 0).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/train/evaluate.h"

namespace agentr1::train {

struct CompareOptions {
  std::vector<std::string> methods = {"grpo", "ppo", "rloo", "reinforce_plus_plus"};
  std::string out_dir = "runs/compare";
  bool plot = true;   // write val_accuracy.png with gnuplot (a warning if it is missing)
};

// Config overrides that make `method` out of the shared tree. Known: grpo, ppo (gae +
// critic), rloo, reinforce_plus_plus, reinforce_plus_plus_baseline, turn_rloo, gspo
// (grpo advantages + sequence-level ratio). Throws Error listing them for another name.
std::vector<std::string> method_overrides(const std::string& method);
std::vector<std::string> known_methods();

struct MethodResult {
  std::string method;
  std::string run_dir;
  EvalResult baseline;                            // the run's step-0 validation
  EvalResult final_eval;                          // after the last step
  double train_reward_last = 0;                   // mean critic/score/mean over the last 5 steps
  double wall_s = 0;                              // whole run (validations included)
  std::vector<std::pair<int64_t, double>> curve;  // (step, greedy success) at each validation
};

struct CompareResult {
  EvalResult baseline;                 // training-free baseline (first method's step 0)
  double baseline_spread = 0;          // max |difference| among the runs' step-0 greedy success
  std::vector<MethodResult> methods;
  std::string out_dir;
};

// Runs every method in order (trainer.output_dir = out_dir/<method>), then writes the
// table, the JSON and the plot. base_tree: a resolved train config tree (defaults,
// config file, overrides) with model.path set.
CompareResult run_comparison(const json& base_tree, const CompareOptions& opts);

// Markdown table: method, greedy accuracy, gain over the baseline, mean@k, mean
// reward (validation, greedy), train reward, response length, turns, wall time.
std::string format_comparison(const CompareResult& r);

// Reads (step, val/success/greedy) pairs from a run's metrics.jsonl.
std::vector<std::pair<int64_t, double>> read_validation_curve(const std::string& metrics_path);

}  // namespace agentr1::train
