// End-to-end: a tiny random model runs the whole RL loop (rollouts through the real
// ToolEnv + calculator, GRPO, update, validation, checkpoints), then resumes.
#include <gtest/gtest.h>
#include <ATen/Parallel.h>
#include <thread>
#include <unistd.h>
#include <sys/wait.h>
#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <atomic>
#include <fstream>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/model/transformer.h"
#include "agentr1/tasks/reward.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/device.h"
#include "agentr1/train/train_config.h"
#include "agentr1/train/train_test_util.h"

#include <torch/cuda.h>

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;

std::string make_tiny_model_dir() { return testing::make_tiny_model_dir("rl"); }

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
  // Old log-probs are the engine's here (actor.use_rollout_logprobs): no learner column.
  EXPECT_FALSE(st.contains("learner_logprobs"));
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

using testing::read_jsonl;
using testing::step_metrics;

using testing::tiny_run_tree;

// PPO with a step-level GAE critic: warm-up step (critic only), finite critic metrics,
// audit columns in the dumps, the critic in the checkpoint, and resume.
TEST(RLTrainerTest, StepGaeWithCriticWarmupAndResume) {
  const std::string dir = make_tiny_model_dir();
  const std::string run = dir + "/run";
  json tree = tiny_run_tree(dir, {"algorithm.adv_estimator=gae", "algorithm.lam=0.95",
                                  "trainer.critic_warmup=1", "trainer.total_steps=2", "trainer.save_freq=1"});
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(false).steps, 2);
  }
  std::vector<json> ms = step_metrics(run);
  ASSERT_EQ(ms.size(), 2u);
  for (const json& m : ms)
    for (const char* k : {"critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm",
                          "critic/lr", "critic/values/mean", "critic/returns/mean", "critic/advantages/mean"}) {
      ASSERT_TRUE(m.contains(k)) << k;
      EXPECT_TRUE(std::isfinite(m[k].get<double>())) << k;
    }
  EXPECT_FALSE(ms[0].contains("actor/pg_loss")) << "step 1 is a critic warm-up step";
  EXPECT_TRUE(ms[1].contains("actor/pg_loss"));
  EXPECT_DOUBLE_EQ(ms[0]["critic/lr"].get<double>(), 1e-3);
  // Dumps: one value, return and advantage per step; return = advantage-free target.
  const std::vector<json> trajs = read_jsonl(run + "/trajectories/step_000002.jsonl");
  ASSERT_EQ(trajs.size(), 4u);
  for (const json& tr : trajs)
    for (const json& st : tr["steps"]) {
      if (st["response_ids"].empty()) continue;
      for (const char* k : {"values", "returns", "advantages"}) {
        ASSERT_TRUE(st.contains(k)) << k;
        EXPECT_TRUE(st[k].is_number()) << k << " is per step for gae";
      }
    }
  // Last step of each trajectory (lam irrelevant): return = its reward (V after = 0).
  for (const json& tr : trajs) {
    const json& last = tr["steps"].back();
    if (last["response_ids"].empty()) continue;
    EXPECT_NEAR(last["returns"].get<double>(),
                last["reward"].get<double>() + tr["outcome_reward"].get<double>(), 1e-5);
  }
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000002/critic/value_head.safetensors"));
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000002/critic/optimizer.pt"));
  json st = json::parse(read_text_file(run + "/checkpoints/step_000002/trainer_state.json"));
  EXPECT_EQ(st["critic_optimizer_steps"], 2);
  EXPECT_EQ(st["optimizer_steps"], 1);  // the actor skipped the warm-up step
  apply_override(tree, "trainer.total_steps=3");
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(true).steps, 3);
  }
  json st3 = json::parse(read_text_file(run + "/checkpoints/step_000003/trainer_state.json"));
  EXPECT_EQ(st3["critic_optimizer_steps"], 3);
  fs::remove_all(dir);
}

