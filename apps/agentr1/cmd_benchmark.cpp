// agentr1 benchmark — Agent-R1's main table on the built-in model: for each task family
// (arithmetic, hotpotqa, alfworld seen/unseen, webshop score/success) the training-free
// baseline and each RL method (GRPO, PPO, RLOO, REINFORCE++, REINFORCE) from the same
// checkpoint, seeds and budget (experiments/benchmark.h). Writes <out>/benchmark.{md,json}, a
// validation-curve PNG per family (<out>/<family>/val_success.png) and a summary PNG of
// final success per family and method (<out>/summary.png).
// The budgets, families and built-in models come from configs/benchmark.yaml, the methods
// from configs/compare.yaml (both in the data dir, see data_dir.h). --jobs N runs N cells
// at once, each in a worker process of this binary (`benchmark --cells-only --tasks F
// --methods M`, cores/N torch threads, log in <out>/logs/), then writes the tables from a
// pass that reuses every cell.
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/experiments/benchmark.h"
#include "agentr1/experiments/compare.h"
#include "agentr1/train/run_dir.h"
#include "child_process.h"
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
  bool cells_only = false;
  int jobs = 1;
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

// The last lines of a text file (a failed worker's log), indented.
std::string log_tail(const std::string& path, size_t lines) {
  std::ifstream f(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(f, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "    " + all[i] + "\n";
  return out;
}

// --jobs N: the cells to run go to N worker processes (`agentr1 benchmark --cells-only
// --tasks F --methods M ...`, each with cores / N torch threads and its log in
// <out>/logs/<task>.<method>.log), longest families first; the built-in models were built
// by the caller's plan. Returns 0 when every cell finished, else the first failure's code
// (the running cells finish; no new one starts).
int run_cells_in_workers(const BenchmarkArgs& a, const std::vector<train::BenchmarkCell>& cells) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, cores / a.jobs);
  bool user_threads = false;
  for (const auto& o : a.overrides) {
    const std::string key = o.substr(o.find_first_not_of('+'));
    user_threads = user_threads || key.rfind("trainer.threads=", 0) == 0;
  }
  std::vector<const train::BenchmarkCell*> queue;
  for (const auto& c : cells)
    if (!c.reuse) queue.push_back(&c);
  const std::string log_dir = a.out + "/logs";
  train::make_dirs(log_dir);
  // A family with a cell to run gets its baseline's seen evaluation again in the tables'
  // pass (which reuses every cell, so it would otherwise keep a cached one).
  for (const auto* c : queue) {
    std::error_code ec;
    std::filesystem::remove(a.out + "/" + c->family + "/baseline_seen_eval.json", ec);
  }
  std::cerr << "agentr1 benchmark: " << queue.size() << " cell(s) to run (" << cells.size() - queue.size()
            << " reused) on " << a.jobs << " worker(s) with " << (user_threads ? "the given" : std::to_string(threads))
            << " torch thread(s) each; logs in " << log_dir << "/\n";
  const std::string program = self_exe();
  // Workers are single processes: no torchrun variables; OpenMP gets the worker's share
  // of the cores unless the user set it.
  std::vector<std::string> env = environment_without(
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"});
  if (std::getenv("OMP_NUM_THREADS") == nullptr) env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  forward_stop_signals();
  struct Running {
    const train::BenchmarkCell* cell;
    std::string log;
    std::chrono::steady_clock::time_point start;
  };
  std::map<pid_t, Running> running;
  // Whatever happens here, the workers are not left behind and Ctrl-C works again after.
  struct Cleanup {
    std::map<pid_t, Running>& running;
    ~Cleanup() {
      if (!running.empty()) {
        signal_children(SIGTERM);
        for (const auto& kv : running) {
          int status = 0;
          waitpid(kv.first, &status, 0);
          forget_child(kv.first);
        }
      }
      restore_stop_signals();
    }
  } cleanup{running};
  size_t next = 0, done = 0;
  int first_code = 0;
  while (next < queue.size() || !running.empty()) {
    while (first_code == 0 && !stop_signalled() && next < queue.size() && static_cast<int>(running.size()) < a.jobs) {
      const train::BenchmarkCell& c = *queue[next++];
      std::vector<std::string> argv{"agentr1", "benchmark", "--cells-only",
                                    "--tasks", c.family, "--methods", c.method, "--out", a.out, "--no-plot"};
      if (a.quick) argv.push_back("--quick");
      if (a.overwrite) argv.push_back("--overwrite");
      if (!a.config_file.empty()) argv.insert(argv.end(), {"--config", a.config_file});
      if (!a.chat_template.empty()) argv.insert(argv.end(), {"--chat-template", a.chat_template});
      argv.insert(argv.end(), a.overrides.begin(), a.overrides.end());
      if (!user_threads) argv.push_back("trainer.threads=" + std::to_string(threads));
      const std::string log = log_dir + "/" + c.family + "." + c.method + ".log";
      const pid_t pid = spawn_child(program, argv, env, log);
      running[pid] = Running{&c, log, std::chrono::steady_clock::now()};
      std::cerr << "agentr1 benchmark: started " << c.family << " / " << c.method << " (pid " << pid << ")\n";
    }
    if (running.empty()) break;  // stopped or failed before the queue's end
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      AGENTR1_CHECK(false, "benchmark: waitpid(): " << std::strerror(errno) << " with " << running.size()
                                                    << " worker(s) running");
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    forget_child(pid);
    const Running r = it->second;
    running.erase(it);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.start).count();
    const int code = exit_code_of(status);
    if (code == 0) {
      std::cerr << "agentr1 benchmark: finished " << r.cell->family << " / " << r.cell->method << " in "
                << static_cast<int>(s) << " s (" << ++done << "/" << queue.size() << ")\n";
      continue;
    }
    if (first_code == 0) first_code = code;
    if (stop_signalled() && (code == 130 || code == 143)) {
      std::cerr << "agentr1 benchmark: " << r.cell->family << " / " << r.cell->method << " stopped (exit code "
                << code << "); the next run of this command starts it over\n";
      continue;
    }
    std::cerr << "agentr1 benchmark: " << r.cell->family << " / " << r.cell->method << " " << describe_status(status)
              << " after " << static_cast<int>(s) << " s; its log (" << r.log << ") ends:\n"
              << log_tail(r.log, 15);
    if (!running.empty())
      std::cerr << "agentr1 benchmark: no new cell starts; waiting for the " << running.size()
                << " running one(s) to finish (their runs are kept)\n";
  }
  // A stop between two cells ends the queue early without a failed worker.
  if (first_code == 0 && (next < queue.size() || done < queue.size()))
    first_code = stop_signalled() ? 128 + stop_signal() : 1;
  return first_code;
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
  AGENTR1_CHECK(a.jobs >= 1 && a.jobs <= 64, "benchmark: --jobs must be in 1..64, got " << a.jobs);
  AGENTR1_CHECK(!(a.jobs > 1 && a.cells_only), "benchmark: --cells-only is what --jobs workers run; give one of them");
  if (a.jobs > 1) {
    const char* world = std::getenv("WORLD_SIZE");
    AGENTR1_CHECK(world == nullptr || std::string(world) == "1" || std::string(world).empty(),
                  "benchmark: --jobs " << a.jobs << " starts worker processes of its own; it cannot run as a rank "
                                       << "of a data-parallel job (WORLD_SIZE=" << world
                                       << "); HINT: run `agentr1 benchmark --jobs N` without launch");
    // Every family resolved (built-in models built, one at a time) and every cell
    // checked here, before a worker starts; then the tables from a pass that reuses
    // every cell (and runs the baselines' seen evaluations).
    const std::vector<BenchmarkCell> cells = plan_benchmark(recipe, o, resolve);
    const int code = run_cells_in_workers(a, cells);
    if (code != 0) {
      std::cerr << "agentr1 benchmark: not every cell finished; the same command runs the missing ones again\n";
      return code;
    }
    o.overwrite = false;
  }
  o.cells_only = a.cells_only;
  const BenchmarkResult r = run_benchmark(recipe, o, resolve);
  if (a.cells_only) return 0;
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
                app.add_option("--jobs", a->jobs,
                               "run N cells at once, each in its own process with cores/N torch threads "
                               "(logs in <out>/logs/); then the tables as with 1")
                    ->capture_default_str();
                app.add_flag("--cells-only", a->cells_only,
                             "run (or reuse) the cells only: no tables, no baseline seen evaluation "
                             "(what --jobs workers run)");
                app.add_flag("--no-plot", a->no_plot, "skip running gnuplot (the .dat and .gp files are still written)");
                app.add_option("--chat-template", a->chat_template,
                               "built-in default only: tokenizer_config.json holding the Qwen3 chat template "
                               "(default: qwen3_tokenizer_config.json in the data dir)");
                app.add_option("overrides", a->overrides,
                               "dotted overrides shared by every run (over the budget), e.g. trainer.total_steps=2");
                app.footer(
                    "Examples:\n  agentr1 benchmark --quick\n"
                    "  agentr1 benchmark --tasks arithmetic,alfworld --methods grpo,ppo --out runs/bench\n"
                    "  agentr1 benchmark --jobs 2      # two cells at a time, one core each on 2 cores\n"
                    "Re-running the same command reuses complete runs (interrupted ones start over).");
                return [a]() { return run_benchmark_cmd(*a); };
              });

}  // namespace
}  // namespace agentr1::cli
