// agentr1/train/train_test_util.h — fixtures shared by the train layer's end-to-end
// tests (header-only, tests only).
//
//   const std::string dir = testing::make_tiny_model_dir("rl");   // /tmp/agentr1_rl_XXXXXX
//   // dir/model: the tiny Qwen3 tokenizer fixture + a random 2-layer Qwen3 model
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/tasks/reward.h"

#include "agentr1/model/transformer.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/train/distributed/distributed.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"

namespace agentr1::train::testing {

// The default train tree with a tiny run's settings (dir/model, dir/run, one thread, 2
// prompts x 2 samples, 6 new tokens, no validation but at the ends, every trajectory
// dumped), then `extra` overrides applied in order (later ones win).
inline json tiny_run_tree(const std::string& dir, const std::vector<std::string>& extra) {
  json tree = default_train_tree();
  std::vector<std::string> o = {
      "model.path=" + dir + "/model", "trainer.output_dir=" + dir + "/run", "trainer.test_freq=0",
      "trainer.threads=1", "data.train_batch_size=2", "data.val_size=1", "rollout.n=2", "rollout.val_k=0",
      "rollout.max_new_tokens=6", "rollout.max_prompt_tokens=2048", "rollout.max_steps=2",
      "trainer.progress=false", "trainer.dump_trajectories=-1"};
  o.insert(o.end(), extra.begin(), extra.end());
  for (const std::string& x : o) apply_override(tree, x);
  return tree;
}

// A fresh temporary directory holding model/: an HF model directory with the tiny
// Qwen3 tokenizer (tests/fixtures/flow/tiny_qwen3) and random weights (seed 5).
inline std::string make_tiny_model_dir(const std::string& tag) {
  std::string tmpl = "/tmp/agentr1_" + tag + "_XXXXXX";
  const char* made = mkdtemp(tmpl.data());
  AGENTR1_CHECK(made != nullptr, "mkdtemp failed for " << tmpl);
  const std::string dir = made;
  const std::string model_dir = dir + "/model";
  make_dirs(model_dir);
  copy_tokenizer_files(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3", model_dir);
  const text::Tokenizer tok = text::Tokenizer::load(model_dir);
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
  model::Transformer m = model::init_random(c, 5);
  model::save_pretrained(m, model_dir, at::kFloat);
  return dir;
}

// Every JSON line of a file (empty lines skipped).
inline std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// The step lines of a run's metrics.jsonl (validation lines have no timing/gen), in order.
inline std::vector<json> step_metrics(const std::string& run) {
  std::vector<json> out;
  for (json& m : read_jsonl(run + "/metrics.jsonl"))
    if (m.contains("timing/gen")) out.push_back(std::move(m));
  return out;
}

// The reward function "test_failing": 0 for every response, except that its fail_on-th
// call (counted in `calls`, from when the test arms it) throws "reward backend went away".
struct FailingReward {
  static inline std::atomic<int> calls{0};
  static inline std::atomic<int> fail_on{0};
  static void register_once() {
    static bool once = [] {
      tasks::register_reward_fn("test_failing", [](const json&) -> tasks::RewardFn {
        return [](const std::string&, const json&, const json&) -> float {
          if (++calls == fail_on.load()) throw std::runtime_error("reward backend went away");
          return 0.0f;
        };
      });
      return true;
    }();
    (void)once;
  }
};

// A port that was free a moment ago (the kernel's pick), for an in-process rendezvous.
inline int free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  close(fd);
  return ntohs(sa.sin_port);
}

// Runs fn(pg) on `world` threads, one rank each, over Gloo on 127.0.0.1.
inline void run_ranks(int world, const std::function<void(ProcessGroup&)>& fn, double timeout_s = 30) {
  const int port = free_local_port();
  std::vector<std::thread> ts;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      try {
        DistEnv e;
        e.rank = r;
        e.world_size = world;
        e.master_port = port;
        ProcessGroup pg(e, timeout_s);
        fn(pg);
      } catch (const std::exception& ex) {
        errors[r] = ex.what();
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < world; ++r) if (!errors[r].empty()) ADD_FAILURE() << "rank " << r << ": " << errors[r];
}

}  // namespace agentr1::train::testing
