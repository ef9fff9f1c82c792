// The benchmark: its recipe (configs/benchmark.yaml) parses strictly, its tables show the
// standard errors computed by hand, and a tiny grid (2 families x 2 methods x 1 step on a
// random model) keeps every run directory, writes the tables, evaluates alfworld's seen
// layouts, and reuses complete runs when run again.
#include "agentr1/experiments/benchmark.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/sft/default_recipe.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;

const std::string kSrc = AGENTR1_SOURCE_DIR;

MethodTable shipped_methods() {
  return parse_compare_recipe(load_yaml_file(kSrc + "/configs/compare.yaml")).methods;
}

json shipped_recipe_json() { return load_yaml_file(kSrc + "/configs/benchmark.yaml"); }

// The agentr1::Error message of fn(), or "(no error)".
template <typename Fn>
std::string error_of(Fn&& fn) {
  return agentr1::testing::error_of(std::forward<Fn>(fn), "(no error)");
}

// The layering of the agentr1 app without the built-in model: defaults < the family's
// recipe defaults < the benchmark layer < `overrides`.
json resolve_like_the_app(const json& layer, const std::vector<std::string>& overrides) {
  tasks::register_builtin_tasks();
  json tree = default_train_tree();
  const json& data = layer.at("data");
  for (const auto& o : tasks::make_task_family(data.at("task").get<std::string>(), data.value("task_kwargs", json::object()))
                           ->recipe_defaults())
    apply_override(tree, o);
  merge_json(tree, layer);
  for (const auto& o : overrides) apply_override(tree, o);
  return tree;
}

TEST(BenchmarkRecipeTest, ShippedRecipeRunsThePapersGridWithBothBudgets) {
  const MethodTable methods = shipped_methods();
  const BenchmarkRecipe r = parse_benchmark_recipe(shipped_recipe_json(), methods);
  EXPECT_EQ(r.default_methods, (std::vector<std::string>{"grpo", "ppo", "rloo", "reinforce_plus_plus", "reinforce"}));
  EXPECT_EQ(r.default_tasks, (std::vector<std::string>{"arithmetic", "hotpotqa", "alfworld", "webshop", "paper_search"}));
  EXPECT_EQ(r.tasks.at("paper_search").report_metrics, (std::vector<std::string>{"paper/recall"}));
  EXPECT_TRUE(r.tasks.at("alfworld").seen_eval);
  EXPECT_FALSE(r.tasks.at("arithmetic").seen_eval);
  EXPECT_TRUE(r.tasks.at("webshop").report_score);
  EXPECT_FALSE(r.tasks.at("hotpotqa").report_score);
  ASSERT_TRUE(r.budgets.count("quick") && r.budgets.count("default"));
  // Every budget x family x method makes a valid config (the app's layering).
  for (const char* budget : {"quick", "default"}) {
    for (const auto& family : r.default_tasks) {
      const json layer = family_layer(r, budget, family);
      EXPECT_EQ(layer["data"]["task"], family);
      for (const auto& m : r.default_methods) {
        json tree = resolve_like_the_app(layer, {"model.path=/nonexistent"});
        for (const auto& o : method_overrides(methods, m)) apply_override(tree, o);
        EXPECT_NO_THROW(load_train_config(tree)) << budget << " " << family << " " << m;
      }
    }
  }
  // The quick budget: the whole grid small (a few steps, a small validation set).
  const TrainConfig quick = load_train_config(resolve_like_the_app(family_layer(r, "quick", "alfworld"), {}));
  EXPECT_LE(quick.trainer.total_steps, 8);
  EXPECT_LE(quick.data.val_size, 64);
  EXPECT_EQ(quick.data.task, "alfworld");
  EXPECT_EQ(quick.data.task_kwargs["step_limit"], 10);
  EXPECT_EQ(quick.rollout.flow.max_steps, 10) << "the family's recipe default follows step_limit";
  // webshop's quick cell: fewer prompts and the last 2 turns in context (its rows are long).
  const TrainConfig shop = load_train_config(resolve_like_the_app(family_layer(r, "quick", "webshop"), {}));
  EXPECT_EQ(shop.data.train_batch_size, 2);
  EXPECT_EQ(shop.rollout.flow.max_steps, 6);
  EXPECT_EQ(shop.rollout.flow.env_kwargs["context"]["keep_last"], 2);
  const TrainConfig full = load_train_config(resolve_like_the_app(family_layer(r, "default", "arithmetic"), {}));
  EXPECT_GT(full.trainer.total_steps, quick.trainer.total_steps);
  EXPECT_GE(full.data.val_size, 100) << "a readable standard error";

  // One built-in model per family, each trained on the prompts its RL runs see: its own
  // directory; the demonstrations' kwargs are the family's data.task_kwargs, replayed
  // under the context its runs use (webshop's 2-turn window).
  std::set<std::string> dirs;
  for (const auto& family : r.default_tasks) {
    DefaultModelOptions o;
    o.apply_json(family_builtin_model(r, family));
    EXPECT_TRUE(dirs.insert(o.dir).second) << family << " shares " << o.dir;
    for (const char* budget : {"quick", "default"}) {
      const TrainConfig c = load_train_config(resolve_like_the_app(family_layer(r, budget, family), {}));
      if (family == "arithmetic") {
        EXPECT_TRUE(o.tasks.empty()) << "the default job's calculator model";
        EXPECT_EQ(o.to_json(), DefaultModelOptions().to_json()) << "reuses runs/_builtin/model as built by `agentr1 train`";
        continue;
      }
      ASSERT_TRUE(o.tasks.contains(family)) << family;
      for (const auto& [k, v] : o.tasks[family]["kwargs"].items())
        EXPECT_EQ(c.data.task_kwargs[k], v) << budget << " " << family << " " << k;
      if (!o.demo_contexts.empty()) {
        EXPECT_EQ(o.demo_contexts[0], c.rollout.flow.env_kwargs["context"]) << budget << " " << family;
      }
    }
  }
  // hotpotqa's second SFT stage starts from a first one built in a directory of its own.
  DefaultModelOptions hot;
  hot.apply_json(family_builtin_model(r, "hotpotqa"));
  EXPECT_NE(hot.base_options().dir, hot.dir);
  EXPECT_EQ(hot.base_options().tasks, hot.tasks);
  EXPECT_LT(hot.sft.optim.lr, hot.base_options().sft.optim.lr);
}

