// The comparison: the method table is data (configs/compare.yaml) with clear errors, and
// run_comparison runs each method from the same checkpoint and seeds, writing a table
// and JSON with per-method validation curves (the plot is the app's job).
#include "agentr1/experiments/compare.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/model/transformer.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/sft/default_recipe.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;

std::string make_tiny_model_dir() { return testing::make_tiny_model_dir("cmp"); }

// The shipped recipe, as the app reads it (from its data dir copy of this file).
CompareRecipe shipped_recipe() {
  return parse_compare_recipe(load_yaml_file(std::string(AGENTR1_SOURCE_DIR) + "/configs/compare.yaml"));
}

using agentr1::testing::error_of;

TEST(CompareRecipeTest, ShippedRecipeHasEveryMethodInOrder) {
  const CompareRecipe r = shipped_recipe();
  EXPECT_EQ(known_methods(r.methods),
            (std::vector<std::string>{"grpo", "ppo", "rloo", "reinforce_plus_plus", "reinforce",
                                      "reinforce_plus_plus_baseline", "turn_rloo", "gspo", "gigpo", "steppo",
                                      "steppo_hotpotqa"}));
  EXPECT_EQ(method_overrides(r.methods, "reinforce"),
            (std::vector<std::string>{"algorithm.adv_estimator=reinforce", "actor.policy_loss=reinforce"}));
  EXPECT_EQ(r.default_methods, (std::vector<std::string>{"grpo", "ppo", "rloo", "reinforce_plus_plus"}));
  EXPECT_EQ(method_overrides(r.methods, "ppo"), std::vector<std::string>{"algorithm.adv_estimator=gae"});
  EXPECT_EQ(method_overrides(r.methods, "gspo"),
            (std::vector<std::string>{"algorithm.adv_estimator=grpo", "actor.policy_loss=gspo",
                                      "actor.loss_agg_mode=seq-mean-token-mean"}));
  // A method's config: the defaults under its overrides.
  const auto method_config = [&](const std::string& name) {
    json tree = default_train_tree();
    for (const auto& o : method_overrides(r.methods, name)) apply_override(tree, o);
    return load_train_config(tree);
  };
  // StepPO is the composition of existing parts (see configs/compare.yaml).
  {
    const TrainConfig c = method_config("steppo");
    EXPECT_EQ(c.algorithm.adv_estimator, "gae");
    EXPECT_EQ(c.algorithm.estimator.whiten_level, "step");
    EXPECT_EQ(c.actor.policy_loss, "gspo");
    EXPECT_FALSE(c.actor.merge_prefix_steps);
    // The authors' ALFWorld / WebShop scripts (examples/run_{alfworld,webshop}_step_adv.sh).
    EXPECT_DOUBLE_EQ(c.actor.clip_ratio_low, 0.0003);
    EXPECT_DOUBLE_EQ(c.actor.clip_ratio_high, 0.0004);
    EXPECT_DOUBLE_EQ(c.actor.loss.clip_ratio_c, 10.0);
    EXPECT_TRUE(c.actor.use_kl_loss);
    EXPECT_DOUBLE_EQ(c.actor.kl_loss_coef, 0.001);
    EXPECT_EQ(c.actor.kl_loss_type_name, "low_var_kl");
    EXPECT_DOUBLE_EQ(c.algorithm.estimator.gamma, 1.0);
    EXPECT_DOUBLE_EQ(c.algorithm.estimator.lam, 1.0);
  }
  {
    // HotpotQA's script: gamma 0.99, no KL loss, verl's default clip 0.2 / 0.2.
    const TrainConfig c = method_config("steppo_hotpotqa");
    EXPECT_EQ(c.algorithm.adv_estimator, "gae");
    EXPECT_EQ(c.algorithm.estimator.whiten_level, "step");
    EXPECT_EQ(c.actor.policy_loss, "gspo");
    EXPECT_DOUBLE_EQ(c.algorithm.estimator.gamma, 0.99);
    EXPECT_FALSE(c.actor.use_kl_loss);
    EXPECT_DOUBLE_EQ(c.actor.clip_ratio_low, 0.2);
    EXPECT_DOUBLE_EQ(c.actor.clip_ratio_high, 0.2);
  }
  // Every method makes a valid config out of the defaults.
  for (const auto& kv : r.methods) EXPECT_NO_THROW(method_config(kv.first)) << kv.first;
}

