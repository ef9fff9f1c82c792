#include "agentr1/model/transformer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/model/model_test_util.h"
#include "agentr1/model/safetensors.h"

namespace agentr1::model {
namespace {

namespace fs = std::filesystem;
using testing::random_ids;
using testing::spicy_model;
using testing::temp_dir;
using testing::tiny_config;

double max_abs(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(TransformerTest, ParameterNamesAreHuggingFace) {
  Transformer q3(tiny_config(Arch::kQwen3));
  std::set<std::string> names;
  for (const auto& p : q3->named_parameters()) names.insert(p.key());
  for (const char* n : {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                        "model.layers.1.self_attn.k_norm.weight", "model.layers.1.self_attn.q_norm.weight",
                        "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                        "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight",
                        "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
                        "model.norm.weight", "lm_head.weight"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_FALSE(names.count("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_EQ(q3->named_parameters()["model.layers.0.self_attn.q_proj.weight"].sizes(),
            (std::vector<int64_t>{4 * 32, 64}));

  Transformer q2(tiny_config(Arch::kQwen2, /*tied=*/true));
  std::set<std::string> n2;
  int64_t count = 0;
  for (const auto& p : q2->named_parameters()) {
    n2.insert(p.key());
    count += p.value().numel();
  }
  EXPECT_TRUE(n2.count("model.layers.1.self_attn.v_proj.bias"));
  EXPECT_FALSE(n2.count("model.layers.1.self_attn.o_proj.bias"));
  EXPECT_FALSE(n2.count("lm_head.weight"));
  EXPECT_EQ(count, q2->config().num_parameters());
  int64_t c3 = 0;
  for (const auto& p : q3->named_parameters()) c3 += p.value().numel();
  EXPECT_EQ(c3, q3->config().num_parameters());
}

TEST(TransformerTest, InitRandomIsSeededAndLeavesGlobalRngAlone) {
  at::manual_seed(5);
  at::Tensor g1 = at::randn({4});
  at::manual_seed(5);
  Transformer a = init_random(tiny_config(Arch::kQwen2), 42);
  at::Tensor g2 = at::randn({4});
  EXPECT_TRUE(g1.equal(g2)) << "init_random must not draw from the global generator";
  Transformer b = init_random(tiny_config(Arch::kQwen2), 42);
  Transformer c = init_random(tiny_config(Arch::kQwen2), 43);
  auto pa = a->named_parameters();
  EXPECT_TRUE(pa["model.embed_tokens.weight"].equal(b->named_parameters()["model.embed_tokens.weight"]));
  EXPECT_FALSE(pa["model.embed_tokens.weight"].equal(c->named_parameters()["model.embed_tokens.weight"]));
  EXPECT_NEAR(pa["model.layers.0.mlp.up_proj.weight"].std().item<double>(), 0.02, 0.002);
  EXPECT_TRUE(pa["model.layers.0.input_layernorm.weight"].eq(1).all().item<bool>());
  EXPECT_TRUE(pa["model.layers.0.self_attn.q_proj.bias"].eq(0).all().item<bool>());
}

// Two sequences packed into one row (plus padding) equal two separate forwards.
TEST(TransformerTest, SegmentPackingEqualsSeparateForwards) {
  at::NoGradGuard ng;
  for (Arch arch : {Arch::kQwen2, Arch::kQwen3, Arch::kLlama}) {
    Transformer m = spicy_model(tiny_config(arch), 3);
    const int64_t V = m->config().vocab_size;
    at::Tensor a = random_ids(1, 7, V, 1), b = random_ids(1, 5, V, 2);
    at::Tensor ids = at::cat({a, b, at::zeros({1, 3}, at::kLong)}, 1);  // [1,15]
    at::Tensor seg = at::tensor(std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, -1, -1, -1}).unsqueeze(0);
    at::Tensor pos = at::tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 0, 0, 0}).unsqueeze(0);
    // A second row: b alone then padding, to check rows are independent.
    at::Tensor ids2 = at::cat({b, at::zeros({1, 10}, at::kLong)}, 1);
    at::Tensor seg2 = at::cat({at::zeros({1, 5}, at::kLong), at::full({1, 10}, -1, at::kLong)}, 1);
    at::Tensor pos2 = at::cat({at::arange(5, at::kLong).unsqueeze(0), at::zeros({1, 10}, at::kLong)}, 1);
    at::Tensor packed = m->forward(at::cat({ids, ids2}), at::cat({pos, pos2}), at::cat({seg, seg2}));
    EXPECT_FALSE(packed.isnan().any().item<bool>()) << arch_name(arch) << ": padding produced NaN";
    const at::Tensor fa = m->forward(a)[0], fb = m->forward(b)[0];
    const double d = std::max({max_abs(packed[0].narrow(0, 0, 7), fa), max_abs(packed[0].narrow(0, 7, 5), fb),
                               max_abs(packed[1].narrow(0, 0, 5), fb)});
    std::printf("[packing] %s max_abs_diff %.3e\n", arch_name(arch), d);
    EXPECT_LE(d, 1e-4) << arch_name(arch);
    // Without the segment mask, segment 1 would see segment 0: the test can fail.
    // (Restarted positions alone change nothing: RoPE scores depend on offsets only.)
    at::Tensor wrong = m->forward(ids, pos)[0].narrow(0, 7, 5);
    EXPECT_GT(max_abs(wrong, fb), 1e-3);
  }
}

// The shared-prefix forward must give the same outputs AND the same parameter
// gradients as running every full row (prefix + own tokens) separately.
TEST(TransformerTest, SharedPrefixEqualsFullRowsWithGradients) {
  for (Arch arch : {Arch::kQwen2, Arch::kQwen3, Arch::kLlama}) {
    Transformer m = spicy_model(tiny_config(arch), 21);
    const int64_t V = m->config().vocab_size, P = 9;
    at::Tensor prefix = random_ids(1, P, V, 31)[0];
    // Two rows of different lengths: 6 and 4 own tokens (the second padded by 2).
    at::Tensor r0 = random_ids(1, 6, V, 32), r1 = random_ids(1, 4, V, 33);
    at::Tensor ids = at::cat({r0, at::cat({r1, at::zeros({1, 2}, at::kLong)}, 1)});
    at::Tensor seg = at::tensor(std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1}).view({2, 6});
    at::Tensor pos = (at::arange(6, at::kLong) + P).unsqueeze(0).expand({2, 6}).contiguous();
    // Loss: a fixed random projection of the row tokens' logits (padding excluded).
    at::Tensor w = at::randn({2, 6, V}, at::make_generator<at::CPUGeneratorImpl>(7));
    w.select(0, 1).narrow(0, 4, 2).zero_();

    m->zero_grad();
    at::Tensor shared = m->forward(ids, pos, seg, prefix);  // [2,6,V]
    (shared * w).sum().backward();
    std::map<std::string, at::Tensor> g_shared;
    for (const auto& p : m->named_parameters()) g_shared[p.key()] = p.value().grad().clone();

    m->zero_grad();
    at::Tensor full0 = m->forward(at::cat({prefix.unsqueeze(0), r0}, 1))[0].narrow(0, P, 6);
    at::Tensor full1 = m->forward(at::cat({prefix.unsqueeze(0), r1}, 1))[0].narrow(0, P, 4);
    ((full0 * w[0]).sum() + (full1 * w[1].narrow(0, 0, 4)).sum()).backward();

    const double d = std::max(max_abs(shared[0], full0), max_abs(shared[1].narrow(0, 0, 4), full1));
    double gd = 0, gmax = 0;
    for (const auto& p : m->named_parameters()) {
      gd = std::max(gd, max_abs(g_shared[p.key()], p.value().grad()));
      gmax = std::max(gmax, p.value().grad().abs().max().item<double>());
    }
    std::printf("[shared prefix] %s logits max_abs_diff %.3e, grad max_abs_diff %.3e (max |grad| %.3e)\n",
                arch_name(arch), d, gd, gmax);
    EXPECT_LE(d, 1e-4) << arch_name(arch);
    EXPECT_LE(gd, 1e-4 * std::max(1.0, gmax)) << arch_name(arch);
    EXPECT_GT(gmax, 1e-3) << "the check needs non-trivial gradients";
    // Default positions continue after the prefix.
    at::NoGradGuard ng;
    EXPECT_LE(max_abs(m->forward(ids, {}, seg, prefix), shared.detach()), 1e-5);
  }
}

TEST(TransformerTest, TokenLogprobsAreLogSoftmaxAtNextIds) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(Arch::kQwen3, true), 9);
  at::Tensor ids = random_ids(2, 6, m->config().vocab_size, 4);
  at::Tensor lp = token_logprobs(m, ids);
  ASSERT_EQ(lp.sizes(), (std::vector<int64_t>{2, 5}));
  at::Tensor logits = m->forward(ids);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 5; ++t) {
      const double want = logits[b][t].log_softmax(0)[ids[b][t + 1].item<int64_t>()].item<double>();
      EXPECT_NEAR(lp[b][t].item<double>(), want, 1e-5);
    }
  EXPECT_EQ(token_logprobs(m, ids.narrow(1, 0, 1)).size(1), 0);
}

