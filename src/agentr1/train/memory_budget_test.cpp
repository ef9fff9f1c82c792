// The memory estimate's items against hand computations (Qwen3-0.6B's shape), the KV cache
// sized from what the budget leaves, the refusal's message, /proc/meminfo and cgroup
// parsing, and a refusal through RLTrainer that comes before any weights are read.
#include "agentr1/train/memory_budget.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/train_config.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

// Qwen3-0.6B (tied embeddings).
model::ModelConfig qwen3_06b() {
  model::ModelConfig c;
  c.arch = model::Arch::kQwen3;
  c.vocab_size = 151936;
  c.hidden_size = 1024;
  c.intermediate_size = 3072;
  c.num_hidden_layers = 28;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.qk_norm = true;
  c.tie_word_embeddings = true;
  c.max_position_embeddings = 40960;
  return c;
}

// Hand count: embedding 151936 x 1024; per layer q 1024x2048, k and v 1024x1024, o 2048x1024,
// q/k norms 2 x 128, MLP 3 x 1024x3072, two RMSNorms 2 x 1024; the final norm 1024.
constexpr int64_t kQwen06Params = 151936LL * 1024 +
                                  28LL * (1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 2 * 128 +
                                          3LL * 1024 * 3072 + 2 * 1024) +
                                  1024;

TrainConfig config(std::vector<std::string> overrides) {
  json tree = default_train_tree();
  for (const auto& o : overrides) apply_override(tree, o);
  return load_train_config(tree);
}

const MemoryItem* find(const MemoryPlan& p, const std::string& owner, const std::string& what_prefix) {
  for (const auto& i : p.items)
    if (i.owner == owner && i.what.rfind(what_prefix, 0) == 0) return &i;
  return nullptr;
}

MemoryBudget gib(double g) { return {static_cast<int64_t>(g * kGiB), "test"}; }

TEST(MemoryBudgetTest, Qwen06ParameterCountIsThePublishedOne) {
  EXPECT_EQ(kQwen06Params, 596049920);  // Qwen3-0.6B's model card, tied embeddings
  EXPECT_EQ(qwen3_06b().num_parameters(), kQwen06Params);
}

TEST(MemoryBudgetTest, FullFineTuningItems) {
  const MemoryPlan fp32 = plan_memory(config({}), qwen3_06b(), std::nullopt, gib(1000));
  ASSERT_NE(find(fp32, "policy", "weights"), nullptr);
  EXPECT_EQ(find(fp32, "policy", "weights")->bytes, kQwen06Params * 4);
  EXPECT_EQ(find(fp32, "policy", "gradients")->bytes, kQwen06Params * 4);
  EXPECT_EQ(find(fp32, "policy", "AdamW state")->bytes, 2 * kQwen06Params * 4);  // exp_avg, exp_avg_sq
  EXPECT_EQ(find(fp32, "reference", "weights"), nullptr);  // no KL: no reference
  EXPECT_EQ(find(fp32, "critic", "weights"), nullptr);     // grpo: no critic
  const MemoryPlan bf16 = plan_memory(config({"model.dtype=bf16"}), qwen3_06b(), std::nullopt, gib(1000));
  EXPECT_EQ(find(bf16, "policy", "weights")->bytes, kQwen06Params * 2);
  EXPECT_EQ(find(bf16, "policy", "AdamW state")->bytes, 2 * kQwen06Params * 2);
  const MemoryPlan kl = plan_memory(config({"actor.use_kl_loss=true"}), qwen3_06b(), std::nullopt, gib(1000));
  ASSERT_NE(find(kl, "reference", "weights"), nullptr);
  EXPECT_EQ(find(kl, "reference", "weights")->bytes, kQwen06Params * 4);
}