// The recipes bind through visit(): the parsed tables are the YAML's, in file order.
TEST(CompareRecipeTest, ParsedValuesAreTheYamls) {
  const json y = load_yaml_file(std::string(AGENTR1_SOURCE_DIR) + "/configs/compare.yaml");
  const CompareRecipe r = shipped_recipe();
  EXPECT_EQ(r.default_methods, y["default_methods"].get<std::vector<std::string>>());
  ASSERT_EQ(r.methods.size(), y["methods"].size());
  size_t i = 0;
  for (const auto& [name, overrides] : y["methods"].items()) {
    EXPECT_EQ(r.methods[i].first, name);
    EXPECT_EQ(r.methods[i].second, overrides.get<std::vector<std::string>>()) << name;
    ++i;
  }
  const json c = load_yaml_file(std::string(AGENTR1_SOURCE_DIR) + "/configs/contexts.yaml");
  const ContextRecipe cr = parse_context_recipe(c);
  EXPECT_EQ(cr.builtin_model, c["builtin_model"]);
  EXPECT_EQ(cr.config, c["config"]);
  EXPECT_EQ(cr.default_contexts, c["default_contexts"].get<std::vector<std::string>>());
  ASSERT_EQ(cr.contexts.size(), c["contexts"].size());
  i = 0;
  for (const auto& [name, overrides] : c["contexts"].items()) {
    EXPECT_EQ(cr.contexts[i].first, name);
    EXPECT_EQ(cr.contexts[i].second, overrides.get<std::vector<std::string>>()) << name;
    ++i;
  }
}

TEST(CompareRecipeTest, UnknownMethodListsTheKnownOnes) {
  const CompareRecipe r = shipped_recipe();
  EXPECT_EQ(error_of([&] { method_overrides(r.methods, "dpo"); }),
            "unknown comparison method 'dpo'; known: grpo, ppo, rloo, reinforce_plus_plus, reinforce, "
            "reinforce_plus_plus_baseline, turn_rloo, gspo, gigpo, steppo, steppo_hotpotqa");
}

TEST(CompareRecipeTest, MalformedTableNamesTheEntryAndTheRule) {
  EXPECT_EQ(parse_method_table(yaml_to_json("a: [x=1, '~y']\nb: []\n")),
            (MethodTable{{"a", {"x=1", "~y"}}, {"b", {}}}));
  const std::string not_map = error_of([] { parse_method_table(yaml_to_json("[grpo, ppo]")); });
  EXPECT_NE(not_map.find("methods: expected a map of method name -> list of \"key=value\" config overrides, got"),
            std::string::npos)
      << not_map;
  EXPECT_NE(error_of([] { parse_method_table(yaml_to_json("{}")); }).find("at least one method"), std::string::npos);
  const std::string not_list = error_of([] { parse_method_table(yaml_to_json("grpo: algorithm.adv_estimator=grpo")); });
  EXPECT_NE(not_list.find("methods.grpo: expected a list of \"key=value\" config overrides, got "
                          "\"algorithm.adv_estimator=grpo\""),
            std::string::npos)
      << not_list;
  const std::string bad_item = error_of([] { parse_method_table(yaml_to_json("grpo: [a=1]\nppo: [a=1, 3]")); });
  EXPECT_NE(bad_item.find("methods.ppo[1]: expected a \"key=value\" (or \"~key\") override string, got 3"),
            std::string::npos)
      << bad_item;
  const std::string no_eq = error_of([] { parse_method_table(yaml_to_json("ppo: [algorithm.adv_estimator]")); });
  EXPECT_NE(no_eq.find("methods.ppo[0]: expected a \"key=value\" (or \"~key\") override string"), std::string::npos)
      << no_eq;
  const std::string named = error_of([] { parse_method_table(yaml_to_json("a: 3"), "contexts"); });
  EXPECT_NE(named.find("contexts.a: expected a list"), std::string::npos) << named;
}

