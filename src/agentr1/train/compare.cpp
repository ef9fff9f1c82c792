#include "agentr1/train/compare.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"

namespace agentr1::train {

namespace {

double metric(const json& j, const std::string& key, double fallback = NAN) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// Mean of critic/score/mean over the last `n` training-step lines of metrics.jsonl.
double last_train_reward(const std::string& metrics_path, int n) {
  std::ifstream f(metrics_path);
  std::vector<double> v;
  std::string line;
  while (std::getline(f, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    const double s = metric(j, "critic/score/mean");
    if (!std::isnan(s)) v.push_back(s);
  }
  if (v.empty()) return NAN;
  const size_t k = std::min(v.size(), static_cast<size_t>(n));
  double sum = 0;
  for (size_t i = v.size() - k; i < v.size(); ++i) sum += v[i];
  return sum / static_cast<double>(k);
}

std::string fmt(double x, int prec = 3) {
  if (std::isnan(x)) return "-";
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << x;
  return o.str();
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

}  // namespace

MethodTable parse_method_table(const json& methods) {
  const char* rule = "a map of method name -> list of \"key=value\" config overrides";
  AGENTR1_CHECK(methods.is_object() && !methods.empty(),
                "comparison method table must be " << rule << " with at least one method, got "
                                                   << describe_value(methods));
  MethodTable table;
  for (auto it = methods.begin(); it != methods.end(); ++it) {
    const std::string& name = it.key();
    AGENTR1_CHECK(!name.empty(), "comparison method table: a method name is empty; names must be non-empty");
    const json& list = it.value();
    AGENTR1_CHECK(list.is_array(), "comparison method '" << name << "' must be a list of \"key=value\" config "
                                                         << "overrides, got " << describe_value(list));
    std::vector<std::string> overrides;
    for (size_t i = 0; i < list.size(); ++i) {
      const json& o = list[i];
      const bool ok = o.is_string() && (o.get<std::string>().find('=') != std::string::npos ||
                                        (o.get<std::string>().size() > 1 && o.get<std::string>()[0] == '~'));
      AGENTR1_CHECK(ok, "comparison method '" << name << "': override " << i + 1
                                              << " must be a \"key=value\" (or \"~key\") string, got "
                                              << describe_value(o));
      overrides.push_back(o.get<std::string>());
    }
    table.emplace_back(name, std::move(overrides));
  }
  return table;
}

CompareRecipe parse_compare_recipe(const json& recipe) {
  AGENTR1_CHECK(recipe.is_object(), "comparison recipe must be a map with keys methods and default_methods, got "
                                        << describe_value(recipe));
  for (auto it = recipe.begin(); it != recipe.end(); ++it)
    AGENTR1_CHECK(it.key() == "methods" || it.key() == "default_methods",
                  "comparison recipe: unknown key '" << it.key() << "'; known: methods, default_methods");
  AGENTR1_CHECK(recipe.contains("methods"), "comparison recipe: missing 'methods' (the method table)");
  CompareRecipe r;
  r.methods = with_context("comparison recipe: methods", [&] { return parse_method_table(recipe["methods"]); });
  const json& d = recipe.contains("default_methods") ? recipe["default_methods"] : json();
  AGENTR1_CHECK(d.is_array() && !d.empty(),
                "comparison recipe: default_methods must be a non-empty list of method names, got "
                    << describe_value(d));
  for (const json& m : d) {
    AGENTR1_CHECK(m.is_string(), "comparison recipe: default_methods must list method names (strings), got "
                                     << describe_value(m));
    const std::string name = m.get<std::string>();
    with_context("comparison recipe: default_methods", [&] { return method_overrides(r.methods, name); });
    r.default_methods.push_back(name);
  }
  return r;
}

std::vector<std::string> known_methods(const MethodTable& table) {
  std::vector<std::string> out;
  for (const auto& m : table) out.push_back(m.first);
  return out;
}

std::vector<std::string> method_overrides(const MethodTable& table, const std::string& method) {
  for (const auto& m : table)
    if (m.first == method) return m.second;
  throw Error("unknown comparison method '" + method + "'; known: " +
              (table.empty() ? std::string("none (the method table is empty)") : join(known_methods(table))));
}

std::vector<std::pair<int64_t, double>> read_validation_curve(const std::string& metrics_path) {
  std::ifstream f(metrics_path);
  AGENTR1_CHECK(f.good(), "cannot read '" << metrics_path << "'");
  std::map<int64_t, double> by_step;  // a resumed run may validate a step twice: keep the last
  std::string line;
  while (std::getline(f, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step")) continue;
    const double s = metric(j, "val/success/greedy");
    if (!std::isnan(s)) by_step[j["step"].get<int64_t>()] = s;
  }
  return {by_step.begin(), by_step.end()};
}

void check_methods(const MethodTable& table, const std::vector<std::string>& methods) {
  AGENTR1_CHECK(!methods.empty(), "compare: no methods given; known: " << join(known_methods(table)));
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
  CompareResult res;
  res.out_dir = opts.out_dir;
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
      s = trainer.run(/*resume=*/false);
    }
    MethodResult m;
    m.method = method;
    m.run_dir = s.run_dir;
    m.baseline = s.baseline;
    m.final_eval = s.final_eval;
    m.wall_s = s.wall_s;
    m.curve = read_validation_curve(s.run_dir + "/metrics.jsonl");
    m.train_reward_last = last_train_reward(s.run_dir + "/metrics.jsonl", 5);
    if (i == 0) res.baseline = s.baseline;
    res.baseline_spread =
        std::max(res.baseline_spread, std::abs(s.baseline.greedy_success - res.baseline.greedy_success));
    res.methods.push_back(std::move(m));
  }
  RunDir out(opts.out_dir);
  const std::string table = format_comparison(res);
  out.write_text("comparison.md", table);
  json j;
  j["baseline"] = res.baseline.to_json();
  j["baseline_spread"] = res.baseline_spread;
  j["methods"] = json::array();
  for (const auto& m : res.methods) {
    json e;
    e["method"] = m.method;
    e["run_dir"] = m.run_dir;
    e["final"] = m.final_eval.to_json();
    e["train_reward_last5"] = std::isnan(m.train_reward_last) ? json(nullptr) : json(m.train_reward_last);
    e["wall_s"] = m.wall_s;
    e["curve"] = json::array();
    for (const auto& [step, acc] : m.curve) e["curve"].push_back({step, acc});
    j["methods"].push_back(e);
  }
  out.write_json("comparison.json", j);
  return res;
}

std::string format_comparison(const CompareResult& r) {
  std::ostringstream o;
  const auto& b = r.baseline;
  const std::string k = std::to_string(b.k);
  o << "| method | greedy acc | gain | mean@" << k << " | val reward | train reward (last 5) | response tokens | turns | "
    << "tool calls | wall s |\n";
  o << "|---|---|---|---|---|---|---|---|---|---|\n";
  o << "| training-free baseline | " << fmt(b.greedy_success) << " | - | " << (b.k > 0 ? fmt(b.mean_at_k) : "-")
    << " | " << fmt(b.greedy_reward) << " | - | " << fmt(b.mean_response_length, 1) << " | " << fmt(b.mean_turns, 2)
    << " | " << fmt(b.mean_tool_calls, 2) << " | - |\n";
  for (const auto& m : r.methods) {
    const auto& f = m.final_eval;
    const double gain = f.greedy_success - b.greedy_success;
    o << "| " << m.method << " | " << fmt(f.greedy_success) << " | " << (gain >= 0 ? "+" : "") << fmt(gain) << " | "
      << (f.k > 0 ? fmt(f.mean_at_k) : "-") << " | " << fmt(f.greedy_reward) << " | " << fmt(m.train_reward_last)
      << " | " << fmt(f.mean_response_length, 1) << " | " << fmt(f.mean_turns, 2) << " | "
      << fmt(f.mean_tool_calls, 2) << " | " << fmt(m.wall_s, 0) << " |\n";
  }
  o << "\n" << b.num_prompts << " held-out prompts; greedy acc = greedy success rate; gain = over the baseline";
  if (r.baseline_spread > 0) o << " (the runs' step-0 validations differed by up to " << fmt(r.baseline_spread) << ")";
  o << ".\n";
  return o.str();
}

}  // namespace agentr1::train
