// agentr1 benchmark — Agent-R1's main table on the built-in model: for each task family
// (arithmetic, hotpotqa, alfworld seen/unseen, webshop score/success) the training-free
// baseline and each RL method (GRPO, PPO, RLOO, REINFORCE++, REINFORCE) from the same
// checkpoint, seeds and budget (train/benchmark.h). Writes <out>/benchmark.{md,json}, a
// validation-curve PNG per family (<out>/<family>/val_success.png) and a summary PNG of
// final success per family and method (<out>/summary.png).
// The budgets, families and built-in model come from configs/benchmark.yaml, the methods
// from configs/compare.yaml (both in the data dir, see data_dir.h).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <sstream>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/train/benchmark.h"
#include "agentr1/train/compare.h"
#include "command.h"
#include "data_dir.h"
#include "plot.h"
#include "train_setup.h"

namespace agentr1::cli {
namespace {

struct BenchmarkArgs {
  std::string config_file;
  std::vector<std::string> overrides;
  std::string methods;  // "" = the recipe's default_methods
  std::string tasks;    // "" = the recipe's default_tasks
  std::string out = "runs/benchmark";
  bool quick = false;
  bool no_plot = false;
  bool overwrite = false;
  std::string chat_template;
};

train::BenchmarkRecipe load_benchmark_recipe(const train::MethodTable& methods) {
  const std::string path = data_file("configs/benchmark.yaml");
  return with_context(path, [&] { return train::parse_benchmark_recipe(load_yaml_file(path), methods); });
}

std::vector<std::string> recipe_tasks(const train::BenchmarkRecipe& r) {
  std::vector<std::string> out;
  for (const auto& kv : r.tasks) out.push_back(kv.first);
  return out;
}

// Validation success over RL steps of one family, one line per method, the baseline dashed.
LinePlot family_plot(const train::FamilyResult& f) {
  LinePlot p;
  p.context = "benchmark";
  p.title = "Held-out greedy success, " + f.family + (f.seen_eval ? " (unseen)" : "");
  p.xlabel = "RL step";
  p.ylabel = "greedy success rate";
  p.yrange = std::make_pair(0.0, 1.0);
  for (const auto& m : f.comparison.methods) {
    PlotSeries s;
    s.title = m.method;
    for (const auto& [step, acc] : m.curve) s.points.emplace_back(static_cast<double>(step), acc);
    p.series.push_back(std::move(s));
  }
  p.reference = f.comparison.baseline.greedy_success;
  p.reference_title = "training-free baseline";
  return p;
}

// Final success per family (alfworld: unseen and seen) and method, the baseline first.
BarPlot summary_plot(const train::BenchmarkResult& r) {
  BarPlot b;
  b.context = "benchmark";
  b.title = "Final held-out greedy success per task and method (budget " + r.budget + ")";
  b.xlabel = "task";
  b.ylabel = "greedy success rate";
  b.yrange = std::make_pair(0.0, 1.0);
  b.series.push_back("training-free baseline");
  for (const auto& f : r.families)
    for (const auto& m : f.comparison.methods)
      if (std::find(b.series.begin(), b.series.end(), m.method) == b.series.end()) b.series.push_back(m.method);
  auto add = [&](const std::string& label, double baseline, const std::vector<std::pair<std::string, double>>& vals) {
    std::vector<double> row(b.series.size(), NAN);
    row[0] = baseline;
    for (const auto& [method, v] : vals)
      row[std::find(b.series.begin(), b.series.end(), method) - b.series.begin()] = v;
    b.categories.push_back(label);
    b.values.push_back(std::move(row));
  };
  for (const auto& f : r.families) {
    std::vector<std::pair<std::string, double>> unseen, seen;
    for (size_t i = 0; i < f.comparison.methods.size(); ++i) {
      unseen.emplace_back(f.comparison.methods[i].method, f.comparison.methods[i].final_eval.greedy_success);
      if (i < f.seen.size()) seen.emplace_back(f.comparison.methods[i].method, f.seen[i].greedy_success);
    }
    add(f.seen_eval ? f.family + " (unseen)" : f.family, f.comparison.baseline.greedy_success, unseen);
    if (f.seen_eval && f.baseline_seen) add(f.family + " (seen)", f.baseline_seen->greedy_success, seen);
  }
  return b;
}

int run_benchmark_cmd(const BenchmarkArgs& a) {
  using namespace agentr1::train;
  const CompareRecipe methods = load_compare_recipe();
  const BenchmarkRecipe recipe = load_benchmark_recipe(methods.methods);
  BenchmarkOptions o;
  o.method_table = methods.methods;
  o.methods = a.methods.empty() ? recipe.default_methods : split_csv(a.methods);
  o.tasks = a.tasks.empty() ? recipe.default_tasks : split_csv(a.tasks);
  o.budget = a.quick ? "quick" : "default";
  o.out_dir = a.out;
  o.overwrite = a.overwrite;
  // Bad names fail before the model is built.
  check_methods(o.method_table, o.methods);
  for (const auto& t : o.tasks)
    AGENTR1_CHECK(recipe.tasks.count(t), "benchmark: unknown task '" << t << "'; known: "
                                                                    << join(recipe_tasks(recipe), ", ") << " (tasks of "
                                                                    << data_path("configs/benchmark.yaml") << ")");
  const std::string recipe_path = data_path("configs/benchmark.yaml");
  const ResolveTree resolve = [&](const std::string& family, const json& layer) {
    RecipeLayer l;
    l.name = recipe_path + " (" + o.budget + ", " + family + ")";
    l.tree = layer;
    l.builtin_model = train::family_builtin_model(recipe, family);
    return resolve_train_tree(a.config_file, a.overrides, a.chat_template, l).tree;
  };
  const BenchmarkResult r = run_benchmark(recipe, o, resolve);
  std::string plots;
  for (const auto& f : r.families) {
    const PlotFiles pf = write_line_plot(family_plot(f), o.out_dir + "/" + f.family, "val_success", !a.no_plot);
    plots += (plots.empty() ? "" : ", ") + (pf.png_written ? pf.png : pf.gp + " (not drawn)");
  }
  const PlotFiles sp = write_bar_plot(summary_plot(r), o.out_dir, "summary", !a.no_plot);
  std::cout << "\n" << format_benchmark(r) << "\ntables: " << o.out_dir << "/benchmark.md, " << o.out_dir
            << "/benchmark.json; plots: " << plots << "; summary: " << (sp.png_written ? sp.png : sp.gp + " (not drawn)")
            << "\n" << std::flush;
  return 0;
}

Registrar reg("benchmark",
              "Agent-R1's main table: baseline + GRPO, PPO, RLOO, REINFORCE++, REINFORCE on every task family",
              [](CLI::App& app) {
                auto a = std::make_shared<BenchmarkArgs>();
                CLI::Option* tasks = app.add_option(
                    "--tasks", a->tasks, "comma-separated task families (default: default_tasks of configs/benchmark.yaml)");
                CLI::Option* methods = app.add_option(
                    "--methods", a->methods, "comma-separated methods (default: default_methods of configs/benchmark.yaml)");
                // Names come from the data dir's recipes, read only when `benchmark` is the
                // command (so that --help lists them); a bad file is reported when it runs.
                app.preparse_callback([tasks, methods](std::size_t) {
                  try {
                    const train::CompareRecipe c = load_compare_recipe();
                    const train::BenchmarkRecipe r = load_benchmark_recipe(c.methods);
                    methods->description("comma-separated methods; known: " + join(train::known_methods(c.methods), ", ") +
                                         " (from " + data_path("configs/compare.yaml") + ")");
                    methods->default_str(join(r.default_methods, ","));
                    tasks->description("comma-separated task families; known: " + join(recipe_tasks(r), ", ") +
                                       " (from " + data_path("configs/benchmark.yaml") + ")");
                    tasks->default_str(join(r.default_tasks, ","));
                  } catch (const std::exception& e) {
                    methods->description(std::string("comma-separated methods (cannot list them: ") + e.what() + ")");
                  }
                });
                app.add_flag("--quick", a->quick,
                             "the quick budget (budgets.quick of configs/benchmark.yaml: the whole grid, small) "
                             "instead of budgets.default");
                app.add_option("--out", a->out, "output directory: <out>/<task>/<method>/ per run, tables and plots")
                    ->capture_default_str();
                app.add_option("--config", a->config_file, "YAML config shared by every run");
                app.add_flag("--overwrite", a->overwrite,
                             "run every cell again (default: complete runs of the same config in --out are reused)");
                app.add_flag("--no-plot", a->no_plot, "skip running gnuplot (the .dat and .gp files are still written)");
                app.add_option("--chat-template", a->chat_template,
                               "built-in default only: tokenizer_config.json holding the Qwen3 chat template "
                               "(default: qwen3_tokenizer_config.json in the data dir)");
                app.add_option("overrides", a->overrides,
                               "dotted overrides shared by every run (over the budget), e.g. trainer.total_steps=2");
                app.footer(
                    "Examples:\n  agentr1 benchmark --quick\n"
                    "  agentr1 benchmark --tasks arithmetic,alfworld --methods grpo,ppo --out runs/bench\n"
                    "Re-running the same command reuses complete runs (interrupted ones start over).");
                return [a]() { return run_benchmark_cmd(*a); };
              });

}  // namespace
}  // namespace agentr1::cli