// The recipe binds through visit(): the parsed values are the YAML's, and an empty (null)
// tree reads as {} (so layers still merge as maps).
TEST(BenchmarkRecipeTest, ParsedValuesAreTheYamlsAndEmptyTreesAreMaps) {
  const json y = shipped_recipe_json();
  const BenchmarkRecipe r = parse_benchmark_recipe(y, shipped_methods());
  EXPECT_EQ(r.builtin_model, y["builtin_model"]);
  EXPECT_EQ(r.default_methods, y["default_methods"].get<std::vector<std::string>>());
  EXPECT_EQ(r.default_tasks, y["default_tasks"].get<std::vector<std::string>>());
  ASSERT_EQ(r.tasks.size(), y["tasks"].size());
  for (const auto& [family, t] : y["tasks"].items()) {
    const BenchmarkTask& p = r.tasks.at(family);
    EXPECT_EQ(p.config, t.value("config", json::object())) << family;
    EXPECT_EQ(p.builtin_model, t.value("builtin_model", json::object())) << family;
    EXPECT_EQ(p.seen_eval, t.value("seen_eval", false)) << family;
    EXPECT_EQ(p.report_score, t.value("report_score", false)) << family;
  }
  ASSERT_EQ(r.budgets.size(), y["budgets"].size());
  for (const auto& [name, b] : y["budgets"].items()) {
    EXPECT_EQ(r.budgets.at(name).config, b["config"]) << name;
    ASSERT_EQ(r.budgets.at(name).task_config.size(), b["tasks"].size()) << name;
    for (const auto& [family, tree] : b["tasks"].items()) EXPECT_EQ(r.budgets.at(name).task_config.at(family), tree);
  }
  json j = y;
  j["builtin_model"] = nullptr;
  j["tasks"]["arithmetic"]["config"] = nullptr;
  j["budgets"]["quick"]["tasks"]["alfworld"] = nullptr;
  const BenchmarkRecipe e = parse_benchmark_recipe(j, shipped_methods());
  EXPECT_EQ(e.builtin_model, json::object());
  EXPECT_EQ(e.tasks.at("arithmetic").config, json::object());
  EXPECT_EQ(e.budgets.at("quick").task_config.at("alfworld"), json::object());
  EXPECT_EQ(family_layer(e, "quick", "alfworld")["data"]["task"], "alfworld");
}

