// forward_cached over the paged KV cache must equal the full causal forward: prefill +
// token-by-token decode, rows of different lengths in one call, blocks shared by
// reference and copied on write, scattered block tables. Each case runs both the fused
// CPU kernels and the portable tensor path, and the two are compared with each other.
#include "agentr1/model/kv_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/model/model_test_util.h"
#include "agentr1/model/paged_attention.h"
#include "agentr1/model/spin_pool.h"
#include "agentr1/model/transformer.h"

namespace agentr1::model {
namespace {

using testing::random_ids;
using testing::spicy_model;
using testing::tiny_config;

constexpr double kTol = 1e-4;

double max_abs(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// The process's peak resident set (VmHWM) in MiB.
double peak_rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

// First in the file, so the process peak before it is that of a small process: an
// 8,192-token prompt prefilled in one call through the fused kernels stays within a
// small memory bound (the tensor path would materialise [1, 4, 8192, 8192] fp32
// scores, 1 GiB, twice), and equals a chunked prefill through the tensor path.
TEST(KVCacheTest, LongPromptPrefillsInBoundedMemoryAndEqualsChunkedPrefill) {
  at::NoGradGuard ng;
  ModelConfig c = tiny_config(Arch::kLlama);
  c.max_position_embeddings = 8192;
  Transformer m = spicy_model(c, 31);
  const int64_t T = 8192, bs = 64;
  at::Tensor ids = random_ids(1, T, c.vocab_size, 4)[0];
  std::vector<int32_t> table(static_cast<size_t>(T / bs));
  std::iota(table.rbegin(), table.rend(), 0);  // blocks in reverse order: not contiguous
  KVCache fused(c, T / bs, bs, at::kFloat, at::kCPU);
  const double before = peak_rss_mib();
  at::Tensor lf = m->forward_cached(ids, {CachedRow{0, T, &table}}, fused);
  const double grew = peak_rss_mib() - before;
  std::printf("[kv] 8192-token fused prefill: peak RSS grew %.1f MiB\n", grew);
  EXPECT_LT(grew, 200.0);

  KVCache ref(c, T / bs, bs, at::kFloat, at::kCPU);
  ref.fused_attention = false;
  at::Tensor lr;
  for (int64_t s = 0; s < T; s += 512)
    lr = m->forward_cached(ids.narrow(0, s, 512), {CachedRow{s, 512, &table}}, ref);
  EXPECT_LE(max_abs(lf, lr), kTol);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    EXPECT_LE(max_abs(fused.k(l), ref.k(l)), kTol) << "layer " << l << " keys";
}

struct PathArch {
  Arch arch;
  bool fused;
  bool invariant = false;  // the batch-invariant products (row_linear.h) on the fused path
};

class KVCacheArchTest : public ::testing::TestWithParam<PathArch> {};

TEST_P(KVCacheArchTest, PrefillThenDecodeEqualsFullForward) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(GetParam().arch), 7);
  const int64_t T = 24, P = 9;
  at::Tensor ids = random_ids(1, T, m->config().vocab_size, 3)[0];
  at::Tensor full = m->forward(ids.unsqueeze(0))[0];  // [T,V]
  KVCache cache(m->config(), /*n_blocks=*/9, /*block_size=*/4, at::kFloat, at::kCPU);
  cache.fused_attention = GetParam().fused;
  cache.batch_invariant = GetParam().invariant;
  const std::vector<int32_t> table = {5, 2, 7, 0, 8, 3};  // 24 positions, scattered
  at::Tensor first = m->forward_cached(ids.narrow(0, 0, P), {CachedRow{0, P, &table}}, cache);  // [1,V]
  double worst = max_abs(first[0], full[P - 1]);
  for (int64_t t = P; t < T; ++t) {
    at::Tensor lg = m->forward_cached(ids.narrow(0, t, 1), {CachedRow{t, 1, &table}}, cache);
    worst = std::max(worst, max_abs(lg[0], full[t]));
  }
  std::printf("[kv] %s %s prefill+decode max_abs_diff %.3e\n", arch_name(GetParam().arch),
              GetParam().invariant ? "invariant" : GetParam().fused ? "fused" : "tensor", worst);
  EXPECT_LE(worst, kTol);
  EXPECT_GT(full.std().item<double>(), 0.5);  // logits are not flat
}

// One call mixing a decode row, a multi-token continuation and a fresh prefill, each
// with its own cached length.
TEST_P(KVCacheArchTest, MixedRowsInOneCall) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(GetParam().arch, /*tied=*/true), 11);
  const int64_t V = m->config().vocab_size;
  at::Tensor seqs = random_ids(3, 20, V, 5);  // three sequences of 20 tokens
  KVCache cache(m->config(), 16, 4, at::kFloat, at::kCPU);
  cache.fused_attention = GetParam().fused;
  cache.batch_invariant = GetParam().invariant;
  const std::vector<std::vector<int32_t>> tables = {{3, 9, 1, 12}, {0, 15, 4}, {7, 2}};
  const std::vector<int64_t> have = {12, 5, 0};  // cached before the mixed call
  for (int r = 0; r < 2; ++r)
    m->forward_cached(seqs[r].narrow(0, 0, have[r]), {CachedRow{0, have[r], &tables[r]}}, cache);
  const std::vector<int64_t> n_new = {1, 4, 7};
  std::vector<CachedRow> rows;
  std::vector<at::Tensor> parts;
  for (int r = 0; r < 3; ++r) {
    rows.push_back({have[r], n_new[r], &tables[r]});
    parts.push_back(seqs[r].narrow(0, have[r], n_new[r]));
  }
  at::Tensor lg = m->forward_cached(at::cat(parts), rows, cache);  // [3,V]
  double worst = 0;
  for (int r = 0; r < 3; ++r) {
    const int64_t L = have[r] + n_new[r];
    at::Tensor full = m->forward(seqs[r].narrow(0, 0, L).unsqueeze(0))[0][L - 1];
    worst = std::max(worst, max_abs(lg[r], full));
  }
  // Then a pure decode step for all three rows at once.
  const std::vector<int64_t> lens = {13, 9, 7};
  rows.clear();
  for (int r = 0; r < 3; ++r) rows.push_back({lens[r], 1, &tables[r]});
  at::Tensor lg2 = m->forward_cached(at::stack({seqs[0][13], seqs[1][9], seqs[2][7]}), rows, cache);
  for (int r = 0; r < 3; ++r) {
    at::Tensor full = m->forward(seqs[r].narrow(0, 0, lens[r] + 1).unsqueeze(0))[0][lens[r]];
    worst = std::max(worst, max_abs(lg2[r], full));
  }
  std::printf("[kv] %s %s mixed rows max_abs_diff %.3e\n", arch_name(GetParam().arch),
              GetParam().invariant ? "invariant" : GetParam().fused ? "fused" : "tensor", worst);
  EXPECT_LE(worst, kTol);
}