// token_gae with KL in the reward (adaptive): the first step's KL is exactly 0 (policy
// = reference), so the coefficient shrinks; after the policy moved, the dumped token
// KL and rewards satisfy reward = score - coef * sum(token_kl) and the coefficient grows.
TEST(RLTrainerTest, TokenGaeWithAdaptiveKlInReward) {
  const std::string dir = make_tiny_model_dir();
  const std::string run = dir + "/run";
  json tree = tiny_run_tree(
      dir, {"algorithm.adv_estimator=token_gae", "algorithm.use_kl_in_reward=true", "algorithm.kl_penalty=abs",
            "algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.kl_coef=0.5", "algorithm.kl_ctrl.target_kl=1e-9",
            "algorithm.kl_ctrl.horizon=40", "trainer.total_steps=3",
            // Old log-probs scored by the learner's own forward, as the reference's are:
            // the engine's agree only to ~1e-7, and this test needs KL exactly 0 at step 0.
            "actor.use_rollout_logprobs=false",
            // An entropy bonus and a large lr move the policy even when every advantage is 0.
            "actor.entropy_coeff=0.1", "actor.optim.lr=0.01"});
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(false).steps, 3);
  }
  std::vector<json> ms = step_metrics(run);
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_EQ(ms[0]["actor/reward_kl_penalty"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(ms[0]["actor/reward_kl_penalty_coeff"].get<double>(), 0.5);
  // KL 0 < target: coefficient *= 1 - 0.2 * 4 / 40.
  EXPECT_NEAR(ms[1]["actor/reward_kl_penalty_coeff"].get<double>(), 0.5 * 0.98, 1e-9);
  EXPECT_GT(ms[1]["actor/reward_kl_penalty"].get<double>(), 1e-9);
  EXPECT_GT(ms[2]["actor/reward_kl_penalty_coeff"].get<double>(), ms[1]["actor/reward_kl_penalty_coeff"].get<double>());
  const double coef = ms[1]["actor/reward_kl_penalty_coeff"].get<double>();
  double kl_seen = 0;
  for (const json& tr : read_jsonl(run + "/trajectories/step_000002.jsonl")) {
    double kl_sum = 0;
    for (const json& st : tr["steps"]) {
      if (st["response_ids"].empty()) continue;
      ASSERT_TRUE(st["values"].is_array());
      EXPECT_EQ(st["values"].size(), st["response_ids"].size());
      EXPECT_EQ(st["returns"].size(), st["response_ids"].size());
      EXPECT_EQ(st["advantages"].size(), st["response_ids"].size());
      ASSERT_EQ(st["token_kl"].size(), st["response_ids"].size());
      // The learner scored old log-probs (use_rollout_logprobs=false): dumped per response
      // token, close to the engine's (the same weights: only fp32 rounding apart).
      ASSERT_EQ(st["learner_logprobs"].size(), st["response_ids"].size());
      for (size_t q = 0; q < st["response_ids"].size(); ++q)
        EXPECT_NEAR(st["learner_logprobs"][q].get<double>(), st["response_logprobs"][q].get<double>(), 1e-3);
      for (const json& k : st["token_kl"]) kl_sum += k.get<double>();
    }
    kl_seen += kl_sum;
    EXPECT_NEAR(tr["reward"].get<double>(), tr["score"].get<double>() - coef * kl_sum, 1e-4);
  }
  EXPECT_GT(kl_seen, 0.0);
  fs::remove_all(dir);
}

// rollout.dtype=bf16 under an fp32 model: rollouts come from a bf16 copy that follows
// the learner every step, and old log-probs from the learner's fp32 scoring pass. The
// engine's bf16 log-probs then differ from the learner's (they are not the same
// arithmetic) but only by bf16's rounding of the weights (relative 2^-9 each) carried
// through a 2-layer model: well under 0.1 nats on this model, and never 0.
TEST(RLTrainerTest, Bf16RolloutCopyOfAnFp32Policy) {
  const std::string dir = make_tiny_model_dir();
  const std::string run = dir + "/run";
  json tree = tiny_run_tree(dir, {"rollout.dtype=bf16", "trainer.total_steps=2", "actor.entropy_coeff=0.1",
                                  "actor.optim.lr=0.01"});
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(false).steps, 2);
  }
  std::vector<json> ms = step_metrics(run);
  ASSERT_EQ(ms.size(), 2u);
  for (const json& m : ms) {
    ASSERT_TRUE(m.contains("rollout/logprob_max_diff")) << m.dump();
    EXPECT_GT(m["rollout/logprob_max_diff"].get<double>(), 1e-6);
    EXPECT_LT(m["rollout/logprob_max_diff"].get<double>(), 0.1);
  }
  // Step 2's rollouts were generated by the copy holding step 1's update.
  for (const json& tr : read_jsonl(run + "/trajectories/step_000002.jsonl"))
    for (const json& st : tr["steps"]) EXPECT_EQ(st["policy_version"].get<int64_t>(), 1);
  fs::remove_all(dir);
  // A dtype the engine does not take, and one beside remote servers: named.
  json bad = tiny_run_tree(dir, {"rollout.dtype=fp16"});
  try {
    load_train_config(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.dtype"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fp16"), std::string::npos) << e.what();
  }
}