TEST(BenchmarkRecipeTest, ErrorsNameTheKeyAndTheRule) {
  const MethodTable methods = shipped_methods();
  auto err = [&](const std::function<void(json&)>& edit) {
    json j = shipped_recipe_json();
    edit(j);
    return error_of([&] { parse_benchmark_recipe(j, methods); });
  };
  auto has = [](const std::string& e, const std::string& part) { return e.find(part) != std::string::npos; };
  std::string e = err([](json& j) { j["budget"] = 1; });
  EXPECT_TRUE(has(e, "unknown config key 'budget'") && has(e, "did you mean 'budgets'?") &&
              has(e, "Valid keys at the top level: builtin_model, default_methods"))
      << e;
  e = err([](json& j) { j["default_methods"] = {"grpo", "dpo"}; });
  EXPECT_TRUE(has(e, "default_methods") && has(e, "unknown comparison method 'dpo'; known: grpo")) << e;
  e = err([](json& j) { j["default_methods"] = json::array(); });
  EXPECT_TRUE(has(e, "default_methods must be a non-empty list")) << e;
  e = err([](json& j) { j["default_methods"] = {"grpo", "grpo"}; });
  EXPECT_TRUE(has(e, "'grpo' is listed twice")) << e;
  e = err([](json& j) { j["default_tasks"] = {"arithmetic", "sudoku"}; });
  EXPECT_TRUE(has(e, "default_tasks: unknown task family 'sudoku'; known: alfworld, arithmetic")) << e;
  e = err([](json& j) { j["tasks"].erase("webshop"); });
  EXPECT_TRUE(has(e, "default_tasks names 'webshop' but tasks has no entry")) << e;
  e = err([](json& j) { j["tasks"]["sudoku"] = json::object(); });
  EXPECT_TRUE(has(e, "tasks: unknown task family 'sudoku'")) << e;
  e = err([](json& j) { j["tasks"]["alfworld"]["seen_eval"] = "yes"; });
  EXPECT_TRUE(has(e, "tasks.alfworld.seen_eval: expected a bool (true or false), got \"yes\"")) << e;
  e = err([](json& j) { j["tasks"]["alfworld"]["seen"] = true; });
  EXPECT_TRUE(has(e, "unknown config key 'tasks.alfworld.seen'") &&
              has(e, "Valid keys under 'tasks.alfworld': config, seen_eval, report_score, report_metrics, builtin_model."))
      << e;
  e = err([](json& j) { j["tasks"]["hotpotqa"]["config"] = json::array({1}); });
  EXPECT_TRUE(has(e, "tasks.hotpotqa: 'config' must be a map (a config tree; empty = none), got a list [1]")) << e;
  e = err([](json& j) { j["budgets"].erase("quick"); });
  EXPECT_TRUE(has(e, "budgets.quick is missing")) << e;
  e = err([](json& j) { j["budgets"]["quick"]["config"] = 3; });
  EXPECT_TRUE(has(e, "budgets.quick: 'config' must be a map (a config tree; empty = none), got 3")) << e;
  e = err([](json& j) { j["budgets"]["quick"]["steps"] = 3; });
  EXPECT_TRUE(has(e, "unknown config key 'budgets.quick.steps'") &&
              has(e, "Valid keys under 'budgets.quick': config, tasks."))
      << e;
  e = err([](json& j) { j["budgets"]["default"]["tasks"]["chess"] = json::object(); });
  EXPECT_TRUE(has(e, "budgets.default: tasks: unknown task family 'chess'; known: alfworld")) << e;
  e = err([](json& j) { j["budgets"]["default"]["tasks"]["alfworld"] = json::array({"rollout.n=2"}); });
  EXPECT_TRUE(has(e, "budgets.default: 'tasks.alfworld' must be a map")) << e;
  e = err([](json& j) { j["builtin_model"]["demoz"] = 1; });
  EXPECT_TRUE(has(e, "builtin_model") && has(e, "unknown config key 'builtin_model.demoz'")) << e;
  e = err([](json& j) { j.erase("budgets"); });
  EXPECT_TRUE(has(e, "budgets.quick is missing (budgets must have quick and default)")) << e;
  e = err([](json& j) { j["tasks"]["hotpotqa"]["builtin_model"] = {{"sft_epochz", 4}}; });
  EXPECT_TRUE(has(e, "unknown config key 'tasks.hotpotqa.builtin_model.sft_epochz'") &&
              has(e, "did you mean 'tasks.hotpotqa.builtin_model.sft_epochs'?"))
      << e;
  e = err([](json& j) { j["tasks"]["hotpotqa"]["builtin_model"] = 4; });
  EXPECT_TRUE(has(e, "tasks.hotpotqa: 'builtin_model' must be a map")) << e;
  // A model per family: the family's keys replace the shared ones key by key (its tasks
  // map replaces the shared tasks map, it is not merged into it).
  {
    json j = shipped_recipe_json();
    j["tasks"]["arithmetic"].erase("builtin_model");
    j["builtin_model"] = {{"dir", "runs/_builtin/shared"}, {"sft_lr", 0.002},
                          {"tasks", {{"arithmetic", {{"demos", 8}}}, {"hotpotqa", {{"demos", 8}}}}}};
    j["tasks"]["hotpotqa"]["builtin_model"] = {{"dir", "runs/_builtin/hotpot"},
                                               {"tasks", {{"hotpotqa", {{"demos", 96}}}}}};
    const BenchmarkRecipe fr = parse_benchmark_recipe(j, methods);
    const json hot = family_builtin_model(fr, "hotpotqa");
    EXPECT_EQ(hot["dir"], "runs/_builtin/hotpot");
    EXPECT_EQ(hot["sft_lr"], 0.002);
    EXPECT_EQ(hot["tasks"], json({{"hotpotqa", {{"demos", 96}}}}));
    EXPECT_EQ(family_builtin_model(fr, "arithmetic"), j["builtin_model"]);
  }
  // Names used at run time.
  const BenchmarkRecipe r = parse_benchmark_recipe(shipped_recipe_json(), methods);
  e = error_of([&] { family_layer(r, "slow", "arithmetic"); });
  EXPECT_TRUE(has(e, "unknown budget 'slow'; known: default, quick")) << e;
  e = error_of([&] { family_layer(r, "quick", "sudoku"); });
  EXPECT_TRUE(has(e, "unknown task 'sudoku'; known")) << e;
}