TEST(TransformerTest, Bf16WeightsGiveFp32Logits) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(Arch::kQwen2), 5);
  at::Tensor ids = random_ids(1, 8, m->config().vocab_size, 6);
  at::Tensor f32 = m->forward(ids);
  m->to(at::kBFloat16);
  at::Tensor b16 = m->forward(ids);
  EXPECT_EQ(b16.scalar_type(), at::kFloat);
  EXPECT_LE(max_abs(b16, f32), 0.5);
  EXPECT_EQ(parse_dtype("bf16"), at::kBFloat16);
  EXPECT_EQ(parse_dtype("float16"), at::kHalf);
  expect_error([] { parse_dtype("int8"); }, {"'int8'", "fp32"});
}

TEST(TransformerTest, SaveLoadRoundTripAndSharding) {
  at::NoGradGuard ng;
  const std::string dir = temp_dir("model_rt");
  Transformer m = spicy_model(tiny_config(Arch::kLlama), 8);
  at::Tensor ids = random_ids(1, 9, m->config().vocab_size, 7);
  save_pretrained(m, dir + "/one", at::kFloat);
  save_pretrained(m, dir + "/sharded", at::kFloat, /*max_shard_bytes=*/40000);
  EXPECT_TRUE(fs::exists(dir + "/sharded/model.safetensors.index.json"));
  {
    std::ifstream in(dir + "/sharded/model.safetensors.index.json");
    const json index = json::parse(in);
    std::set<std::string> files;
    for (const auto& kv : index["weight_map"].items()) files.insert(kv.value().get<std::string>());
    EXPECT_GT(files.size(), 2u);
    EXPECT_TRUE(files.count("model-00001-of-" + std::string(5 - std::to_string(files.size()).size(), '0') +
                            std::to_string(files.size()) + ".safetensors"));
    EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), m->config().num_parameters() * 4);
  }
  for (const char* sub : {"/one", "/sharded"}) {
    Transformer r = load_pretrained(dir + sub, at::kFloat, at::kCPU);
    EXPECT_TRUE(r->forward(ids).equal(m->forward(ids))) << sub;
  }
  // Saving unsharded over a sharded directory removes the stale index.
  save_pretrained(m, dir + "/sharded", at::kFloat);
  EXPECT_FALSE(fs::exists(dir + "/sharded/model.safetensors.index.json"));
  fs::remove_all(dir);
}