// trainer.threads=0 sizes the teams to the cores other processes leave: with a process
// spinning beside the run, a step runs on fewer threads than the machine has cores. (The
// spinner gets at least cores / (cores + 1) of a core whatever else runs, so the others
// use >= 0.67 cores and threads_for leaves at most cores - 1.) trainer.threads=N: no
// adaptation, no perf/threads.
TEST(RLTrainerTest, ThreadsFollowTheFreeCores) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (cores < 2) GTEST_SKIP() << "one core: there is no thread count to lower";
  const int saved = at::get_num_threads();
  at::set_num_threads(cores);  // trainer.threads=0 keeps the process's count as its maximum
  const std::string dir = make_tiny_model_dir();
  {
    struct Spinner {  // a busy process, killed when the scope ends however it ends
      pid_t pid = fork();
      ~Spinner() {
        if (pid > 0) {
          kill(pid, SIGKILL);
          waitpid(pid, nullptr, 0);
        }
      }
    } spinner;
    if (spinner.pid == 0) {
      volatile unsigned long x = 0;
      for (;;) x = x + 1;
    }
    ASSERT_GT(spinner.pid, 0);
    json tree = tiny_run_tree(dir, {"trainer.threads=0", "trainer.total_steps=3"});
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(false).steps, 3);
  }
  std::vector<json> ms = step_metrics(dir + "/run");
  ASSERT_EQ(ms.size(), 3u);
  for (const json& m : ms) {
    ASSERT_TRUE(m.contains("perf/threads")) << m.dump();
    EXPECT_GE(m["perf/threads"].get<int>(), 1);
    EXPECT_LE(m["perf/threads"].get<int>(), cores - 1) << "a busy process beside the run, yet all cores used";
  }
  fs::remove_all(dir);
  at::set_num_threads(saved);
  // A fixed count is kept and not logged.
  const std::string dir2 = make_tiny_model_dir();
  json fixed = tiny_run_tree(dir2, {"trainer.total_steps=1"});  // trainer.threads=1
  {
    RLTrainer t(load_train_config(fixed), fixed);
    t.run(false);
  }
  for (const json& m : step_metrics(dir2 + "/run")) EXPECT_FALSE(m.contains("perf/threads")) << m.dump();
  fs::remove_all(dir2);
  at::set_num_threads(saved);
}