TEST(MemoryBudgetTest, LoraTrainsOnlyTheAdaptersAndNeedsNoReferenceCopy) {
  const MemoryPlan p = plan_memory(config({"actor.lora.rank=16", "actor.use_kl_loss=true", "model.dtype=bf16"}),
                                   qwen3_06b(), std::nullopt, gib(1000));
  // all-linear, r = 16: r x (in + out) per projection, per layer.
  const int64_t adapters = 28LL * 16 *
                           ((1024 + 2048) + 2 * (1024 + 1024) + (2048 + 1024) + 2 * (1024 + 3072) + (3072 + 1024));
  EXPECT_EQ(find(p, "policy", "weights")->bytes, kQwen06Params * 2);  // the base, bf16
  EXPECT_EQ(find(p, "policy", "LoRA adapters")->bytes, adapters * 4);  // fp32
  EXPECT_EQ(find(p, "policy", "gradients")->bytes, adapters * 4);
  EXPECT_EQ(find(p, "policy", "AdamW state")->bytes, 2 * adapters * 4);
  EXPECT_EQ(find(p, "reference", "weights"), nullptr);  // the base with adapters off
  // modules_to_save: the embedding trains whole (bf16 here) beside a frozen copy of it.
  const MemoryPlan q = plan_memory(config({"actor.lora.rank=16", "actor.lora.modules_to_save=[embed_tokens]",
                                           "model.dtype=bf16"}),
                                   qwen3_06b(), std::nullopt, gib(1000));
  const int64_t embed = 151936LL * 1024 * 2;
  ASSERT_NE(find(q, "policy", "modules_to_save"), nullptr);
  EXPECT_EQ(find(q, "policy", "modules_to_save")->bytes, embed);
  EXPECT_EQ(find(q, "policy", "gradients")->bytes, adapters * 4 + embed);
  EXPECT_EQ(find(q, "policy", "AdamW state")->bytes, 2 * (adapters * 4 + embed));
}

TEST(MemoryBudgetTest, CriticIsAnotherBodyWithItsOwnOptimiser) {
  model::ModelConfig small = qwen3_06b();
  small.num_hidden_layers = 2;
  small.tie_word_embeddings = false;  // its LM head gets no gradient
  const MemoryPlan p = plan_memory(config({"algorithm.adv_estimator=gae"}), qwen3_06b(), small, gib(1000));
  const int64_t body = small.num_parameters(), head = 1024 + 1;
  EXPECT_EQ(find(p, "critic", "weights")->bytes, (body + head) * 4);
  EXPECT_EQ(find(p, "critic", "gradients")->bytes, (body - 151936LL * 1024 + head) * 4);
  EXPECT_EQ(find(p, "critic", "AdamW state")->bytes, 2 * (body - 151936LL * 1024 + head) * 4);
}

// LoRA critic: from a LoRA policy it shares the frozen base (no weights of its own);
// adapters and the fp32 head are what it trains. From its own model_path the base counts.
TEST(MemoryBudgetTest, LoraCriticSharesTheBaseAndTrainsAdaptersAndHead) {
  const int64_t adapters = 28LL * 8 *
                           ((1024 + 2048) + 2 * (1024 + 1024) + (2048 + 1024) + 2 * (1024 + 3072) + (3072 + 1024));
  const int64_t trained = (adapters + 1024 + 1) * 4;
  const MemoryPlan p = plan_memory(
      config({"algorithm.adv_estimator=gae", "actor.lora.rank=16", "critic.lora.rank=8", "model.dtype=bf16"}),
      qwen3_06b(), std::nullopt, gib(1000));
  EXPECT_EQ(find(p, "critic", "weights"), nullptr);
  ASSERT_NE(find(p, "critic", "LoRA adapters"), nullptr);
  EXPECT_EQ(find(p, "critic", "LoRA adapters")->bytes, trained);
  EXPECT_EQ(find(p, "critic", "gradients")->bytes, trained);
  EXPECT_EQ(find(p, "critic", "AdamW state")->bytes, 2 * trained);
  // A full fine-tuned policy changes its base: the critic needs its own frozen copy.
  const MemoryPlan q = plan_memory(config({"algorithm.adv_estimator=gae", "critic.lora.rank=8", "model.dtype=bf16"}),
                                   qwen3_06b(), std::nullopt, gib(1000));
  ASSERT_NE(find(q, "critic", "weights (frozen base)"), nullptr);
  EXPECT_EQ(find(q, "critic", "weights (frozen base)")->bytes, kQwen06Params * 2);
}

