#include "agentr1/experiments/compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/strings.h"
#include "agentr1/sft/default_recipe.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"

namespace agentr1::train {

namespace {

double metric(const json& j, const std::string& key, double fallback = NAN) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// The lines of a run's metrics.jsonl that have a numeric `key`, by step (a resumed run
// may log a step twice: the last line wins). Throws Error if the file cannot be read.
std::map<int64_t, json> lines_with(const std::string& metrics_path, const std::string& key) {
  std::ifstream f(metrics_path);
  AGENTR1_CHECK(f.good(), "cannot read '" << metrics_path << "'");
  std::map<int64_t, json> by_step;
  std::string line;
  while (std::getline(f, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    if (std::isnan(metric(j, key))) continue;
    const int64_t step = j["step"].get<int64_t>();
    by_step[step] = std::move(j);
  }
  return by_step;
}

// Mean of critic/score/mean over the last `n` training steps.
double last_train_reward(const std::string& metrics_path, int n) {
  const std::map<int64_t, json> steps = lines_with(metrics_path, "critic/score/mean");
  if (steps.empty()) return NAN;
  double sum = 0;
  int k = 0;
  for (auto it = steps.rbegin(); it != steps.rend() && k < n; ++it, ++k) sum += metric(it->second, "critic/score/mean");
  return sum / k;
}

// A recipe's default list (`key`, e.g. "default_methods"): non-empty, each name in `table`.
void check_default_names(const std::vector<std::string>& names, const MethodTable& table, const std::string& key) {
  AGENTR1_CHECK(!names.empty(), "'" << key << "' must be a non-empty list of names from the table; known: "
                                    << join(known_methods(table), ", "));
  for (const std::string& name : names) with_context(key, [&] { return method_overrides(table, name); });
}

// Binds a recipe of type R, errors prefixed with `what` ("comparison recipe").
template <class R>
R bind_recipe(const json& recipe, const std::string& what) {
  return with_context(what, [&] { return bind_config<R>(recipe); });
}

}  // namespace

void check_config_tree(const json& tree, const std::string& key) {
  AGENTR1_CHECK(tree.is_object() || tree.is_null(),
                "'" << key << "' must be a map (a config tree; empty = none), got " << describe_value(tree));
}

MethodTable parse_method_table(const json& methods, const std::string& key) {
  config_detail::BindContext ctx;
  MethodTable table;
  config_detail::Codec<MethodTable>::read(methods, table, key, ctx);
  config_detail::throw_if_errors(ctx.errors);
  return table;
}

void CompareRecipe::validate() const {
  AGENTR1_CHECK(!methods.empty(), "'methods' is missing: the method table (name -> list of \"key=value\" config "
                                  "overrides)");
  check_default_names(default_methods, methods, "default_methods");
}

CompareRecipe parse_compare_recipe(const json& recipe) { return bind_recipe<CompareRecipe>(recipe, "comparison recipe"); }

void ContextRecipe::validate() const {
  check_config_tree(builtin_model, "builtin_model");
  check_config_tree(config, "config");
  AGENTR1_CHECK(!contexts.empty(), "'contexts' is missing: context name -> list of \"key=value\" config overrides");
  check_default_names(default_contexts, contexts, "default_contexts");
}

ContextRecipe parse_context_recipe(const json& recipe) {
  ContextRecipe r = bind_recipe<ContextRecipe>(recipe, "context recipe");
  if (r.builtin_model.is_null()) r.builtin_model = json::object();
  if (r.config.is_null()) r.config = json::object();
  with_context("context recipe", [&] {
    DefaultModelOptions probe;
    probe.apply_json(r.builtin_model, "builtin_model");
    return 0;
  });
  return r;
}

const std::vector<std::string> kRunMeanKeys = {"env/prompt_tokens_mean/mean",     "env/prompt_tokens_max/mean",
                                               "batch/row_tokens_per_trajectory", "env/context_omitted_turns/mean",
                                               "env/summary_steps/mean",          "env/context_overflow/mean",
                                               "env/num_turns/mean",              "env/response_length/mean"};

std::map<std::string, double> read_run_means(const std::string& metrics_path, const std::vector<std::string>& keys) {
  const std::map<int64_t, json> by_step = lines_with(metrics_path, "critic/score/mean");  // training steps
  std::map<std::string, double> out;
  for (const auto& k : keys) {
    double sum = 0;
    int64_t n = 0;
    for (const auto& [step, j] : by_step) {
      const double v = metric(j, k);
      if (std::isnan(v)) continue;
      sum += v;
      ++n;
    }
    out[k] = n > 0 ? sum / static_cast<double>(n) : NAN;
  }
  return out;
}

double success_stderr(double p, int64_t n) {
  if (n <= 0) return 0;
  const double q = std::clamp(p, 0.0, 1.0);
  return std::sqrt(q * (1 - q) / static_cast<double>(n));
}

std::string format_fixed(double x, int prec) {
  if (std::isnan(x)) return "-";
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << x;
  return o.str();
}

std::string format_rate(double p, int64_t n) { return format_fixed(p) + " ± " + format_fixed(success_stderr(p, n)); }

std::vector<std::string> known_methods(const MethodTable& table) {
  std::vector<std::string> out;
  for (const auto& m : table) out.push_back(m.first);
  return out;
}

std::vector<std::string> method_overrides(const MethodTable& table, const std::string& method) {
  for (const auto& m : table)
    if (m.first == method) return m.second;
  throw Error("unknown comparison method '" + method + "'; known: " +
              (table.empty() ? std::string("none (the method table is empty)") : join(known_methods(table), ", ")));
}

std::vector<std::pair<int64_t, double>> read_validation_curve(const std::string& metrics_path) {
  std::map<int64_t, double> by_step;
  for (const auto& [step, j] : lines_with(metrics_path, "val/success/greedy")) by_step[step] = metric(j, "val/success/greedy");
  return {by_step.begin(), by_step.end()};
}

void check_methods(const MethodTable& table, const std::vector<std::string>& methods) {
  AGENTR1_CHECK(!methods.empty(), "compare: no methods given; known: " << join(known_methods(table), ", "));
  for (size_t i = 0; i < methods.size(); ++i) {
    method_overrides(table, methods[i]);
    for (size_t k = 0; k < i; ++k)
      AGENTR1_CHECK(methods[k] != methods[i],
                    "compare: method '" << methods[i] << "' is listed twice (each run needs its own directory)");
  }
}

CompareResult run_comparison(const json& base_tree, const CompareOptions& opts) {
  check_methods(opts.method_table, opts.methods);
  // Every method must make a valid config before the first (long) run starts.
  for (const std::string& method : opts.methods) {
    const std::vector<std::string> overrides = method_overrides(opts.method_table, method);
    with_context("compare method '" + method + "'", [&] {
      json tree = base_tree;
      for (const auto& o : overrides) apply_override(tree, o);
      return load_train_config(tree);
    });
  }
  if (!opts.overwrite) {
    for (const std::string& method : opts.methods) {
      const std::string dir = opts.out_dir + "/" + method;
      AGENTR1_CHECK(!std::filesystem::exists(dir + "/metrics.jsonl") && !std::filesystem::exists(dir + "/checkpoints"),
                    "compare: '" << dir << "' already holds a run of method '" << method
                                 << "'; HINT: --overwrite to run the comparison again there, or --out DIR");
    }
  }
  CompareResult res;
  res.out_dir = opts.out_dir;
  res.kind = opts.kind;
  make_dirs(opts.out_dir);
  for (size_t i = 0; i < opts.methods.size(); ++i) {
    const std::string& method = opts.methods[i];
    json tree = base_tree;
    for (const auto& o : method_overrides(opts.method_table, method)) apply_override(tree, o);
    apply_override(tree, "trainer.output_dir=" + opts.out_dir + "/" + method);
    apply_override(tree, "trainer.run_name=" + method);
    AGENTR1_LOG(INFO) << "compare: method " << i + 1 << "/" << opts.methods.size() << ": " << method;
    TrainConfig cfg = with_context("compare method '" + method + "'", [&] { return load_train_config(tree); });
    RunSummary s;
    {
      RLTrainer trainer(cfg, tree);
      s = trainer.run(opts.overwrite ? RunMode::kOverwrite : RunMode::kFresh);
    }
    MethodResult m;
    m.method = method;
    m.run_dir = s.run_dir;
    m.baseline = s.baseline;
    m.final_eval = s.final_eval;
    m.wall_s = s.wall_s;
    m.curve = read_validation_curve(s.run_dir + "/metrics.jsonl");
    m.train_reward_last = last_train_reward(s.run_dir + "/metrics.jsonl", 5);
    m.run_means = read_run_means(s.run_dir + "/metrics.jsonl", kRunMeanKeys);
    if (i == 0) res.baseline = s.baseline;
    res.baseline_spread =
        std::max(res.baseline_spread, std::abs(s.baseline.greedy_success - res.baseline.greedy_success));
    res.methods.push_back(std::move(m));
  }
  if (!opts.write_tables) return res;
  RunDir out(opts.out_dir);
  const std::string table = format_comparison(res);
  out.write_text("comparison.md", table);
  json j;
  j["baseline"] = res.baseline.to_json();
  j["baseline_spread"] = res.baseline_spread;
  j["baseline"]["greedy_success_stderr"] = success_stderr(res.baseline.greedy_success, res.baseline.num_prompts);
  j["kind"] = res.kind == CompareKind::kContexts ? "contexts" : "methods";
  j["methods"] = json::array();
  for (const auto& m : res.methods) {
    json e;
    e["method"] = m.method;
    e["run_dir"] = m.run_dir;
    e["final"] = m.final_eval.to_json();
    e["final"]["greedy_success_stderr"] = success_stderr(m.final_eval.greedy_success, m.final_eval.num_prompts);
    e["run_means"] = json::object();
    for (const auto& [k, v] : m.run_means) e["run_means"][k] = std::isnan(v) ? json(nullptr) : json(v);
    e["train_reward_last5"] = std::isnan(m.train_reward_last) ? json(nullptr) : json(m.train_reward_last);
    e["wall_s"] = m.wall_s;
    e["curve"] = json::array();
    for (const auto& [step, acc] : m.curve) e["curve"].push_back({step, acc});
    j["methods"].push_back(e);
  }
  out.write_json("comparison.json", j);
  return res;
}

namespace {

double run_mean(const MethodResult& m, const std::string& key) {
  auto it = m.run_means.find(key);
  return it == m.run_means.end() ? NAN : it->second;
}

std::string format_methods(const CompareResult& r) {
  std::ostringstream o;
  const auto& b = r.baseline;
  const std::string k = std::to_string(b.k);
  o << "| method | greedy acc ± s.e. | gain | mean@" << k << " | val reward | train reward (last 5) | response tokens | "
    << "turns | tool calls | wall s |\n";
  o << "|---|---|---|---|---|---|---|---|---|---|\n";
  o << "| training-free baseline | " << format_rate(b.greedy_success, b.num_prompts) << " | - | "
    << (b.k > 0 ? format_fixed(b.mean_at_k) : "-") << " | " << format_fixed(b.greedy_reward) << " | - | "
    << format_fixed(b.mean_response_length, 1) << " | " << format_fixed(b.mean_turns, 2) << " | " << format_fixed(b.mean_tool_calls, 2)
    << " | - |\n";
  for (const auto& m : r.methods) {
    const auto& f = m.final_eval;
    const double gain = f.greedy_success - b.greedy_success;
    o << "| " << m.method << " | " << format_rate(f.greedy_success, f.num_prompts) << " | " << (gain >= 0 ? "+" : "")
      << format_fixed(gain) << " | " << (f.k > 0 ? format_fixed(f.mean_at_k) : "-") << " | " << format_fixed(f.greedy_reward) << " | "
      << format_fixed(m.train_reward_last) << " | " << format_fixed(f.mean_response_length, 1) << " | " << format_fixed(f.mean_turns, 2)
      << " | " << format_fixed(f.mean_tool_calls, 2) << " | " << format_fixed(m.wall_s, 0) << " |\n";
  }
  return o.str();
}

// Each context run's own step-0 validation is its baseline (the policies show the same
// model different prompts, so the training-free accuracy differs per context).
std::string format_contexts(const CompareResult& r) {
  std::ostringstream o;
  o << "| context | greedy acc ± s.e. (step 0) | greedy acc ± s.e. (final) | gain | val reward | "
    << "prompt tokens/step (mean / max) | response tokens | turns | learner tokens/trajectory | "
    << "turns left out | summaries | context overflows | wall s |\n";
  o << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& m : r.methods) {
    const auto& f = m.final_eval;
    const double gain = f.greedy_success - m.baseline.greedy_success;
    o << "| " << m.method << " | " << format_rate(m.baseline.greedy_success, m.baseline.num_prompts) << " | "
      << format_rate(f.greedy_success, f.num_prompts) << " | " << (gain >= 0 ? "+" : "") << format_fixed(gain) << " | "
      << format_fixed(f.greedy_reward) << " | " << format_fixed(run_mean(m, "env/prompt_tokens_mean/mean"), 1) << " / "
      << format_fixed(run_mean(m, "env/prompt_tokens_max/mean"), 1) << " | " << format_fixed(f.mean_response_length, 1) << " | "
      << format_fixed(f.mean_turns, 2) << " | " << format_fixed(run_mean(m, "batch/row_tokens_per_trajectory"), 1) << " | "
      << format_fixed(run_mean(m, "env/context_omitted_turns/mean"), 2) << " | " << format_fixed(run_mean(m, "env/summary_steps/mean"), 2)
      << " | " << format_fixed(run_mean(m, "env/context_overflow/mean"), 3) << " | " << format_fixed(m.wall_s, 0) << " |\n";
  }
  return o.str();
}

}  // namespace

std::string format_comparison(const CompareResult& r) {
  std::ostringstream o;
  const auto& b = r.baseline;
  if (r.kind == CompareKind::kContexts) {
    o << format_contexts(r);
    o << "\n" << b.num_prompts << " held-out prompts; greedy acc = greedy success rate (s.e. = standard error over "
      << "the prompts); gain = final minus the run's step-0 accuracy; prompt tokens, learner tokens (rows the learner "
      << "forwards), turns left out, summaries and overflows are means per trajectory over all training steps; "
      << "response tokens and turns are per greedy validation episode.\n";
    return o.str();
  }
  o << format_methods(r);
  o << "\n" << b.num_prompts << " held-out prompts; greedy acc = greedy success rate (s.e. = its standard error over "
    << "the prompts); gain = over the baseline";
  if (r.baseline_spread > 0) o << " (the runs' step-0 validations differed by up to " << format_fixed(r.baseline_spread) << ")";
  o << ".\n";
  return o.str();
}

}  // namespace agentr1::train

