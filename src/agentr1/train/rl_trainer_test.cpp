// End-to-end: a tiny random model runs the whole RL loop (rollouts through the real
// ToolEnv + calculator, GRPO, update, validation, checkpoints), then resumes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/model/transformer.h"
#include "agentr1/text/tokenizer.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;

std::string make_tiny_model_dir() {
  char tmpl[] = "/tmp/agentr1_rl_XXXXXX";
  std::string dir = mkdtemp(tmpl);
  const std::string model_dir = dir + "/model";
  make_dirs(model_dir);
  copy_tokenizer_files(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3", model_dir);
  text::Tokenizer tok = text::Tokenizer::load(model_dir);
  model::ModelConfig c;
  c.arch = model::Arch::kQwen3;
  c.vocab_size = tok.vocab_size();
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.qk_norm = true;
  c.tie_word_embeddings = true;
  c.max_position_embeddings = 4096;
  auto m = model::init_random(c, 5);
  model::save_pretrained(m, model_dir, at::kFloat);
  return dir;
}

int count_lines(const std::string& path) {
  std::ifstream f(path);
  int n = 0;
  std::string line;
  while (std::getline(f, line)) n += !line.empty();
  return n;
}

TEST(RLTrainerTest, RunsEndToEndAndResumes) {
  const std::string dir = make_tiny_model_dir();
  json tree = default_train_tree();
 for (const std::string& o : std::vector<std::string>{
           "model.path=" + dir + "/model", "trainer.output_dir=" + dir + "/run", "trainer.total_steps=2",
        "trainer.test_freq=1", "trainer.save_freq=1", "trainer.threads=1", "data.train_batch_size=2",
        "data.val_size=2", "rollout.n=2", "rollout.val_k=1", "rollout.max_new_tokens=6",
        "rollout.max_prompt_tokens=2048", "rollout.max_steps=2", "trainer.progress=false"})
    apply_override(tree, o);
  {
    RLTrainer t(load_train_config(tree), tree);
    RunSummary s = t.run(/*resume=*/false);
    EXPECT_EQ(s.steps, 2);
  }
  const std::string run = dir + "/run";
  EXPECT_TRUE(fs::exists(run + "/config.yaml"));
  EXPECT_TRUE(fs::exists(run + "/trajectories/step_000001.jsonl"));
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000002/model.safetensors"));
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000002/tokenizer.json"));
  // 2 step lines + validations at 0, 1 and 2.
  EXPECT_EQ(count_lines(run + "/metrics.jsonl"), 5);
  json summary = json::parse(read_text_file(run + "/summary.json"));
  ASSERT_TRUE(summary.contains("baseline"));
  ASSERT_TRUE(summary.contains("final"));
  EXPECT_TRUE(summary["final"].contains("greedy_success"));
  // The dumped steps carry ids, log-probs and the advantage.
  std::ifstream f(run + "/trajectories/step_000001.jsonl");
  std::string line;
  std::getline(f, line);
  json traj = json::parse(line);
  const json& st = traj["steps"][0];
  EXPECT_EQ(st["response_ids"].size(), st["response_logprobs"].size());
  EXPECT_TRUE(st.contains("advantage"));
  // Every step line has the verl-style names.
  std::ifstream mf(run + "/metrics.jsonl");
  bool saw_step = false;
  while (std::getline(mf, line)) {
    json m = json::parse(line);
    if (!m.contains("actor/pg_loss")) continue;
    saw_step = true;
    for (const char* k : {"critic/score/mean", "actor/ppo_kl", "response_length/mean",
                          "env/num_turns/mean", "env/tool_calls/mean", "timing/gen"})
      EXPECT_TRUE(m.contains(k)) << k;
    EXPECT_LT(m["rollout/logprob_max_diff"].get<double>(), 1e-3);
  }
  EXPECT_TRUE(saw_step);
  // The checkpoint is a loadable HF model.
  EXPECT_NO_THROW(model::load_pretrained(run + "/checkpoints/step_000002", at::kFloat, at::kCPU));
  // Resume to step 3: continues after the last checkpoint, keeps the baseline.
  apply_override(tree, "trainer.total_steps=3");
  {
    RLTrainer t(load_train_config(tree), tree);
    RunSummary s = t.run(/*resume=*/true);
    EXPECT_EQ(s.steps, 3);
  }
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000003/model.safetensors"));
  json s2 = json::parse(read_text_file(run + "/summary.json"));
  EXPECT_EQ(s2["baseline"], summary["baseline"]);
  EXPECT_EQ(s2["steps"], 3);
  fs::remove_all(dir);
}

TEST(RLTrainerTest, ConfigErrorsNameTheKey) {
  json tree = default_train_tree();
  try {
    apply_override(tree, "rollout.nn=3");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.n"), std::string::npos) << e.what();
  }
  apply_override(tree, "rollout.n=0");
  EXPECT_THROW(load_train_config(tree), Error);
}

}  // namespace
}  // namespace agentr1::train
