// Every task family through the real stack: its experts' demonstrations replayed through
// the family's own agent (ToolEnv or GameEnv) with the SFT replay generator reach reward
// 1 token for token, and a tiny random model trains two RL steps on each family
// (rollouts, rewards, update, validation; no learning claim) with the family's recipe
// defaults applied as the agentr1 app applies them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agentr1/core/config.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/sft/sft.h"
#include "agentr1/train/train_config.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;

const char* const kFamilies[] = {"arithmetic", "hotpotqa", "alfworld", "webshop", "paper_search"};

// The flow's options for `family` after its recipe defaults (rollout.* keys only).
flow::FlowOptions flow_options_for(const tasks::TaskFamily& fam) {
  json tree = default_train_tree();
  for (const std::string& kv : fam.recipe_defaults()) apply_override(tree, kv);
  apply_override(tree, "rollout.max_prompt_tokens=8192");
  apply_override(tree, "rollout.max_new_tokens=1024");  // the fixture tokenizer has few merges
  apply_override(tree, "rollout.max_response_tokens=8192");
  apply_override(tree, "rollout.enable_thinking=false");
  return load_train_config(tree).rollout.flow;
}

TEST(Families, ExpertDemonstrationsReplayToRewardOneThroughTheirAgents) {
  tasks::register_builtin_tasks();
  const text::Tokenizer tok =
      text::Tokenizer::load(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3");
  const text::ChatTemplate tmpl = text::ChatTemplate::from_template_text(tok.chat_template());
  ThreadPool pool(1);
  for (const char* name : kFamilies) {
    SCOPED_TRACE(name);
    auto fam = tasks::make_task_family(name, json::object());
    std::vector<std::string> corpus;
    const std::vector<json> demos = fam->demonstrations(6, 17, tmpl, "<|im_end|>", &corpus);
    ASSERT_EQ(demos.size(), 6u);
    EXPECT_EQ(corpus.size(), 6u);
    flow::FlowContext ctx;
    ctx.tokenizer = &tok;
    ctx.chat_template = &tmpl;
    ctx.tool_pool = &pool;
    ctx.stop_token_ids = flow::default_stop_token_ids(tok);
    const flow::FlowOptions fo = flow_options_for(*fam);
    const std::vector<Trajectory> trajs = demonstration_trajectories(demos, ctx, fo);
    ASSERT_EQ(trajs.size(), demos.size());
    for (size_t i = 0; i < trajs.size(); ++i) {
      const Trajectory& t = trajs[i];
      EXPECT_FLOAT_EQ(t.outcome_reward, 1.0f) << t.to_json().dump().substr(0, 2000);
      EXPECT_EQ(t.steps.size(), demos[i]["actions"].size());
      EXPECT_EQ(t.metrics["truncated"], 0);
      EXPECT_EQ(t.metrics["invalid_format"], 0);
      EXPECT_EQ(t.metrics["tool_errors"], 0);
      // The SFT rows hold the demonstrated actions token for token.
      EXPECT_EQ(tok.decode(t.steps[0].response_ids), demos[i]["actions"][0].get<std::string>());
    }
  }
}

TEST(Families, EachFamilyTrainsTwoStepsOnATinyModel) {
  tasks::register_builtin_tasks();
  const std::string dir = testing::make_tiny_model_dir("families");
  for (const char* name : kFamilies) {
    SCOPED_TRACE(name);
    json tree = default_train_tree();
    apply_override(tree, std::string("data.task=") + name);
    auto fam = tasks::make_task_family(name, json::object());
    for (const std::string& kv : fam->recipe_defaults()) apply_override(tree, kv);
    const std::string run = dir + "/run_" + name;
    for (const std::string& o : std::vector<std::string>{
             "model.path=" + dir + "/model", "trainer.output_dir=" + run, "trainer.total_steps=2",
             "trainer.test_freq=0", "trainer.threads=1", "data.train_batch_size=2", "data.train_size=8",
             "data.val_size=2", "rollout.n=2", "rollout.val_k=0", "rollout.max_new_tokens=8",
             "rollout.max_steps=3", "rollout.max_prompt_tokens=4000", "trainer.progress=false",
             "trainer.dump_trajectories=-1"})
      apply_override(tree, o);
    const bool papers = std::string(name) == "paper_search";
    if (papers) apply_override(tree, "trainer.test_freq=2");  // its validation metrics below
    RLTrainer t(load_train_config(tree), tree);
    RunSummary s = t.run(/*resume=*/false);
    EXPECT_EQ(s.steps, 2);
    if (papers) {  // the env's own metrics reach metrics.jsonl, in training and validation
      bool train_recall = false, val_recall = false;
      std::ifstream m(run + "/metrics.jsonl");
      for (std::string line; std::getline(m, line);) {
        const json j = json::parse(line);
        train_recall = train_recall || j.contains("env/paper/recall/mean");
        val_recall = val_recall || j.contains("val/paper/recall/greedy");
      }
      EXPECT_TRUE(train_recall);
      EXPECT_TRUE(val_recall);
    }
    // The dumped trajectories ran through the family's agent.
    std::ifstream f(run + "/trajectories/step_000001.jsonl");
    std::string line;
    ASSERT_TRUE(static_cast<bool>(std::getline(f, line)));
    const json traj = json::parse(line);
    ASSERT_FALSE(traj["steps"].empty());
    const json& info = traj["steps"][0]["info"];
    const bool game = std::string(name) == "alfworld" || std::string(name) == "webshop";
    EXPECT_EQ(info.contains("game_reward"), game || papers) << info.dump();  // paper_search: the recall gain
    EXPECT_EQ(info.contains("tool_calls"), !game) << info.dump();
    EXPECT_TRUE(fs::exists(run + "/summary.json"));
  }
  fs::remove_all(dir);
}

// GiGPO on a game family: every step carries the env's anchor state, the first steps
// of each prompt's trajectories share one (the game's intro), so anchor groups form.
TEST(Families, GigpoGroupsStepsByTheGamesAnchorStates) {
  tasks::register_builtin_tasks();
  const std::string dir = testing::make_tiny_model_dir("gigpo");
  json tree = default_train_tree();
  apply_override(tree, "data.task=alfworld");
  auto fam = tasks::make_task_family("alfworld", json::object());
  for (const std::string& kv : fam->recipe_defaults()) apply_override(tree, kv);
  const std::string run = dir + "/run";
  for (const std::string& o : std::vector<std::string>{
           "model.path=" + dir + "/model", "trainer.output_dir=" + run, "trainer.total_steps=1",
           "trainer.test_freq=0", "trainer.threads=1", "data.train_batch_size=2", "data.train_size=8",
           "data.val_size=2", "rollout.n=3", "rollout.val_k=0", "rollout.max_new_tokens=8",
           "rollout.max_steps=3", "rollout.max_prompt_tokens=4000", "trainer.progress=false",
           "algorithm.adv_estimator=gigpo", "algorithm.gamma=0.95"})
    apply_override(tree, o);
  RLTrainer t(load_train_config(tree), tree);
  EXPECT_EQ(t.run(/*resume=*/false).steps, 1);
  json step1;
  std::ifstream m(run + "/metrics.jsonl");
  for (std::string line; std::getline(m, line);) {
    const json j = json::parse(line);
    if (j["step"] == 1 && j.contains("gigpo/anchor_groups")) step1 = j;
  }
  ASSERT_FALSE(step1.is_null()) << "no gigpo metrics in step 1";
  EXPECT_EQ(step1["gigpo/known_anchor_fraction"].get<double>(), 1.0);
  EXPECT_GE(step1["gigpo/anchor_groups"].get<double>(), 2.0);  // each prompt's first steps
  EXPECT_GT(step1["gigpo/grouped_step_fraction"].get<double>(), 0.0);
  std::ifstream f(run + "/trajectories/step_000001.jsonl");
  std::string line;
  ASSERT_TRUE(static_cast<bool>(std::getline(f, line)));
  const json traj = json::parse(line);
  const json& steps = traj["steps"];
  ASSERT_FALSE(steps.empty());
  EXPECT_NE(steps[0]["info"]["anchor"].get<std::string>().find("You are in the middle of a room"),
            std::string::npos)
      << steps[0]["info"].dump();
  // Each anchor is the game text the model was shown when it acted.
  const text::Tokenizer tok = text::Tokenizer::load(dir + "/model");
  for (size_t k = 0; k < steps.size(); ++k) {
    const std::string anchor = steps[k]["info"]["anchor"].get<std::string>();
    EXPECT_FALSE(anchor.empty()) << k;
    EXPECT_NE(tok.decode(steps[k]["prompt_ids"].get<TokenIds>()).find(anchor), std::string::npos) << k;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::train