namespace agentr1::config_detail {

void Codec<train::MethodTable>::read(const json& v, train::MethodTable& out, const std::string& key,
                                     BindContext& ctx) {
  const char* rule = "a map of method name -> list of \"key=value\" config overrides";
  if (!v.is_object()) {
    ctx.errors.push_back(type_error(key, rule, v));
    return;
  }
  if (v.empty()) {
    ctx.errors.push_back(key + ": expected " + rule + " with at least one method, got {}");
    return;
  }
  train::MethodTable table;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& name = it.key();
    if (name.empty()) {
      ctx.errors.push_back(key + ": a method name is empty; names must be non-empty");
      continue;
    }
    const std::string entry = join_key(key, name);
    const json& list = it.value();
    if (!list.is_array()) {
      ctx.errors.push_back(type_error(entry, "a list of \"key=value\" config overrides", list));
      continue;
    }
    std::vector<std::string> overrides;
    for (size_t i = 0; i < list.size(); ++i) {
      const json& o = list[i];
      const bool ok = o.is_string() && (o.get<std::string>().find('=') != std::string::npos ||
                                        (o.get<std::string>().size() > 1 && o.get<std::string>()[0] == '~'));
      if (!ok) {
        ctx.errors.push_back(type_error(entry + "[" + std::to_string(i) + "]",
                                        "a \"key=value\" (or \"~key\") override string", o));
        continue;
      }
      overrides.push_back(o.get<std::string>());
    }
    table.emplace_back(name, std::move(overrides));
  }
  out = std::move(table);
}

json Codec<train::MethodTable>::write(const train::MethodTable& x) {
  json o = json::object();
  for (const auto& [name, overrides] : x) o[name] = overrides;
  return o;
}

}  // namespace agentr1::config_detail
