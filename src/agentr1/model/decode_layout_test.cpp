// DecodeLayout: forward_cached reading the weights' copies in the decode layout gives the
// logits of reading the weights themselves, bit for bit; copies of weights changed since
// they were packed are not read; bad input is refused by name.
#include "agentr1/model/decode_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <memory>
#include <chrono>

#include "agentr1/core/error.h"
#include "agentr1/model/huge_pages.h"
#include "agentr1/model/kv_cache.h"
#include "agentr1/model/model_test_util.h"
#include "agentr1/model/spin_pool.h"

namespace agentr1::model {
namespace {

using testing::random_ids;
using testing::spicy_model;
using testing::tiny_config;

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.numel() * ac.element_size()) == 0;
}

// A prompt then `steps` one-token decode steps of one sequence, in a fresh batch-invariant
// cache; the logits of every call, stacked.
at::Tensor decode(Transformer& m, const at::Tensor& ids, int64_t prompt, SpinPool* pool, const DecodeLayout* packed) {
  at::NoGradGuard ng;
  KVCache cache(m->config(), 8, 4, m->decode_weights().front().scalar_type(), at::kCPU);
  cache.batch_invariant = true;
  const std::vector<int32_t> table = {3, 0, 6, 1, 7, 2, 5, 4};
  std::vector<at::Tensor> out{m->forward_cached(ids.narrow(0, 0, prompt), {CachedRow{0, prompt, &table}}, cache, pool, packed)};
  for (int64_t t = prompt; t < ids.size(0); ++t)
    out.push_back(m->forward_cached(ids.narrow(0, t, 1), {CachedRow{t, 1, &table}}, cache, pool, packed));
  return at::cat(out);
}

struct Case {
  Arch arch;
  bool tied;
  at::ScalarType dtype;
};

class DecodeLayoutTest : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeLayoutTest, SameLogitsBitForBitAndOnlyCurrentCopiesRead) {
  const Case c = GetParam();
  Transformer m = spicy_model(tiny_config(c.arch, c.tied), 21);
  m->to(c.dtype);
  const at::Tensor ids = random_ids(1, 20, m->config().vocab_size, 4)[0];
  SpinPool pool(2);
  DecodeLayout packed(m->decode_weights(), &pool);
  const int64_t L = m->config().num_hidden_layers;
  EXPECT_EQ(packed.weights(), 7 * L + 1);  // a tied head is the embedding, not a layer weight
  for (const at::Tensor& w : m->decode_weights()) EXPECT_NE(packed.find(w), nullptr);
  EXPECT_EQ(DecodeLayout::bytes_needed(m->decode_weights()), packed.bytes());
  // Each copy names the copy decode order reads next (the head: layer 0's q, the next
  // step), with its whole size: what a one-row product warms for the next region.
  {
    const std::vector<at::Tensor> ws = m->decode_weights();
    for (size_t i = 0; i < ws.size(); ++i) {
      const detail::PackedWeight* p = packed.find(ws[i]);
      const detail::PackedWeight* n = packed.find(ws[(i + 1) % ws.size()]);
      ASSERT_TRUE(p != nullptr && n != nullptr);
      EXPECT_EQ(p->next, n->data) << "weight #" << i;
      const int64_t es = static_cast<int64_t>(at::elementSize(n->dtype)), L = 64 / es;  // elements per line
      EXPECT_EQ(p->next_bytes, (n->O + 3) / 4 * 4 * ((n->K + L - 1) / L * L) * es) << "weight #" << i;
    }
  }
  EXPECT_TRUE(packed.holds(m->decode_weights()));
  Transformer other = spicy_model(tiny_config(c.arch, c.tied), 22);
  EXPECT_FALSE(packed.holds(other->decode_weights()));  // another model's tensors: a new layout is needed

  const at::Tensor plain = decode(m, ids, 6, &pool, nullptr);
  EXPECT_TRUE(same_bits(decode(m, ids, 6, &pool, &packed), plain));
  EXPECT_TRUE(same_bits(decode(m, ids, 6, nullptr, &packed), plain));

  // A write that bypasses ATen is not seen (documented): the stale copy is read, so the
  // logits differ from the weights' own. This shows the copies are what one row reads
  // (a prompt of one token: every call has one row).
  const at::Tensor one_row = decode(m, ids, 1, &pool, nullptr);
  EXPECT_TRUE(same_bits(decode(m, ids, 1, &pool, &packed), one_row));
  at::Tensor down = m->decode_weights()[6];
  const at::Tensor saved = down.clone();
  std::memset(down.data_ptr(), 0, static_cast<size_t>(down.numel() * down.element_size()));
  EXPECT_NE(packed.find(down), nullptr);
  const at::Tensor zeroed = decode(m, ids, 1, &pool, nullptr);
  EXPECT_FALSE(same_bits(zeroed, one_row));
  EXPECT_TRUE(same_bits(decode(m, ids, 1, &pool, &packed), one_row)) << "the copy, not the zeroed weight, was read";
  packed.repack(&pool);
  EXPECT_TRUE(same_bits(decode(m, ids, 1, &pool, &packed), zeroed));
  std::memcpy(down.data_ptr(), saved.data_ptr(), static_cast<size_t>(down.numel() * down.element_size()));
  packed.repack(&pool);