TEST(RLTrainerTest, CriticAndKlConfigErrorsNameTheKey) {
  auto error_of = [](const std::vector<std::string>& overrides) -> std::string {
    json tree = default_train_tree();
    try {
      for (const auto& o : overrides) apply_override(tree, o);
      load_train_config(tree);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of({"critic.optim.lr=0"}).find("critic.optim.lr"), std::string::npos);
  EXPECT_NE(error_of({"critic.cliprange_value=-1"}).find("critic.cliprange_value"), std::string::npos);
  EXPECT_NE(error_of({"critic.loss_agg_mode=sum"}).find("critic.loss_agg_mode"), std::string::npos);
  EXPECT_NE(error_of({"algorithm.kl_ctrl.type=pid"}).find("algorithm.kl_ctrl.type"), std::string::npos);
  EXPECT_NE(error_of({"algorithm.kl_penalty=k9"}).find("algorithm.kl_penalty"), std::string::npos);
  EXPECT_NE(error_of({"trainer.critic_warmup=2"}).find("trainer.critic_warmup"), std::string::npos);
  EXPECT_NE(error_of({"critic.cliprange_valu=1"}).find("critic.cliprange_value"), std::string::npos);
  EXPECT_EQ(error_of({"algorithm.adv_estimator=gae", "trainer.critic_warmup=2"}), "");
  EXPECT_EQ(error_of({"algorithm.adv_estimator=token_gae", "algorithm.use_kl_in_reward=true"}), "");
  // --help-config lists the new keys with their defaults.
  const std::string help = describe_config(TrainConfig{});
  for (const char* k : {"critic.model_path", "critic.optim.lr", "critic.cliprange_value", "critic.ppo_epochs",
                        "critic.micro_batch_size", "critic.loss_agg_mode", "trainer.critic_warmup",
                        "algorithm.use_kl_in_reward", "algorithm.kl_penalty", "algorithm.kl_ctrl.type",
                        "algorithm.kl_ctrl.kl_coef", "algorithm.kl_ctrl.target_kl", "algorithm.kl_ctrl.horizon"})
    EXPECT_NE(help.find(k), std::string::npos) << k;
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
  // The engine's KV-cache sizes: a pool that cannot hold one full sequence is refused.
  tree = default_train_tree();
  apply_override(tree, "rollout.kv_blocks=3");
  try {
    load_train_config(tree);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.kv_blocks must be 0 (auto) or hold one sequence"),
              std::string::npos)
        << e.what();
  }
  tree = default_train_tree();
  apply_override(tree, "rollout.kv_block_size=0");
  EXPECT_THROW(load_train_config(tree), Error);
  // rollout.engine binds by name (local | remote) and writes back the same name.
  tree = default_train_tree();
  EXPECT_EQ(tree["rollout"]["engine"], "local");
  EXPECT_EQ(load_train_config(tree).rollout.engine, RolloutEngine::kLocal);
  EXPECT_FALSE(load_train_config(tree).rollout.remote_engine());
  apply_override(tree, "rollout.engine=gpu");
  try {
    load_train_config(tree);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.engine: expected \"local\" (the in-process engine) or \"remote\" "
                                         "(OpenAI-compatible servers, rollout.remote.*), got \"gpu\""),
              std::string::npos)
        << e.what();
  }
  RolloutConfig remote;
  remote.engine = RolloutEngine::kRemote;
  EXPECT_EQ(config_to_json(remote)["engine"], "remote");
}