TEST(MemoryBudgetTest, KvCacheDefaultIsMaxBatchFullContextSequencesDoubled) {
  // max_context 1024 + 48 = 1072 -> 67 blocks of 16; 64 sequences, x2 for the prefix cache.
  const MemoryPlan p =
      plan_memory(config({"rollout.max_new_tokens=48"}), qwen3_06b(), std::nullopt, gib(1000));
  EXPECT_EQ(p.kv_block_bytes, 2LL * 28 * 16 * 8 * 128 * 4);  // K and V, 28 layers, 16 positions
  EXPECT_EQ(p.kv_blocks_min, 67);
  EXPECT_EQ(p.kv_blocks_default, 67 * 64 * 2);
  EXPECT_EQ(p.kv_blocks, p.kv_blocks_default);  // a huge budget: what it was before budgets
  EXPECT_EQ(p.engines, 1);
  // 31.5 GB: the cache that got `agentr1 train model.path=q06 ...` killed at 24.3 GB.
  EXPECT_EQ(find(p, "rollout", "KV cache")->bytes, 8576LL * 3670016);
}

TEST(MemoryBudgetTest, KvCacheGetsWhatTheBudgetLeaves) {
  const TrainConfig c = config({"rollout.max_new_tokens=48", "rollout.max_prompt_tokens=256"});
  const MemoryPlan huge = plan_memory(c, qwen3_06b(), std::nullopt, gib(1000));
  int64_t rest = huge.total() - find(huge, "rollout", "KV cache")->bytes;
  // Room for 100 blocks and a half: 100 blocks.
  MemoryBudget b{rest + 100 * huge.kv_block_bytes + huge.kv_block_bytes / 2, "test"};
  MemoryPlan p = plan_memory(c, qwen3_06b(), std::nullopt, b);
  EXPECT_TRUE(p.fits);
  EXPECT_EQ(p.kv_blocks, 100);
  EXPECT_LE(p.total(), b.bytes);
  EXPECT_NO_THROW(check_memory_plan(p));
  // One block short of one full-context sequence (19 blocks of 16 for 304 tokens): refused.
  ASSERT_EQ(p.kv_blocks_min, 19);
  b.bytes = rest + 18 * huge.kv_block_bytes;
  p = plan_memory(c, qwen3_06b(), std::nullopt, b);
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.kv_blocks, 18);
  EXPECT_THROW(check_memory_plan(p), Error);
  // Asynchronous: two engines (the rollout copy's and validation's) share what is left,
  // and the copy's weights count.
  const TrainConfig ac = config({"rollout.max_new_tokens=48", "rollout.max_prompt_tokens=256",
                                 "rollout.max_staleness=1"});
  const MemoryPlan ah = plan_memory(ac, qwen3_06b(), std::nullopt, gib(1000));
  EXPECT_EQ(ah.engines, 2);
  EXPECT_EQ(find(ah, "rollout copy", "weights")->bytes, kQwen06Params * 4);
  rest = ah.total() - find(ah, "rollout", "KV caches")->bytes;
  p = plan_memory(ac, qwen3_06b(), std::nullopt, {rest + 100 * ah.kv_block_bytes, "test"});
  EXPECT_EQ(p.kv_blocks, 50);
  // rollout.kv_blocks given: taken as is, and counted.
  p = plan_memory(config({"rollout.max_new_tokens=48", "rollout.kv_blocks=500"}), qwen3_06b(), std::nullopt,
                  gib(1000));
  EXPECT_EQ(p.kv_blocks, 500);
  EXPECT_EQ(find(p, "rollout", "KV cache")->bytes, 500 * p.kv_block_bytes);
  // Remote engines: no cache here.
  p = plan_memory(config({"rollout.engine=remote", "rollout.remote.urls=[http://localhost:1]"}), qwen3_06b(),
                  std::nullopt, gib(1000));
  EXPECT_EQ(p.engines, 0);
  EXPECT_EQ(find(p, "rollout", "KV"), nullptr);
}

