// trainer.logger end to end: a tiny run with [console, jsonl, tensorboard], its event file
// read by an independent Python reader (tests/ref/tb_events_read.py: python3-protobuf,
// its own CRC-32C), every metrics.jsonl value found there at its step; and the config
// errors of trainer.logger.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>
#include <string>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;
using testing::read_jsonl;
using testing::tiny_run_tree;

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << cmd;
  return out;
}

std::string config_error(const std::vector<std::string>& overrides) {
  json tree = tiny_run_tree("/tmp/agentr1_tb_config_unused", overrides);
  try {
    load_train_config(tree);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TensorBoardRunTest, LoggerConfigErrors) {
  EXPECT_EQ(config_error({}), "");
  EXPECT_EQ(config_error({"trainer.logger=[jsonl]"}), "");
  EXPECT_TRUE(TrainConfig().trainer.logger_sinks().console);
  EXPECT_FALSE(TrainConfig().trainer.logger_sinks().tensorboard);
  std::string e = config_error({"trainer.logger=[console, jsonl, wandb]"});
  EXPECT_NE(e.find("trainer.logger: unknown logger 'wandb'; known: console, jsonl, tensorboard"), std::string::npos)
      << e;
  e = config_error({"trainer.logger=[console, tensorboard]"});
  EXPECT_NE(e.find("trainer.logger must include jsonl"), std::string::npos) << e;
  EXPECT_NE(e.find("HINT: trainer.logger=[console,tensorboard,jsonl]"), std::string::npos) << e;
  e = config_error({"trainer.logger=[]"});
  EXPECT_NE(e.find("HINT: trainer.logger=[jsonl]"), std::string::npos) << e;
  e = config_error({"trainer.logger=[jsonl, tensorboard, jsonl]"});
  EXPECT_NE(e.find("trainer.logger names 'jsonl' twice"), std::string::npos) << e;
  e = config_error({"trainer.logger=tensorboard"});
  EXPECT_NE(e.find("trainer.logger"), std::string::npos) << e;
}

TEST(TensorBoardRunTest, EveryMetricReachesTensorBoard) {
  const std::string dir = testing::make_tiny_model_dir("tb");
  const std::string run = dir + "/run";
  json tree = tiny_run_tree(dir, {"trainer.logger=[console, jsonl, tensorboard]", "trainer.total_steps=2",
                                  "trainer.test_freq=1", "rollout.val_k=1", "trainer.dump_trajectories=3"});
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(/*resume=*/false).steps, 2);
  }
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(run + "/tensorboard")) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(fs::path(files[0]).filename().string().rfind("events.out.tfevents.", 0), 0u) << files[0];
  const std::string out = run_capture(std::string(AGENTR1_PYTHON) + " " + AGENTR1_SOURCE_DIR +
                                      "/tests/ref/tb_events_read.py " + files[0]);
  const json tb = json::parse(out);
  EXPECT_EQ(tb["file_version"], "brain.Event:2");
  // Every value of every metrics line (steps and validations), at its step, as float32.
  size_t checked = 0;
  bool saw_val = false;
  for (const json& line : read_jsonl(run + "/metrics.jsonl")) {
    const int64_t step = line["step"].get<int64_t>();
    for (const auto& kv : line.items()) {
      if (kv.key() == "step") continue;
      saw_val = saw_val || kv.key().rfind("val/", 0) == 0;
      ASSERT_TRUE(tb["scalars"].contains(kv.key())) << kv.key();
      bool found = false;
      for (const json& sv : tb["scalars"][kv.key()]) {
        if (sv[0].get<int64_t>() != step) continue;
        if (kv.value().is_null()) {
          found = sv[1].is_null();
        } else {
          const double want = kv.value().get<double>(), got = sv[1].get<double>();
          found = std::abs(got - want) <= 1e-6 * std::abs(want) + 1e-30 ||
                  static_cast<float>(want) == static_cast<float>(got);
        }
        if (found) break;
      }
      EXPECT_TRUE(found) << kv.key() << " at step " << step << " = " << kv.value().dump() << "; TensorBoard has "
                         << tb["scalars"][kv.key()].dump();
      ++checked;
    }
  }
  EXPECT_TRUE(saw_val);
  EXPECT_GT(checked, 50u);
  // No scalar in TensorBoard that metrics.jsonl does not have.
  size_t tb_points = 0;
  for (const auto& kv : tb["scalars"].items()) tb_points += kv.value().size();
  EXPECT_EQ(tb_points, checked);
  // One text sample per step that dumped trajectories, with a prompt and a response.
  ASSERT_TRUE(tb["texts"].contains("trajectories/sample")) << tb["texts"].dump();
  const json& texts = tb["texts"]["trajectories/sample"];
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_EQ(texts[0][0], 1);
  EXPECT_EQ(texts[1][0], 2);
  const std::string md = texts[0][1].get<std::string>();
  EXPECT_NE(md.find("### trajectory 0"), std::string::npos) << md;
  EXPECT_NE(md.find("### trajectory 1"), std::string::npos) << md;
  EXPECT_EQ(md.find("### trajectory 2"), std::string::npos) << md;
  EXPECT_NE(md.find("**prompt** (step 0)"), std::string::npos) << md;
  EXPECT_NE(md.find("**response 0** (reward "), std::string::npos) << md;
  EXPECT_NE(md.find(", advantage "), std::string::npos) << md;
  EXPECT_NE(md.find("```"), std::string::npos) << md;
  fs::remove_all(dir);
}

// A resumed run writes a second event file that starts with SessionLog START at the first
// step after its checkpoint (TensorBoard drops the older file's points from there on), and
// starting the run over removes tensorboard/ with the rest of the run.
TEST(TensorBoardRunTest, ResumeStartsASessionAndOverwriteClearsTheFiles) {
  const std::string dir = testing::make_tiny_model_dir("tb_resume");
  const std::string run = dir + "/run";
  auto tree_for = [&](int steps) {
    return tiny_run_tree(dir, {"trainer.logger=[console, jsonl, tensorboard]", "trainer.total_steps=" +
                                   std::to_string(steps), "trainer.save_freq=1", "trainer.test_freq=0"});
  };
  {
    json tree = tree_for(1);
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(/*resume=*/false).steps, 1);
  }
  auto event_files = [&] {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(run + "/tensorboard")) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    return files;
  };
  ASSERT_EQ(event_files().size(), 1u);
  const std::string first = event_files()[0];
  // The resumed run's writer may start in the same second as the first: its file gets
  // a name of its own.
  {
    json tree = tree_for(2);
    RLTrainer t(load_train_config(tree), tree);
    t.run(/*resume=*/true);
  }
  std::vector<std::string> files = event_files();
  ASSERT_EQ(files.size(), 2u);
  const std::string second = files[0] == first ? files[1] : files[0];
  const auto read = [](const std::string& f) {
    return json::parse(run_capture(std::string(AGENTR1_PYTHON) + " " + AGENTR1_SOURCE_DIR +
                                   "/tests/ref/tb_events_read.py " + f));
  };
  EXPECT_EQ(read(first)["session_starts"], json::array());
  const json tb = read(second);
  EXPECT_EQ(tb["session_starts"], json::parse("[2]"));  // checkpoint at step 1
  ASSERT_TRUE(tb["scalars"].contains("critic/score/mean")) << tb.dump();
  EXPECT_EQ(tb["scalars"]["critic/score/mean"][0][0], 2);
  RunDir(run).clear_run();
  EXPECT_FALSE(fs::exists(run + "/tensorboard"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::train
