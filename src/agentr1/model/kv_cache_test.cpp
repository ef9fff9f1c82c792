// forward_cached must equal the full causal forward: prefill + token-by-token decode,
// rows of different lengths in one call, shared prefixes copied between slots.
#include "agentr1/model/kv_cache.h"

#include <gtest/gtest.h>

#include "agentr1/core/error.h"
#include "agentr1/model/model_test_util.h"
#include "agentr1/model/transformer.h"

namespace agentr1::model {
namespace {

using testing::random_ids;
using testing::spicy_model;
using testing::tiny_config;

constexpr double kTol = 1e-4;

double max_abs(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

class KVCacheArchTest : public ::testing::TestWithParam<Arch> {};

TEST_P(KVCacheArchTest, PrefillThenDecodeEqualsFullForward) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(GetParam()), 7);
  const int64_t T = 24, P = 9;
  at::Tensor ids = random_ids(1, T, m->config().vocab_size, 3);
  at::Tensor full = m->forward(ids)[0];  // [T,V]
  KVCache cache(m->config(), /*n_slots=*/4, /*max_len=*/32, at::kFloat, at::kCPU);
  at::Tensor first = m->forward_cached(ids.narrow(1, 0, P), {2}, {P}, cache);  // [1,V]
  EXPECT_EQ(cache.length(2), P);
  double worst = max_abs(first[0], full[P - 1]);
  for (int64_t t = P; t < T; ++t) {
    at::Tensor lg = m->forward_cached(ids.narrow(1, t, 1), {2}, {1}, cache);
    worst = std::max(worst, max_abs(lg[0], full[t]));
  }
  EXPECT_EQ(cache.length(2), T);
  std::printf("[kv] %s prefill+decode max_abs_diff %.3e\n", arch_name(GetParam()), worst);
  EXPECT_LE(worst, kTol);
  EXPECT_GT(full.std().item<double>(), 0.5);  // logits are not flat
}

// One call mixing a decode row, a multi-token continuation and a fresh prefill, each
// with its own cached length; padding columns of short rows must not leak.
TEST_P(KVCacheArchTest, MixedRowsInOneCall) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(GetParam(), /*tied=*/true), 11);
  const int64_t V = m->config().vocab_size;
  at::Tensor seqs = random_ids(3, 20, V, 5);  // three sequences of 20 tokens
  KVCache cache(m->config(), 5, 24, at::kFloat, at::kCPU);
  const std::vector<int64_t> slots = {4, 0, 2};
  const std::vector<int64_t> have = {12, 5, 0};  // cached before the mixed call
  for (int r = 0; r < 2; ++r) m->forward_cached(seqs[r].narrow(0, 0, have[r]).unsqueeze(0), {slots[r]}, {have[r]}, cache);
  const std::vector<int64_t> n_new = {1, 4, 7};
  const int64_t T = 7;
  at::Tensor batch = at::full({3, T}, 0, at::kLong);
  for (int r = 0; r < 3; ++r) batch[r].narrow(0, 0, n_new[r]).copy_(seqs[r].narrow(0, have[r], n_new[r]));
  at::Tensor lg = m->forward_cached(batch, slots, n_new, cache);  // [3,V]
  double worst = 0;
  for (int r = 0; r < 3; ++r) {
    const int64_t L = have[r] + n_new[r];
    EXPECT_EQ(cache.length(slots[r]), L);
    at::Tensor full = m->forward(seqs[r].narrow(0, 0, L).unsqueeze(0))[0][L - 1];
    worst = std::max(worst, max_abs(lg[r], full));
  }
  // Then a pure decode step for all three rows at once (B=3, T=1).
  at::Tensor step = at::stack({seqs[0][13], seqs[1][9], seqs[2][7]}).unsqueeze(1);
  at::Tensor lg2 = m->forward_cached(step, slots, {1, 1, 1}, cache);
  const std::vector<int64_t> lens = {14, 10, 8};
  for (int r = 0; r < 3; ++r) {
    at::Tensor full = m->forward(seqs[r].narrow(0, 0, lens[r]).unsqueeze(0))[0][lens[r] - 1];
    worst = std::max(worst, max_abs(lg2[r], full));
  }
  std::printf("[kv] %s mixed rows max_abs_diff %.3e\n", arch_name(GetParam()), worst);
  EXPECT_LE(worst, kTol);
}