TEST(MemoryBudgetTest, ActivationsFollowTheMicroBatch) {
  // Rows: one turn's prompt plus its response, at most max_prompt + min(max_new, max_response).
  auto act = [](std::vector<std::string> o) {
    o.push_back("rollout.max_prompt_tokens=256");
    const MemoryPlan p = plan_memory(config(o), qwen3_06b(), std::nullopt, gib(1000));
    return std::make_pair(p.micro_batch_tokens, find(p, "learner", "activations")->bytes);
  };
  EXPECT_EQ(act({"rollout.max_new_tokens=48"}).first, 8 * (256 + 48));
  EXPECT_EQ(act({"rollout.max_new_tokens=48", "actor.micro_batch_size=2"}).first, 2 * (256 + 48));
  EXPECT_EQ(act({"rollout.max_new_tokens=48", "actor.micro_batch_max_tokens=1000"}).first, 1000);
  // A cap below one row still computes that row.
  EXPECT_EQ(act({"rollout.max_new_tokens=48", "actor.micro_batch_max_tokens=10"}).first, 256 + 48);
  EXPECT_EQ(act({"rollout.max_new_tokens=500", "rollout.max_response_tokens=100"}).first, 8 * (256 + 100));
  // Never more rows than a step makes (2 prompts x 1 sample x 1 turn).
  EXPECT_EQ(act({"rollout.max_new_tokens=48", "data.train_batch_size=2", "rollout.n=1", "rollout.max_steps=1"})
                .first,
            2 * (256 + 48));
  EXPECT_LT(act({"actor.micro_batch_size=2"}).second, act({"actor.micro_batch_size=4"}).second);
  EXPECT_LT(act({"model.dtype=bf16"}).second, act({}).second);
}

// Rows longer than actor.attention_block attend in tiles: no [heads, T, T] scores, so
// one row's activations grow about linearly with its length instead of quadratically.
TEST(MemoryBudgetTest, TiledAttentionMakesLongRowsLinear) {
  auto act = [](int64_t row, int64_t block) {
    const MemoryPlan p = plan_memory(config({"rollout.max_prompt_tokens=" + std::to_string(row - 32),
                                             "rollout.max_new_tokens=32", "actor.micro_batch_size=1",
                                             "actor.lora.rank=16", "actor.gradient_checkpointing=true",
                                             "actor.attention_block=" + std::to_string(block)}),
                                     qwen3_06b(), std::nullopt, gib(1000));
    return static_cast<double>(find(p, "learner", "activations")->bytes);
  };
  // Dense: 16 heads x 8192^2 fp32 scores alone are 4 GiB per layer.
  EXPECT_GT(act(8192, 0) / act(4096, 0), 3.0);
  EXPECT_LT(act(8192, 256) / act(4096, 256), 2.2);
  EXPECT_LT(act(8192, 256), 0.25 * act(8192, 0));
  // Up to one tile the dense path runs, and the estimate says so.
  EXPECT_EQ(act(256, 256), act(256, 0));
}

TEST(MemoryBudgetTest, RefusalNamesTheBudgetTheBiggestItemsAndTheKeys) {
  const MemoryPlan p = plan_memory(config({"rollout.max_new_tokens=48"}), qwen3_06b(), std::nullopt,
                                   {10 * kGiB, "trainer.memory_gb=10"});
  EXPECT_FALSE(p.fits);
  try {
    check_memory_plan(p);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const char* s : {"10.00 GiB", "trainer.memory_gb=10", "policy AdamW state: 4.44 GiB", "learner activations",
                          "rollout.max_batch", "rollout.kv_blocks", "actor.micro_batch_size",
                          "actor.micro_batch_max_tokens", "actor.lora.rank", "model.dtype=bf16",
                          "rollout.max_prompt_tokens", "HINT"})
      EXPECT_NE(m.find(s), std::string::npos) << "missing '" << s << "' in: " << m;
  }
}

TEST(MemoryBudgetTest, RefusalSuggestsAMicroBatchCapThatFits) {
  const std::vector<std::string> o{"rollout.max_new_tokens=48", "rollout.max_prompt_tokens=256"};
  const MemoryBudget b{16 * kGiB, "trainer.memory_gb=16"};
  const MemoryPlan p = plan_memory(config(o), qwen3_06b(), std::nullopt, b);
  ASSERT_FALSE(p.fits);
  const std::string key = "actor.micro_batch_max_tokens=";
  ASSERT_EQ(p.hint.rfind(key, 0), 0u) << p.hint;
  const int64_t cap = std::stoll(p.hint.substr(key.size()));
  EXPECT_GE(cap, 304);
  EXPECT_LT(cap, 8 * 304);
  std::vector<std::string> with = o;
  with.push_back(key + std::to_string(cap));
  EXPECT_TRUE(plan_memory(config(with), qwen3_06b(), std::nullopt, b).fits);
  with.back() = key + std::to_string(cap + 1);
  EXPECT_FALSE(plan_memory(config(with), qwen3_06b(), std::nullopt, b).fits);
  try {
    check_memory_plan(p);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p.hint), std::string::npos) << e.what();
  }
  // 10 GiB: the weights' side alone nearly fills it; not even one row fits.
  const MemoryPlan q = plan_memory(config(o), qwen3_06b(), std::nullopt, {10 * kGiB, "test"});
  EXPECT_NE(q.hint.find("not even one row of 304 tokens"), std::string::npos) << q.hint;
}