TEST(CompareRecipeTest, RecipeErrorsNameTheKey) {
  const std::string unknown_default =
      error_of([] { parse_compare_recipe(yaml_to_json("methods: {grpo: [a=1]}\ndefault_methods: [grpo, dpo]")); });
  EXPECT_NE(unknown_default.find("default_methods: unknown comparison method 'dpo'; known: grpo"), std::string::npos)
      << unknown_default;
  const std::string extra = error_of(
      [] { parse_compare_recipe(yaml_to_json("methods: {grpo: [a=1]}\ndefault_methods: [grpo]\nmethod: {}")); });
  EXPECT_NE(extra.find("unknown config key 'method'; did you mean 'methods'? Valid keys at the top level: methods, "
                       "default_methods."),
            std::string::npos)
      << extra;
  const std::string no_table = error_of([] { parse_compare_recipe(yaml_to_json("default_methods: [grpo]")); });
  EXPECT_NE(no_table.find("'methods' is missing: the method table"), std::string::npos) << no_table;
  const std::string no_default = error_of([] { parse_compare_recipe(yaml_to_json("methods: {grpo: [a=1]}")); });
  EXPECT_NE(no_default.find("'default_methods' must be a non-empty list of names from the table; known: grpo"),
            std::string::npos)
      << no_default;
  const std::string bad_table =
      error_of([] { parse_compare_recipe(yaml_to_json("methods: {grpo: 3}\ndefault_methods: [grpo]")); });
  EXPECT_NE(bad_table.find("comparison recipe: invalid config: methods.grpo: expected a list"), std::string::npos)
      << bad_table;
}

// ---------------------------------------------------------------- the context experiment

ContextRecipe shipped_context_recipe() {
  return parse_context_recipe(load_yaml_file(std::string(AGENTR1_SOURCE_DIR) + "/configs/contexts.yaml"));
}

TEST(ContextRecipeTest, ShippedRecipeRunsThePapersThreeContextsOnTheMultiStepVariant) {
  const ContextRecipe r = shipped_context_recipe();
  EXPECT_EQ(r.default_contexts, (std::vector<std::string>{"append_only", "sliding_window", "summarize"}));
  EXPECT_EQ(r.builtin_model.at("demo_style"), "per_step");
  EXPECT_EQ(r.config.at("data").at("task_kwargs").at("demo_style"), "per_step");
  EXPECT_GE(r.config.at("data").at("task_kwargs").at("min_level").get<int>(), 4) << "four or more dependent calls";
  // Every context makes a valid config over the defaults and the shared config, and sets
  // the policy its name says.
  for (const auto& [name, overrides] : r.contexts) {
    json tree = default_train_tree();
    merge_json(tree, r.config);
    for (const auto& o : overrides) apply_override(tree, o);
    EXPECT_NO_THROW(load_train_config(tree)) << name;
    const json& ctx = tree.at("rollout").at("env_kwargs").at("context");
    const std::string type = ctx.is_string() ? ctx.get<std::string>() : ctx.at("type").get<std::string>();
    EXPECT_EQ(name.rfind(type, 0), 0u) << name << " sets " << ctx.dump();
  }
  const std::vector<std::string> trained = method_overrides(r.contexts, "summarize_trained");
  ASSERT_EQ(trained.size(), 1u);
  EXPECT_NE(trained[0].find("train_summary: true"), std::string::npos) << trained[0];
}

