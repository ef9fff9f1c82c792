// agentr1/experiments/benchmark.h — Agent-R1's main table: on every task family (arithmetic,
// hotpotqa, alfworld, webshop), the training-free baseline and each RL method from the
// same checkpoint, seeds and budget (train::run_comparison per family).
//
//   CompareRecipe methods = parse_compare_recipe(load_yaml_file("configs/compare.yaml"));
//   BenchmarkRecipe recipe = parse_benchmark_recipe(load_yaml_file("configs/benchmark.yaml"),
//                                                   methods.methods);
//   BenchmarkOptions o;
//   o.method_table = methods.methods;
//   o.methods = recipe.default_methods;       // grpo, ppo, rloo, reinforce_plus_plus, reinforce
//   o.tasks = recipe.default_tasks;           // arithmetic, hotpotqa, alfworld, webshop
//   o.budget = "quick";                       // a key of recipe.budgets
//   o.out_dir = "runs/benchmark";
//   BenchmarkResult r = run_benchmark(recipe, o, [&](const std::string& family, const json& layer) {
//     return resolve(layer);                  // the caller layers defaults, model, --config, overrides
//   });
//   std::cout << format_benchmark(r);
//   // out_dir/<family>/<method>/  one kept run directory per cell (metrics, dumps, checkpoints)
//   // out_dir/<family>/comparison.{md,json}   the family's comparison (compare.h's schema,
//   //                                         plus "seen" evaluations where the family has them)
//   // out_dir/benchmark.{md,json}  every family's table and the summary (family x method)
//
// The per-family layer (family_layer) is: the budget's `config`, then the family's
// `config`, then data.task=<family>, then the budget's config for that family. The
// resolver puts it where a recipe goes (under --config and the command-line overrides).
//
// Extra evaluations, where the paper has them (the family's entry in the recipe says):
//   seen_eval: greedy success on data.val_size samples of the *train* split (layouts the
//     policy trained on; ALFWorld's "seen"), generated with seed data.seed + 2000003 (not
//     the training set itself), for the baseline checkpoint (model.path) and each method's
//     final checkpoint; the regular validation (test split) is the "unseen" column.
//   report_score: score = 100 x mean greedy reward (WebShop's score) next to the success
//     rate (reward >= rollout.success_threshold, 1 by default).
//   report_metrics: the greedy means of the env's own metrics (EvalResult::env_metrics,
//     e.g. paper_search's paper/recall), a row each in the summary ("-" where absent).
//
// Resuming (without overwrite): a cell whose run directory holds a complete run (summary.json
// with its final validation at trainer.total_steps) made from the same config (config.yaml
// equals the one this cell would write, trainer.threads aside: a resource setting) is reused, not run again; a cell holding an
// interrupted run of the same config is started over (a WARN says so); a cell holding a run
// of another config is an Error before anything runs (HINT: overwrite, or another out_dir).
// With overwrite every cell is started over. Seen evaluations of reused cells are read
// back from <run>/seen_eval.json when it was made from the same checkpoint file (the
// baseline's from <out_dir>/<family>/baseline_seen_eval.json when every cell was reused).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/experiments/compare.h"
#include "agentr1/train/evaluate.h"

namespace agentr1::train {

// One budget (configs/benchmark.yaml budgets.<name>): a config tree shared by every family
// and method, plus per-family config trees (merged last, e.g. alfworld's shorter episodes).
// Rules (validate()): config and each family's tree maps (null = {}), family names
// registered task families.
struct BenchmarkBudget {
  json config = json::object();
  std::map<std::string, json> task_config;  // family -> config tree (the YAML key `tasks`)

  template <class V>
  void visit(V& v) {
    v.field("config", config, "config tree shared by every family and method");
    v.field("tasks", task_config, "family -> config tree merged last for that family");
  }
  void validate() const;
};

// One family's entry (configs/benchmark.yaml tasks.<family>). Rules (validate()): config
// and builtin_model maps (null = {}).
struct BenchmarkTask {
  json config = json::object();  // config tree for this family (e.g. data.task_kwargs)
  bool seen_eval = false;        // also evaluate on train-split layouts (ALFWorld's "seen")
  bool report_score = false;     // also report 100 x mean reward (WebShop's score)
  std::vector<std::string> report_metrics;  // also report these env metrics (greedy means of
                                            // EvalResult::env_metrics), e.g. [paper/recall]
  json builtin_model = json::object();  // this family's built-in model: keys that replace
                                        // the recipe's builtin_model keys (a model per family)

