// Training memory bounded in sequence length, with the dense path as the reference:
// the chunked LM head (values and gradients of log-probs and entropies, head frozen or
// trained, with a temperature), activation checkpointing per decoder layer (every
// parameter's gradient, three architectures, packed segments and the shared-prefix form,
// LoRA adapters with dropout), and the model's attention in tiles with an online softmax
// in the same forms (the kernel itself is tested against a float64 reference in
// model/blocked_attention_test).
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/function.h>

#include <set>

#include "agentr1/model/model_test_util.h"
#include "agentr1/model/transformer.h"
#include "agentr1/train/learner/chunked_logprobs.h"

namespace agentr1::train {
namespace {

using model::Arch;
using model::Transformer;
using model::testing::random_ids;
using model::testing::graph_has;
using model::testing::spicy_model;
using model::testing::tiny_config;

double max_abs(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

at::Tensor randn(std::vector<int64_t> shape, uint64_t seed, double scale = 1.0) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen, at::kFloat) * scale;
}

struct HeadCase {
  double temperature;
  bool train_head;
  int64_t chunk;
};

class ChunkedHeadTest : public ::testing::TestWithParam<HeadCase> {};

TEST_P(ChunkedHeadTest, ValuesAndGradientsEqualTheDensePath) {
  const auto [temperature, train_head, chunk] = GetParam();
  const int64_t N = 23, H = 16, V = 41;
  const at::Tensor h0 = randn({N, H}, 1), w0 = randn({V, H}, 2, 0.5);
  const at::Tensor targets = random_ids(1, N, V, 3)[0];
  const at::Tensor a = randn({N}, 4), b = randn({N}, 5);  // weights of lp and entropy in the loss
  // Dense: the whole [N,V] logits through autograd.
  at::Tensor hd = h0.clone().requires_grad_(true), wd = w0.clone().requires_grad_(train_head);
  const at::Tensor logp = at::log_softmax(at::linear(hd, wd) / temperature, -1);
  const at::Tensor lp_d = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1);
  const at::Tensor ent_d = -(logp.exp() * logp).sum(-1);
  ((lp_d * a).sum() + (ent_d * b).sum()).backward();
  // Chunked.
  at::Tensor hc = h0.clone().requires_grad_(true), wc = w0.clone().requires_grad_(train_head);
  auto [lp_c, ent_c] = chunked_token_logprobs(hc, wc, targets, temperature, chunk);
  ((lp_c * a).sum() + (ent_c * b).sum()).backward();
  EXPECT_LE(max_abs(lp_c, lp_d), 1e-5);
  EXPECT_LE(max_abs(ent_c, ent_d), 1e-5);
  EXPECT_LE(max_abs(hc.grad(), hd.grad()), 1e-5);
  if (train_head) {
    EXPECT_LE(max_abs(wc.grad(), wd.grad()), 1e-5);
  } else {
    EXPECT_FALSE(wc.grad().defined());
  }
  EXPECT_GT(hd.grad().abs().max().item<double>(), 1e-2);  // the gradient is not trivially zero
}

INSTANTIATE_TEST_SUITE_P(Cases, ChunkedHeadTest,
                         ::testing::Values(HeadCase{1.0, true, 4}, HeadCase{0.7, true, 5}, HeadCase{0.7, false, 1},
                                           HeadCase{1.3, false, 100}));

TEST(ChunkedHeadTest, OnlyTheLogprobsTermOrOnlyTheEntropyTerm) {
  const int64_t N = 9, H = 8, V = 13;
  const at::Tensor h0 = randn({N, H}, 7), w0 = randn({V, H}, 8), targets = random_ids(1, N, V, 9)[0];
  for (int which = 0; which < 2; ++which) {
    at::Tensor hd = h0.clone().requires_grad_(true);
    const at::Tensor logp = at::log_softmax(at::linear(hd, w0), -1);
    (which == 0 ? logp.gather(-1, targets.unsqueeze(-1)).sum() : -(logp.exp() * logp).sum()).backward();
    at::Tensor hc = h0.clone().requires_grad_(true);
    auto [lp, ent] = chunked_token_logprobs(hc, w0, targets, 1.0, 2);
    (which == 0 ? lp.sum() : ent.sum()).backward();
    EXPECT_LE(max_abs(hc.grad(), hd.grad()), 1e-5) << (which == 0 ? "log-probs only" : "entropy only");
  }
}