// The task family and the device are chosen by name: unknown names list the known ones
// (the trainer's constructor resolves them before any work), task kwargs are checked by
// the family, and the generated-set sizes only matter without files.
TEST(RLTrainerTest, TaskFamilyAndDeviceErrorsNameTheValue) {
  const std::string dir = make_tiny_model_dir();
  auto ctor_error = [&](const std::vector<std::string>& extra) -> std::string {
    json tree = tiny_run_tree(dir, extra);
    try {
      RLTrainer t(load_train_config(tree), tree);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  std::string e = ctor_error({"data.task=sudoku"});
  EXPECT_NE(e.find("unknown task family 'sudoku'"), std::string::npos) << e;
  EXPECT_NE(e.find("arithmetic"), std::string::npos) << e;
  e = ctor_error({"+data.task_kwargs.max_levl=2"});
  EXPECT_NE(e.find("max_levl"), std::string::npos) << e;
  EXPECT_NE(e.find("max_level"), std::string::npos) << e;
  e = ctor_error({"+data.task_kwargs.max_level=9"});
  EXPECT_NE(e.find("max_level"), std::string::npos) << e;
  e = ctor_error({"trainer.device=gpu"});
  EXPECT_NE(e.find("'gpu'"), std::string::npos) << e;
  EXPECT_NE(e.find("cuda:N"), std::string::npos) << e;
  if (!torch::cuda::is_available()) {
    e = ctor_error({"trainer.device=cuda:0"});
    EXPECT_NE(e.find("no CUDA"), std::string::npos) << e;
    EXPECT_NE(e.find("trainer.device=cpu"), std::string::npos) << e;  // the hint
  }
  EXPECT_EQ(parse_device("cuda:3").index(), 3);
  EXPECT_TRUE(parse_device("cpu").is_cpu());
  // With files, train_size is not a generated-set size and is not checked.
  json tree = default_train_tree();
  apply_override(tree, "data.train_size=0");
  EXPECT_THROW(load_train_config(tree), Error);
  apply_override(tree, "data.train_files=" + std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/gsm8k/sample.jsonl");
  EXPECT_NO_THROW(load_train_config(tree));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------- crash safety

// The steps metrics.jsonl names, in order (validation lines included).
std::vector<int64_t> logged_steps(const std::string& run) {
  std::vector<int64_t> out;
  for (const json& m : read_jsonl(run + "/metrics.jsonl")) out.push_back(m["step"].get<int64_t>());
  return out;
}

using agentr1::testing::error_of;

// A second run into a directory that holds one is refused (never mixed); --overwrite
// starts it over.
TEST(RLTrainerCrashSafety, ASecondRunIsRefusedOrStartedOver) {
  const std::string dir = make_tiny_model_dir();
  const std::string run = dir + "/run";
  json tree = tiny_run_tree(dir, {"trainer.total_steps=1"});
  {
    RLTrainer t(load_train_config(tree), tree);
    t.run(RunMode::kFresh);
  }
  const std::vector<int64_t> first = logged_steps(run);
  EXPECT_EQ(first, (std::vector<int64_t>{0, 1, 1}));  // baseline, step 1, final validation
  {
    RLTrainer t(load_train_config(tree), tree);
    const std::string e = error_of([&] { t.run(RunMode::kFresh); });
    EXPECT_NE(e.find("'" + run + "' already holds a run"), std::string::npos) << e;
    EXPECT_NE(e.find("--resume"), std::string::npos) << e;
    EXPECT_NE(e.find("--overwrite"), std::string::npos) << e;
  }
  EXPECT_EQ(logged_steps(run), first) << "the refused run wrote nothing";
  {
    RLTrainer t(load_train_config(tree), tree);
    t.run(RunMode::kOverwrite);
  }
  EXPECT_EQ(logged_steps(run), first) << "overwritten, not appended";
  fs::remove_all(dir);
}

// A crash after step 3 of 4 (checkpoints at 2 and 4; the step-4 checkpoint and the
// `latest` pointer to it lost, a half-written line at the end of metrics.jsonl): the
// resume loads step 2, cuts what was logged after it, and every step appears once.
TEST(RLTrainerCrashSafety, ResumeCutsWhatWasLoggedAfterTheCheckpoint) {
  const std::string dir = make_tiny_model_dir();
  const std::string run = dir + "/run";
  json tree = tiny_run_tree(dir, {"trainer.total_steps=4", "trainer.save_freq=2"});
  {
    RLTrainer t(load_train_config(tree), tree);
    t.run(RunMode::kFresh);
  }
  const std::vector<int64_t> whole = logged_steps(run);
  EXPECT_EQ(whole, (std::vector<int64_t>{0, 1, 2, 3, 4, 4}));
  const size_t dump_rows = read_jsonl(run + "/trajectories/step_000003.jsonl").size();
  ASSERT_GT(dump_rows, 0u);
  fs::remove_all(run + "/checkpoints/step_000004");  // the pointer still names it
  ASSERT_EQ(read_text_file(run + "/checkpoints/latest"), "step_000004\n");
  { std::ofstream(run + "/metrics.jsonl", std::ios::app) << "{\"step\": 5, \"critic/sc"; }
  ASSERT_EQ(latest_checkpoint(run + "/checkpoints"), run + "/checkpoints/step_000002");
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kResume).steps, 4);
  }
  EXPECT_EQ(logged_steps(run), whole) << "each step once, the baseline not repeated";
  EXPECT_EQ(read_jsonl(run + "/trajectories/step_000003.jsonl").size(), dump_rows) << "dumps not doubled";
  EXPECT_EQ(read_text_file(run + "/checkpoints/latest"), "step_000004\n");
  // Resuming a complete run does nothing and logs nothing.
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kResume).steps, 4);
  }
  EXPECT_EQ(logged_steps(run), whole);
  fs::remove_all(dir);
}