  template <class V>
  void visit(V& v) {
    v.field("config", config, "config tree for this family (e.g. data.task_kwargs)");
    v.field("seen_eval", seen_eval, "also evaluate on train-split layouts (ALFWorld's seen)");
    v.field("report_score", report_score, "also report 100 x mean reward (WebShop's score)");
    v.field("report_metrics", report_metrics, "also report these env metrics' greedy means, e.g. [paper/recall]");
    v.field("builtin_model", builtin_model, "keys replacing the recipe's builtin_model for this family");
  }
  void validate() const;
};

// configs/benchmark.yaml, bound through visit() (unknown keys, types and the nearest-key
// hint from core/config; errors name the full key, e.g. tasks.alfworld.seen_eval):
//   builtin_model: {...}              DefaultModelOptions::apply_json keys (checked here;
//                                     the resolver builds the model)
//   default_methods: [grpo, ...]      names from the method table (configs/compare.yaml)
//   default_tasks: [arithmetic, ...]  names of registered task families
//   tasks: {<family>: {config: {...}, seen_eval: bool, report_score: bool,
//                      report_metrics: [names], builtin_model: {...}}, ...}   builtin_model: keys that replace
//                                     the top-level builtin_model's for this family
//                                     (key by key, e.g. its own dir and tasks: one model
//                                     per family)
//   budgets: {quick: {config: {...}, tasks: {<family>: {...config tree...}}},
//             default: {...}}
// Rules (validate(), then parse_benchmark_recipe): default_methods and default_tasks
// non-empty lists without repeats; default_methods in `methods`; every default task has
// an entry under tasks; tasks' and budgets' family names are registered task families;
// budgets has both "quick" and "default" (other names allowed); config entries (and a
// budget's per-family entries) are maps; builtin_model (and each family's model, keys
// named tasks.<family>.builtin_model.<name>) passes DefaultModelOptions::apply_json.
// Throws Error naming the key and the rule.
struct BenchmarkRecipe {
  json builtin_model = json::object();
  std::vector<std::string> default_methods;
  std::vector<std::string> default_tasks;
  std::map<std::string, BenchmarkTask> tasks;
  std::map<std::string, BenchmarkBudget> budgets;

  template <class V>
  void visit(V& v) {
    v.field("builtin_model", builtin_model, "the built-in model options shared by every family");
    v.field("default_methods", default_methods, "methods run when the user names none");
    v.field("default_tasks", default_tasks, "task families run when the user names none");
    v.field("tasks", tasks, "family -> its entry");
    v.field("budgets", budgets, "budget name -> its config (quick and default required)");
  }
  void validate() const;
};
BenchmarkRecipe parse_benchmark_recipe(const json& recipe, const MethodTable& methods);

// The built-in model options of `family`: the recipe's builtin_model with the family's
// builtin_model keys replacing it key by key (a family without any gets the shared one).
json family_builtin_model(const BenchmarkRecipe& recipe, const std::string& family);

struct BenchmarkOptions {
  MethodTable method_table;            // the known methods (configs/compare.yaml; required)
  std::vector<std::string> methods;    // run on every family, in this order (required)
  std::vector<std::string> tasks;      // families (entries of recipe.tasks), in this order
  std::string budget = "default";      // a key of recipe.budgets
  std::string out_dir = "runs/benchmark";
  bool overwrite = false;              // start every cell over (see the header comment)
  bool cells_only = false;             // run (or reuse) the cells and their seen evaluations
                                       // only: no baseline seen evaluation, no tables (what
                                       // `agentr1 benchmark --jobs` workers do; the tables
                                       // come from a last pass that reuses every cell)
};

// The layer for `family` under `budget` (see the header comment). Throws Error for an
// unknown family or budget (listing the known ones). Whether the keys exist is checked
// when the resolved tree is bound (run_benchmark).
json family_layer(const BenchmarkRecipe& recipe, const std::string& budget, const std::string& family);

// Returns the resolved train tree (model.path set) for a family's layer.
using ResolveTree = std::function<json(const std::string& family, const json& layer)>;

struct FamilyResult {
  std::string family;
  bool seen_eval = false;
  bool report_score = false;
  std::vector<std::string> report_metrics;  // BenchmarkTask::report_metrics
  bool game = false;  // the samples' agent is a text game (env::has_game): one action per
                      // turn, so the tool-calls column shows actions (turns; a turn without
                      // a well-formed <action> counts too)
  CompareResult comparison;             // baseline + methods (final_eval = unseen / held-out)
  std::optional<EvalResult> baseline_seen;  // seen_eval only
  std::vector<EvalResult> seen;         // seen_eval only: one per comparison.methods entry
  std::vector<bool> reused;             // per method: the run was reused, not run
};

struct BenchmarkResult {
  std::string out_dir;
  std::string budget;
  std::vector<FamilyResult> families;
};

// Checks the options (methods as check_methods, tasks known and not repeated, the budget
// known), resolves every family's tree and checks every method's config on it, then the
// run directories (see Resuming), all before the first run; then runs each family (see
// the header comment) and writes the files. Throws Error naming the family and method.
BenchmarkResult run_benchmark(const BenchmarkRecipe& recipe, const BenchmarkOptions& opts,
                              const ResolveTree& resolve);

// One (family, method) cell as run_benchmark would treat it: run (or run again) or reuse.
struct BenchmarkCell {
  std::string family;
  std::string method;
  std::string dir;   // out_dir/<family>/<method>
  bool reuse = false;
};
// The checks and the plan of run_benchmark (every family resolved, every cell's config
// and directory checked), without running anything. Throws the same Errors.
std::vector<BenchmarkCell> plan_benchmark(const BenchmarkRecipe& recipe, const BenchmarkOptions& opts,
                                          const ResolveTree& resolve);

// Markdown: one table per family (method, success +- s.e. [unseen and seen], score,
// mean reward, response tokens, turns, tool calls or actions, wall time; the baseline
// first), then the summary table (family x method final success +- s.e.).
std::string format_benchmark(const BenchmarkResult& r);
std::string format_family(const FamilyResult& f);
std::string format_summary(const BenchmarkResult& r);

// The JSON of out_dir/benchmark.json ({budget, out_dir, families: [family_json...],
// summary: {family: {baseline|method: success}}}) and of one family.
json benchmark_json(const BenchmarkResult& r);
json family_json(const FamilyResult& f);

}  // namespace agentr1::train