// A prompt's full blocks shared by reference by two continuations in one call, and a
// partial block copied on write.
TEST_P(KVCacheArchTest, SharedBlocksAndCopyOnWrite) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(GetParam().arch), 21);
  const int64_t V = m->config().vocab_size;
  at::Tensor a = random_ids(1, 16, V, 8)[0];
  at::Tensor b = a.clone(), c = a.clone();
  b.narrow(0, 8, 8).copy_(random_ids(1, 8, V, 9)[0]);   // shares a's first 8 tokens (2 full blocks)
  c.narrow(0, 10, 6).copy_(random_ids(1, 6, V, 10)[0]);  // shares 10: 2 full blocks + 2 of the third
  KVCache cache(m->config(), 12, 4, at::kFloat, at::kCPU);
  cache.fused_attention = GetParam().fused;
  cache.batch_invariant = GetParam().invariant;
  const std::vector<int32_t> ta = {4, 6, 1, 9}, tb = {4, 6, 0, 2}, tc = {4, 6, 11, 3};
  m->forward_cached(a.narrow(0, 0, 11), {CachedRow{0, 11, &ta}}, cache);
  cache.copy_block(/*src=*/1, /*dst=*/11, /*n=*/2);  // c's third block: a's positions 8, 9
  std::vector<CachedRow> rows = {{11, 5, &ta}, {8, 8, &tb}, {10, 6, &tc}};
  at::Tensor lg = m->forward_cached(at::cat({a.narrow(0, 11, 5), b.narrow(0, 8, 8), c.narrow(0, 10, 6)}), rows, cache);
  double worst = 0;
  int r = 0;
  for (const at::Tensor& s : {a, b, c}) worst = std::max(worst, max_abs(lg[r++], m->forward(s.unsqueeze(0))[0][15]));
  EXPECT_LE(worst, kTol);
}