// K ids per token (a distillation teacher's top-k, with the sampled target in column 0):
// values and gradients equal the dense gather of the same columns; and the top-k pass
// returns the dense top-k.
TEST(ChunkedHeadTest, SeveralIdsPerTokenAndTopkEqualTheDensePath) {
  const int64_t N = 11, H = 8, V = 29, K = 4;
  const at::Tensor h0 = randn({N, H}, 21), w0 = randn({V, H}, 22, 0.7);
  const at::Tensor ids = at::cat({random_ids(1, N, V, 23)[0].unsqueeze(-1), random_ids(N, K - 1, V, 24)}, 1);  // [N,K]
  const at::Tensor a = randn({N, K}, 25), b = randn({N}, 26);
  at::Tensor hd = h0.clone().requires_grad_(true), wd = w0.clone().requires_grad_(true);
  const at::Tensor logp = at::log_softmax(at::linear(hd, wd) / 0.8, -1);
  const at::Tensor lp_d = logp.gather(-1, ids);
  ((lp_d * a).sum() + (-(logp.exp() * logp).sum(-1) * b).sum()).backward();
  at::Tensor hc = h0.clone().requires_grad_(true), wc = w0.clone().requires_grad_(true);
  auto [lp_c, ent_c] = chunked_token_logprobs(hc, wc, ids, 0.8, 3);
  ASSERT_EQ(lp_c.sizes(), (at::IntArrayRef{N, K}));
  ((lp_c * a).sum() + (ent_c * b).sum()).backward();
  EXPECT_LE(max_abs(lp_c, lp_d), 1e-5);
  EXPECT_LE(max_abs(hc.grad(), hd.grad()), 1e-5);
  EXPECT_LE(max_abs(wc.grad(), wd.grad()), 1e-5);
  const at::Tensor dense = at::log_softmax(at::linear(h0, w0) / 0.8, -1);  // [N,V]
  const TopkLogprobs t = chunked_topk_logprobs(h0, w0, K, 0.8, 3, ids.select(1, 0));
  const auto [v, i] = dense.topk(K, -1);
  EXPECT_LE(max_abs(t.lp, v), 1e-5);
  EXPECT_LE(max_abs(t.target_lp, dense.gather(-1, ids.select(1, 0).unsqueeze(-1)).squeeze(-1)), 1e-5);
  EXPECT_LE(max_abs(dense.gather(-1, t.ids), v), 1e-5);  // the ids hold those values (ties: either id)
  // max_id: the top k among the first 20 ids, normalised over all 29.
  const TopkLogprobs f = chunked_topk_logprobs(h0, w0, K, 0.8, 3, at::Tensor(), 20);
  const auto [vf, iff] = dense.narrow(-1, 0, 20).topk(K, -1);
  EXPECT_LE(max_abs(f.lp, vf), 1e-5);
  EXPECT_LT(f.ids.max().item<int64_t>(), 20);
  EXPECT_FALSE(f.target_lp.defined());
}

