// agentr1/experiments/compare.h — Agent-R1's headline experiment: several RL algorithms on
// one task with the same model, seeds and budget, against the training-free baseline.
//
//   CompareRecipe recipe = parse_compare_recipe(load_yaml_file("configs/compare.yaml"));
//   CompareOptions o;
//   o.method_table = recipe.methods;           // name -> config overrides (data, not code)
//   o.methods = recipe.default_methods;        // e.g. grpo, ppo, rloo, reinforce_plus_plus
//   o.out_dir = "runs/compare";
//   CompareResult r = run_comparison(base_tree, o);   // one RLTrainer run per method
//   std::cout << format_comparison(r);                // markdown table
//   // out_dir/<method>/ holds each run directory; out_dir/comparison.{md,json} the
//   // table and the JSON (with each method's validation curve, MethodResult::curve,
//   // for a plot drawn by the caller).
//
// A method is a name plus config overrides applied on top of the shared tree (see
// method_overrides), read from a table such as configs/compare.yaml: "ppo" = GAE with
// a critic, the others select an advantage estimator. Every run starts from the same
// checkpoint with the same data and sampling seeds, so the runs' step-0 validations are
// the same training-free baseline; the table reports the first one (and the spread,
// which should be 0).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/train/evaluate.h"

namespace agentr1::train {

// Method name -> "key=value" config overrides (dotted, as on the command line), in
// the table's order.
using MethodTable = std::vector<std::pair<std::string, std::vector<std::string>>>;

}  // namespace agentr1::train

// A method table binds as a map in file order (see parse_method_table for the rules).
namespace agentr1::config_detail {
template <>
struct Codec<train::MethodTable> {
  static std::string type_name() { return "map[string, list[string]]"; }
  static void read(const json& v, train::MethodTable& out, const std::string& key, BindContext& ctx);
  static json write(const train::MethodTable& x);
};
}  // namespace agentr1::config_detail

namespace agentr1::train {

// The `methods` map of a comparison recipe:
//   grpo: [algorithm.adv_estimator=grpo]
//   gspo: [algorithm.adv_estimator=grpo, actor.policy_loss=gspo, ...]
// Rules: a map (in file order) of non-empty names to lists (possibly empty) of strings,
// each "key=value" or "~key" (override syntax, see core/config.h's apply_override), with
// at least one method. Bound by the Codec<MethodTable> above; parse_method_table reads one
// outside a recipe, `key` naming the map in errors. Throws Error naming the entry and the
// rule ("methods.ppo[1]: expected a \"key=value\" (or \"~key\") override string, got 3").
// Whether the keys exist is checked by run_comparison.
MethodTable parse_method_table(const json& methods, const std::string& key = "methods");

// A whole comparison recipe (configs/compare.yaml), bound through visit():
//   methods: <table>                 see parse_method_table
//   default_methods: [names]         run when the user names none
// parse_compare_recipe throws Error (core/config's: unknown keys with the nearest and the
// valid ones, types, and validate()'s rules: the table present, default_methods a
// non-empty list of names in the table, listing the known ones).
struct CompareRecipe {
  MethodTable methods;                       // see parse_method_table
  std::vector<std::string> default_methods;  // run when the user names none

  template <class V>
  void visit(V& v) {
    v.field("methods", methods, "method name -> list of \"key=value\" config overrides");
    v.field("default_methods", default_methods, "names from methods, run when the user names none");
  }
  void validate() const;
};
CompareRecipe parse_compare_recipe(const json& recipe);

// The context-strategy experiment (configs/contexts.yaml): the same model trained with
// each context policy under the same budget and seeds.
//   builtin_model: {demo_style: per_step, ...}    DefaultModelOptions::apply_json keys
//   config: {data: {...}, rollout: {...}, ...}    a config tree every run shares
//   default_contexts: [append_only, sliding_window, summarize]
//   contexts: {append_only: ["++rollout.env_kwargs.context=append_only"], ...}
// Bound through visit() (unknown keys and types from core/config). Rules (validate()):
// builtin_model and config maps (empty or null = {}); contexts a method table
// (parse_method_table rules); default_contexts a non-empty list of names in it. Then
// parse_context_recipe checks builtin_model with DefaultModelOptions::apply_json (keys
// named builtin_model.<name>). Throws Error naming the key and the rule.
struct ContextRecipe {
  json builtin_model = json::object();
  json config = json::object();
  MethodTable contexts;
  std::vector<std::string> default_contexts;

