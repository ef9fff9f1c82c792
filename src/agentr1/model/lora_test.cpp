// LoRA adapters: the adapted model equals a plain model with W + (alpha/r) B A computed
// directly here, on every path (training forward, the engine's cached forward, BLAS and
// batch-invariant products); BaseOnly gives the base; PEFT's file format (keys, shapes,
// adapter_config.json fields) read back by a reader written in this test; merged saving;
// refusals of adapters we do not support.
#include "agentr1/model/lora.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/core/testing.h"
#include "agentr1/model/model_test_util.h"
#include "agentr1/model/transformer.h"

namespace agentr1::model {
namespace {

namespace fs = std::filesystem;
using agentr1::testing::error_of;
using testing::random_ids;
using testing::spicy_model;
using testing::ScopedTempDir;
using testing::tiny_config;

constexpr double kTol = 2e-4;  // fp32 logits of order 10, summed in other orders

double max_abs(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// Gives every adapter matrix random values (a fresh B is zero: nothing to test).
void randomise_adapters(Transformer& m, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::NoGradGuard ng;
  for (auto& [name, t] : m->lora_parameters()) t.normal_(0.0, 0.3, gen);
}

// A plain copy of m whose adapted weights are W + (alpha / r) B A, formed here from the
// named tensors (not through the model's own merge).
Transformer merged_by_hand(Transformer& m, const ModelConfig& cfg) {
  Transformer plain(cfg);
  auto dst = plain->named_parameters();
  std::map<std::string, at::Tensor> lora;
  for (auto& [name, t] : m->lora_parameters()) lora[name] = t.detach();
  const double s = m->lora()->alpha / m->lora()->rank;
  at::NoGradGuard ng;
  for (const auto& kv : m->named_parameters()) {
    const std::string& n = kv.key();
    if (n.find(".lora_") != std::string::npos) continue;
    at::Tensor w = kv.value().detach().clone();
    const std::string stem = n.substr(0, n.size() - std::strlen(".weight"));
    if (lora.count(stem + ".lora_A")) w += s * at::mm(lora[stem + ".lora_B"], lora[stem + ".lora_A"]);
    dst[n].copy_(w);
  }
  plain->eval();
  return plain;
}

LoraOptions opts(int r, double alpha, std::vector<std::string> targets = {"all-linear"}) {
  LoraOptions o;
  o.rank = r;
  o.alpha = alpha;
  o.target_modules = std::move(targets);
  return o;
}

class LoraArchTest : public ::testing::TestWithParam<Arch> {};

TEST_P(LoraArchTest, AdaptedForwardEqualsDirectMergeAndBaseOnlyEqualsBase) {
  const ModelConfig cfg = tiny_config(GetParam());
  Transformer m = spicy_model(cfg, 11);
  Transformer base = spicy_model(cfg, 11);  // the same weights, never adapted
  at::Tensor ids = random_ids(2, 12, cfg.vocab_size, 5);
  at::NoGradGuard ng;
  m->add_lora(opts(4, 8.0), 3);
  // A new adapter changes nothing (B = 0).
  EXPECT_LE(max_abs(m->forward(ids), base->forward(ids)), 0.0);
  randomise_adapters(m, 9);
  Transformer ref = merged_by_hand(m, cfg);
  const at::Tensor got = m->forward(ids), want = ref->forward(ids);
  EXPECT_LE(max_abs(got, want), kTol);
  EXPECT_GT(max_abs(got, base->forward(ids)), 0.5);  // the adapter matters
  {
    BaseOnly b;
    EXPECT_LE(max_abs(m->forward(ids), base->forward(ids)), 0.0);
    {
      BaseOnly nested;
    }
    EXPECT_FALSE(adapters_active());  // still inside the outer one
  }
  EXPECT_TRUE(adapters_active());
  EXPECT_LE(max_abs(m->forward(ids), want), kTol);
}

TEST_P(LoraArchTest, CachedForwardAppliesTheAdapterOnEveryPath) {
  const ModelConfig cfg = tiny_config(GetParam());
  Transformer m = spicy_model(cfg, 21);
  m->add_lora(opts(3, 6.0, {"q_proj", "v_proj", "down_proj"}), 1);
  randomise_adapters(m, 4);
  Transformer ref = merged_by_hand(m, cfg);
  at::NoGradGuard ng;
  const int64_t T = 14, P = 6;
  const at::Tensor ids = random_ids(1, T, cfg.vocab_size, 8)[0];
  const at::Tensor full = ref->forward(ids.unsqueeze(0))[0];  // [T,V]
  for (int path = 0; path < 3; ++path) {  // tensor path, fused BLAS, fused batch-invariant
    KVCache cache(cfg, 8, 4, at::kFloat, at::kCPU);
    cache.fused_attention = path > 0;
    cache.batch_invariant = path == 2;
    const std::vector<int32_t> table = {3, 0, 6, 1};
    double worst = max_abs(m->forward_cached(ids.narrow(0, 0, P), {CachedRow{0, P, &table}}, cache)[0], full[P - 1]);
    for (int64_t t = P; t < T; ++t)
      worst = std::max(worst, max_abs(m->forward_cached(ids.narrow(0, t, 1), {CachedRow{t, 1, &table}}, cache)[0],
                                      full[t]));
    EXPECT_LE(worst, kTol) << "path " << path;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, LoraArchTest, ::testing::Values(Arch::kQwen2, Arch::kQwen3, Arch::kLlama),
                         [](const auto& info) { return std::string(arch_name(info.param)); });

TEST(LoraTest, OnlyAdaptersTrainAndGetGradients) {
  const ModelConfig cfg = tiny_config(Arch::kQwen3);
  Transformer m = spicy_model(cfg, 2);
  const int64_t all = cfg.num_parameters();
  m->add_lora(opts(4, 8.0, {"q_proj", "up_proj"}), 7);
  const auto trainable = m->trainable_parameters();
  ASSERT_EQ(trainable.size(), 2u * 2 * 2);  // 2 layers x 2 targets x (A, B)
  int64_t n = 0;
  for (const auto& t : trainable) n += t.numel();
  // q_proj: 64 -> 4*32, up_proj: 64 -> 96; rank 4.
  EXPECT_EQ(n, 2 * (4 * (64 + 128) + 4 * (64 + 96)));
  EXPECT_EQ(n, lora_parameter_count(cfg, *m->lora()));
  for (const auto& p : m->named_parameters())
    EXPECT_EQ(p.value().requires_grad(), p.key().find(".lora_") != std::string::npos) << p.key();
  int64_t total = 0;
  for (const auto& p : m->parameters()) total += p.numel();
  EXPECT_EQ(total, all + n);
  randomise_adapters(m, 5);
  m->train();
  m->forward(random_ids(2, 8, cfg.vocab_size, 1)).logsumexp(-1).sum().backward();
  for (const auto& p : m->named_parameters()) {
    if (p.key().find(".lora_") != std::string::npos) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
    } else {
      EXPECT_FALSE(p.value().grad().defined()) << p.key();
    }
  }
}

TEST(LoraTest, OptionsAreValidatedByName) {
  EXPECT_NE(error_of([] { opts(4, 8.0, {"qproj"}).validate("actor.lora"); })
                .find("actor.lora.target_modules: unknown module 'qproj'"),
            std::string::npos);
  EXPECT_NE(error_of([] { opts(-1, 8.0).validate("actor.lora"); }).find("actor.lora.rank must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { opts(4, 0.0).validate("actor.lora"); }).find("actor.lora.alpha"), std::string::npos);
  EXPECT_EQ(opts(4, 8.0, {"all-linear"}).target_list().size(), 7u);
  EXPECT_EQ(opts(4, 8.0, {"down_proj", "q_proj"}).target_list(), (std::vector<std::string>{"q_proj", "down_proj"}));
}

// The safetensors header, read here by hand: 8-byte little-endian length, then JSON
// {name: {dtype, shape, data_offsets}}.
json safetensors_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string h(n, '\0');
  in.read(h.data(), static_cast<std::streamsize>(n));
  return json::parse(h);
}

TEST(LoraTest, SavesPeftFormatAndLoadsItBack) {
  const ModelConfig cfg = tiny_config(Arch::kQwen2, /*tied=*/true);
  Transformer m = spicy_model(cfg, 3);
  m->add_lora(opts(4, 16.0, {"q_proj", "k_proj", "v_proj", "o_proj"}), 2);
  randomise_adapters(m, 6);
  const ScopedTempDir tmp("lora_peft");
  const std::string& dir = tmp.path;
  save_lora_adapter(m, dir, "/models/base");
  // adapter_config.json: PEFT's fields.
  std::ifstream cf(dir + "/adapter_config.json");
  const json c = json::parse(cf);
  EXPECT_EQ(c["peft_type"], "LORA");
  EXPECT_EQ(c["task_type"], "CAUSAL_LM");
  EXPECT_EQ(c["r"], 4);
  EXPECT_EQ(c["lora_alpha"], 16.0);
  EXPECT_EQ(c["bias"], "none");
  EXPECT_EQ(c["use_rslora"], false);
  EXPECT_EQ(c["base_model_name_or_path"], "/models/base");
  EXPECT_EQ(c["target_modules"], json({"q_proj", "k_proj", "v_proj", "o_proj"}));
  // adapter_model.safetensors: PEFT's key names and shapes, nothing else.
  const json h = safetensors_header(dir + "/adapter_model.safetensors");
  std::set<std::string> keys;
  for (const auto& [k, v] : h.items())
    if (k != "__metadata__") keys.insert(k);
  EXPECT_EQ(keys.size(), 2u * 4 * 2);
  const json& a = h.at("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(a["shape"], json({4, 64}));
  EXPECT_EQ(a["dtype"], "F32");
  EXPECT_EQ(h.at("base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight")["shape"], json({2 * 16, 4}));
  EXPECT_TRUE(h.contains("base_model.model.model.layers.1.self_attn.o_proj.lora_A.weight"));

  // Read back into a model without adapters: they are added from the config.
  Transformer back = spicy_model(cfg, 3);
  load_lora_adapter(back, dir);
  ASSERT_NE(back->lora(), nullptr);
  EXPECT_EQ(back->lora()->rank, 4);
  at::NoGradGuard ng;
  const at::Tensor ids = random_ids(2, 9, cfg.vocab_size, 2);
  EXPECT_LE(max_abs(back->forward(ids), m->forward(ids)), 0.0);

  // A model with other adapters is refused, naming both.
  Transformer other = spicy_model(cfg, 3);
  other->add_lora(opts(8, 16.0, {"q_proj"}), 0);
  const std::string e = error_of([&] { load_lora_adapter(other, dir); });
  EXPECT_NE(e.find("differs from the model's"), std::string::npos) << e;
  EXPECT_NE(e.find("actor.lora"), std::string::npos) << e;
}

// modules_to_save (PEFT): the embedding (and with it the tied head) trains whole beside
// the adapters; the base (BaseOnly) still reads the original embedding; the adapter file
// holds it under PEFT's plain key and loads back into a fresh base.
TEST(LoraTest, ModulesToSaveTrainTheEmbeddingWhileTheBaseKeepsTheOriginal) {
  const ModelConfig cfg = tiny_config(Arch::kQwen3, /*tied=*/true);
  Transformer m = spicy_model(cfg, 4);
  LoraOptions o = opts(2, 4.0);
  o.modules_to_save = {"embed_tokens"};
  m->add_lora(o, 1);
  randomise_adapters(m, 3);  // the adapters and the embedding now differ from the base
  const auto named = m->lora_parameters();
  ASSERT_EQ(named.back().first, "model.embed_tokens");
  EXPECT_EQ(named.back().second.sizes(), (std::vector<int64_t>{cfg.vocab_size, cfg.hidden_size}));
  const at::Tensor embed = m->named_parameters()["model.embed_tokens.weight"];
  EXPECT_TRUE(embed.requires_grad());
  EXPECT_EQ(m->trainable_parameters().size(), 2u * 7 * 2 + 1);
  m->train();
  const at::Tensor ids = random_ids(2, 9, cfg.vocab_size, 2);
  m->forward(ids).logsumexp(-1).sum().backward();
  ASSERT_TRUE(embed.grad().defined());
  EXPECT_GT(embed.grad().abs().sum().item<double>(), 0.0);
  m->eval();
  at::NoGradGuard ng;
  // The tied head reads the trained embedding: the model is the base with W + delta on
  // the projections and the new embedding on both ends, built here by hand.
  Transformer by_hand = merged_by_hand(m, cfg);
  by_hand->named_parameters()["model.embed_tokens.weight"].copy_(embed);
  EXPECT_LE(max_abs(m->forward(ids), by_hand->forward(ids)), kTol);
  // BaseOnly: the original model, exactly (the frozen copy, no adapters).
  Transformer base = spicy_model(cfg, 4);
  {
    BaseOnly b;
    EXPECT_EQ(max_abs(m->forward(ids), base->forward(ids)), 0.0);
  }
  // The file: PEFT's plain key for a saved module, and the config lists it.
  const ScopedTempDir tmp("lora_saved");
  const std::string& dir = tmp.path;
  save_lora_adapter(m, dir, "base");
  const json h = safetensors_header(dir + "/adapter_model.safetensors");
  ASSERT_TRUE(h.contains("base_model.model.model.embed_tokens.weight"));
  EXPECT_EQ(h.at("base_model.model.model.embed_tokens.weight")["shape"], json({cfg.vocab_size, cfg.hidden_size}));
  std::ifstream cf(dir + "/adapter_config.json");
  EXPECT_EQ(json::parse(cf)["modules_to_save"], json({"embed_tokens"}));
  Transformer back = spicy_model(cfg, 4);
  load_lora_adapter(back, dir);
  EXPECT_EQ(max_abs(back->forward(ids), m->forward(ids)), 0.0);
  {
    BaseOnly b;
    EXPECT_EQ(max_abs(back->forward(ids), base->forward(ids)), 0.0);
  }
  // A tied model has no lm_head of its own to save.
  Transformer tied = spicy_model(cfg, 4);
  LoraOptions head = opts(2, 4.0);
  head.modules_to_save = {"lm_head"};
  EXPECT_NE(error_of([&] { tied->add_lora(head, 1); }).find("tied to embed_tokens"), std::string::npos);
  EXPECT_NE(error_of([&] {
              LoraOptions bad = opts(2, 4.0);
              bad.modules_to_save = {"norm"};
              bad.validate("actor.lora");
            }).find("actor.lora.modules_to_save: unknown module 'norm'"),
            std::string::npos);
}

TEST(LoraTest, SavePretrainedWritesTheMergedPlainModel) {
  const ModelConfig cfg = tiny_config(Arch::kLlama);
  Transformer m = spicy_model(cfg, 13);
  m->add_lora(opts(2, 4.0), 1);
  randomise_adapters(m, 2);
  const ScopedTempDir tmp("lora_merged");
  const std::string& dir = tmp.path;
  save_pretrained(m, dir, at::kFloat);
  const json header = safetensors_header(dir + "/model.safetensors");
  for (const auto& [k, v] : header.items()) EXPECT_EQ(k.find("lora"), std::string::npos) << k;
  Transformer plain = load_pretrained(dir, at::kFloat, at::kCPU);
  Transformer ref = merged_by_hand(m, cfg);
  at::NoGradGuard ng;
  const at::Tensor ids = random_ids(1, 10, cfg.vocab_size, 4);
  EXPECT_LE(max_abs(plain->forward(ids), ref->forward(ids)), kTol);
}

TEST(LoraTest, UnsupportedAdapterConfigsAreRefusedByName) {
  const ModelConfig cfg = tiny_config(Arch::kQwen3);
  Transformer m = spicy_model(cfg, 1);
  m->add_lora(opts(2, 4.0), 1);
  const ScopedTempDir tmp("lora_bad");
  const std::string& dir = tmp.path;
  save_lora_adapter(m, dir, "base");
  std::ifstream cf(dir + "/adapter_config.json");
  const json good = json::parse(cf);
  auto refused = [&](const std::string& key, const json& value) {
    json c = good;
    c[key] = value;
    std::ofstream(dir + "/adapter_config.json") << c.dump();
    Transformer fresh = spicy_model(cfg, 1);
    return error_of([&] { load_lora_adapter(fresh, dir); });
  };
  EXPECT_NE(refused("use_dora", true).find("DoRA"), std::string::npos);
  EXPECT_NE(refused("bias", "all").find("bias"), std::string::npos);
  EXPECT_NE(refused("modules_to_save", json({"score"})).find("modules_to_save entry \"score\""), std::string::npos);
  // An adapter that says it saved the head but holds no such tensor.
  EXPECT_NE(refused("modules_to_save", json({"lm_head"})).find("missing tensor 'base_model.model.lm_head.weight'"),
            std::string::npos);
  EXPECT_NE(refused("target_modules", ".*proj").find("pattern"), std::string::npos);
  EXPECT_NE(refused("r", 0).find("r must be a positive integer"), std::string::npos);
  EXPECT_NE(refused("r", 3).find("lora_A.weight' is [2, 64], expected [3, 64]"), std::string::npos);
  // use_rslora: scaling alpha / sqrt(r).
  json c = good;
  c["use_rslora"] = true;
  std::ofstream(dir + "/adapter_config.json") << c.dump();
  EXPECT_NEAR(read_lora_adapter_config(dir).scaling(), 4.0 / std::sqrt(2.0), 1e-12);
}

}  // namespace
}  // namespace agentr1::model