// Every way a checkpoint can disagree with its config.json gives an Error that names
// the tensor and the problem.
TEST(TransformerTest, LoadRejectsMismatchedCheckpoints) {
  const std::string dir = temp_dir("model_bad");
  Transformer m = init_random(tiny_config(Arch::kQwen3), 1);
  save_pretrained(m, dir, at::kFloat);
  const std::string file = dir + "/model.safetensors";
  const TensorList good = read_safetensors(file);

  TensorList missing;
  for (const auto& nt : good)
    if (nt.first != "model.layers.1.mlp.up_proj.weight") missing.push_back(nt);
  write_safetensors(file, missing);
  expect_error([&] { load_pretrained(dir, at::kFloat, at::kCPU); },
               {"missing tensor 'model.layers.1.mlp.up_proj.weight'", "[96, 64]"});

  TensorList wrong_shape = good;
  for (auto& nt : wrong_shape)
    if (nt.first == "lm_head.weight") nt.second = at::zeros({64, 97});
  write_safetensors(file, wrong_shape);
  expect_error([&] { load_pretrained(dir, at::kFloat, at::kCPU); },
               {"tensor 'lm_head.weight'", "expected [97, 64], found [64, 97]"});

  TensorList extra = good;
  extra.emplace_back("model.layers.0.self_attn.o_proj.bias", at::zeros({64}));
  write_safetensors(file, extra);
  expect_error([&] { load_pretrained(dir, at::kFloat, at::kCPU); },
               {"unexpected tensor 'model.layers.0.self_attn.o_proj.bias'"});

  TensorList with_inv_freq = good;  // HF rotary buffers are ignored
  with_inv_freq.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", at::ones({16}));
  write_safetensors(file, with_inv_freq);
  EXPECT_NO_THROW(load_pretrained(dir, at::kFloat, at::kCPU));

  // Config says 3 layers but the file has 2.
  ModelConfig cfg = m->config();
  cfg.num_hidden_layers = 3;
  write_safetensors(file, good);
  cfg.save(dir + "/config.json");
  expect_error([&] { load_pretrained(dir, at::kFloat, at::kCPU); }, {"missing tensor 'model.layers.2."});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::model
