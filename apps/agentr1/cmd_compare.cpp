// agentr1 compare — Agent-R1's headline experiment: the training-free baseline and
// several RL algorithms (GRPO, PPO with a GAE critic, RLOO, REINFORCE++) on the same
// task, model, seeds and budget; writes a table and a plot of held-out accuracy.
// The methods (name -> config overrides) and the default list come from
// configs/compare.yaml in the data dir (see data_dir.h).
//
// With --contexts, the context-strategy experiment instead: the same model trained
// with each context policy (append_only, sliding_window, summarize, ...) on the
// multi-step arithmetic variant; the contexts, their shared config and the built-in
// model they start from come from configs/contexts.yaml.
#include <iostream>
#include <memory>
#include <sstream>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/experiments/compare.h"
#include "agentr1/train/train_config.h"
#include "command.h"
#include "data_dir.h"
#include "plot.h"
#include "train_setup.h"

namespace agentr1::cli {
namespace {

struct CompareArgs {
  std::string config_file;
  std::vector<std::string> overrides;
  std::string methods;  // "" = the recipe's default_methods
  std::string contexts;  // non-empty: the context experiment ("default" = default_contexts)
  std::string out;       // "" = runs/compare or runs/contexts
  int steps = 0;
  bool no_plot = false;
  bool overwrite = false;
  std::string chat_template;
};

train::ContextRecipe load_context_recipe() {
  const std::string path = data_file("configs/contexts.yaml");
  return with_context(path, [&] { return train::parse_context_recipe(load_yaml_file(path)); });
}

// Held-out greedy accuracy per method over RL steps, with the baseline as a dashed line
// (for contexts, each run starts from its own baseline: no common line).
LinePlot accuracy_plot(const train::CompareResult& r) {
  LinePlot p;
  p.context = "compare";
  const bool contexts = r.kind == train::CompareKind::kContexts;
  p.title = contexts ? "Held-out greedy accuracy by context policy, multi-step arithmetic"
                     : "Held-out greedy accuracy, arithmetic tool task";
  p.xlabel = "RL step";
  p.ylabel = "greedy success rate";
  p.yrange = std::make_pair(0.0, 1.0);
  for (const auto& m : r.methods) {
    PlotSeries s;
    s.title = m.method;
    for (const auto& [step, acc] : m.curve) s.points.emplace_back(static_cast<double>(step), acc);
    p.series.push_back(std::move(s));
  }
  if (!contexts) {
    p.reference = r.baseline.greedy_success;
    p.reference_title = "training-free baseline";
  }
  return p;
}

int run_compare(const CompareArgs& a) {
  using namespace agentr1::train;
  CompareOptions o;
  RecipeLayer layer;
  if (a.contexts.empty()) {
    const CompareRecipe recipe = load_compare_recipe();
    o.method_table = recipe.methods;
    o.methods = a.methods.empty() ? recipe.default_methods : split_csv(a.methods);
    o.out_dir = a.out.empty() ? "runs/compare" : a.out;
  } else {
    const ContextRecipe recipe = load_context_recipe();
    o.kind = CompareKind::kContexts;
    o.method_table = recipe.contexts;
    o.methods = a.contexts == "default" ? recipe.default_contexts : split_csv(a.contexts);
    o.out_dir = a.out.empty() ? "runs/contexts" : a.out;
    layer.name = data_path("configs/contexts.yaml");
    layer.tree = recipe.config;
    layer.builtin_model = recipe.builtin_model;
  }
  o.overwrite = a.overwrite;
  check_methods(o.method_table, o.methods);  // bad names fail before the model is built
  std::vector<std::string> overrides = a.overrides;
  if (a.steps > 0) overrides.push_back("trainer.total_steps=" + std::to_string(a.steps));
  TrainTree resolved = resolve_train_tree(a.config_file, overrides, a.chat_template, layer);
  CompareResult r = run_comparison(resolved.tree, o);
  const PlotFiles plot = write_line_plot(accuracy_plot(r), o.out_dir, "val_accuracy", /*run_gnuplot=*/!a.no_plot);
  std::cout << "\n" << format_comparison(r) << "\ntable: " << o.out_dir << "/comparison.md, plot: "
            << (plot.png_written ? plot.png : plot.gp + " (not drawn)") << ", runs: " << o.out_dir << "/<method>/\n"
            << std::flush;
  return 0;
}

Registrar reg("compare", "baseline vs GRPO, PPO (GAE critic), RLOO, REINFORCE++ on one task: table + plot",
              [](CLI::App& app) {
                auto a = std::make_shared<CompareArgs>();
                CLI::Option* methods =
                    app.add_option("--methods", a->methods,
                                   "comma-separated methods (default: default_methods of configs/compare.yaml)");
                CLI::Option* contexts = app.add_option(
                    "--contexts", a->contexts,
                    "the context-strategy experiment instead of methods: comma-separated context policies "
                    "from configs/contexts.yaml (e.g. append_only,sliding_window,summarize), or 'default'");
                contexts->excludes(methods);
                // The method names come from the data dir's configs/compare.yaml, read
                // only when `compare` is the command (so that --help lists them); a
                // missing or bad file is reported when the command runs.
                app.preparse_callback([methods, contexts](std::size_t) {
                  try {
                    const train::CompareRecipe r = load_compare_recipe();
                    const std::string known = join(train::known_methods(r.methods), ", ");
                    methods->description("comma-separated methods; known: " + known + " (from " +
                                         data_path("configs/compare.yaml") + ")");
                    methods->default_str(join(r.default_methods, ","));
                  } catch (const std::exception& e) {
                    methods->description(std::string("comma-separated methods (cannot list them: ") + e.what() + ")");
                  }
                  try {
                    const train::ContextRecipe r = load_context_recipe();
                    contexts->description(
                        "the context-strategy experiment instead of methods: comma-separated context runs, or "
                        "'default' (" + join(r.default_contexts, ",") + "); known: " +
                        join(train::known_methods(r.contexts), ", ") + " (from " +
                        data_path("configs/contexts.yaml") + ")");
                  } catch (const std::exception&) {
                  }
                });
                app.add_option("--out", a->out,
                               "output directory, one run directory per method inside (default: runs/compare, "
                               "or runs/contexts with --contexts)");
                app.add_option("--steps", a->steps,
                               "RL steps per method (0 = trainer.total_steps); raise it for longer runs")
                    ->capture_default_str()
                    ->check(CLI::Range(0, 1000000));
                app.add_option("--config", a->config_file, "YAML config shared by every method");
                app.add_flag("--overwrite", a->overwrite,
                             "start over where --out already holds runs of these methods");
                app.add_flag("--no-plot", a->no_plot, "skip running gnuplot (the .dat and .gp files are still written)");
                app.add_option("--chat-template", a->chat_template,
                               "built-in default only: tokenizer_config.json holding the Qwen3 chat template "
                               "(default: qwen3_tokenizer_config.json in the data dir)");
                app.add_option("overrides", a->overrides,
                               "dotted overrides shared by every method, e.g. data.train_batch_size=8");
                app.footer(
                    "Examples:\n  agentr1 compare --methods grpo,rloo --steps 20 --out runs/cmp\n"
                    "  agentr1 compare --contexts append_only,sliding_window,summarize");
                return [a]() { return run_compare(*a); };
              });

}  // namespace
}  // namespace agentr1::cli