EvalResult eval_of(double success, double reward, int64_t n) {
  EvalResult e;
  e.num_prompts = n;
  e.greedy_success = success;
  e.greedy_reward = reward;
  e.mean_turns = 3;
  e.mean_tool_calls = 1.5;
  e.mean_response_length = 40;
  return e;
}

// Standard errors by hand: sqrt(p (1 - p) / n).
//   0.5 over 100 -> sqrt(0.0025) = 0.05;   0.8 over 100 -> sqrt(0.0016) = 0.04
//   0.9 over 100 -> 0.03;   0.1 over 100 -> 0.03;   0.36 over 36 -> sqrt(0.2304 / 36) = 0.08
//   0.64 over 36 -> 0.08
TEST(BenchmarkTableTest, RowsShowSuccessWithHandComputedStandardErrors) {
  BenchmarkResult r;
  r.budget = "quick";
  r.out_dir = "runs/x";
  FamilyResult alf;
  alf.family = "alfworld";
  alf.seen_eval = true;
  alf.game = true;
  alf.comparison.baseline = eval_of(0.5, 0.5, 100);
  MethodResult g;
  g.method = "grpo";
  g.final_eval = eval_of(0.8, 0.8, 100);
  g.wall_s = 41.6;
  alf.comparison.methods.push_back(g);
  alf.baseline_seen = eval_of(0.1, 0.1, 100);
  alf.seen.push_back(eval_of(0.9, 0.9, 100));
  alf.reused = {false};
  FamilyResult web;
  web.family = "webshop";
  web.report_score = true;
  web.game = true;
  web.comparison.baseline = eval_of(0.36, 0.625, 36);
  MethodResult w = g;
  w.final_eval = eval_of(0.64, 0.8125, 36);
  web.comparison.methods.push_back(w);
  web.reused = {true};
  r.families = {alf, web};

  const std::string a = format_family(alf);
  EXPECT_NE(a.find("| method | success ± s.e. (unseen) | success ± s.e. (seen) | mean reward |"), std::string::npos) << a;
  EXPECT_NE(a.find("| actions | wall s |"), std::string::npos) << a;
  EXPECT_NE(a.find("| training-free baseline | 0.500 ± 0.050 | 0.100 ± 0.030 | 0.500 | 40.0 | 3.00 | 3.00 | - |"),
            std::string::npos)
      << a;
  EXPECT_NE(a.find("| grpo | 0.800 ± 0.040 | 0.900 ± 0.030 | 0.800 | 40.0 | 3.00 | 3.00 | 42 |"), std::string::npos) << a;
  const std::string wtab = format_family(web);
  // Score = 100 x mean reward: 62.5 and 81.2 (81.25 rounded to even in fixed notation).
  EXPECT_NE(wtab.find("| training-free baseline | 0.360 ± 0.080 | 62.5 | 0.625 |"), std::string::npos) << wtab;
  EXPECT_NE(wtab.find("| grpo | 0.640 ± 0.080 | 81."), std::string::npos) << wtab;
  EXPECT_EQ(wtab.find("(seen)"), std::string::npos) << wtab;

  const std::string s = format_summary(r);
  EXPECT_NE(s.find("| task | training-free baseline | grpo |"), std::string::npos) << s;
  EXPECT_NE(s.find("| alfworld (unseen) | 0.500 ± 0.050 | 0.800 ± 0.040 |"), std::string::npos) << s;
  EXPECT_NE(s.find("| alfworld (seen) | 0.100 ± 0.030 | 0.900 ± 0.030 |"), std::string::npos) << s;
  EXPECT_NE(s.find("| webshop | 0.360 ± 0.080 | 0.640 ± 0.080 |"), std::string::npos) << s;
  EXPECT_NE(s.find("| webshop (score) | 62.5 |"), std::string::npos) << s;

  const json j = benchmark_json(r);
  ASSERT_EQ(j["families"].size(), 2u);
  EXPECT_NEAR(j["families"][0]["methods"][0]["final"]["greedy_success_stderr"].get<double>(), 0.04, 1e-12);
  EXPECT_NEAR(j["families"][0]["methods"][0]["seen"]["greedy_success_stderr"].get<double>(), 0.03, 1e-12);
  EXPECT_NEAR(j["families"][1]["baseline"]["score"].get<double>(), 62.5, 1e-9);
  EXPECT_EQ(j["families"][1]["methods"][0]["reused"], true);
  ASSERT_EQ(j["summary"].size(), 4u);  // alfworld unseen, seen; webshop success, score
  EXPECT_EQ(j["summary"][1]["task"], "alfworld (seen)");
  EXPECT_NEAR(j["summary"][1]["methods"]["grpo"].get<double>(), 0.9, 1e-12);
  EXPECT_NEAR(j["summary"][3]["baseline"].get<double>(), 62.5, 1e-9);
}