// A reward function that fails on its n-th call (counted from when it is armed).
std::atomic<int>& g_reward_calls = testing::FailingReward::calls;
std::atomic<int>& g_fail_on_call = testing::FailingReward::fail_on;
void register_failing_reward() { testing::FailingReward::register_once(); }

// A failure during start-up (here the baseline validation's first reward) leaves no
// run behind: a fresh directory is removed, so the same command can simply be rerun.
// A failure in a later step keeps the logs and says how to go on.
TEST(RLTrainerCrashSafety, FailuresLeaveNoHalfWrittenRun) {
  register_failing_reward();
  const std::string dir = make_tiny_model_dir();
  const std::string run = dir + "/run";
  json tree = tiny_run_tree(dir, {"trainer.total_steps=3", "trainer.save_freq=1", "rollout.reward_fn=test_failing"});
  g_reward_calls = 0;
  g_fail_on_call = 1;  // the baseline's only greedy trajectory
  {
    RLTrainer t(load_train_config(tree), tree);
    const std::string e = error_of([&] { t.run(RunMode::kFresh); });
    EXPECT_NE(e.find("reward backend went away"), std::string::npos) << e;
  }
  EXPECT_FALSE(fs::exists(run)) << "start-up failed: the run directory it created is gone";
  // Into an existing directory with a file of the user's: only the run's files go.
  fs::create_directories(run);
  { std::ofstream(run + "/notes.txt") << "mine\n"; }
  g_reward_calls = 0;
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_FALSE(error_of([&] { t.run(RunMode::kFresh); }).empty());
  }
  EXPECT_TRUE(fs::exists(run + "/notes.txt"));
  EXPECT_FALSE(fs::exists(run + "/config.yaml"));
  EXPECT_FALSE(fs::exists(run + "/metrics.jsonl"));
  // Later: 1 baseline call, 4 per step (2 prompts x 2): call 6 is in step 2.
  g_reward_calls = 0;
  g_fail_on_call = 6;
  {
    RLTrainer t(load_train_config(tree), tree);
    const std::string e = error_of([&] { t.run(RunMode::kFresh); });
    EXPECT_NE(e.find("reward backend went away"), std::string::npos) << e;
    EXPECT_NE(e.find("the run stopped in step 2"), std::string::npos) << e;
    EXPECT_NE(e.find("--resume continues from " + run + "/checkpoints/step_000001"), std::string::npos) << e;
  }
  EXPECT_EQ(logged_steps(run), (std::vector<int64_t>{0, 1}));
  const json summary = json::parse(read_text_file(run + "/summary.json"));
  EXPECT_EQ(summary["failed"]["step"], 2);
  g_fail_on_call = 0;
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kResume).steps, 3);
  }
  EXPECT_EQ(logged_steps(run), (std::vector<int64_t>{0, 1, 2, 3, 3}));
  EXPECT_FALSE(json::parse(read_text_file(run + "/summary.json")).contains("failed"));
  fs::remove_all(dir);
}

