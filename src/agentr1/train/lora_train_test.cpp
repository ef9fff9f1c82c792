// LoRA through the trainer: every update reaches the engine that samples the next step
// (the in-process engine sharing the module, and the asynchronous engine's copy), the
// reference is the base (KL > 0 once the adapter moved, no second model), only adapters
// change, checkpoints hold PEFT adapters and a run resumes from one.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/rollout/rollout_backend.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;
using agentr1::testing::error_of;
using testing::step_metrics;

// A tiny run with LoRA and groups of 4. A large step so the adapter moves the policy far
// from its base within a step: an update that did not reach the engine would show in
// logprob_max_diff. A random model earns no reward (zero advantages): the entropy bonus
// gives the gradient.
json lora_tree(const std::string& dir, std::vector<std::string> extra) {
  std::vector<std::string> o = {"rollout.n=4", "trainer.save_freq=1", "trainer.dump_trajectories=16",
                                "actor.lora.rank=4", "actor.lora.alpha=8", "actor.optim.lr=0.05",
                                "actor.entropy_coeff=0.5", "actor.use_kl_loss=true", "actor.kl_loss_coef=0.001"};
  o.insert(o.end(), extra.begin(), extra.end());
  return testing::tiny_run_tree(dir, o);
}

TEST(LoraTrainTest, UpdatesReachTheEngineReferenceIsTheBaseAndRunsResume) {
  const std::string dir = testing::make_tiny_model_dir("lora");
  json tree = lora_tree(dir, {"trainer.total_steps=3"});
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kFresh).steps, 3);
  }
  const std::string run = dir + "/run";
  const auto steps = step_metrics(run);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    // The engine sampled from the learner's current adapter: its behaviour log-probs are
    // the learner's (before the step's update) to fp32 rounding.
    EXPECT_LT(steps[i]["rollout/logprob_max_diff"].get<double>(), 1e-3) << "step " << i + 1;
  }
  // The policy moved away from the base, and the KL is measured against the base.
  EXPECT_GT(steps[2]["actor/kl_loss"].get<double>(), 1e-6);

  // The checkpoint is a PEFT adapter over the run's model.path, not a model copy.
  const std::string ck = run + "/checkpoints/step_000003";
  EXPECT_TRUE(fs::exists(ck + "/adapter_config.json"));
  EXPECT_TRUE(fs::exists(ck + "/adapter_model.safetensors"));
  EXPECT_FALSE(fs::exists(ck + "/model.safetensors"));
  const json ac = json::parse(read_text_file(ck + "/adapter_config.json"));
  EXPECT_EQ(ac["r"], 4);
  EXPECT_EQ(ac["base_model_name_or_path"], dir + "/model");

  // The base is untouched: base + adapter differs from the base, and BaseOnly gives it.
  model::Transformer base = model::load_pretrained(dir + "/model", at::kFloat, at::kCPU);
  model::Transformer tuned = model::load_pretrained(dir + "/model", at::kFloat, at::kCPU);
  model::load_lora_adapter(tuned, ck);
  {
    at::NoGradGuard ng;
    const at::Tensor ids = at::arange(1, 20, at::kLong).unsqueeze(0);
    EXPECT_GT((tuned->forward(ids) - base->forward(ids)).abs().max().item<double>(), 1e-3);
    model::BaseOnly b;
    EXPECT_EQ((tuned->forward(ids) - base->forward(ids)).abs().max().item<double>(), 0.0);
  }

  // Resume from the adapter checkpoint; a run without LoRA cannot resume from it.
  apply_override(tree, "trainer.total_steps=4");
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kResume).steps, 4);
  }
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000004/adapter_model.safetensors"));
  json full = tree;
  apply_override(full, "actor.lora.rank=0");
  apply_override(full, "trainer.total_steps=5");
  const std::string e = error_of([&] {
    RLTrainer t(load_train_config(full), full);
    t.run(RunMode::kResume);
  });
  EXPECT_NE(e.find("holds a LoRA adapter but actor.lora.rank is 0"), std::string::npos) << e;
  fs::remove_all(dir);
}

