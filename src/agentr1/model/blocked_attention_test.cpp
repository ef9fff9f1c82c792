// Tiled attention with an online softmax (blocked_attention.h) against a reference
// written here in float64 with plain autograd: softmax(q k^T * scale, masked) v with
// GQA by repeating k/v heads. Outputs and the gradients of q, k and v, for causal,
// packed-segment, shared-prefix (S > T) and random masks, tile sizes that divide the
// lengths and that do not, and bf16 inputs.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <limits>

#include "agentr1/model/blocked_attention.h"

namespace agentr1::model::detail {
namespace {

at::Tensor randn(std::vector<int64_t> shape, uint64_t seed, double scale = 1.0) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen, at::kFloat) * scale;
}

// The reference: float64, k/v heads repeated for GQA, the whole [B,H,T,S] softmax.
at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                     double scale) {
  const int64_t rep = q.size(1) / k.size(1);
  const at::Tensor kr = k.repeat_interleave(rep, 1), vr = v.repeat_interleave(rep, 1);
  at::Tensor s = at::matmul(q, kr.transpose(-1, -2)) * scale;           // [B,H,T,S]
  s = s.masked_fill(blocked.squeeze(1), -std::numeric_limits<double>::infinity());  // [B|1,1,T,S]
  return at::matmul(at::softmax(s, -1), vr);
}

struct Case {
  const char* name;
  int64_t B, H, G, T, S, hd, block;
  int mask;  // 0 causal, 1 packed segments, 2 shared prefix (S = P + T), 3 random
};

// blocked [B|1,1,1,T,S] for the case: true where a query may not see a key. Every query
// sees at least one key.
at::Tensor make_blocked(const Case& c) {
  const auto bopts = at::TensorOptions().dtype(at::kBool);
  at::Tensor allowed;
  if (c.mask == 0) {
    allowed = at::ones({c.T, c.S}, bopts).tril().unsqueeze(0);
  } else if (c.mask == 1) {  // row 0: segments of 5, 9, rest; row 1: one segment then padding
    std::vector<int64_t> seg(static_cast<size_t>(c.B * c.T));
    for (int64_t t = 0; t < c.T; ++t) {
      seg[static_cast<size_t>(t)] = t < 5 ? 0 : t < 14 ? 1 : 2;
      if (c.B > 1) seg[static_cast<size_t>(c.T + t)] = t < c.T - 4 ? 0 : -1;
    }
    const at::Tensor s = at::tensor(seg).view({c.B, c.T});
    allowed = at::ones({c.T, c.T}, bopts).tril().unsqueeze(0).logical_and(s.unsqueeze(2) == s.unsqueeze(1));
    allowed = allowed.logical_and(s.unsqueeze(1) >= 0).logical_or(at::eye(c.T, bopts).unsqueeze(0));
  } else if (c.mask == 2) {  // every query sees the P prefix keys, then its row causally
    const int64_t P = c.S - c.T;
    allowed = at::cat({at::ones({c.T, P}, bopts), at::ones({c.T, c.T}, bopts).tril()}, 1).unsqueeze(0);
  } else {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
    allowed = at::rand({c.B, c.T, c.S}, gen) < 0.3;
    allowed.select(2, 0).fill_(true);
  }
  return allowed.logical_not().unsqueeze(1).unsqueeze(1);
}

class BlockedAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(BlockedAttentionTest, OutputsAndGradientsEqualTheDenseSoftmax) {
  const Case c = GetParam();
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.hd));
  const at::Tensor q0 = randn({c.B, c.H, c.T, c.hd}, 1, 2.0), k0 = randn({c.B, c.G, c.S, c.hd}, 2, 2.0);
  const at::Tensor v0 = randn({c.B, c.G, c.S, c.hd}, 3), dout = randn({c.B, c.H, c.T, c.hd}, 4);
  const at::Tensor blocked = make_blocked(c);

  at::Tensor qd = q0.to(at::kDouble).requires_grad_(true), kd = k0.to(at::kDouble).requires_grad_(true),
             vd = v0.to(at::kDouble).requires_grad_(true);
  const at::Tensor want = reference(qd, kd, vd, blocked, scale);
  (want * dout.to(at::kDouble)).sum().backward();

  at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true),
             v = v0.clone().requires_grad_(true);
  const at::Tensor got = blocked_attention(q, k, v, blocked, scale, c.block);
  ASSERT_EQ(got.sizes(), q.sizes());
  (got * dout).sum().backward();

  auto close = [](const at::Tensor& a, const at::Tensor& b) {
    return (a.to(at::kDouble) - b).abs().max().item<double>() / (1.0 + b.abs().max().item<double>());
  };
  EXPECT_LT(close(got, want.detach()), 2e-6) << "output";
  EXPECT_LT(close(q.grad(), qd.grad()), 2e-6) << "dq";
  EXPECT_LT(close(k.grad(), kd.grad()), 2e-6) << "dk";
  EXPECT_LT(close(v.grad(), vd.grad()), 2e-6) << "dv";
  EXPECT_GT(k.grad().abs().max().item<double>(), 1e-3);  // not trivially zero
}