INSTANTIATE_TEST_SUITE_P(Archs, KVCacheArchTest,
                         ::testing::Values(PathArch{Arch::kQwen2, true}, PathArch{Arch::kQwen3, true},
                                           PathArch{Arch::kLlama, true}, PathArch{Arch::kQwen2, false},
                                           PathArch{Arch::kQwen3, false}, PathArch{Arch::kLlama, false},
                                           PathArch{Arch::kQwen2, true, true}, PathArch{Arch::kQwen3, true, true},
                                           PathArch{Arch::kLlama, true, true}),
                         [](const auto& info) {
                           return std::string(arch_name(info.param.arch)) +
                                  (info.param.invariant ? "_invariant" : info.param.fused ? "_fused" : "_tensor");
                         });

// batch_invariant at the forward_cached level (no engine, no timing): one row's logits,
// prefill then 6 decode steps, are the same bits alone, inside calls with 63 other rows
// (prefill and decode), with its prompt prefilled in chunks of 5, with its first 16
// positions read from blocks another row wrote, and on a 2-thread SpinPool. The widths
// are not multiples of 8 (hidden 60, intermediate 100, head_dim 10: vector tails
// everywhere), for fp32 and bf16 and each arch.
TEST(KVCacheTest, BatchInvariantRowIsTheSameBitsWhateverTheCall) {
  at::NoGradGuard ng;
  // head_dim 10 takes the portable loops everywhere; 32 the AVX-512 forms where the CPU
  // has them (hidden 128 = 4 heads of 32, a multiple of 32 for their rms_norm_rows).
  for (const int64_t hd : {10, 32})
  for (Arch arch : {Arch::kQwen2, Arch::kQwen3, Arch::kLlama})
    for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
      ModelConfig c = tiny_config(arch);
      c.hidden_size = hd == 10 ? 60 : 128;
      c.intermediate_size = 100;
      c.num_attention_heads = hd == 10 ? 6 : 4;
      c.num_key_value_heads = 2;
      c.head_dim = hd;
      Transformer m = spicy_model(c, 13);
      m->to(dt);
      const int64_t V = c.vocab_size, P = 21, T = 27, bs = 4, per = (T + bs - 1) / bs;  // 7 blocks a row
      const at::Tensor ids = random_ids(1, T, V, 5)[0];
      const at::Tensor others = random_ids(63, T, V, 6);
      auto same_bits = [](const at::Tensor& a, const at::Tensor& b) {
        return a.sizes() == b.sizes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0;
      };
      // Logits of the target row: after its prompt, then after each of the next 6 tokens.
      // mode 0 alone, 1 with 63 others, 2 chunked prefill, 3 prefix from another row's
      // blocks, 4 alone on a 2-thread pool.
      auto run = [&](int mode) {
        KVCache cache(c, 64 * per + per, bs, dt, at::kCPU);
        cache.batch_invariant = true;
        SpinPool pool(2);
        SpinPool* pp = mode == 4 ? &pool : nullptr;
        std::vector<std::vector<int32_t>> tables(64);
        for (int r = 0; r < 64; ++r)
          for (int64_t b = 0; b < per; ++b) tables[r].push_back(static_cast<int32_t>(r * per + b));
        std::vector<at::Tensor> out;
        const std::vector<int32_t>& tt = tables[0];
        if (mode == 1) {  // the target is row 17 of 64; the others' prompts have other lengths
          std::vector<CachedRow> rows;
          std::vector<at::Tensor> parts;
          tables[17].swap(tables[0]);  // the target (row 17) writes blocks 0..6, as alone
          for (int r = 0; r < 64; ++r) {
            const int64_t len = r == 17 ? P : 3 + (r * 7) % 19;
            rows.push_back({0, len, &tables[r]});
            parts.push_back(r == 17 ? ids.narrow(0, 0, P) : others[r % 63].narrow(0, 0, len));
          }
          out.push_back(m->forward_cached(at::cat(parts), rows, cache)[17].clone());
          for (int64_t t = P; t < T - 1; ++t) {
            std::vector<CachedRow> drows;
            std::vector<int64_t> dids;
            for (int r = 0; r < 64; ++r) {
              const int64_t len = r == 17 ? t : 3 + (r * 7) % 19 + (t - P);
              drows.push_back({len, 1, &tables[r]});
              dids.push_back(r == 17 ? ids[t].item<int64_t>() : others[r % 63][len].item<int64_t>());
            }
            out.push_back(m->forward_cached(at::tensor(dids), drows, cache)[17].clone());
          }
          return out;
        }
        if (mode == 2) {
          at::Tensor last;
          for (int64_t s0 = 0; s0 < P; s0 += 5) {
            const int64_t n = std::min<int64_t>(5, P - s0);
            last = m->forward_cached(ids.narrow(0, s0, n), {CachedRow{s0, n, &tt}}, cache);
          }
          out.push_back(last[0].clone());
        } else if (mode == 3) {
          // Another row (table 1) computes the same first 16 tokens plus its own; the
          // target shares its 4 full blocks and computes positions 16..20 itself.
          at::Tensor other = ids.narrow(0, 0, 16).clone();
          m->forward_cached(at::cat({other, others[0].narrow(0, 0, 3)}), {CachedRow{0, 19, &tables[1]}}, cache);
          std::vector<int32_t> shared(tables[1].begin(), tables[1].begin() + 4);
          shared.insert(shared.end(), tt.begin() + 4, tt.end());
          tables[0] = shared;
          out.push_back(m->forward_cached(ids.narrow(0, 16, P - 16), {CachedRow{16, P - 16, &tables[0]}}, cache)[0].clone());
        } else {
          out.push_back(m->forward_cached(ids.narrow(0, 0, P), {CachedRow{0, P, &tt}}, cache, pp)[0].clone());
        }
        for (int64_t t = P; t < T - 1; ++t)
          out.push_back(m->forward_cached(ids.narrow(0, t, 1), {CachedRow{t, 1, &tables[0]}}, cache, pp)[0].clone());
        return out;
      };
      const std::vector<at::Tensor> ref = run(0);
      ASSERT_EQ(ref.size(), 6u);
      for (int mode = 1; mode <= 4; ++mode) {
        const std::vector<at::Tensor> got = run(mode);
        ASSERT_EQ(got.size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i)
          EXPECT_TRUE(same_bits(got[i], ref[i])) << arch_name(arch) << " " << c10::toString(dt) << " head_dim " << hd
                                                 << " mode " << mode
                                                 << " step " << i << ": max diff "
                                                 << (got[i] - ref[i]).abs().max().item<double>();
      }
    }
}