// A reward service that fails now and then (InfraError on every third call): the
// trajectories it failed are left out of training, not scored 0. They are counted
// (env/infra_failures), dumped with the reason and no advantage, and each group's
// GRPO advantages are over its other members (so they sum to 0 there; had the failed
// ones been scored, the rest would sum to minus theirs). A member left alone in its
// group (the rollouts' order decides which fail) is left out too (env/infra_orphans):
// GRPO would give it its raw score.
std::atomic<int> g_flaky_calls{0};
TEST(RLTrainerTest, InfrastructureFailuresAreLeftOutOfTheirGroups) {
  static bool once = [] {
    tasks::register_reward_fn("test_flaky_service", [](const json&) -> tasks::RewardFn {
      return [](const std::string& text, const json&, const json&) -> float {
        if (++g_flaky_calls % 3 == 0) throw InfraError("judge service: HTTP 503 after 3 retries");
        return static_cast<float>(text.size() % 3) / 2.0f;
      };
    });
    return true;
  }();
  (void)once;
  g_flaky_calls = 0;
  const std::string dir = make_tiny_model_dir();
  const std::string run = dir + "/run";
  // Calls: 1 for the baseline's greedy trajectory, then 6 in step 1 (2 prompts x 3):
  // calls 3 and 6 fail.
  json tree = tiny_run_tree(dir, {"trainer.total_steps=1", "rollout.n=3", "rollout.reward_fn=test_flaky_service",
                                  "rollout.max_new_tokens=12"});
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kFresh).steps, 1);
  }
  const std::vector<json> steps = step_metrics(run);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0]["env/infra_failures"].get<double>(), 2.0);
  const int orphans = static_cast<int>(steps[0]["env/infra_orphans"].get<double>());
  std::map<std::string, double> group_sum;
  int failed = 0, trained = 0, alone = 0;
  for (const json& j : read_jsonl(run + "/trajectories/step_000001.jsonl")) {
    if (j.contains("excluded")) {
      ++alone;
      EXPECT_FALSE(j.contains("advantage"));
      continue;
    }
    if (j.contains("infra_failure")) {
      ++failed;
      EXPECT_EQ(j["infra_failure"], "reward function 'test_flaky_service': judge service: HTTP 503 after 3 retries");
      EXPECT_FALSE(j.contains("advantage"));
      continue;
    }
    ++trained;
    group_sum[j["group"].get<std::string>()] += j["advantage"].get<double>();
  }
  EXPECT_EQ(failed, 2);
  EXPECT_EQ(alone, orphans);
  EXPECT_EQ(trained, 4 - orphans);
  for (const auto& [g, sum] : group_sum) EXPECT_NEAR(sum, 0.0, 1e-5) << "group " << g;
  fs::remove_all(dir);
}

// A reward service that never answers: nothing can be trained, so the run stops after 3
// such steps with the failure named, instead of checkpointing an unchanged policy; the
// validation before it counts the failure and scores nothing.
TEST(RLTrainerTest, ARunWhoseInfrastructureFailsEverythingStops) {
  static bool once = [] {
    tasks::register_reward_fn("test_down_service", [](const json&) -> tasks::RewardFn {
      return [](const std::string&, const json&, const json&) -> float {
        throw InfraError("judge service: connection refused");
      };
    });
    return true;
  }();
  (void)once;
  const std::string dir = make_tiny_model_dir();
  const std::string run = dir + "/run";
  json tree = tiny_run_tree(dir, {"trainer.total_steps=6", "rollout.reward_fn=test_down_service"});
  {
    RLTrainer t(load_train_config(tree), tree);
    const std::string e = error_of([&] { t.run(RunMode::kFresh); });
    EXPECT_NE(e.find("every trajectory of the last 3 steps failed for infrastructure reasons"), std::string::npos) << e;
    EXPECT_NE(e.find("judge service: connection refused"), std::string::npos) << e;
    EXPECT_NE(e.find("the run stopped in step 3"), std::string::npos) << e;
  }
  const std::vector<json> steps = step_metrics(run);
  ASSERT_EQ(steps.size(), 2u);  // steps 1 and 2 logged; step 3 failed
  EXPECT_EQ(steps[0]["env/infra_failures"].get<double>(), 4.0);  // 2 prompts x 2
  const json baseline = read_jsonl(run + "/metrics.jsonl").front();
  EXPECT_EQ(baseline["val/infra_failures"].get<double>(), 1.0);
  EXPECT_EQ(baseline["val/success/greedy"].get<double>(), 0.0);
  fs::remove_all(dir);
}

// A stop request (Ctrl-C) ends the run after the current step with a checkpoint and a
// message saying how to resume; the resumed run ends where the uninterrupted one would.
TEST(RLTrainerCrashSafety, StopRequestCheckpointsAndResumes) {
  const std::string dir = make_tiny_model_dir();
  const std::string run = dir + "/run";
  json tree = tiny_run_tree(dir, {"trainer.total_steps=3"});  // save_freq 0: only at the end
  std::atomic<int> flag{2};                                     // SIGINT already arrived
  {
    RLTrainer t(load_train_config(tree), tree);
    t.set_stop_flag(&flag);
    try {
      t.run(RunMode::kFresh);
      FAIL() << "expected StopRequested";
    } catch (const StopRequested& e) {
      EXPECT_EQ(e.step, 1);
      EXPECT_NE(std::string(e.what()).find("stopped at step 1 of 3"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--resume"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000001/model.safetensors"));
  EXPECT_EQ(logged_steps(run), (std::vector<int64_t>{0, 1}));
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kResume).steps, 3);
  }
  EXPECT_EQ(logged_steps(run), (std::vector<int64_t>{0, 1, 2, 3, 3}));
  fs::remove_all(dir);
}