  template <class V>
  void visit(V& v) {
    v.field("builtin_model", builtin_model, "the built-in model every context starts from (apply_json keys)");
    v.field("config", config, "a config tree every run shares");
    v.field("contexts", contexts, "context name -> list of \"key=value\" config overrides");
    v.field("default_contexts", default_contexts, "names from contexts, run when the user names none");
  }
  void validate() const;
};
ContextRecipe parse_context_recipe(const json& recipe);

// A recipe's config-tree field (builtin_model, config, a budget's per-family tree): throws
// Error "'<key>' must be a map ..." unless `tree` is a map or null (null reads as {}).
void check_config_tree(const json& tree, const std::string& key);

// What the runs differ in, which decides the table's columns (format_comparison).
enum class CompareKind {
  kMethods,   // RL algorithms: train reward, tool calls
  kContexts,  // context policies: prompt tokens per step, learner tokens per trajectory,
              // turns left out, summaries, context overflows
};

struct CompareOptions {
  MethodTable method_table;          // the known methods (required; e.g. configs/compare.yaml)
  std::vector<std::string> methods;  // names from method_table, run in this order (required)
  std::string out_dir = "runs/compare";  // out_dir/<method>/ per run, plus the table files
  CompareKind kind = CompareKind::kMethods;
  bool overwrite = false;  // false: a method whose run directory holds a run is an Error
                           // before anything runs; true: those runs are started over
  bool write_tables = true;  // out_dir/comparison.{md,json} (the benchmark writes its own)
};

// The config overrides that make `method` out of the shared tree. Throws Error
// "unknown comparison method '<m>'; known: <names in table order>" for a name not in
// the table.
std::vector<std::string> method_overrides(const MethodTable& table, const std::string& method);
std::vector<std::string> known_methods(const MethodTable& table);  // in table order

// Checks a method list against the table without running anything: throws Error when
// `methods` is empty or lists a name twice, or (as method_overrides) names an unknown
// method. run_comparison calls it first; callers may call it before costly set-up.
void check_methods(const MethodTable& table, const std::vector<std::string>& methods);

struct MethodResult {
  std::string method;
  std::string run_dir;
  EvalResult baseline;                            // the run's step-0 validation
  EvalResult final_eval;                          // after the last step
  double train_reward_last = 0;                   // mean critic/score/mean over the last 5 steps
  // Means over all training steps of the context metrics (kRunMeanKeys; NaN when a run
  // never logged one): prompt tokens per step (mean, max), learner tokens per
  // trajectory, turns left out, summary calls, context overflows, turns.
  std::map<std::string, double> run_means;
  double wall_s = 0;                              // whole run (validations included)
  std::vector<std::pair<int64_t, double>> curve;  // (step, greedy success) at each validation
};

// The metrics.jsonl keys averaged into MethodResult::run_means.
extern const std::vector<std::string> kRunMeanKeys;

// Means over the training-step lines (those with critic/score/mean) of `keys` in a run's
// metrics.jsonl; NaN for a key no line has. Throws Error if the file cannot be read.
std::map<std::string, double> read_run_means(const std::string& metrics_path, const std::vector<std::string>& keys);

// Standard error of a success rate p over n independent episodes: sqrt(p (1 - p) / n)
// (0 when n <= 0).
double success_stderr(double p, int64_t n);
// x with `prec` decimals ("-" for NaN), as the tables print numbers.
std::string format_fixed(double x, int prec = 3);
// "0.578 ± 0.044": a success rate over n and its standard error.
std::string format_rate(double p, int64_t n);

struct CompareResult {
  EvalResult baseline;                 // training-free baseline (first method's step 0)
  double baseline_spread = 0;          // max |difference| among the runs' step-0 greedy success
  std::vector<MethodResult> methods;
  std::string out_dir;
  CompareKind kind = CompareKind::kMethods;
};

// Runs every method in order (trainer.output_dir = out_dir/<method>), then writes
// out_dir/comparison.md (format_comparison) and out_dir/comparison.json. Draws no plot
// (the caller does, from CompareResult). base_tree: a resolved train config tree
// (defaults, config file, overrides) with model.path set. Before any run, checks every
// method: check_methods, then a method whose overrides do not apply to base_tree or
// give an invalid config throws Error naming the method.
CompareResult run_comparison(const json& base_tree, const CompareOptions& opts);

// Markdown table. kMethods: method, greedy accuracy +- its standard error, gain over the
// baseline, mean@k, mean reward (validation, greedy), train reward, response length,
// turns, tool calls, wall time. kContexts: context, greedy accuracy +- standard error,
// gain, validation reward, prompt tokens per step (mean / max, training), response
// tokens, turns (validation, greedy), learner tokens per trajectory, turns left out and
// summary calls per trajectory, context overflows, wall time.
std::string format_comparison(const CompareResult& r);

// Reads (step, val/success/greedy) pairs from a run's metrics.jsonl.
std::vector<std::pair<int64_t, double>> read_validation_curve(const std::string& metrics_path);

}  // namespace agentr1::train
