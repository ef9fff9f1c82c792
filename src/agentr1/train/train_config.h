// agentr1/train/train_config.h — the whole configuration of `agentr1 train` / `sft`,
// one options struct per section, key names following verl / Agent-R1.
//
//   json tree = config_to_json(TrainConfig{});           // defaults
//   merge_json(tree, load_yaml_file(path));               // --config FILE
//   apply_overrides(tree, {"rollout.n=8", "actor.optim.lr=3e-5"});
//   TrainConfig cfg = load_train_config(tree);            // typed, validated
//
// Unknown keys fail naming the nearest valid key; every field has a default and a doc
// (`agentr1 train --help-config` prints them).
#pragma once

#include <cstdint>
#include <string>

#include "agentr1/algo/kl_controller.h"
#include "agentr1/core/json.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/train/actor.h"
#include "agentr1/train/critic.h"

namespace agentr1::train {

struct DataOptions {
  std::string train_files;        // JSONL samples; "" = the built-in arithmetic generator
  std::string val_files;          // JSONL held-out samples; "" = generated (disjoint seeds)
  int train_batch_size = 8;       // prompts per RL step
  int train_size = 4096;          // generated training problems (when train_files is "")
  int val_size = 64;              // held-out problems (when val_files is "")
  int min_level = 1;              // generated problems: fewest operations
  int max_level = 1;              // generated problems: most operations
  int seed = 1;                   // seed of the generated datasets and the sampling order
  bool skip_bad_rows = false;     // malformed JSONL rows: warn and skip instead of failing
  bool use_system_prompt = true;  // generated problems: start with the task's system prompt
  template <class V>
  void visit(V& v) {
    v.field("train_files", train_files, "training JSONL (Agent-R1 sample schema); empty = generated");
    v.field("val_files", val_files, "validation JSONL; empty = generated held-out problems");
    v.field("train_batch_size", train_batch_size, "prompts per RL step");
    v.field("train_size", train_size, "generated training problems");
    v.field("val_size", val_size, "generated held-out problems");
    v.field("min_level", min_level, "generated problems: fewest operations (1..4)");
    v.field("max_level", max_level, "generated problems: most operations (1..4)");
    v.field("seed", seed, "dataset generation and sampling-order seed");
    v.field("skip_bad_rows", skip_bad_rows, "skip malformed JSONL rows with a warning");
    v.field("use_system_prompt", use_system_prompt, "generated problems: prepend the task's system prompt");
  }
  void validate() const;
};

struct ModelOptions {
  std::string path;               // HF model dir (config.json, model.safetensors, tokenizer);
                                  // "" = the built-in default (built on first use)
  std::string dtype = "fp32";     // training dtype: fp32 | bf16
  template <class V>
  void visit(V& v) {
    v.field("path", path, "HF model directory; empty = built-in default model");
    v.field("dtype", dtype, "weights dtype for training and rollout: fp32 | bf16");
  }
};

struct RolloutConfig {
  int n = 8;                      // trajectories per prompt (GRPO group size)
  int max_batch = 64;             // engine: sequences decoded together
  bool prefix_cache = true;       // engine: reuse KV of shared prefixes
  int val_k = 4;                  // validation mean@k: samples per held-out prompt
  double val_temperature = 1.0;   // temperature of the mean@k samples
  flow::FlowOptions flow;         // budgets, sampling, agent, env kwargs
  // Defaults sized for the built-in task: short turns, no thinking block generated.
  RolloutConfig() {
    flow.enable_thinking = false;
    flow.max_new_tokens = 128;
    flow.max_response_tokens = 384;
    flow.max_prompt_tokens = 1024;
  }
  template <class V>
  void visit(V& v) {
    v.field("n", n, "trajectories per prompt (GRPO group size)");
    v.field("max_batch", max_batch, "engine: sequences decoded together");
    v.field("prefix_cache", prefix_cache, "engine: reuse keys/values of shared prefixes");
    v.field("val_k", val_k, "validation mean@k: samples per held-out prompt (0 = skip)");
    v.field("val_temperature", val_temperature, "temperature of the mean@k samples");
    flow.visit(v);
  }
  void validate() const;
};

struct AlgorithmOptions {
  std::string adv_estimator = "grpo";   // advantage estimator (algo::make_estimator name)
  bool norm_adv_by_std_in_grpo = true;  // false = Dr.GRPO
  double gamma = 1.0;                   // discount (reinforce_plus_plus, turn_rloo)
  double lam = 1.0;                     // GAE lambda (critic estimators)
  bool use_kl_in_reward = false;        // subtract kl_coef * KL(pi_old || ref) from each action
                                        // token's reward (needs the reference model)
  std::string kl_penalty = "kl";        // KL estimator of the reward penalty: kl (k1) | abs |
                                        // mse (k2) | low_var_kl (k3)
  algo::KlControllerOptions kl_ctrl;    // the coefficient: fixed or adaptive
  algo::KlType kl_penalty_type = algo::KlType::kK1;  // parsed kl_penalty (resolve())
  template <class V>
  void visit(V& v) {
    v.field("adv_estimator", adv_estimator,
            "grpo | rloo | reinforce_plus_plus | reinforce_plus_plus_baseline | turn_rloo | "
            "gae (step-level, critic) | token_gae (critic)");
    v.field("norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo, "divide by the group std (false: Dr.GRPO)");
    v.field("gamma", gamma, "discount factor");
    v.field("lam", lam, "GAE lambda");
    v.field("use_kl_in_reward", use_kl_in_reward, "penalise KL to the reference in the reward");
    v.field("kl_penalty", kl_penalty, "reward KL estimator: kl (k1) | abs | mse (k2) | low_var_kl (k3)");
    v.section("kl_ctrl", kl_ctrl, "KL-in-reward coefficient controller");
  }
  // Parses kl_penalty, then validate(). Throws Error naming the key.
  void resolve();
  void validate() const;
  // True when adv_estimator needs a critic (gae, token_gae).
  bool uses_critic() const;
};

struct TrainerOptions {
  int total_steps = 30;           // RL steps
  int test_freq = 10;             // validate every this many steps (0 = start and end only)
  int save_freq = 0;              // checkpoint every this many steps (0 = end only)
  std::string output_dir;         // run directory; "" = runs/<run_name>
  std::string run_name;           // "" = <adv_estimator>-<yyyymmdd-hhmmss>
  int critic_warmup = 0;          // the first N steps update only the critic (needs one)
  int seed = 42;                  // run seed (rollout sampling, init)
  int threads = 0;                // torch threads; 0 = all cores
  int tool_threads = 4;           // tool execution pool
  int dump_trajectories = 16;     // trajectories dumped per step (0 = none, -1 = all)
  bool progress = true;           // progress line on stderr
  template <class V>
  void visit(V& v) {
    v.field("total_steps", total_steps, "RL steps");
    v.field("test_freq", test_freq, "validate every N steps (0 = only at start and end)");
    v.field("save_freq", save_freq, "checkpoint every N steps (0 = only at the end)");
    v.field("output_dir", output_dir, "run directory; empty = runs/<run_name>");
    v.field("run_name", run_name, "run name; empty = <estimator>-<timestamp>");
    v.field("critic_warmup", critic_warmup, "steps at the start that update only the critic");
    v.field("seed", seed, "run seed");
    v.field("threads", threads, "torch threads; 0 = all cores");
    v.field("tool_threads", tool_threads, "threads executing tool calls");
    v.field("dump_trajectories", dump_trajectories, "trajectories dumped per step (-1 = all)");
    v.field("progress", progress, "progress line on stderr");
  }
  void validate() const;
};

struct TrainConfig {
  DataOptions data;
  ModelOptions model;
  ActorOptions actor;
  CriticOptions critic;
  RolloutConfig rollout;
  AlgorithmOptions algorithm;
  TrainerOptions trainer;
  template <class V>
  void visit(V& v) {
    v.section("data", data, "datasets");
    v.section("model", model, "policy model");
    v.section("actor", actor, "policy optimisation");
    v.section("critic", critic, "value model (used by the gae and token_gae estimators)");
    v.section("rollout", rollout, "rollout engine and agent loop");
    v.section("algorithm", algorithm, "advantage estimation and KL in the reward");
    v.section("trainer", trainer, "loop, validation, checkpoints, run directory");
  }
  void validate();
};

// The defaults as a tree (the base that files and overrides modify).
json default_train_tree();
// Typed + validated config from a tree. Throws Error listing every problem.
TrainConfig load_train_config(const json& tree);

}  // namespace agentr1::train