// The AVX-512 and portable forms of the fused kernels (paged_attention.h) against the
// model's own forward, each within the rounding tolerance, and against each other.
TEST(KVCacheTest, VectorAndPortableKernelsAgree) {
  at::NoGradGuard ng;
  if (!detail::attention_avx512_supported()) GTEST_SKIP() << "no AVX-512 here: only the portable form runs";
  struct Unforce {  // the default back even when a check throws
    ~Unforce() { detail::force_attention_avx512(std::nullopt); }
  } unforce;
  for (Arch arch : {Arch::kQwen2, Arch::kQwen3, Arch::kLlama})
    for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
      ModelConfig c = tiny_config(arch);
      c.hidden_size = 128;  // 4 heads of 32: every vector form applies
      c.head_dim = 32;
      Transformer m = spicy_model(c, 21);
      m->to(dt);
      const at::Tensor ids = random_ids(1, 40, c.vocab_size, 3)[0];
      const std::vector<int32_t> table = {3, 1, 4, 0, 2, 5};
      const at::Tensor full = m->forward(ids.unsqueeze(0))[0].to(at::kFloat);
      at::Tensor got[2];
      for (int form = 0; form < 2; ++form) {
        detail::force_attention_avx512(form == 1);
        KVCache cache(c, 6, 8, dt, at::kCPU);
        cache.batch_invariant = true;
        std::vector<at::Tensor> rows;
        rows.push_back(m->forward_cached(ids.narrow(0, 0, 30), {CachedRow{0, 30, &table}}, cache));  // prefill
        for (int64_t t = 30; t < 40; ++t)
          rows.push_back(m->forward_cached(ids.narrow(0, t, 1), {CachedRow{t, 1, &table}}, cache));  // decode
        got[form] = at::cat(rows);
      }
      const at::Tensor want = full.narrow(0, 29, 11);
      const double tol = dt == at::kFloat ? 1e-3 : 0.25;  // bf16: roundings differ from the tensor path
      for (int form = 0; form < 2; ++form)
        EXPECT_LE(max_abs(got[form], want), tol) << arch_name(arch) << " " << c10::toString(dt) << " form " << form;
      EXPECT_LE(max_abs(got[0], got[1]), dt == at::kFloat ? 1e-4 : 0.25) << arch_name(arch) << " " << c10::toString(dt);
      // The switch really switches: the forms' summation orders differ, so fp32 logits do.
      if (dt == at::kFloat) EXPECT_GT(max_abs(got[0], got[1]), 0.0) << "force_attention_avx512 had no effect";
    }
}