INSTANTIATE_TEST_SUITE_P(Archs, KVCacheArchTest, ::testing::Values(Arch::kQwen2, Arch::kQwen3, Arch::kLlama),
                         [](const auto& info) { return std::string(arch_name(info.param)); });

TEST(KVCacheTest, CopyPrefixSharesAPrompt) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(Arch::kQwen3), 21);
  at::Tensor a = random_ids(1, 14, m->config().vocab_size, 8)[0];
  at::Tensor b = a.clone();
  b.narrow(0, 8, 6).copy_(random_ids(1, 6, m->config().vocab_size, 9)[0]);  // same 8-token prompt
  KVCache cache(m->config(), 3, 16, at::kFloat, at::kCPU);
  m->forward_cached(a.narrow(0, 0, 10).unsqueeze(0), {0}, {10}, cache);
  cache.copy_prefix(/*src=*/0, /*dst=*/1, /*len=*/8);
  EXPECT_EQ(cache.length(1), 8);
  at::Tensor batch = at::zeros({2, 4}, at::kLong);
  batch[0].copy_(a.narrow(0, 10, 4));
  batch[1].narrow(0, 0, 4).copy_(b.narrow(0, 8, 4));
  at::Tensor lg = m->forward_cached(batch, {0, 1}, {4, 4}, cache);
  EXPECT_LE(max_abs(lg[0], m->forward(a.narrow(0, 0, 14).unsqueeze(0))[0][13]), kTol);
  EXPECT_LE(max_abs(lg[1], m->forward(b.narrow(0, 0, 12).unsqueeze(0))[0][11]), kTol);
  cache.reset(1);
  EXPECT_EQ(cache.length(1), 0);
}

TEST(KVCacheTest, Bf16CacheMatchesBf16Forward) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(Arch::kLlama), 4);
  m->to(at::kBFloat16);
  at::Tensor ids = random_ids(1, 10, m->config().vocab_size, 1);
  KVCache cache(m->config(), 1, 10, at::kBFloat16, at::kCPU);
  at::Tensor lg = m->forward_cached(ids, {0}, {10}, cache);
  EXPECT_EQ(lg.scalar_type(), at::kFloat);
  EXPECT_LE(max_abs(lg[0], m->forward(ids)[0][9]), 0.25);  // same math, bf16 rounding order differs
}

TEST(KVCacheTest, ErrorsNameTheProblem) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(Arch::kQwen2), 2);
  KVCache cache(m->config(), 2, 8, at::kFloat, at::kCPU);
  at::Tensor ids = random_ids(2, 6, m->config().vocab_size, 1);
  auto expect_error = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "expected Error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { m->forward_cached(ids, {1, 1}, {6, 6}, cache); }, "appears twice");
  expect_error([&] { m->forward_cached(ids, {0, 1}, {6, 7}, cache); }, "n_new[1]");
  expect_error([&] { m->forward_cached(ids, {0, 5}, {6, 6}, cache); }, "slot 5 out of range");
  m->forward_cached(ids, {0, 1}, {6, 6}, cache);
  expect_error([&] { m->forward_cached(ids, {0, 1}, {6, 6}, cache); }, "exceeds max_len 8");
  EXPECT_EQ(cache.length(0), 6);  // a failed call leaves the cache as it was
  expect_error([&] { cache.copy_prefix(0, 1, 7); }, "len 7");
  expect_error([&] { cache.set_length(0, 9); }, "max_len=8");
  KVCache wrong(m->config(), 2, 8, at::kBFloat16, at::kCPU);
  expect_error([&] { m->forward_cached(ids, {0, 1}, {6, 6}, wrong); }, "model's dtype");
  EXPECT_THROW(KVCache(m->config(), 0, 8, at::kFloat, at::kCPU), Error);
}

}  // namespace
}  // namespace agentr1::model