TEST(ContextRecipeTest, ErrorsNameTheKeyAndTheRule) {
  const json ok = {{"contexts", {{"a", json::array({"++rollout.env_kwargs.context=append_only"})}}},
                   {"default_contexts", json::array({"a"})}};
  EXPECT_NO_THROW(parse_context_recipe(ok));
  json bad = ok;
  bad["context"] = 1;
  const std::string unknown = error_of([&] { parse_context_recipe(bad); });
  EXPECT_NE(unknown.find("unknown config key 'context'; did you mean 'contexts'? Valid keys at the top level: "
                         "builtin_model, config, contexts, default_contexts."),
            std::string::npos)
      << unknown;
  bad = ok;
  bad["default_contexts"] = json::array({"b"});
  const std::string e = error_of([&] { parse_context_recipe(bad); });
  EXPECT_NE(e.find("unknown comparison method 'b'; known: a"), std::string::npos) << e;
  bad = ok;
  bad["builtin_model"] = {{"demo_styl", "per_step"}};
  const std::string bm = error_of([&] { parse_context_recipe(bad); });
  EXPECT_NE(bm.find("builtin_model"), std::string::npos) << bm;
  EXPECT_NE(bm.find("unknown config key 'builtin_model.demo_styl'"), std::string::npos) << bm;
  EXPECT_NE(bm.find("Valid keys under 'builtin_model': dir"), std::string::npos) << bm;
  bad["builtin_model"] = {{"demo_style", "chained"}};
  EXPECT_NE(error_of([&] { parse_context_recipe(bad); }).find("\"single\" or \"per_step\", got \"chained\""),
            std::string::npos);
  bad["builtin_model"] = {{"demos", 0}};
  EXPECT_NE(error_of([&] { parse_context_recipe(bad); }).find("'demos' must be a positive integer, got 0"),
            std::string::npos);
  bad["builtin_model"] = {{"demo_contexts", json::array({3})}};
  EXPECT_NE(error_of([&] { parse_context_recipe(bad); }).find("demo_contexts"), std::string::npos);
  bad["builtin_model"] = {{"min_level", 3}, {"max_level", 2}};
  EXPECT_NE(error_of([&] { parse_context_recipe(bad); }).find("min_level must be <= max_level"), std::string::npos);
  bad = ok;
  bad["config"] = json::array();
  EXPECT_NE(error_of([&] { parse_context_recipe(bad); }).find("'config' must be a map (a config tree"), std::string::npos);
  bad = ok;
  bad["config"] = nullptr;
  EXPECT_EQ(parse_context_recipe(bad).config, json::object()) << "an empty tree reads as {}";
}

// The recipe of a model directory changes only where the options do: the default model's
// recipe.json has no demo_style or demo_contexts (built before they existed, still reused).
TEST(DefaultModelOptionsTest, ApplyJsonSetsTheKeysAndTheRecipeRecordsThem) {
  DefaultModelOptions d;
  const json before = d.to_json();
  EXPECT_FALSE(before.contains("demo_style"));
  EXPECT_FALSE(before.contains("demo_contexts"));
  d.apply_json({{"dir", "x/y"}, {"demo_style", "per_step"}, {"min_level", 4}, {"max_level", 4}, {"demos", 32},
                {"demo_contexts", json::array({"append_only"})}, {"sft_epochs", 2}, {"sft_lr", 0.001},
                {"init_from", "builtin"}});
  EXPECT_EQ(d.dir, "x/y");
  EXPECT_EQ(d.demos, 32);
  EXPECT_EQ(d.sft.epochs, 2);
  EXPECT_DOUBLE_EQ(d.sft.optim.lr, 0.001);
  const json after = d.to_json();
  EXPECT_EQ(after.at("demo_style"), "per_step");
  EXPECT_EQ(after.at("demo_contexts"), json::array({"append_only"}));
  EXPECT_EQ(after.at("min_level"), 4);
  EXPECT_EQ(d.task_kwargs().at("demo_style"), "per_step");
  EXPECT_EQ(after.at("init_from"), "builtin");
  EXPECT_EQ(after.at("base_recipe"), before) << "a change to the base model rebuilds this one";
}