// PPO with LoRA on both the policy and the critic: the critic trains (its value loss is
// reported every step), its checkpoint is a PEFT adapter + value head over the run's
// base, and the run resumes from it.
TEST(LoraTrainTest, PpoWithALoraCriticCheckpointsAdaptersAndResumes) {
  const std::string dir = testing::make_tiny_model_dir("lora_ppo");
  json tree = lora_tree(dir, {"trainer.total_steps=2", "algorithm.adv_estimator=gae", "critic.lora.rank=4",
                              "critic.lora.alpha=8"});
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kFresh).steps, 2);
  }
  const std::string run = dir + "/run";
  const auto steps = step_metrics(run);
  ASSERT_EQ(steps.size(), 2u);
  for (const auto& m : steps) {
    ASSERT_TRUE(m.contains("critic/vf_loss")) << m.dump();
    EXPECT_TRUE(std::isfinite(m["critic/vf_loss"].get<double>()));
  }
  const std::string ck = run + "/checkpoints/step_000002/critic";
  EXPECT_TRUE(fs::exists(ck + "/adapter_model.safetensors"));
  EXPECT_TRUE(fs::exists(ck + "/value_head.safetensors"));
  EXPECT_FALSE(fs::exists(ck + "/model.safetensors"));
  const json ac = json::parse(read_text_file(ck + "/adapter_config.json"));
  EXPECT_EQ(ac["base_model_name_or_path"], dir + "/model");
  apply_override(tree, "trainer.total_steps=3");
  {
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kResume).steps, 3);
  }
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000003/critic/adapter_model.safetensors"));
  fs::remove_all(dir);
}

// The asynchronous engine has its own module: it shares the frozen base (no copy) and
// receives each staged adapter; after apply, its log-probs are the learner's.
TEST(LoraTrainTest, EngineCopySharesTheBaseAndReceivesEveryAdapterVersion) {
  const std::string dir = testing::make_tiny_model_dir("lora_copy");
  model::Transformer policy = model::load_pretrained(dir + "/model", at::kFloat, at::kCPU);
  model::LoraOptions lo;
  lo.rank = 4;
  lo.alpha = 8;
  policy->add_lora(lo, 1);
  rollout::EngineOptions eo;
  eo.max_batch = 2;
  eo.max_context = 64;
  EngineCopyBackend backend(policy, eo);

  // The learner's prompt log-probs (teacher forcing) vs the engine's greedy sample.
  const TokenIds prompt{5, 9, 11, 3, 7};
  auto engine_sample = [&] {
    GenRequest r;
    r.prompt_ids = prompt;
    r.sampling.temperature = 0;
    r.sampling.max_new_tokens = 6;
    return backend.generator().submit(std::move(r)).get();
  };
  auto learner_logprobs = [&](const GenResult& g) {
    TokenIds all = prompt;
    all.insert(all.end(), g.token_ids.begin(), g.token_ids.end());
    at::NoGradGuard ng;
    const at::Tensor ids = at::tensor(std::vector<int64_t>(all.begin(), all.end()), at::kLong).unsqueeze(0);
    return model::token_logprobs(policy, ids)[0].narrow(0, static_cast<int64_t>(prompt.size()) - 1,
                                                         static_cast<int64_t>(g.token_ids.size()));
  };
  auto max_diff = [&](const GenResult& g) {
    const at::Tensor lp = learner_logprobs(g);
    double d = 0;
    for (size_t i = 0; i < g.logprobs.size(); ++i)
      d = std::max(d, std::abs(lp[static_cast<int64_t>(i)].item<double>() - g.logprobs[i]));
    return d;
  };
  EXPECT_LT(max_diff(engine_sample()), 1e-4);
  for (int version = 1; version <= 2; ++version) {
    {  // an "update": new adapter values on the learner's module
      at::NoGradGuard ng;
      for (auto& [name, t] : policy->lora_parameters()) t.normal_(0.0, 0.5);
    }
    const GenResult stale = engine_sample();
    EXPECT_GT(max_diff(stale), 1e-3) << "the copy followed the learner without a weight swap";
    backend.apply(backend.stage(version), /*in_flight=*/false);
    EXPECT_LT(max_diff(engine_sample()), 1e-4) << "version " << version;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::train
