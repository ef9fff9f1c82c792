// EngineOptions::batch_invariant: one request, greedy and sampled with a seed, gives the
// same tokens and the same log-probs bit for bit when it runs alone, inside a burst of
// 63 random others, after its prefix was cached, with its prompt prefilled in small
// chunks, and with 1 or 2 compute threads -- for Qwen2, Qwen3 and Llama. The outputs
// are also checked against the model's full forward (token_logprobs) within a stated
// tolerance, so the mode computes the right numbers and not only the same ones.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "agentr1/model/model_test_util.h"
#include "agentr1/rollout/engine.h"

namespace agentr1::rollout {
namespace {

using model::Arch;

struct EngineSetup {
  int threads = 1;
  int prefill_chunk = 512;
  bool invariant = true;
};

GenRequest target(const TokenIds& prompt, bool greedy) {
  GenRequest r;
  r.prompt_ids = prompt;
  r.sampling.temperature = greedy ? 0.0f : 1.0f;
  r.sampling.max_new_tokens = 24;
  r.sampling.seed = 11;
  return r;
}

TokenIds random_tokens(std::mt19937_64& g, int len, int64_t vocab) {
  std::uniform_int_distribution<int> d(0, static_cast<int>(vocab) - 1);
  TokenIds ids;
  for (int i = 0; i < len; ++i) ids.push_back(d(g));
  return ids;
}

// 63 random requests (prompts of 2..70 tokens, some sharing the target's first tokens,
// 1..40 new tokens, greedy and sampled) with the target at position 31.
std::vector<GenRequest> burst(const GenRequest& t, int64_t vocab) {
  std::mt19937_64 g(5);
  std::vector<GenRequest> out;
  for (int i = 0; i < 64; ++i) {
    if (i == 31) {
      out.push_back(t);
      continue;
    }
    GenRequest r;
    const int len = std::uniform_int_distribution<int>(2, 70)(g);
    r.prompt_ids = random_tokens(g, len, vocab);
    if (i % 5 == 0)  // a shared prefix: these rows read the target's blocks or lend theirs
      std::copy(t.prompt_ids.begin(), t.prompt_ids.begin() + std::min<size_t>(20, r.prompt_ids.size()),
                r.prompt_ids.begin());
    r.sampling.temperature = i % 2 ? 0.0f : 0.8f;
    r.sampling.max_new_tokens = std::uniform_int_distribution<int>(1, 40)(g);
    r.sampling.seed = static_cast<uint64_t>(i);
    out.push_back(r);
  }
  return out;
}

EngineOptions options(const EngineSetup& s) {
  EngineOptions o;
  o.max_batch = 64;
  o.max_context = 160;
  o.block_size = 16;
  o.threads = s.threads;
  o.prefill_chunk = s.prefill_chunk;
  o.batch_invariant = s.invariant;
  return o;
}

bool same(const GenResult& a, const GenResult& b) {
  return a.token_ids == b.token_ids && a.logprobs.size() == b.logprobs.size() &&
         std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * sizeof(float)) == 0;
}

std::string show(const GenResult& r) {
  std::string s;
  for (size_t i = 0; i < r.token_ids.size(); ++i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %d:%.9g", r.token_ids[i], static_cast<double>(r.logprobs[i]));
    s += buf;
  }
  return s;
}

class BatchInvariance : public ::testing::TestWithParam<Arch> {};

TEST_P(BatchInvariance, RequestIsBitIdenticalAloneBatchedCachedChunkedAndThreaded) {
  model::ModelConfig cfg = model::testing::tiny_config(GetParam());
  model::Transformer m = model::testing::spicy_model(cfg, 77);
  std::mt19937_64 g(3);
  const TokenIds prompt = random_tokens(g, 37, cfg.vocab_size);  // 2 full blocks + 5
  int differ_default = 0;
  for (bool greedy : {true, false}) {
    const GenRequest t = target(prompt, greedy);
    auto alone = [&](const EngineSetup& s) {
      Engine e(m, options(s));
      return e.submit(t).get();
    };
    const GenResult ref = alone({});
    ASSERT_EQ(ref.token_ids.size(), 24u);

    // The model's own full forward over prompt + response: the engine's log-probs of
    // the sampled tokens within 1e-4 (fp32; the two differ only in summation order).
    {
      TokenIds all = prompt;
      all.insert(all.end(), ref.token_ids.begin(), ref.token_ids.end());
      std::vector<int64_t> ids(all.begin(), all.end());
      at::NoGradGuard ng;
      const at::Tensor lp = model::token_logprobs(m, at::tensor(ids).unsqueeze(0))[0];
      for (size_t i = 0; i < ref.token_ids.size(); ++i) {
        const float want = lp[static_cast<int64_t>(prompt.size() - 1 + i)].item<float>();
        EXPECT_NEAR(ref.logprobs[i], want, 1e-4) << "token " << i;
      }
    }

    const GenResult two_threads = alone({/*threads=*/2});
    EXPECT_TRUE(same(two_threads, ref)) << "2 threads:" << show(two_threads) << "\nalone:" << show(ref);
    const GenResult chunked = alone({/*threads=*/1, /*prefill_chunk=*/5});
    EXPECT_TRUE(same(chunked, ref)) << "chunked prefill:" << show(chunked) << "\nalone:" << show(ref);

    for (int threads : {1, 2}) {
      Engine e(m, options({threads}));
      std::vector<GenResult> rs = e.generate(burst(t, cfg.vocab_size));
      EXPECT_GT(e.stats().max_decode_batch, 32) << "the burst did not batch";
      EXPECT_TRUE(same(rs[31], ref)) << "in a burst of 64, " << threads << " threads:" << show(rs[31])
                                     << "\nalone:" << show(ref);
    }

    {  // its prefix cached: first the same prompt (3 tokens), then a longer one
      Engine e(m, options({}));
      GenRequest warm = t;
      warm.sampling.max_new_tokens = 3;
      e.submit(warm).get();
      const GenResult cached = e.submit(t).get();
      EXPECT_GE(e.stats().prefill_tokens_reused, 36);
      EXPECT_TRUE(same(cached, ref)) << "prefix cached:" << show(cached) << "\nalone:" << show(ref);
      GenRequest longer = t;
      longer.prompt_ids.insert(longer.prompt_ids.end(), cached.token_ids.begin(), cached.token_ids.begin() + 10);
      longer.sampling.max_new_tokens = 14;
      const GenResult cont = e.submit(longer).get();  // reuses prompt + 10 generated tokens
      // Greedy: the continuation is the rest of the response, its log-probs the same bits.
      if (greedy) {
        GenResult tail;
        tail.token_ids.assign(ref.token_ids.begin() + 10, ref.token_ids.end());
        tail.logprobs.assign(ref.logprobs.begin() + 10, ref.logprobs.end());
        EXPECT_TRUE(same(cont, tail)) << "continued from cached tokens:" << show(cont) << "\nwant:" << show(tail);
      }
    }

    // The default (BLAS) mode, for the record: how often the same comparisons differ.
    EngineSetup def;
    def.invariant = false;
    const GenResult d_alone = alone(def);
    Engine e(m, options(def));
    std::vector<GenResult> rs = e.generate(burst(t, cfg.vocab_size));
    differ_default += !same(rs[31], d_alone);
  }
  std::printf("[batch-invariance] %s: default mode, burst vs alone differ in %d of 2 requests\n",
              model::arch_name(GetParam()), differ_default);
}

INSTANTIATE_TEST_SUITE_P(Archs, BatchInvariance, ::testing::Values(Arch::kQwen2, Arch::kQwen3, Arch::kLlama),
                         [](const auto& info) { return std::string(model::arch_name(info.param)); });

}  // namespace
}  // namespace agentr1::rollout
