#include "agentr1/experiments/benchmark.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/strings.h"
#include "agentr1/core/log.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/env/text_game.h"
#include "agentr1/flow/agent_env_loop.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/sft/default_recipe.h"
#include "agentr1/train/device.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"

namespace agentr1::train {

namespace fs = std::filesystem;

namespace {

// The seen-layout set's seed offset from data.seed (the training set uses data.seed, the
// test split data.seed + 1000003; see prompt_source.h).
constexpr int64_t kSeenSeedOffset = 2000003;




void check_family(const std::string& name, const std::string& what) {
  tasks::register_builtin_tasks();
  AGENTR1_CHECK(tasks::has_task_family(name), what << ": unknown task family '" << name
                                                   << "'; known: " << join(tasks::task_family_names(), ", "));
}

// A list of names without repeats, non-empty.
void check_name_list(const std::vector<std::string>& names, const std::string& key) {
  AGENTR1_CHECK(!names.empty(), key << " must be a non-empty list of names");
  for (size_t i = 0; i < names.size(); ++i)
    AGENTR1_CHECK(std::find(names.begin(), names.begin() + i, names[i]) == names.begin() + i,
                  key << ": '" << names[i] << "' is listed twice");
}

// null (an empty YAML value) as {}, so trees merge as maps.
void null_to_map(json& tree) {
  if (tree.is_null()) tree = json::object();
}

// Mean of critic/score/mean over the last `n` training steps of a run's metrics.jsonl
// (NaN when none); the last line of a repeated step wins.
double last_train_reward(const std::string& metrics_path, int n) {
  std::ifstream f(metrics_path);
  std::map<int64_t, double> by_step;
  std::string line;
  while (std::getline(f, line)) {
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    const auto it = j.find("critic/score/mean");
    if (it != j.end() && it->is_number()) by_step[j["step"].get<int64_t>()] = it->get<double>();
  }
  if (by_step.empty()) return NAN;
  double sum = 0;
  int k = 0;
  for (auto it = by_step.rbegin(); it != by_step.rend() && k < n; ++it, ++k) sum += it->second;
  return sum / k;
}

// The tree run_comparison gives `method` in out_dir/<method> (and writes to its config.yaml).
json method_tree(const json& tree, const MethodTable& table, const std::string& method, const std::string& dir) {
  json t = tree;
  for (const auto& o : method_overrides(table, method)) apply_override(t, o);
  apply_override(t, "trainer.output_dir=" + dir);
  apply_override(t, "trainer.run_name=" + method);
  return t;
}

bool holds_run(const std::string& dir) {
  return fs::exists(dir + "/metrics.jsonl") || fs::exists(dir + "/summary.json") || fs::exists(dir + "/checkpoints");
}

json read_json_or_null(const std::string& path) {
  if (!fs::exists(path)) return json();
  const json j = json::parse(read_text_file(path), nullptr, false);
  return j.is_discarded() ? json() : j;
}

// Complete: summary.json holds the final validation at total_steps, and a checkpoint exists.
bool run_complete(const std::string& dir, int64_t total_steps) {
  const json s = read_json_or_null(dir + "/summary.json");
  return s.is_object() && s.contains("final") && s.value("steps", int64_t{-1}) == total_steps &&
         latest_checkpoint(dir + "/checkpoints").has_value();
}

// config.yaml at `path` is `tree` written out, trainer.threads aside (how many cores a run
// had does not make it another experiment: `benchmark --jobs` workers run with fewer).
bool same_config_but_threads(const std::string& path, const json& tree) {
  const std::string text = read_text_file(path);
  if (text == to_yaml(tree)) return true;
  json have;
  try {
    have = yaml_to_json(text);
  } catch (const std::exception&) {
    return false;
  }
  const json* threads = nullptr;
  if (have.is_object() && have.contains("trainer") && have["trainer"].is_object() && have["trainer"].contains("threads"))
    threads = &have["trainer"]["threads"];
  if (threads == nullptr) return false;
  json t = tree;
  t["trainer"]["threads"] = *threads;
  return text == to_yaml(t);
}

enum class CellPlan { kRun, kReuse };

// What to do with one (family, method) cell; see the header's "Resuming". Throws Error for
// a run of another config (unless overwrite).
CellPlan plan_cell(const json& tree, const std::string& dir, bool overwrite, const std::string& family,
                   const std::string& method) {
  if (overwrite || !holds_run(dir)) return CellPlan::kRun;
  const bool same_config = fs::exists(dir + "/config.yaml") && same_config_but_threads(dir + "/config.yaml", tree);
  AGENTR1_CHECK(same_config, "benchmark: '" << dir << "' already holds a run of " << family << " / " << method
                                            << " made with another config (its config.yaml differs); HINT: "
                                            << "--overwrite to run every cell again, or --out DIR");
  if (run_complete(dir, load_train_config(tree).trainer.total_steps)) return CellPlan::kReuse;
  AGENTR1_LOG(WARN) << "benchmark: '" << dir << "' holds an unfinished run of " << family << " / " << method
                    << " (same config); starting it over";
  return CellPlan::kRun;
}

// A complete run read back from its directory (as run_comparison would have returned it).
MethodResult load_method_result(const std::string& method, const std::string& dir) {
  const json s = read_json_or_null(dir + "/summary.json");
  AGENTR1_CHECK(s.is_object(), "benchmark: cannot read '" << dir << "/summary.json'");
  MethodResult m;
  m.method = method;
  m.run_dir = dir;
  m.baseline = EvalResult::from_json(s.value("baseline", json::object()));
  m.final_eval = EvalResult::from_json(s.value("final", json::object()));
  m.wall_s = s.value("wall_s", 0.0);
  const std::string metrics = dir + "/metrics.jsonl";
  m.curve = read_validation_curve(metrics);
  m.run_means = read_run_means(metrics, kRunMeanKeys);
  m.train_reward_last = last_train_reward(metrics, 5);
  return m;
}

// Greedy evaluation of the HF model in model_dir on `samples` with the run's flow options
// (as RLTrainer validates; no mean@k).
EvalResult evaluate_model(const TrainConfig& c, const std::string& model_dir, const std::vector<Sample>& samples) {
  const at::Device device = parse_device(c.trainer.device);
  require_device_available(device);
  const text::Tokenizer tok =
      with_context("loading tokenizer from '" + model_dir + "'", [&] { return text::Tokenizer::load(model_dir); });
  const text::ChatTemplate chat = with_context(
      "chat template of '" + model_dir + "'", [&] { return text::ChatTemplate::from_tokenizer(tok); });
  model::Transformer policy = with_context("loading model from '" + model_dir + "'", [&] {
    return model::load_model_dir(model_dir, model::parse_dtype(c.model.dtype), device);
  });
  rollout::EngineOptions eo;
  eo.max_batch = c.rollout.max_batch;
  eo.max_context = c.rollout.flow.max_prompt_tokens + c.rollout.flow.max_new_tokens;
  eo.prefix_cache = c.rollout.prefix_cache;
  eo.batch_invariant = c.rollout.batch_invariant;
  eo.huge_pages = c.rollout.huge_pages;
  eo.packed_decode = c.rollout.packed_decode;
  eo.block_size = c.rollout.kv_block_size;
  eo.n_blocks = c.rollout.kv_blocks;
  eo.detokenize = [&tok](const TokenIds& ids) { return tok.decode(ids); };
  rollout::Engine engine(policy, eo);
  ThreadPool tool_pool(c.trainer.tool_threads);
  ThreadPool drivers(static_cast<int>(std::max<size_t>(8, std::min<size_t>(256, samples.size()))));
  flow::FlowContext ctx;
  ctx.generator = &engine;
  ctx.tokenizer = &tok;
  ctx.chat_template = &chat;
  ctx.tool_pool = &tool_pool;
  ctx.stop_token_ids = flow::default_stop_token_ids(tok);
  flow::check_env_setup(samples, ctx, c.rollout.flow, "the seen-layout set");
  return evaluate(samples, ctx, c.rollout.flow, /*k=*/0, c.rollout.val_temperature,
                  static_cast<uint64_t>(c.trainer.seed) * 7919 + 17, drivers);
}

// What a seen evaluation depends on: the weights file (path, size, time) and the samples.
json seen_key(const std::string& model_dir, const TrainConfig& c) {
  const std::string weights = model_dir + "/model.safetensors";
  std::error_code ec;
  const auto size = fs::file_size(weights, ec);
  const auto time = fs::last_write_time(weights, ec);
  return {{"model", model_dir},
          {"weights_bytes", ec ? int64_t{-1} : static_cast<int64_t>(size)},
          {"weights_time", static_cast<int64_t>(time.time_since_epoch().count())},
          {"n", c.data.val_size},
          {"seed", static_cast<int64_t>(c.data.seed) + kSeenSeedOffset},
          {"task_kwargs", c.data.task_kwargs}};
}

// The seen evaluation of model_dir, read back from cache_file when it holds one with the
// same key and may_reuse, else run and written there.
EvalResult seen_eval(const TrainConfig& c, const std::string& model_dir, const std::string& cache_file,
                     bool may_reuse) {
  const json key = seen_key(model_dir, c);
  const json cached = read_json_or_null(cache_file);
  if (may_reuse && cached.is_object() && cached.value("key", json()) == key && cached.contains("result"))
    return EvalResult::from_json(cached["result"]);
  const auto family = tasks::make_task_family(c.data.task, c.data.task_kwargs);
  const std::vector<Sample> seen = family->make_dataset(tasks::DataSplit::kTrain, c.data.val_size,
                                                        static_cast<uint64_t>(c.data.seed + kSeenSeedOffset));
  AGENTR1_LOG(INFO) << "benchmark: " << c.data.task << " seen-layout evaluation of " << model_dir << " ("
                    << seen.size() << " train-split samples)";
  const EvalResult r = evaluate_model(c, model_dir, seen);
  json out{{"key", key}, {"result", r.to_json()}};
  out["result"]["greedy_success_stderr"] = success_stderr(r.greedy_success, r.num_prompts);
  RunDir(fs::path(cache_file).parent_path().string()).write_json(fs::path(cache_file).filename().string(), out);
  return r;
}

bool family_is_game(const TrainConfig& c) {
  const auto family = tasks::make_task_family(c.data.task, c.data.task_kwargs);
  const std::vector<Sample> one = family->make_dataset(tasks::DataSplit::kTest, 1, static_cast<uint64_t>(c.data.seed));
  return !one.empty() && env::has_game(one[0].agent_name);
}

json eval_json(const EvalResult& e, bool score) {
  json j = e.to_json();
  j["greedy_success_stderr"] = success_stderr(e.greedy_success, e.num_prompts);
  if (score) j["score"] = 100.0 * e.greedy_reward;
  return j;
}

// One row of the summary: a label and a value per column (baseline, then the methods).
struct SummaryRow {
  std::string label;
  std::vector<std::string> cells;  // formatted
  std::vector<double> values;      // for the JSON
};

std::vector<SummaryRow> summary_rows(const FamilyResult& f) {
  std::vector<SummaryRow> rows;
  const CompareResult& c = f.comparison;
  SummaryRow main{f.seen_eval ? f.family + " (unseen)" : f.family, {}, {}};
  main.cells.push_back(format_rate(c.baseline.greedy_success, c.baseline.num_prompts));
  main.values.push_back(c.baseline.greedy_success);
  for (const auto& m : c.methods) {
    main.cells.push_back(format_rate(m.final_eval.greedy_success, m.final_eval.num_prompts));
    main.values.push_back(m.final_eval.greedy_success);
  }
  rows.push_back(main);
  if (f.seen_eval && f.baseline_seen) {
    SummaryRow seen{f.family + " (seen)", {}, {}};
    seen.cells.push_back(format_rate(f.baseline_seen->greedy_success, f.baseline_seen->num_prompts));
    seen.values.push_back(f.baseline_seen->greedy_success);
    for (const auto& s : f.seen) {
      seen.cells.push_back(format_rate(s.greedy_success, s.num_prompts));
      seen.values.push_back(s.greedy_success);
    }
    rows.push_back(seen);
  }
  for (const std::string& name : f.report_metrics) {
    SummaryRow row{f.family + " (" + name + ")", {}, {}};
    auto add = [&](const EvalResult& e) {
      auto it = e.env_metrics.find(name);
      row.cells.push_back(it == e.env_metrics.end() ? "-" : format_fixed(it->second));
      row.values.push_back(it == e.env_metrics.end() ? std::nan("") : it->second);
    };
    add(c.baseline);
    for (const auto& m : c.methods) add(m.final_eval);
    rows.push_back(row);
  }
  if (f.report_score) {
    SummaryRow score{f.family + " (score)", {}, {}};
    score.cells.push_back(format_fixed(100.0 * c.baseline.greedy_reward, 1));
    score.values.push_back(100.0 * c.baseline.greedy_reward);
    for (const auto& m : c.methods) {
      score.cells.push_back(format_fixed(100.0 * m.final_eval.greedy_reward, 1));
      score.values.push_back(100.0 * m.final_eval.greedy_reward);
    }
    rows.push_back(score);
  }
  return rows;
}

// The method names of the summary's columns: the union over families, in first-seen order.
std::vector<std::string> summary_methods(const BenchmarkResult& r) {
  std::vector<std::string> out;
  for (const auto& f : r.families)
    for (const auto& m : f.comparison.methods)
      if (std::find(out.begin(), out.end(), m.method) == out.end()) out.push_back(m.method);
  return out;
}

void write_outputs(const BenchmarkResult& r) {
  RunDir out(r.out_dir);
  out.write_text("benchmark.md", format_benchmark(r));
  out.write_json("benchmark.json", benchmark_json(r));
}

}  // namespace

void BenchmarkBudget::validate() const {
  check_config_tree(config, "config");
  for (const auto& [family, tree] : task_config) {
    check_family(family, "tasks");
    check_config_tree(tree, "tasks." + family);
  }
}

void BenchmarkTask::validate() const {
  check_config_tree(config, "config");
  check_config_tree(builtin_model, "builtin_model");
}

void BenchmarkRecipe::validate() const {
  check_config_tree(builtin_model, "builtin_model");
  check_name_list(default_methods, "default_methods");
  check_name_list(default_tasks, "default_tasks");
  for (const auto& t : default_tasks) check_family(t, "default_tasks");
  for (const auto& kv : tasks) check_family(kv.first, "tasks");
  for (const auto& t : default_tasks)
    AGENTR1_CHECK(tasks.count(t), "default_tasks names '" << t << "' but tasks has no entry for it; HINT: add tasks."
                                                          << t << ": {}");
  for (const char* b : {"quick", "default"})
    AGENTR1_CHECK(budgets.count(b), "budgets." << b << " is missing (budgets must have quick and default)");
}

BenchmarkRecipe parse_benchmark_recipe(const json& recipe, const MethodTable& methods) {
  BenchmarkRecipe r = with_context("benchmark recipe", [&] { return bind_config<BenchmarkRecipe>(recipe); });
  null_to_map(r.builtin_model);
  for (auto& [family, t] : r.tasks) {
    null_to_map(t.config);
    null_to_map(t.builtin_model);
  }
  for (auto& [name, b] : r.budgets) {
    null_to_map(b.config);
    for (auto& [family, tree] : b.task_config) null_to_map(tree);
  }
  for (const auto& m : r.default_methods)
    with_context("benchmark recipe: default_methods", [&] { return method_overrides(methods, m); });
  // The built-in models: the shared one, then each family's (its keys over the shared ones).
  with_context("benchmark recipe", [&] {
    DefaultModelOptions probe;
    probe.apply_json(r.builtin_model, "builtin_model");
    return 0;
  });
  for (const auto& kv : r.tasks)
    with_context("benchmark recipe", [&] {
      DefaultModelOptions probe;
      probe.apply_json(family_builtin_model(r, kv.first), "tasks." + kv.first + ".builtin_model");
      return 0;
    });
  return r;
}

json family_builtin_model(const BenchmarkRecipe& recipe, const std::string& family) {
  json out = recipe.builtin_model;
  const auto t = recipe.tasks.find(family);
  if (t != recipe.tasks.end())
    for (auto it = t->second.builtin_model.begin(); it != t->second.builtin_model.end(); ++it) out[it.key()] = it.value();
  return out;
}

json family_layer(const BenchmarkRecipe& recipe, const std::string& budget, const std::string& family) {
  const auto b = recipe.budgets.find(budget);
  if (b == recipe.budgets.end()) {
    std::vector<std::string> known;
    for (const auto& kv : recipe.budgets) known.push_back(kv.first);
    throw Error("benchmark: unknown budget '" + budget + "'; known: " + join(known, ", "));
  }
  const auto t = recipe.tasks.find(family);
  if (t == recipe.tasks.end()) {
    std::vector<std::string> known;
    for (const auto& kv : recipe.tasks) known.push_back(kv.first);
    throw Error("benchmark: unknown task '" + family + "'; known (tasks of the benchmark recipe): " + join(known, ", "));
  }
  json layer = json::object();
  merge_json(layer, b->second.config);
  merge_json(layer, t->second.config);
  merge_json(layer, json{{"data", {{"task", family}}}});
  const auto o = b->second.task_config.find(family);
  if (o != b->second.task_config.end()) merge_json(layer, o->second);
  return layer;
}

namespace {

struct FamilyPlan {
  std::string family;
  json tree;
  std::vector<CellPlan> cells;
};

// Every family's tree and every cell's config and directory, checked before the first
// (long) run starts.
std::vector<FamilyPlan> make_plans(const BenchmarkRecipe& recipe, const BenchmarkOptions& opts,
                                   const ResolveTree& resolve) {
  check_methods(opts.method_table, opts.methods);
  AGENTR1_CHECK(!opts.tasks.empty(), "benchmark: no tasks given");
  for (size_t i = 0; i < opts.tasks.size(); ++i)
    for (size_t k = 0; k < i; ++k)
      AGENTR1_CHECK(opts.tasks[k] != opts.tasks[i], "benchmark: task '" << opts.tasks[i] << "' is listed twice");
  std::vector<FamilyPlan> plans;
  for (const std::string& family : opts.tasks) {
    FamilyPlan p;
    p.family = family;
    const json layer = family_layer(recipe, opts.budget, family);
    p.tree = with_context("benchmark task '" + family + "'", [&] { return resolve(family, layer); });
    const TrainConfig cfg = with_context("benchmark task '" + family + "'", [&] { return load_train_config(p.tree); });
    AGENTR1_CHECK(cfg.data.task == family, "benchmark task '" << family << "': the resolved config has data.task="
                                                              << cfg.data.task << "; HINT: data.task is set per family by "
                                                              << "the benchmark: choose families with --tasks");
    for (const std::string& method : opts.methods) {
      const std::string dir = opts.out_dir + "/" + family + "/" + method;
      const json t = with_context("benchmark task '" + family + "', method '" + method + "'", [&] {
        json mt = method_tree(p.tree, opts.method_table, method, dir);
        load_train_config(mt);
        return mt;
      });
      p.cells.push_back(plan_cell(t, dir, opts.overwrite, family, method));
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace

std::vector<BenchmarkCell> plan_benchmark(const BenchmarkRecipe& recipe, const BenchmarkOptions& opts,
                                          const ResolveTree& resolve) {
  std::vector<BenchmarkCell> cells;
  for (const FamilyPlan& p : make_plans(recipe, opts, resolve))
    for (size_t i = 0; i < opts.methods.size(); ++i)
      cells.push_back(BenchmarkCell{p.family, opts.methods[i], opts.out_dir + "/" + p.family + "/" + opts.methods[i],
                                    p.cells[i] == CellPlan::kReuse});
  return cells;
}

BenchmarkResult run_benchmark(const BenchmarkRecipe& recipe, const BenchmarkOptions& opts,
                              const ResolveTree& resolve) {
  const std::vector<FamilyPlan> plans = make_plans(recipe, opts, resolve);

  BenchmarkResult res;
  res.out_dir = opts.out_dir;
  res.budget = opts.budget;
  make_dirs(opts.out_dir);
  for (size_t fi = 0; fi < plans.size(); ++fi) {
    const FamilyPlan& p = plans[fi];
    const std::string family_dir = opts.out_dir + "/" + p.family;
    const BenchmarkTask& task = recipe.tasks.at(p.family);
    AGENTR1_LOG(INFO) << "benchmark: task " << fi + 1 << "/" << plans.size() << ": " << p.family;
    std::vector<std::string> to_run;
    for (size_t i = 0; i < opts.methods.size(); ++i)
      if (p.cells[i] == CellPlan::kRun) to_run.push_back(opts.methods[i]);
    CompareResult ran;
    if (!to_run.empty()) {
      CompareOptions co;
      co.method_table = opts.method_table;
      co.methods = to_run;
      co.out_dir = family_dir;
      co.kind = CompareKind::kMethods;
      co.overwrite = true;  // the cells were checked above: nothing else is replaced
      co.write_tables = false;  // written below (with the reused cells and seen columns)
      ran = with_context("benchmark task '" + p.family + "'", [&] { return run_comparison(p.tree, co); });
    }
    FamilyResult f;
    f.family = p.family;
    f.seen_eval = task.seen_eval;
    f.report_score = task.report_score;
    f.report_metrics = task.report_metrics;
    const TrainConfig cfg = load_train_config(p.tree);
    f.game = family_is_game(cfg);
    f.comparison.out_dir = family_dir;
    f.comparison.kind = CompareKind::kMethods;
    size_t next_ran = 0;
    for (size_t i = 0; i < opts.methods.size(); ++i) {
      const std::string& method = opts.methods[i];
      const bool reuse = p.cells[i] == CellPlan::kReuse;
      if (reuse) {
        AGENTR1_LOG(INFO) << "benchmark: " << p.family << " / " << method << ": reusing the complete run";
      }
      MethodResult m = reuse ? load_method_result(method, family_dir + "/" + method) : ran.methods.at(next_ran++);
      if (i == 0) f.comparison.baseline = m.baseline;
      f.comparison.baseline_spread = std::max(f.comparison.baseline_spread,
                                              std::abs(m.baseline.greedy_success - f.comparison.baseline.greedy_success));
      f.comparison.methods.push_back(std::move(m));
      f.reused.push_back(reuse);
    }
    if (task.seen_eval) {
      // The baseline's cached result stands only when every cell was reused (so the
      // config is the one it was made with).
      const bool all_reused = std::all_of(f.reused.begin(), f.reused.end(), [](bool b) { return b; });
      if (!opts.cells_only)
        f.baseline_seen = seen_eval(cfg, cfg.model.path, family_dir + "/baseline_seen_eval.json", all_reused);
      for (size_t i = 0; i < opts.methods.size(); ++i) {
        const std::string dir = family_dir + "/" + opts.methods[i];
        const TrainConfig mc = load_train_config(method_tree(p.tree, opts.method_table, opts.methods[i], dir));
        const std::optional<std::string> ck = latest_checkpoint(dir + "/checkpoints");
        AGENTR1_CHECK(ck.has_value(), "benchmark: " << p.family << " / " << opts.methods[i] << ": no checkpoint under '"
                                                    << dir << "/checkpoints' for the seen-layout evaluation");
        f.seen.push_back(seen_eval(mc, *ck, dir + "/seen_eval.json", /*may_reuse=*/f.reused[i]));
      }
    }
    if (!opts.cells_only) {
      RunDir fd(family_dir);
      fd.write_text("comparison.md", format_comparison(f.comparison));
      fd.write_json("comparison.json", family_json(f));
    }
    res.families.push_back(std::move(f));
    if (!opts.cells_only) write_outputs(res);  // after every family: an interrupted benchmark keeps the finished tables
  }
  return res;
}

std::string format_family(const FamilyResult& f) {
  const CompareResult& c = f.comparison;
  std::ostringstream o;
  o << "### " << f.family << "\n\n| method | success ± s.e." << (f.seen_eval ? " (unseen)" : "");
  if (f.seen_eval) o << " | success ± s.e. (seen)";
  if (f.report_score) o << " | score";
  for (const auto& name : f.report_metrics) o << " | " << name;
  o << " | mean reward | response tokens | turns | " << (f.game ? "actions" : "tool calls") << " | wall s |\n|---|---|";
  if (f.seen_eval) o << "---|";
  if (f.report_score) o << "---|";
  for (size_t i = 0; i < f.report_metrics.size(); ++i) o << "---|";
  o << "---|---|---|---|---|\n";
  auto row = [&](const std::string& name, const EvalResult& e, const EvalResult* seen, const std::string& wall) {
    o << "| " << name << " | " << format_rate(e.greedy_success, e.num_prompts);
    if (f.seen_eval) o << " | " << (seen != nullptr ? format_rate(seen->greedy_success, seen->num_prompts) : "-");
    if (f.report_score) o << " | " << format_fixed(100.0 * e.greedy_reward, 1);
    for (const auto& name : f.report_metrics) {
      auto it = e.env_metrics.find(name);
      o << " | " << (it == e.env_metrics.end() ? std::string("-") : format_fixed(it->second));
    }
    o << " | " << format_fixed(e.greedy_reward) << " | " << format_fixed(e.mean_response_length, 1) << " | " << format_fixed(e.mean_turns, 2)
      << " | " << format_fixed(f.game ? e.mean_turns : e.mean_tool_calls, 2) << " | " << wall << " |\n";
  };
  row("training-free baseline", c.baseline, f.baseline_seen ? &*f.baseline_seen : nullptr, "-");
  for (size_t i = 0; i < c.methods.size(); ++i) {
    const MethodResult& m = c.methods[i];
    row(m.method, m.final_eval, i < f.seen.size() ? &f.seen[i] : nullptr, format_fixed(m.wall_s, 0));
  }
  o << "\n" << c.baseline.num_prompts << " held-out prompts (test split";
  if (f.seen_eval) {
    o << ", unseen layouts); seen: " << (f.baseline_seen ? f.baseline_seen->num_prompts : 0)
      << " train-split prompts (layouts the policy trained on, not the training samples)";
  } else {
    o << ")";
  }
  o << "; success = greedy success rate ± its standard error";
  if (f.report_score) o << "; score = 100 x mean reward";
  o << "; tokens, turns and " << (f.game ? "actions (one per turn)" : "tool calls") << " per greedy episode";
  if (c.baseline_spread > 0) o << "; the runs' step-0 validations differed by up to " << format_fixed(c.baseline_spread);
  o << ".\n";
  return o.str();
}

std::string format_summary(const BenchmarkResult& r) {
  const std::vector<std::string> methods = summary_methods(r);
  std::ostringstream o;
  o << "| task | training-free baseline";
  for (const auto& m : methods) o << " | " << m;
  o << " |\n|---|---|";
  for (size_t i = 0; i < methods.size(); ++i) o << "---|";
  o << "\n";
  for (const auto& f : r.families) {
    for (const SummaryRow& row : summary_rows(f)) {
      o << "| " << row.label << " | " << row.cells[0];
      for (const auto& m : methods) {
        size_t k = 0;
        while (k < f.comparison.methods.size() && f.comparison.methods[k].method != m) ++k;
        o << " | " << (k < f.comparison.methods.size() ? row.cells[k + 1] : "-");
      }
      o << " |\n";
    }
  }
  return o.str();
}

std::string format_benchmark(const BenchmarkResult& r) {
  std::ostringstream o;
  o << "## Benchmark (budget " << r.budget << ")\n\nFinal greedy success ± standard error per task and method "
    << "(score rows: 100 x mean reward).\n\n"
    << format_summary(r);
  for (const auto& f : r.families) o << "\n" << format_family(f);
  o << "\nRuns: " << r.out_dir << "/<task>/<method>/ (metrics, dumps, checkpoints).\n";
  return o.str();
}

json family_json(const FamilyResult& f) {
  const CompareResult& c = f.comparison;
  json j;
  j["family"] = f.family;
  j["seen_eval"] = f.seen_eval;
  j["report_score"] = f.report_score;
  j["report_metrics"] = f.report_metrics;
  j["game"] = f.game;
  j["kind"] = "methods";
  j["baseline"] = eval_json(c.baseline, f.report_score);
  if (f.baseline_seen) j["baseline"]["seen"] = eval_json(*f.baseline_seen, false);
  j["baseline_spread"] = c.baseline_spread;
  j["methods"] = json::array();
  for (size_t i = 0; i < c.methods.size(); ++i) {
    const MethodResult& m = c.methods[i];
    json e;
    e["method"] = m.method;
    e["run_dir"] = m.run_dir;
    e["reused"] = i < f.reused.size() && f.reused[i];
    e["final"] = eval_json(m.final_eval, f.report_score);
    if (i < f.seen.size()) e["seen"] = eval_json(f.seen[i], false);
    e["run_means"] = json::object();
    for (const auto& [k, v] : m.run_means) e["run_means"][k] = std::isnan(v) ? json(nullptr) : json(v);
    e["train_reward_last5"] = std::isnan(m.train_reward_last) ? json(nullptr) : json(m.train_reward_last);
    e["wall_s"] = m.wall_s;
    e["curve"] = json::array();
    for (const auto& [step, acc] : m.curve) e["curve"].push_back({step, acc});
    j["methods"].push_back(e);
  }
  return j;
}

json benchmark_json(const BenchmarkResult& r) {
  json j;
  j["budget"] = r.budget;
  j["out_dir"] = r.out_dir;
  j["families"] = json::array();
  j["summary"] = json::array();
  for (const auto& f : r.families) {
    j["families"].push_back(family_json(f));
    for (const SummaryRow& row : summary_rows(f)) {
      json s{{"task", row.label}, {"baseline", row.values[0]}, {"methods", json::object()}};
      for (size_t k = 0; k < f.comparison.methods.size(); ++k) s["methods"][f.comparison.methods[k].method] = row.values[k + 1];
      j["summary"].push_back(s);
    }
  }
  return j;
}

}  // namespace agentr1::train