// report_metrics: a row per env metric in the summary and a column in the family's table,
// "-" where a run has no such metric; the values survive EvalResult's JSON (reused cells).
TEST(BenchmarkTableTest, ReportMetricsShowEnvMetricMeans) {
  BenchmarkResult r;
  r.budget = "quick";
  r.out_dir = "runs/x";
  FamilyResult f;
  f.family = "paper_search";
  f.report_metrics = {"paper/recall"};
  f.comparison.baseline = eval_of(0.25, 0.5, 100);
  f.comparison.baseline.env_metrics["paper/recall"] = 0.375;
  MethodResult g;
  g.method = "grpo";
  g.final_eval = EvalResult::from_json(eval_of(0.5, 1.0, 100).to_json());
  g.final_eval.env_metrics["paper/recall"] = 0.625;
  g.final_eval = EvalResult::from_json(g.final_eval.to_json());
  MethodResult p = g;
  p.method = "ppo";
  p.final_eval.env_metrics.clear();
  f.comparison.methods = {g, p};
  f.reused = {false, false};
  r.families = {f};
  const std::string s = format_summary(r);
  EXPECT_NE(s.find("| paper_search | 0.250 ± 0.043 | 0.500 ± 0.050 | 0.500 ± 0.050 |"), std::string::npos) << s;
  EXPECT_NE(s.find("| paper_search (paper/recall) | 0.375 | 0.625 | - |"), std::string::npos) << s;
  const std::string t = format_family(f);
  EXPECT_NE(t.find("| success ± s.e. | paper/recall | mean reward |"), std::string::npos) << t;
  EXPECT_NE(t.find("| grpo | 0.500 ± 0.050 | 0.625 | 1.000 |"), std::string::npos) << t;
}