INSTANTIATE_TEST_SUITE_P(
    Masks, BlockedAttentionTest,
    ::testing::Values(Case{"causal_gqa2", 2, 4, 2, 23, 23, 8, 4}, Case{"causal_one_tile", 1, 2, 2, 9, 9, 8, 16},
                      Case{"causal_tile1", 1, 3, 1, 7, 7, 4, 1}, Case{"causal_gqa3_even", 2, 6, 2, 24, 24, 8, 8},
                      Case{"segments", 2, 4, 2, 21, 21, 8, 5}, Case{"prefix", 3, 4, 1, 13, 22, 8, 6},
                      Case{"random", 2, 4, 4, 17, 19, 8, 3}),
    [](const auto& info) { return std::string(info.param.name); });

// bf16 inputs compute in fp32 inside and return bf16: within bf16 rounding of the fp32
// reference of the same (rounded) inputs.
TEST(BlockedAttentionTest, Bf16InputsGiveBf16ResultsWithinItsRounding) {
  const Case c{"bf16", 1, 4, 2, 19, 19, 16, 4, 0};
  const double scale = 0.25;
  const at::Tensor q = randn({1, 4, 19, 16}, 5).to(at::kBFloat16), k = randn({1, 2, 19, 16}, 6).to(at::kBFloat16),
                   v = randn({1, 2, 19, 16}, 7).to(at::kBFloat16);
  const at::Tensor blocked = make_blocked(c);
  const at::Tensor got = blocked_attention(q, k, v, blocked, scale, c.block);
  EXPECT_EQ(got.scalar_type(), at::kBFloat16);
  const at::Tensor want = reference(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), blocked, scale);
  EXPECT_LT((got.to(at::kDouble) - want).abs().max().item<double>(), 2e-2);
}

// A query whose keys are all blocked gets 0 and no gradient (the dense softmax gives
// NaN); the other queries are unaffected.
TEST(BlockedAttentionTest, AQueryThatSeesNoKeyGetsZeroNotNan) {
  const at::Tensor q = randn({1, 2, 6, 4}, 8).requires_grad_(true), k = randn({1, 1, 6, 4}, 9).requires_grad_(true),
                   v = randn({1, 1, 6, 4}, 10).requires_grad_(true);
  at::Tensor allowed = at::ones({6, 6}, at::kBool).tril();
  allowed[3].fill_(false);  // query 3 sees nothing
  const at::Tensor blocked = allowed.logical_not().view({1, 1, 1, 6, 6});
  const at::Tensor out = blocked_attention(q, k, v, blocked, 0.5, 2);
  out.sum().backward();
  EXPECT_FALSE(out.isnan().any().item<bool>());
  EXPECT_EQ(out.select(2, 3).abs().max().item<double>(), 0.0);
  EXPECT_EQ(q.grad().select(2, 3).abs().max().item<double>(), 0.0);
  EXPECT_FALSE(k.grad().isnan().any().item<bool>());
  const at::Tensor want = reference(q.detach().to(at::kDouble), k.detach().to(at::kDouble),
                                    v.detach().to(at::kDouble), blocked, 0.5);
  for (int64_t t : {0, 1, 2, 4, 5})
    EXPECT_LT((out.select(2, t).to(at::kDouble) - want.select(2, t)).abs().max().item<double>(), 1e-6) << t;
}

TEST(BlockedAttentionTest, BadShapesAreErrorsNamingThem) {
  const at::Tensor q = at::zeros({1, 3, 4, 8}), k = at::zeros({1, 2, 4, 8});
  const at::Tensor blocked = at::zeros({1, 1, 1, 4, 4}, at::kBool);
  try {
    blocked_attention(q, k, k, blocked, 1.0, 2);
    FAIL() << "3 query heads over 2 kv heads accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of nKV"), std::string::npos) << e.what();
  }
  EXPECT_THROW(blocked_attention(at::zeros({1, 2, 4, 8}), k, k, at::zeros({1, 1, 1, 4, 5}, at::kBool), 1.0, 2),
               std::exception);
  EXPECT_THROW(blocked_attention(at::zeros({1, 2, 4, 8}), k, k, blocked, 1.0, 0), std::exception);
}

}  // namespace
}  // namespace agentr1::model::detail