// Decode attention over long rows with 128-wide heads (the 0.6B shape's), 4 KV groups of
// 2 query heads: the work is split into (token, range of groups) items by the number of
// threads, and each block's keys are scored 8, 4 and 1 at a time (blocks of 16 and 13
// positions: every tail). A row's logits must be the same bits on no pool and on pools
// of 1, 2 and 3 threads (ranges of 4, 2 and 1-2 groups), and within rounding of the
// model's own forward (an independent path: dense attention over whole sequences).
TEST(KVCacheTest, DecodeAttentionIsTheSameBitsForEveryThreadSplit) {
  at::NoGradGuard ng;
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16})
    for (const int64_t bs : {16, 13}) {
      ModelConfig c = tiny_config(Arch::kQwen3);
      c.hidden_size = 256;
      c.num_attention_heads = 8;
      c.num_key_value_heads = 4;
      c.head_dim = 128;
      c.intermediate_size = 64;
      Transformer m = spicy_model(c, 31);
      m->to(dt);
      const int64_t P = 90, T = 100;  // a 90-token prompt, then 10 decoded positions
      const at::Tensor ids = random_ids(1, T, c.vocab_size, 8)[0];
      std::vector<int32_t> table;
      for (int64_t b = (T + bs - 1) / bs; b-- > 0;) table.push_back(static_cast<int32_t>(b));  // out of order
      auto run = [&](int threads) {
        std::unique_ptr<SpinPool> pool(threads > 0 ? new SpinPool(threads) : nullptr);
        KVCache cache(c, static_cast<int64_t>(table.size()), bs, dt, at::kCPU);
        cache.batch_invariant = true;
        std::vector<at::Tensor> rows;
        rows.push_back(m->forward_cached(ids.narrow(0, 0, P), {CachedRow{0, P, &table}}, cache, pool.get()));
        for (int64_t t = P; t < T; ++t)
          rows.push_back(m->forward_cached(ids.narrow(0, t, 1), {CachedRow{t, 1, &table}}, cache, pool.get()));
        return at::cat(rows);
      };
      const at::Tensor ref = run(0);
      for (int threads : {1, 2, 3}) {
        const at::Tensor got = run(threads);
        EXPECT_TRUE(got.sizes() == ref.sizes() &&
                    std::memcmp(got.data_ptr(), ref.data_ptr(), got.numel() * got.element_size()) == 0)
            << c10::toString(dt) << " block " << bs << ", " << threads << " threads: max diff " << max_abs(got, ref);
      }
      const at::Tensor full = m->forward(ids.unsqueeze(0))[0].to(at::kFloat).narrow(0, P - 1, T - P + 1);
      // bf16: the fused kernel keeps q and the scores in float where the tensor path rounds.
      EXPECT_LE(max_abs(ref, full), dt == at::kFloat ? 1e-3 : 0.25) << c10::toString(dt) << " block " << bs;
    }
}