TEST(MemoryBudgetTest, TableListsEveryItemAndTheBudget) {
  const MemoryPlan p = plan_memory(config({"rollout.max_new_tokens=48", "rollout.max_prompt_tokens=256"}),
                                   qwen3_06b(), std::nullopt, {40 * kGiB, "trainer.memory_gb=40"});
  const std::string t = format_memory_plan(p);
  for (const char* s : {"policy weights", "2.22 GiB", "policy gradients", "KV cache", "total", "40.00 GiB",
                        "trainer.memory_gb=40", "blocks per engine"})
    EXPECT_NE(t.find(s), std::string::npos) << "missing '" << s << "' in:\n" << t;
}

// Peak RSS (/usr/bin/time -v) of real runs on this machine (2 cores, libtorch 1.13 CPU), and
// the estimate for the same settings: at the rows the run really had (max_prompt_tokens set
// to the prompt it saw) within 15%, and the worst case of the run's own limits above it.
TEST(MemoryBudgetTest, CalibratedAgainstMeasuredPeaks) {
  // agentr1 init-model --arch qwen3 --tokenizer <Qwen3 tokenizer> --hidden-size 1024
  //   --intermediate-size 3072 --layers 28 --heads 16 --kv-heads 8 --head-dim 128
  //   --tie-embeddings --dtype bf16 --out /tmp/q06          (vocab 151669 from the tokenizer)
  // agentr1 train model.path=/tmp/q06 trainer.total_steps=2 data.train_batch_size=1 rollout.n=4
  //   rollout.max_new_tokens=48 rollout.max_batch=8 rollout.val_k=0 data.val_size=1
  //   actor.micro_batch_size=2 actor.min_shared_prefix=0 rollout.max_prompt_tokens=320
  //   trainer.test_freq=0
  // -> rows of 317 and 314 tokens (prompts ~268 + 48), 368 KV blocks; the peak is in step 2's
  //    backward (AdamW state allocated by step 1): 17660412 kB with the dense LM head,
  //    17191896 kB with the chunked one (chunked_logprobs.h; 2026-12-04).
  model::ModelConfig q06 = qwen3_06b();
  q06.vocab_size = 151669;
  const double measured = 17191896.0 * 1024;
  // (measured with dense attention: actor.attention_block=0)
  const std::vector<std::string> run{"data.train_batch_size=1", "rollout.n=4", "rollout.max_new_tokens=48",
                                     "rollout.max_batch=8", "actor.micro_batch_size=2", "rollout.kv_blocks=368",
                                     "actor.attention_block=0"};
  auto with = [&](const std::string& o) {
    std::vector<std::string> v = run;
    v.push_back(o);
    return plan_memory(config(v), q06, std::nullopt, gib(1000)).total();
  };
  const double at_rows = static_cast<double>(with("rollout.max_prompt_tokens=268"));  // rows of 316
  EXPECT_NEAR(at_rows / measured, 1.0, 0.15) << "estimate " << at_rows / kGiB << " GiB";
  const double worst = static_cast<double>(with("rollout.max_prompt_tokens=320"));
  EXPECT_GE(worst, measured);
  EXPECT_LE(worst / measured, 1.15) << "estimate " << worst / kGiB << " GiB";

  // The same run with LoRA r16 (actor.lora.rank=16 actor.lora.alpha=32 actor.optim.lr=1e-4
  // trainer.threads=1; 2026-12-05, with the tiled attention: rows of 317 > 256): peak
  // 8939524 kB, in step 1's update.
  const double measured_lora = 8939524.0 * 1024;
  auto with_lora = [&](const std::string& o) {
    std::vector<std::string> v = run;
    v.back() = "actor.lora.rank=16";  // tiled attention, as the run had
    v.push_back(o);
    return static_cast<double>(plan_memory(config(v), q06, std::nullopt, gib(1000)).total());
  };
  EXPECT_NEAR(with_lora("rollout.max_prompt_tokens=268") / measured_lora, 1.0, 0.15);
  EXPECT_GE(with_lora("rollout.max_prompt_tokens=320"), measured_lora);

  // The built-in default (configs/builtin.yaml: rollout.n=16; vocab 2304, hidden 128, 4
  // layers): agentr1 train trainer.total_steps=2 -> rows of ~91 tokens (the longest ~110),
  // 9216 KV blocks, peak 753048 kB (the SFT that builds the model first peaks at 528272 kB).
  // Its worst case (rows of 1024 + 128 tokens, which its task never makes) is ~2.5 GiB.
  model::ModelConfig builtin = qwen3_06b();
  builtin.vocab_size = 2304;
  builtin.hidden_size = 128;
  builtin.intermediate_size = 384;
  builtin.num_hidden_layers = 4;
  builtin.num_attention_heads = 4;
  builtin.num_key_value_heads = 2;
  builtin.head_dim = 32;
  const double measured_builtin = 753048.0 * 1024;
  auto builtin_total = [&](std::vector<std::string> o) {
    o.push_back("rollout.n=16");
    o.push_back("rollout.kv_blocks=9216");
    return static_cast<double>(plan_memory(config(o), builtin, std::nullopt, gib(1000)).total());
  };
  const double builtin_rows = builtin_total({"rollout.max_prompt_tokens=86", "rollout.max_new_tokens=24"});
  EXPECT_NEAR(builtin_rows / measured_builtin, 1.0, 0.15) << "estimate " << builtin_rows / (1 << 20) << " MiB";
  EXPECT_GE(builtin_total({}), measured_builtin);
}