// A tiny grid end to end: 2 families x 2 methods x 1 RL step, 2 validation prompts.
TEST(BenchmarkTest, TinyGridKeepsRunsWritesTablesAndReusesCompleteRuns) {
  const std::string dir = testing::make_tiny_model_dir("benchmark");
  json rj = shipped_recipe_json();
  rj.erase("builtin_model");
  rj["budgets"]["quick"] = {{"config",
                             {{"trainer", {{"total_steps", 1}, {"test_freq", 1}}},
                              {"data", {{"train_batch_size", 2}, {"val_size", 2}, {"train_size", 8}}},
                              {"rollout", {{"n", 2}, {"val_k", 0}}}}},
                            {"tasks", {{"alfworld", {{"data", {{"task_kwargs", {{"step_limit", 2}}}}}}}}}};
  const BenchmarkRecipe recipe = parse_benchmark_recipe(rj, shipped_methods());
  std::vector<std::string> extra = {"model.path=" + dir + "/model", "trainer.threads=1", "rollout.max_new_tokens=8",
                                    "rollout.max_steps=2", "rollout.max_prompt_tokens=4000", "trainer.progress=false",
                                    "trainer.dump_trajectories=0", "actor.ppo_mini_batch_size=0"};
  int resolved = 0;
  const ResolveTree resolve = [&](const std::string&, const json& layer) {
    ++resolved;
    return resolve_like_the_app(layer, extra);
  };
  BenchmarkOptions o;
  o.method_table = shipped_methods();
  o.methods = {"grpo", "rloo"};
  o.tasks = {"arithmetic", "alfworld"};
  o.budget = "quick";
  o.out_dir = dir + "/bench";
  const BenchmarkResult r = run_benchmark(recipe, o, resolve);
  EXPECT_EQ(resolved, 2);
  ASSERT_EQ(r.families.size(), 2u);
  for (const auto& f : r.families) {
    ASSERT_EQ(f.comparison.methods.size(), 2u) << f.family;
    EXPECT_EQ(f.comparison.baseline_spread, 0.0) << "same checkpoint and seeds";
    EXPECT_EQ(f.comparison.baseline.num_prompts, 2);
    for (const auto& m : f.comparison.methods) {
      const std::string run = o.out_dir + "/" + f.family + "/" + m.method;
      EXPECT_EQ(m.run_dir, run);
      EXPECT_TRUE(fs::exists(run + "/summary.json")) << run;
      EXPECT_TRUE(fs::exists(run + "/metrics.jsonl")) << run;
      EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000001/model.safetensors")) << run;
      EXPECT_EQ(m.curve.size(), 2u) << run;  // steps 0 and 1
    }
    EXPECT_TRUE(fs::exists(o.out_dir + "/" + f.family + "/comparison.md"));
  }
  EXPECT_FALSE(r.families[0].game);
  EXPECT_TRUE(r.families[1].game);
  // alfworld's seen layouts: the baseline and each method's final checkpoint.
  const FamilyResult& alf = r.families[1];
  ASSERT_TRUE(alf.baseline_seen.has_value());
  EXPECT_EQ(alf.baseline_seen->num_prompts, 2);
  ASSERT_EQ(alf.seen.size(), 2u);
  EXPECT_TRUE(fs::exists(o.out_dir + "/alfworld/grpo/seen_eval.json"));
  EXPECT_TRUE(fs::exists(o.out_dir + "/alfworld/baseline_seen_eval.json"));
  EXPECT_FALSE(r.families[0].baseline_seen.has_value());

  const std::string md = read_text_file(o.out_dir + "/benchmark.md");
  for (const char* row : {"### arithmetic", "### alfworld", "| training-free baseline |", "| grpo |", "| rloo |",
                          "| arithmetic |", "| alfworld (unseen) |", "| alfworld (seen) |"})
    EXPECT_NE(md.find(row), std::string::npos) << row << "\n" << md;
  const json j = json::parse(read_text_file(o.out_dir + "/benchmark.json"));
  ASSERT_EQ(j["families"].size(), 2u);
  EXPECT_EQ(j["families"][1]["methods"][0]["seen"]["num_prompts"], 2);
  EXPECT_EQ(j["families"][0]["methods"][1]["method"], "rloo");

  // Run again: every cell is complete with the same config, so nothing runs.
  const auto mtime = fs::last_write_time(o.out_dir + "/arithmetic/grpo/metrics.jsonl");
  const BenchmarkResult again = run_benchmark(recipe, o, resolve);
  for (const auto& f : again.families)
    for (bool reused : f.reused) EXPECT_TRUE(reused) << f.family;
  EXPECT_EQ(fs::last_write_time(o.out_dir + "/arithmetic/grpo/metrics.jsonl"), mtime);
  EXPECT_EQ(again.families[1].seen[1].greedy_success, alf.seen[1].greedy_success);
  EXPECT_EQ(again.families[0].comparison.methods[1].final_eval.greedy_reward,
            r.families[0].comparison.methods[1].final_eval.greedy_reward);

  // Another thread count is the same experiment (what --jobs workers run with): reused,
  // and the plan says so without running anything.
  extra[1] = "trainer.threads=2";
  const std::vector<BenchmarkCell> planned = plan_benchmark(recipe, o, resolve);
  ASSERT_EQ(planned.size(), 4u);
  for (const BenchmarkCell& c : planned) {
    EXPECT_TRUE(c.reuse) << c.family << " / " << c.method;
    EXPECT_EQ(c.dir, o.out_dir + "/" + c.family + "/" + c.method);
  }
  const BenchmarkResult other_threads = run_benchmark(recipe, o, resolve);
  for (const auto& f : other_threads.families)
    for (bool reused : f.reused) EXPECT_TRUE(reused) << f.family;
  EXPECT_EQ(fs::last_write_time(o.out_dir + "/arithmetic/grpo/metrics.jsonl"), mtime);
  extra[1] = "trainer.threads=1";

  // cells_only (a --jobs worker): the cell runs, no tables and no baseline seen evaluation.
  {
    BenchmarkOptions w = o;
    w.tasks = {"alfworld"};
    w.methods = {"grpo"};
    w.out_dir = dir + "/bench_worker";
    w.cells_only = true;
    const BenchmarkResult wr = run_benchmark(recipe, w, resolve);
    ASSERT_EQ(wr.families.size(), 1u);
    EXPECT_FALSE(wr.families[0].baseline_seen.has_value());
    EXPECT_EQ(wr.families[0].seen.size(), 1u) << "the method's seen evaluation runs in the worker";
    EXPECT_TRUE(fs::exists(w.out_dir + "/alfworld/grpo/summary.json"));
    EXPECT_TRUE(fs::exists(w.out_dir + "/alfworld/grpo/seen_eval.json"));
    EXPECT_FALSE(fs::exists(w.out_dir + "/benchmark.md"));
    EXPECT_FALSE(fs::exists(w.out_dir + "/alfworld/comparison.md"));
    EXPECT_FALSE(fs::exists(w.out_dir + "/alfworld/baseline_seen_eval.json"));
    // The tables' pass reuses the cell and evaluates the baseline on seen layouts.
    w.cells_only = false;
    const BenchmarkResult tables = run_benchmark(recipe, w, resolve);
    EXPECT_TRUE(tables.families[0].reused[0]);
    EXPECT_TRUE(tables.families[0].baseline_seen.has_value());
    EXPECT_TRUE(fs::exists(w.out_dir + "/benchmark.md"));
    EXPECT_EQ(tables.families[0].seen[0].greedy_success, wr.families[0].seen[0].greedy_success);
  }

  // Another config in the same directory is an Error before anything runs.
  extra.push_back("trainer.seed=7");
  const std::string e = error_of([&] { run_benchmark(recipe, o, resolve); });
  EXPECT_NE(e.find("already holds a run of arithmetic / grpo made with another config"), std::string::npos) << e;
  EXPECT_NE(e.find("--overwrite"), std::string::npos) << e;
  EXPECT_EQ(fs::last_write_time(o.out_dir + "/arithmetic/grpo/metrics.jsonl"), mtime);
  // Bad names fail first.
  BenchmarkOptions bad = o;
  bad.tasks = {"arithmetic", "arithmetic"};
  EXPECT_NE(error_of([&] { run_benchmark(recipe, bad, resolve); }).find("'arithmetic' is listed twice"),
            std::string::npos);
  bad = o;
  bad.methods = {"grpo", "dpo"};
  EXPECT_NE(error_of([&] { run_benchmark(recipe, bad, resolve); }).find("unknown comparison method 'dpo'"),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::train