TEST(KVCacheTest, Bf16CacheMatchesBf16Forward) {
  at::NoGradGuard ng;
  for (Arch arch : {Arch::kLlama, Arch::kQwen3}) {
    Transformer m = spicy_model(tiny_config(arch), 4);
    m->to(at::kBFloat16);
    at::Tensor ids = random_ids(1, 10, m->config().vocab_size, 1)[0];
    const std::vector<int32_t> table = {2, 0, 1};
    at::Tensor full = m->forward(ids.unsqueeze(0))[0][9];
    for (int mode : {0, 1, 2}) {  // fused, tensor, fused + batch-invariant
      const bool fused = mode != 1;
      KVCache cache(m->config(), 3, 4, at::kBFloat16, at::kCPU);
      cache.fused_attention = fused;
      cache.batch_invariant = mode == 2;
      at::Tensor lg = m->forward_cached(ids, {CachedRow{0, 10, &table}}, cache);
      EXPECT_EQ(lg.scalar_type(), at::kFloat);
      // Same math; bf16 rounding differs where the fused kernel keeps float (q, scores).
      EXPECT_LE(max_abs(lg[0], full), 0.25) << arch_name(arch) << " mode " << mode;
    }
  }
}

TEST(KVCacheTest, ErrorsNameTheProblem) {
  at::NoGradGuard ng;
  Transformer m = spicy_model(tiny_config(Arch::kQwen2), 2);
  KVCache cache(m->config(), 4, 4, at::kFloat, at::kCPU);
  at::Tensor ids = random_ids(1, 12, m->config().vocab_size, 1)[0];
  const std::vector<int32_t> t0 = {0, 1}, t_bad = {0, 7}, t_same = {0, 3};
  auto expect_error = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "expected Error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { m->forward_cached(ids.narrow(0, 0, 9), {CachedRow{0, 9, &t0}}, cache); }, "has 2 blocks");
  expect_error([&] { m->forward_cached(ids.narrow(0, 0, 6), {CachedRow{0, 6, &t_bad}}, cache); },
               "block 7 out of range");
  expect_error([&] { m->forward_cached(ids.narrow(0, 0, 8), {CachedRow{0, 4, &t0}, CachedRow{0, 4, &t_same}}, cache); },
               "block 0 is written by two rows");
  expect_error([&] { m->forward_cached(ids.narrow(0, 0, 5), {CachedRow{0, 4, &t0}}, cache); },
               "ids has 5 tokens but the rows add 4");
  expect_error([&] { m->forward_cached(ids.narrow(0, 0, 1), {CachedRow{300, 1, &t0}}, cache); },
               "max_position_embeddings");
  KVCache wrong(m->config(), 2, 4, at::kBFloat16, at::kCPU);
  expect_error([&] { m->forward_cached(ids.narrow(0, 0, 4), {CachedRow{0, 4, &t0}}, wrong); }, "model's dtype");
  expect_error([&] { cache.copy_block(0, 1, 5); }, "n 5");
  KVCache unfused(m->config(), 2, 4, at::kFloat, at::kCPU);
  unfused.fused_attention = false;
  unfused.batch_invariant = true;
  expect_error([&] { m->forward_cached(ids.narrow(0, 0, 4), {CachedRow{0, 4, &t0}}, unfused); },
               "batch_invariant needs the fused CPU kernels");
  EXPECT_THROW(KVCache(m->config(), 0, 8, at::kFloat, at::kCPU), Error);
  // Two rows may read the same full block while writing their own.
  const std::vector<int32_t> ra = {0, 1}, rb = {0, 2};
  m->forward_cached(ids.narrow(0, 0, 4), {CachedRow{0, 4, &ra}}, cache);
  EXPECT_NO_THROW(m->forward_cached(ids.narrow(0, 4, 2), {CachedRow{4, 1, &ra}, CachedRow{4, 1, &rb}}, cache));
}

}  // namespace
}  // namespace agentr1::model