TEST(MemoryBudgetTest, MachineMemoryParsing) {
  const std::string meminfo =
      "MemTotal:       24683784 kB\nMemFree:        20350364 kB\nMemAvailable:   22962412 kB\n";
  EXPECT_EQ(parse_meminfo_total(meminfo), 24683784LL * 1024);
  EXPECT_THROW(parse_meminfo_total("MemFree: 1 kB\n"), Error);
  EXPECT_THROW(parse_meminfo_total("MemTotal: lots\n"), Error);
  EXPECT_EQ(parse_cgroup_limit("max\n"), std::nullopt);              // v2, none
  EXPECT_EQ(parse_cgroup_limit("9223372036854771712\n"), std::nullopt);  // v1, none
  EXPECT_EQ(parse_cgroup_limit("8589934592\n"), 8589934592LL);
  EXPECT_EQ(parse_cgroup_limit(""), std::nullopt);
  // Margin: 10% of a big machine, 1.5 GiB of a small one.
  EXPECT_EQ(auto_memory_margin(40 * kGiB), 4 * kGiB);
  EXPECT_EQ(auto_memory_margin(8 * kGiB), 3 * kGiB / 2);
  const MemoryBudget given = resolve_memory_budget(12);
  EXPECT_EQ(given.bytes, 12 * kGiB);
  EXPECT_EQ(given.source, "trainer.memory_gb=12");
  const MemoryBudget autob = resolve_memory_budget(0);  // this machine: positive, below MemTotal
  EXPECT_GT(autob.bytes, 0);
  EXPECT_NE(autob.source.find("auto"), std::string::npos);
  EXPECT_THROW(resolve_memory_budget(-1), Error);
}

// Through the trainer: a budget too small for anything stops in the constructor, before
// the weights are read (the model directory has none: reading them would fail differently).
TEST(MemoryBudgetTest, TrainerRefusesBeforeLoadingTheModel) {
  const std::string dir = testing::make_tiny_model_dir("memory");
  std::filesystem::remove(dir + "/model/model.safetensors");
  json tree = default_train_tree();
  for (const std::string& o : std::vector<std::string>{"model.path=" + dir + "/model",
                                                        "trainer.output_dir=" + dir + "/run",
                                                        "trainer.memory_gb=0.01", "trainer.progress=false"})
    apply_override(tree, o);
  try {
    RLTrainer t(load_train_config(tree), tree);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("trainer.memory_gb=0.01"), std::string::npos) << m;
    EXPECT_NE(m.find("runtime"), std::string::npos) << m;
    EXPECT_EQ(m.find("safetensors"), std::string::npos) << m;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::train
