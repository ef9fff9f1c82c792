#include "agentr1/train/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

const std::vector<std::pair<std::string, std::vector<std::string>>>& method_table() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> kMethods = {
      {"grpo", {"algorithm.adv_estimator=grpo"}},
      {"ppo", {"algorithm.adv_estimator=gae"}},
      {"rloo", {"algorithm.adv_estimator=rloo"}},
      {"reinforce_plus_plus", {"algorithm.adv_estimator=reinforce_plus_plus"}},
      {"reinforce_plus_plus_baseline", {"algorithm.adv_estimator=reinforce_plus_plus_baseline"}},
      {"turn_rloo", {"algorithm.adv_estimator=turn_rloo"}},
      {"gspo",
       {"algorithm.adv_estimator=grpo", "actor.policy_loss=gspo", "actor.loss_agg_mode=seq-mean-token-mean"}},
  };
  return kMethods;
}

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

// Data file (one block per method: "step success") + gnuplot script; runs gnuplot.
void write_plot(const CompareResult& r, const CompareOptions& opts) {
  RunDir out(r.out_dir);
  std::ostringstream dat;
  for (const auto& m : r.methods) {
    dat << "# " << m.method << "\n";
    for (const auto& [step, acc] : m.curve) dat << step << " " << acc << "\n";
    dat << "\n\n";
  }
  out.write_text("val_accuracy.dat", dat.str());
  std::ostringstream gp;
  gp << "# agentr1 compare: held-out greedy accuracy over RL steps (gnuplot val_accuracy.gp)\n"
     << "set terminal png size 900,560 noenhanced\n"
     << "set output '" << r.out_dir << "/val_accuracy.png'\n"
     << "set title 'Held-out greedy accuracy, arithmetic tool task'\n"
     << "set xlabel 'RL step'\nset ylabel 'greedy success rate'\nset yrange [0:1]\n"
     << "set key bottom right\nset grid\n"
     << "plot ";
  for (size_t i = 0; i < r.methods.size(); ++i)
    gp << "'" << r.out_dir << "/val_accuracy.dat' index " << i << " with linespoints lw 2 title '"
       << r.methods[i].method << "', ";
  gp << r.baseline.greedy_success << " with lines dt 2 lc rgb 'black' title 'training-free baseline'\n";
  out.write_text("val_accuracy.gp", gp.str());
  if (!opts.plot) return;
  const std::string cmd = "gnuplot '" + r.out_dir + "/val_accuracy.gp' 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    AGENTR1_LOG(WARN) << "compare: gnuplot failed (exit " << rc << "), no val_accuracy.png; the data and "
                      << "script are in " << r.out_dir << ". HINT: apt-get install gnuplot-nox, then run "
                      << "gnuplot " << r.out_dir << "/val_accuracy.gp";
  }
}

}  // namespace

std::vector<std::string> known_methods() {
  std::vector<std::string> out;
  for (const auto& m : method_table()) out.push_back(m.first);
  return out;
}

std::vector<std::string> method_overrides(const std::string& method) {
  for (const auto& m : method_table())
    if (m.first == method) return m.second;
  std::string known;
  for (const auto& k : known_methods()) known += (known.empty() ? "" : ", ") + k;
  throw Error("unknown comparison method '" + method + "'; known: " + known);
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

CompareResult run_comparison(const json& base_tree, const CompareOptions& opts) {
  AGENTR1_CHECK(!opts.methods.empty(), "compare: no methods given; known: grpo, ppo, rloo, reinforce_plus_plus, ...");
  for (const auto& m : opts.methods) method_overrides(m);  // fail before any run
  CompareResult res;
  res.out_dir = opts.out_dir;
  make_dirs(opts.out_dir);
  for (size_t i = 0; i < opts.methods.size(); ++i) {
    const std::string& method = opts.methods[i];
    json tree = base_tree;
    for (const auto& o : method_overrides(method)) apply_override(tree, o);
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
  write_plot(res, opts);
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