// init_from as a map: a base model built first (an SFT stage); the recipe records the
// base's whole recipe, so a change to the base stage rebuilds this one.
TEST(DefaultModelOptionsTest, InitFromAMapChainsStagesAndRecordsTheBase) {
  DefaultModelOptions stage1;
  stage1.apply_json({{"dir", "runs/x/stage1"}, {"vocab_size", 4096}, {"sft_lr", 0.002}});
  DefaultModelOptions d;
  d.apply_json({{"dir", "runs/x/stage2"}, {"sft_lr", 0.001},
                {"init_from", {{"dir", "runs/x/stage1"}, {"vocab_size", 4096}, {"sft_lr", 0.002}}}});
  EXPECT_TRUE(d.init_from.empty());
  EXPECT_EQ(d.base_options().dir, "runs/x/stage1");
  EXPECT_DOUBLE_EQ(d.base_options().sft.optim.lr, 0.002);
  const json j = d.to_json();
  EXPECT_EQ(j.at("init_from"), "recipe");
  EXPECT_EQ(j.at("base_recipe"), stage1.to_json());
  DefaultModelOptions other = d;
  other.apply_json({{"init_from", {{"dir", "runs/x/stage1"}, {"vocab_size", 4096}, {"sft_lr", 0.003}}}});
  EXPECT_NE(other.to_json(), j) << "another base stage is another model";
  // A string after a map (and back) replaces it.
  other.apply_json({{"init_from", "builtin"}});
  EXPECT_EQ(other.to_json().at("init_from"), "builtin");
  // Errors name the option and the rule.
  DefaultModelOptions bad;
  EXPECT_NE(error_of([&] { bad.apply_json({{"init_from", {{"sft_lr", 0.001}}}}); }).find("needs a 'dir' of its own"),
            std::string::npos);
  const std::string e = error_of([&] { bad.apply_json({{"init_from", {{"dir", "a"}, {"demoz", 3}}}}); });
  EXPECT_NE(e.find("init_from"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown config key 'builtin_model.init_from.demoz'"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { bad.apply_json({{"init_from", 3}}); }).find("a map of built-in model options"),
            std::string::npos);
}

TEST(CompareStatsTest, StandardErrorOfASuccessRate) {
  // sqrt(p (1 - p) / n) by hand: p = 0.5, n = 100 -> 0.05; p = 0.9, n = 400 -> 0.015.
  EXPECT_NEAR(success_stderr(0.5, 100), 0.05, 1e-12);
  EXPECT_NEAR(success_stderr(0.9, 400), 0.015, 1e-12);
  EXPECT_EQ(success_stderr(1.0, 128), 0.0);
  EXPECT_EQ(success_stderr(0.5, 0), 0.0);
}

TEST(CompareStatsTest, RunMeansAverageTrainingStepsOnlyAndKeepTheLastOfARepeatedStep) {
  const std::string dir = (fs::temp_directory_path() / ("agentr1_runmeans_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  const std::string path = dir + "/metrics.jsonl";
  {
    std::ofstream f(path);
    f << R"({"step":0,"val/success/greedy":0.5,"env/prompt_tokens_mean/mean":999})" << "\n";  // validation line
    f << R"({"step":1,"critic/score/mean":0.1,"env/prompt_tokens_mean/mean":100,"env/summary_steps/mean":1})" << "\n";
    f << R"({"step":2,"critic/score/mean":0.2,"env/prompt_tokens_mean/mean":500})" << "\n";
    f << "not json\n";
    f << R"({"step":2,"critic/score/mean":0.2,"env/prompt_tokens_mean/mean":300})" << "\n";  // resumed: wins
  }
  const auto m = read_run_means(path, {"env/prompt_tokens_mean/mean", "env/summary_steps/mean", "missing"});
  EXPECT_DOUBLE_EQ(m.at("env/prompt_tokens_mean/mean"), 200.0);  // (100 + 300) / 2
  EXPECT_DOUBLE_EQ(m.at("env/summary_steps/mean"), 1.0);         // only step 1 has it
  EXPECT_TRUE(std::isnan(m.at("missing")));
  EXPECT_THROW(read_run_means(dir + "/nope.jsonl", {"x"}), Error);
  fs::remove_all(dir);
}

TEST(CompareStatsTest, ContextTableShowsEachRunsBaselineAndContextColumns) {
  CompareResult r;
  r.kind = CompareKind::kContexts;
  r.baseline.num_prompts = 100;
  r.baseline.greedy_success = 0.5;
  MethodResult m;
  m.method = "sliding_window";
  m.baseline.num_prompts = 100;
  m.baseline.greedy_success = 0.5;
  m.final_eval.num_prompts = 100;
  m.final_eval.greedy_success = 0.9;
  m.run_means = {{"env/prompt_tokens_mean/mean", 150.25},     {"env/prompt_tokens_max/mean", 180.0},
                 {"batch/row_tokens_per_trajectory", 777.0},  {"env/context_omitted_turns/mean", 1.5},
                 {"env/summary_steps/mean", 0.0},             {"env/context_overflow/mean", 0.125}};
  r.methods.push_back(m);
  const std::string t = format_comparison(r);
  EXPECT_NE(t.find("| context |"), std::string::npos) << t;
  EXPECT_NE(t.find("| sliding_window | 0.500 ± 0.050 | 0.900 ± 0.030 | +0.400 |"), std::string::npos) << t;
  EXPECT_NE(t.find("| 150.2 / 180.0 |"), std::string::npos) << t;  // prompt tokens per step
  EXPECT_NE(t.find("| 777.0 |"), std::string::npos) << t;          // learner tokens per trajectory
  EXPECT_NE(t.find("| 1.50 | 0.00 | 0.125 |"), std::string::npos) << t;
  r.kind = CompareKind::kMethods;
  EXPECT_NE(format_comparison(r).find("| training-free baseline | 0.500 ± 0.050 |"), std::string::npos);
}

// The comparison runs each method from the same checkpoint and seeds, and writes a
// table and JSON with per-method validation curves; no plot files.
TEST(CompareTest, RunsMethodsAndWritesTableAndJson) {
  const std::string dir = make_tiny_model_dir();
  json tree = default_train_tree();
  for (const std::string& o : std::vector<std::string>{
           "model.path=" + dir + "/model", "trainer.total_steps=1", "trainer.test_freq=1", "trainer.threads=1",
           "data.train_batch_size=2", "data.val_size=2", "rollout.n=2", "rollout.val_k=1",
           "rollout.max_new_tokens=6", "rollout.max_prompt_tokens=2048", "rollout.max_steps=2",
           "trainer.progress=false", "trainer.dump_trajectories=0"})
    apply_override(tree, o);
  CompareOptions o;
  o.method_table = shipped_recipe().methods;
  o.methods = {"grpo", "ppo"};
  o.out_dir = dir + "/cmp";
  CompareResult r = run_comparison(tree, o);
  ASSERT_EQ(r.methods.size(), 2u);
  EXPECT_EQ(r.baseline_spread, 0.0) << "same checkpoint + seeds: identical step-0 validations";
  for (const auto& m : r.methods) {
    EXPECT_EQ(m.curve.size(), 2u) << m.method;  // validations at steps 0 and 1
    EXPECT_TRUE(fs::exists(o.out_dir + "/" + m.method + "/summary.json")) << m.method;
  }
  // ppo really ran with the critic: its run logged critic metrics, grpo's did not.
  EXPECT_NE(read_text_file(o.out_dir + "/ppo/metrics.jsonl").find("critic/vf_loss"), std::string::npos);
  EXPECT_EQ(read_text_file(o.out_dir + "/grpo/metrics.jsonl").find("critic/vf_loss"), std::string::npos);
  const std::string md = read_text_file(o.out_dir + "/comparison.md");
  for (const char* row : {"| training-free baseline |", "| grpo |", "| ppo |"})
    EXPECT_NE(md.find(row), std::string::npos) << md;
  const json j = json::parse(read_text_file(o.out_dir + "/comparison.json"));
  ASSERT_EQ(j["methods"].size(), 2u);
  EXPECT_EQ(j["methods"][1]["method"], "ppo");
  EXPECT_EQ(j["methods"][0]["curve"][1][0], 1);
  EXPECT_EQ(read_validation_curve(o.out_dir + "/grpo/metrics.jsonl"), r.methods[0].curve);
  // Plotting is the caller's (apps/agentr1/plot.h): the library writes no plot files.
  EXPECT_FALSE(fs::exists(o.out_dir + "/val_accuracy.dat"));
  EXPECT_FALSE(fs::exists(o.out_dir + "/val_accuracy.gp"));
  EXPECT_FALSE(fs::exists(o.out_dir + "/val_accuracy.png"));

  // Every method is checked before the first run starts.
  CompareOptions bad = o;
  bad.out_dir = dir + "/bad";
  bad.methods = {"grpo", "dpo"};
  EXPECT_NE(error_of([&] { run_comparison(tree, bad); }).find("unknown comparison method 'dpo'; known: grpo, ppo"),
            std::string::npos);
  bad.methods = {"grpo", "typo"};
  bad.method_table.push_back({"typo", {"algorithm.adv_estimatr=grpo"}});
  const std::string typo = error_of([&] { run_comparison(tree, bad); });
  EXPECT_NE(typo.find("compare method 'typo'"), std::string::npos) << typo;
  EXPECT_NE(typo.find("adv_estimatr"), std::string::npos) << typo;
  bad.methods = {"grpo", "grpo"};
  EXPECT_NE(error_of([&] { run_comparison(tree, bad); }).find("'grpo' is listed twice"), std::string::npos);
  bad.methods = {};
  EXPECT_NE(error_of([&] { run_comparison(tree, bad); }).find("no methods given; known: grpo, ppo"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(bad.out_dir + "/grpo")) << "no run may start when a method is bad";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::train