// A health monitor in trainer.health.stop_on stops the run like Ctrl-C: logged, a
// checkpoint, StopRequested naming the monitor. (Entropy is always below 1e9.)
TEST(RLTrainerCrashSafety, HealthMonitorInStopOnStopsTheRunCleanly) {
  const std::string dir = make_tiny_model_dir();
  const std::string run = dir + "/run";
  json tree = tiny_run_tree(dir, {"trainer.total_steps=3", "trainer.health.entropy_min=1e9",
                                  "trainer.health.stop_on=[entropy_collapse]"});
  {
    RLTrainer t(load_train_config(tree), tree);
    try {
      t.run(RunMode::kFresh);
      FAIL() << "expected StopRequested";
    } catch (const StopRequested& e) {
      EXPECT_EQ(e.step, 1);
      EXPECT_NE(std::string(e.what()).find("health monitor entropy_collapse"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000001/model.safetensors"));
  const std::vector<json> lines = read_jsonl(run + "/metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["health/entropy_collapse"], 1.0);
  EXPECT_EQ(lines[1]["health/nan"], 0.0);
  // Unknown monitor names fail in the config.
  json bad = tiny_run_tree(dir, {"trainer.health.stop_on=[entropy]"});
  const std::string e = error_of([&] { load_train_config(bad); });
  EXPECT_NE(e.find("trainer.health: health option 'stop_on': unknown monitor 'entropy'"), std::string::npos) << e;
  fs::remove_all(dir);
}

// RunDir's resume helpers on hand-written files.
TEST(RLTrainerCrashSafety, RunDirCutsLinesAndDumpsAfterAStep) {
  const std::string dir = make_tiny_model_dir();
  RunDir rd(dir + "/r");
  {
    std::ofstream f(rd.file("metrics.jsonl"));
    f << "{\"step\":0,\"a\":1}\n{\"step\":1}\n{\"step\":2}\n{\"step\":1,\"late\":true}\n{\"step\":3,\"x\"";
  }
  EXPECT_EQ(rd.cut_jsonl_after("metrics.jsonl", 1), 2u);  // step 2 and the cut line
  EXPECT_EQ(read_text_file(rd.file("metrics.jsonl")), "{\"step\":0,\"a\":1}\n{\"step\":1}\n{\"step\":1,\"late\":true}\n");
  EXPECT_EQ(rd.cut_jsonl_after("missing.jsonl", 1), 0u);
  for (const char* f : {"step_000001.jsonl", "step_000002.jsonl", "val_step_000002.jsonl", "val_step_000001.jsonl",
                        "notes.txt"})
    rd.append_jsonl(std::string("trajectories/") + f, json{{"x", 1}});
  EXPECT_EQ(rd.cut_dumps_after(1), 2u);
  EXPECT_TRUE(fs::exists(rd.file("trajectories/step_000001.jsonl")));
  EXPECT_TRUE(fs::exists(rd.file("trajectories/val_step_000001.jsonl")));
  EXPECT_FALSE(fs::exists(rd.file("trajectories/step_000002.jsonl")));
  EXPECT_FALSE(fs::exists(rd.file("trajectories/val_step_000002.jsonl")));
  EXPECT_TRUE(fs::exists(rd.file("trajectories/notes.txt")));
  rd.write_text("remote_weights/policy_v000001/config.json", "{}");
  rd.write_text("my_notes.txt", "mine");
  EXPECT_TRUE(rd.has_run());
  rd.clear_run();
  EXPECT_FALSE(rd.has_run());
  EXPECT_FALSE(fs::exists(rd.file("trajectories")));
  EXPECT_FALSE(fs::exists(rd.file("remote_weights")));  // a failed start or --overwrite leaves no model copies
  EXPECT_TRUE(fs::exists(rd.file("my_notes.txt")));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::train