// Gradients of every trainable parameter after one backward of a loss over the logits.
// With block > 0 the attention runs in tiles of that many tokens (else dense); the
// logits come back under the key "logits".
std::map<std::string, at::Tensor> grads_of(Transformer& m, bool checkpoint, const at::Tensor& ids,
                                           const at::Tensor& segments, const at::Tensor& prefix, int64_t block = 0) {
  m->zero_grad();
  m->set_gradient_checkpointing(checkpoint);
  m->set_attention_block(block);
  m->train();
  at::manual_seed(17);  // the global generator: LoRA dropout's masks
  const at::Tensor logits = m->forward(ids, {}, segments, prefix);
  EXPECT_EQ(graph_has(logits, "Checkpointed"), checkpoint);  // the layers really were checkpointed (or not)
  if (!checkpoint) EXPECT_EQ(graph_has(logits, "BlockedAttention"), block > 0);  // tiles really ran (or not)
  (at::log_softmax(logits, -1).select(-1, 3) * randn({ids.size(0), ids.size(1)}, 5)).sum().backward();
  std::map<std::string, at::Tensor> g;
  for (const auto& p : m->named_parameters())
    if (p.value().requires_grad()) g[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : at::Tensor();
  g["logits"] = logits.detach();
  m->set_gradient_checkpointing(false);
  m->set_attention_block(model::kDefaultAttentionBlock);
  return g;
}

struct CkCase {
  Arch arch;
  int form;  // 0 plain rows, 1 packed segments, 2 shared prefix, 3 LoRA with dropout
};

// The model and inputs of one form: 2 rows of 11 tokens; form 1 packs segments (and
// padding), 2 adds a 6-token shared prefix, 3 adds LoRA adapters (random, dropout 0.3).
struct FormCase {
  Transformer m;
  at::Tensor ids, segments, prefix;
};

FormCase form_case(Arch arch, int form) {
  FormCase c{spicy_model(tiny_config(arch), 3), {}, {}, {}};
  const int64_t V = c.m->config().vocab_size;
  c.ids = random_ids(2, 11, V, 1);
  if (form == 1) c.segments = at::tensor({0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 5, 5, 5, 5, 5, 5, 5, 5, -1, -1, -1}).view({2, 11});
  if (form == 2) c.prefix = random_ids(1, 6, V, 2)[0];
  if (form == 3) {
    model::LoraOptions lo;
    lo.rank = 3;
    lo.alpha = 6;
    lo.dropout = 0.3;
    c.m->add_lora(lo, 4);
    at::NoGradGuard ng;
    for (auto& [name, t] : c.m->lora_parameters()) t.normal_(0.0, 0.3);
  }
  return c;
}

class CheckpointingTest : public ::testing::TestWithParam<CkCase> {};

TEST_P(CheckpointingTest, GradientsEqualTheRecordedForward) {
  const auto [arch, form] = GetParam();
  auto [m, ids, segments, prefix] = form_case(arch, form);
  const auto want = grads_of(m, false, ids, segments, prefix);
  const auto got = grads_of(m, true, ids, segments, prefix);
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, g] : want) {
    ASSERT_TRUE(g.defined()) << name;
    ASSERT_TRUE(got.at(name).defined()) << name << " got no gradient with checkpointing";
    EXPECT_LE(max_abs(got.at(name), g), 1e-5 * (1 + g.abs().max().item<double>())) << name;
  }
  if (form == 3) {  // dropout really acted: another seed gives other gradients
    m->set_gradient_checkpointing(false);
    m->zero_grad();
    at::manual_seed(99);
    (at::log_softmax(m->forward(ids), -1).select(-1, 3) * randn({2, 11}, 5)).sum().backward();
    const std::string n = "model.layers.0.self_attn.q_proj.lora_B";
    EXPECT_GT(max_abs(m->named_parameters()[n].grad(), want.at(n)), 1e-6);
  }
}

// The model's attention in tiles (Transformer::set_attention_block, blocked_attention.h)
// against its dense attention: logits and every parameter's gradient to fp32 tolerance,
// in every form the learner forwards (rows of 11 tokens in tiles of 3; the prefix form
// attends over 6 + 11 keys). Tree packing: tree_packing_test.
class BlockedAttentionModelTest : public ::testing::TestWithParam<CkCase> {};

TEST_P(BlockedAttentionModelTest, LogitsAndGradientsEqualDenseAttention) {
  const auto [arch, form] = GetParam();  // form 4: checkpointed layers too
  auto [m, ids, segments, prefix] = form_case(arch, form);
  const bool ck = form == 4;
  const auto want = grads_of(m, ck, ids, segments, prefix, /*block=*/0);
  const auto got = grads_of(m, ck, ids, segments, prefix, /*block=*/3);
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, g] : want) {
    ASSERT_TRUE(g.defined()) << name;
    ASSERT_TRUE(got.at(name).defined()) << name << " got no gradient with tiled attention";
    const at::Tensor a = name == "logits" && form == 1 ? got.at(name) * (segments >= 0).unsqueeze(-1) : got.at(name);
    const at::Tensor b = name == "logits" && form == 1 ? g * (segments >= 0).unsqueeze(-1) : g;
    EXPECT_LE(max_abs(a, b), 1e-5 * (1 + b.abs().max().item<double>())) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, BlockedAttentionModelTest,
                         ::testing::Values(CkCase{Arch::kQwen2, 0}, CkCase{Arch::kQwen3, 0}, CkCase{Arch::kLlama, 0},
                                           CkCase{Arch::kQwen2, 1}, CkCase{Arch::kQwen3, 1}, CkCase{Arch::kQwen3, 2},
                                           CkCase{Arch::kLlama, 2}, CkCase{Arch::kQwen2, 3}, CkCase{Arch::kQwen3, 4}));

INSTANTIATE_TEST_SUITE_P(Forms, CheckpointingTest,
                         ::testing::Values(CkCase{Arch::kQwen2, 0}, CkCase{Arch::kQwen3, 0}, CkCase{Arch::kLlama, 0},
                                           CkCase{Arch::kQwen3, 1}, CkCase{Arch::kQwen2, 2}, CkCase{Arch::kQwen3, 2},
                                           CkCase{Arch::kLlama, 3}, CkCase{Arch::kQwen3, 3}));

}  // namespace
}  // namespace agentr1::train
