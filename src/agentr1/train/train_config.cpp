#include "agentr1/train/train_config.h"

#include "agentr1/algo/estimator.h"
#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/strings.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/train/device.h"

#include <algorithm>
#include <cmath>

namespace agentr1::train {

void DataOptions::validate() const {
  AGENTR1_CHECK(train_batch_size >= 1, "data.train_batch_size must be >= 1, got " << train_batch_size);
  AGENTR1_CHECK(!task.empty(), "data.task must name a task family (e.g. arithmetic), got ''");
  AGENTR1_CHECK(task_kwargs.is_object() || task_kwargs.is_null(),
                "data.task_kwargs must be a map of the task family's options, got " << task_kwargs.dump());
  // Resolve the family now (unknown name, bad options), before any model is loaded.
  tasks::register_builtin_tasks();
  with_context("data.task", [&] { return tasks::make_task_family(task, task_kwargs); });
  // The sizes only matter for generated datasets; a file's row count is the file's.
  if (train_files.empty())
    AGENTR1_CHECK(train_size >= 1, "data.train_size must be >= 1 (no data.train_files given), got " << train_size);
  if (val_files.empty())
    AGENTR1_CHECK(val_size >= 0, "data.val_size must be >= 0 (no data.val_files given), got " << val_size);
}

void RolloutConfig::validate() const {
  AGENTR1_CHECK(n >= 1, "rollout.n must be >= 1, got " << n);
  AGENTR1_CHECK(dtype.empty() || dtype == "fp32" || dtype == "bf16",
                "rollout.dtype must be empty (= model.dtype), fp32 or bf16, got '" << dtype << "'");
  AGENTR1_CHECK(dtype.empty() || !remote_engine(),
                "rollout.dtype=" << dtype << " sets the in-process engine's weights; with rollout.engine=remote the "
                "servers load the weights in their own dtype. HINT: drop rollout.dtype");
  AGENTR1_CHECK(max_batch >= 1, "rollout.max_batch must be >= 1, got " << max_batch);
  AGENTR1_CHECK(kv_block_size >= 1, "rollout.kv_block_size must be >= 1, got " << kv_block_size);
  const int per_seq = (flow.max_prompt_tokens + flow.max_new_tokens + kv_block_size - 1) / kv_block_size;
  AGENTR1_CHECK(kv_blocks == 0 || kv_blocks >= per_seq,
                "rollout.kv_blocks must be 0 (auto) or hold one sequence of rollout.max_prompt_tokens + "
                "rollout.max_new_tokens positions ("
                    << per_seq << " blocks of " << kv_block_size << "), got " << kv_blocks);
  AGENTR1_CHECK(val_k >= 0, "rollout.val_k must be >= 0, got " << val_k);
  AGENTR1_CHECK(val_temperature > 0, "rollout.val_temperature must be > 0, got " << val_temperature);
  AGENTR1_CHECK(max_staleness >= 0 && max_staleness <= 1000,
                "rollout.max_staleness must be in 0..1000 (0 = synchronous), got " << max_staleness);
  AGENTR1_CHECK(engine_threads >= 0 && engine_threads <= 1024,
                "rollout.engine_threads must be in 0..1024 (0 = trainer.threads), got " << engine_threads);
  AGENTR1_CHECK(engine_nice >= 0 && engine_nice <= 19,
                "rollout.engine_nice must be in 0..19 (a lower priority; 0 = unchanged), got " << engine_nice);
  if (remote_engine()) remote.validate_remote();
  flow.validate();
}

void AlgorithmOptions::resolve() {
  kl_penalty_type = with_context("algorithm.kl_penalty", [&] { return algo::kl_type_from_string(kl_penalty); });
  distill.resolve();
  validate();
}

void AlgorithmOptions::validate() const {
  with_context("algorithm.adv_estimator", [&] { return algo::make_estimator(adv_estimator); });
  AGENTR1_CHECK(estimator.gamma > 0 && estimator.gamma <= 1,
                "algorithm.gamma must be in (0, 1], got " << estimator.gamma);
  AGENTR1_CHECK(estimator.eps > 0 && std::isfinite(estimator.eps),
                "algorithm.eps must be a positive number, got " << estimator.eps);
  estimator.validate();
  kl_ctrl.validate();
}

bool AlgorithmOptions::uses_critic() const { return algo::make_estimator(adv_estimator)->needs_values(); }

void TrainerOptions::validate() const {
  AGENTR1_CHECK(total_steps >= 0, "trainer.total_steps must be >= 0, got " << total_steps);
  AGENTR1_CHECK(test_freq >= 0, "trainer.test_freq must be >= 0, got " << test_freq);
  AGENTR1_CHECK(save_freq >= 0, "trainer.save_freq must be >= 0, got " << save_freq);
  dist.validate();
  AGENTR1_CHECK(threads >= 0 && threads <= 1024,
                "trainer.threads must be in 0..1024 (0 = all cores), got " << threads);
  AGENTR1_CHECK(tool_threads >= 1 && tool_threads <= 1024,
                "trainer.tool_threads must be in 1..1024, got " << tool_threads);
  AGENTR1_CHECK(critic_warmup >= 0, "trainer.critic_warmup must be >= 0, got " << critic_warmup);
  AGENTR1_CHECK(memory_gb >= 0, "trainer.memory_gb must be >= 0 (0 = what the machine has), got " << memory_gb);
  logger_sinks();
  // Checked here, before any model is built: a missing CUDA fails at once.
  with_context("trainer.device", [&] { require_device_available(parse_device(device)); });
}

LoggerSinks TrainerOptions::logger_sinks() const {
  static const char* const kKnown = "console, jsonl, tensorboard";
  LoggerSinks out;
  out.console = false;
  bool jsonl = false;
  std::vector<std::string> seen;
  for (const std::string& name : logger) {
    AGENTR1_CHECK(std::find(seen.begin(), seen.end(), name) == seen.end(),
                  "trainer.logger names '" << name << "' twice; each logger once (known: " << kKnown << ")");
    seen.push_back(name);
    if (name == "console") {
      out.console = true;
    } else if (name == "jsonl") {
      jsonl = true;
    } else if (name == "tensorboard") {
      out.tensorboard = true;
    } else {
      throw Error("trainer.logger: unknown logger '" + name + "'; known: " + kKnown);
    }
  }
  AGENTR1_CHECK(jsonl, "trainer.logger must include jsonl (metrics.jsonl is what resume, plots and agentr1 view "
                       "read), got [" << join(logger, ", ") << "]. HINT: trainer.logger=["
                       << join(logger, ",") << (logger.empty() ? "" : ",") << "jsonl]");
  return out;
}

void TrainConfig::validate() {
  data.validate();
  rollout.validate();
  algorithm.resolve();
  trainer.validate();
  actor.resolve();
  critic.resolve();
  AGENTR1_CHECK(trainer.critic_warmup == 0 || algorithm.uses_critic(),
                "trainer.critic_warmup=" << trainer.critic_warmup << " needs a critic, but algorithm.adv_estimator '"
                    << algorithm.adv_estimator << "' does not use one (HINT: use gae or token_gae, or set "
                    "trainer.critic_warmup=0)");
  AGENTR1_CHECK(model.dtype == "fp32" || model.dtype == "bf16",
                "model.dtype must be fp32 or bf16, got '" << model.dtype << "'");
}

json default_train_tree() { return config_to_json(TrainConfig{}); }

TrainConfig load_train_config(const json& tree) {
  TrainConfig cfg = bind_config<TrainConfig>(tree);
  cfg.validate();
  return cfg;
}

const char* rollout_engine_name(RolloutEngine e) { return e == RolloutEngine::kRemote ? "remote" : "local"; }

}  // namespace agentr1::train

namespace agentr1::config_detail {

void Codec<train::RolloutEngine>::read(const json& v, train::RolloutEngine& out, const std::string& key,
                                       BindContext& ctx) {
  const char* valid = "\"local\" (the in-process engine) or \"remote\" (OpenAI-compatible servers, rollout.remote.*)";
  const std::string name = v.is_string() ? v.get<std::string>() : "";
  if (name == "local") {
    out = train::RolloutEngine::kLocal;
  } else if (name == "remote") {
    out = train::RolloutEngine::kRemote;
  } else {
    ctx.errors.push_back(type_error(key, valid, v));
  }
}

}  // namespace agentr1::config_detail