  // An in-place op through ATen bumps the weight's version: its copy is no longer read
  // (the others still are), so the logits follow the new weights.
  at::Tensor gate = m->decode_weights()[4];  // (a q scale would vanish in Qwen3's q norm)
  {
    at::NoGradGuard ng;
    gate.mul_(0.5);
  }
  EXPECT_EQ(packed.find(gate), nullptr);
  EXPECT_NE(packed.find(m->decode_weights()[1]), nullptr);
  const at::Tensor halved = decode(m, ids, 6, &pool, nullptr);
  EXPECT_FALSE(same_bits(halved, plain));
  EXPECT_TRUE(same_bits(decode(m, ids, 6, &pool, &packed), halved));
  packed.repack(&pool);
  EXPECT_NE(packed.find(gate), nullptr);
  EXPECT_TRUE(same_bits(decode(m, ids, 6, &pool, &packed), halved));
}

INSTANTIATE_TEST_SUITE_P(Models, DecodeLayoutTest,
                         ::testing::Values(Case{Arch::kQwen2, false, at::kFloat}, Case{Arch::kQwen3, true, at::kBFloat16},
                                           Case{Arch::kLlama, false, at::kBFloat16}, Case{Arch::kQwen3, false, at::kHalf}));

// A one-row product on a pool reading a copy warms the front of the next copy for the
// next region (helper 1 reads min(512 KiB, next copy / threads)), keeping the arena alive
// while it reads: the layout is destroyed right after the product, and a read past its
// free would be reported by make test-sanitize. Products big enough for the pool (a
// product under 2^17 multiply-adds runs on the caller and warms nothing).
TEST(DecodeLayoutWarm, AOneRowProductWarmsTheNextCopysFrontAndKeepsTheArenaAlive) {
  at::NoGradGuard ng;
  SpinPool pool(2, /*idle_us=*/60'000'000);  // no helper falls asleep (and drops the hint)
  std::vector<at::Tensor> ws;
  for (int i = 0; i < 3; ++i) ws.push_back(at::randn({512 + 8 * i, 512}).to(at::kBFloat16));
  const at::Tensor x = at::randn({1, 512}).to(at::kBFloat16);
  auto settle = [&](uint64_t want) {  // until helper 1 has read `want` lines (bounded)
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (pool.warmed_lines() < want && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    return pool.warmed_lines();
  };
  const uint64_t start = pool.warmed_lines();
  const at::Tensor plain = detail::row_linear(x, ws[0], {}, &pool);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(pool.warmed_lines(), start) << "a product without a copy warms nothing";
  for (int off : {0, 1, 2}) {
    auto packed = std::make_unique<DecodeLayout>(ws, &pool);
    const detail::PackedWeight* p = packed->find(ws[static_cast<size_t>(off)]);
    ASSERT_NE(p, nullptr);
    const int64_t next_bytes = p->next_bytes;
    const uint64_t before = pool.warmed_lines();
    const at::Tensor y = detail::row_linear(x, ws[static_cast<size_t>(off)], {}, &pool, p);
    packed.reset();  // the helper may still be reading the arena: it holds it
    const at::Tensor ref = detail::row_linear(x, ws[static_cast<size_t>(off)], {}, &pool);
    EXPECT_TRUE(same_bits(y, ref)) << "weight #" << off;
    // The product's warm target: the next copy's first min(512 KiB, half of it) bytes,
    // every line of it; the product without a copy warmed nothing more.
    const uint64_t want = static_cast<uint64_t>((std::min<int64_t>(512 << 10, next_bytes / 2) + 63) / 64);
    EXPECT_EQ(settle(before + want) - before, want) << "weight #" << off;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(pool.warmed_lines() - before, want) << "weight #" << off;
  }
  EXPECT_EQ(plain.sizes(), (at::IntArrayRef{1, 512}));
  detail::set_decode_warm_bytes(0);
  {
    DecodeLayout packed(ws, &pool);
    const uint64_t before = pool.warmed_lines();
    (void)detail::row_linear(x, ws[0], {}, &pool, packed.find(ws[0]));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(pool.warmed_lines(), before) << "set_decode_warm_bytes(0) turns the warm off";
  }
  detail::set_decode_warm_bytes(-1);
}

TEST(DecodeLayoutErrors, NamesTheWeightAndTheRule) {
  const at::Tensor good = at::randn({8, 16});
  try {
    DecodeLayout bad({good, at::randn({16})});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight #1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(DecodeLayout({at::randn({4, 4}, at::kDouble)}), Error);
  at::Tensor w = at::randn({8, 16});
  DecodeLayout one({w});
  EXPECT_EQ(one.weights(), 1);
  EXPECT_EQ(one.bytes(), 2 * 1 * 4 * 64);  // 2 groups x 1 line x 4 columns x 64 bytes
  EXPECT_EQ(one.find(at::randn({8, 16})), nullptr);  // not packed here
  w.set_data(at::randn({4, 16}));
  EXPECT_EQ(one.find(w), nullptr);  // moved and reshaped
  EXPECT_THROW(one.repack(), Error);
}

TEST(HugePageBuffer, ZeroFilledAlignedAndSized) {
  for (int64_t n : {int64_t{1}, int64_t{100}, int64_t{3} << 20}) {
    const at::Tensor b = huge_page_buffer(n);
    ASSERT_EQ(b.numel(), n);
    EXPECT_EQ(b.scalar_type(), at::kByte);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data_ptr()) % 64, 0u);
    EXPECT_EQ(b.sum().item<int64_t>(), 0);
  }
  EXPECT_THROW(huge_page_buffer(0), Error);
#if defined(__linux__)
  EXPECT_GT(mem_available_bytes(), 0);
#endif
}

}  // namespace
}  // namespace agentr1::model
