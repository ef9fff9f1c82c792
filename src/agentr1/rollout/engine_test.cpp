#include "agentr1/rollout/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "agentr1/core/error.h"

namespace agentr1::rollout {
namespace {

constexpr int64_t kVocab = 160;

model::ModelConfig tiny_config() {
  model::ModelConfig c;
  c.arch = model::Arch::kQwen3;
  c.vocab_size = kVocab;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.qk_norm = true;
  c.max_position_embeddings = 512;
  c.rope_theta = 10000.0;
  return c;
}

model::Transformer& tiny_model() {
  static model::Transformer m = [] {
    model::Transformer t = model::init_random(tiny_config(), /*seed=*/42);
    // Sharpen the random model's next-token distributions (HF init gives nearly uniform
    // logits), so greedy decoding has clear winners and sampling is not uniform.
    torch::NoGradGuard ng;
    for (auto& p : t->named_parameters())
      if (p.key().find("lm_head") != std::string::npos) p.value().mul_(30.0);
    return t;
  }();
  return m;
}

TokenIds random_prompt(std::mt19937_64& g, int len) {
  std::uniform_int_distribution<int> d(0, kVocab - 1);
  TokenIds ids;
  for (int i = 0; i < len; ++i) ids.push_back(d(g));
  return ids;
}

GenRequest request(TokenIds prompt, float temperature, int max_new, uint64_t seed = 0) {
  GenRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = temperature;
  r.sampling.max_new_tokens = max_new;
  r.sampling.seed = seed;
  return r;
}

at::Tensor as_tensor(const TokenIds& ids) {
  std::vector<int64_t> v(ids.begin(), ids.end());
  return at::tensor(v, at::TensorOptions().dtype(at::kLong)).view({1, -1});
}

// Naive greedy: re-run the full forward over the whole sequence for every token.
TokenIds naive_greedy(const TokenIds& prompt, int max_new) {
  torch::NoGradGuard ng;
  TokenIds seq = prompt;
  TokenIds out;
  for (int i = 0; i < max_new; ++i) {
    at::Tensor logits = tiny_model()->forward(as_tensor(seq)).select(1, seq.size() - 1)[0];
    const float* l = logits.contiguous().data_ptr<float>();
    int best = 0;
    for (int v = 1; v < kVocab; ++v)
      if (l[v] > l[best]) best = v;
    seq.push_back(best);
    out.push_back(best);
  }
  return out;
}

// log_softmax(logits / T) of each completion token, from one full forward.
std::vector<float> score(const TokenIds& prompt, const TokenIds& completion, float t) {
  torch::NoGradGuard ng;
  TokenIds all = prompt;
  all.insert(all.end(), completion.begin(), completion.end());
  at::Tensor logits = tiny_model()->forward(as_tensor(all))[0];  // [T, V]
  at::Tensor lp = at::log_softmax(logits / t, /*dim=*/-1);
  std::vector<float> out;
  for (size_t i = 0; i < completion.size(); ++i)
    out.push_back(lp[prompt.size() - 1 + i][completion[i]].item<float>());
  return out;
}

EngineOptions options(int max_batch, bool prefix_cache = true) {
  EngineOptions o;
  o.max_batch = max_batch;
  o.max_context = 256;
  o.prefix_cache = prefix_cache;
  return o;
}

TEST(Engine, CachedGreedyEqualsFullRecomputation) {
  std::mt19937_64 g(1);
  std::vector<TokenIds> prompts = {random_prompt(g, 5), random_prompt(g, 17), random_prompt(g, 40)};
  for (int chunk : {512, 7}) {
    EngineOptions o = options(4);
    o.prefill_chunk = chunk;
    Engine engine(tiny_model(), o);
    std::vector<GenRequest> reqs;
    for (auto& p : prompts) reqs.push_back(request(p, 0.0f, 24));
    auto results = engine.generate(reqs);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(results[i].token_ids, naive_greedy(prompts[i], 24)) << "prompt " << i << " chunk " << chunk;
      EXPECT_EQ(results[i].finish, FinishReason::kLength);
      // Greedy log-probs are log_softmax(logits) (T = 1): model::token_logprobs.
      TokenIds all = prompts[i];
      all.insert(all.end(), results[i].token_ids.begin(), results[i].token_ids.end());
      torch::NoGradGuard ng;
      at::Tensor ref = model::token_logprobs(tiny_model(), as_tensor(all))[0];
      for (size_t t = 0; t < results[i].token_ids.size(); ++t)
        EXPECT_NEAR(results[i].logprobs[t], ref[prompts[i].size() - 1 + t].item<float>(), 1e-4);
    }
    EXPECT_GT(engine.stats().prefill_calls, chunk == 7 ? 8 : 0);
  }
}

// EngineOptions::huge_pages (on by default): a model with a storage of at least 2 MiB
// (an embedding of 9,000 x 64 floats) has its weights moved by the constructor, and it
// generates the same tokens and log-probs as the same model left in place.
TEST(Engine, HugePagesMoveTheWeightsAndKeepTheOutputs) {
  model::ModelConfig cfg = tiny_config();
  cfg.vocab_size = 9000;
  model::Transformer left = model::init_random(cfg, 42), moved = model::init_random(cfg, 42);
  const void* before = moved->named_parameters()["model.embed_tokens.weight"].data_ptr();
  const void* left_before = left->named_parameters()["model.embed_tokens.weight"].data_ptr();
  EngineOptions off = options(2), on = options(2);
  off.huge_pages = false;
  Engine e_off(left, off), e_on(moved, on);
  const void* after = moved->named_parameters()["model.embed_tokens.weight"].data_ptr();
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(thp, mode);
  if (mode.find("[never]") == std::string::npos && !mode.empty()) {
    EXPECT_NE(after, before) << "THP '" << mode << "': the embedding was not moved";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(after) % (uintptr_t{2} << 20), 0u) << "not on a 2 MiB boundary";
  }
  EXPECT_EQ(left->named_parameters()["model.embed_tokens.weight"].data_ptr(), left_before);  // off: left alone
  std::mt19937_64 g(3);
  std::uniform_int_distribution<int> d(0, 8999);
  for (int i = 0; i < 2; ++i) {
    TokenIds p;
    for (int k = 0; k < 11; ++k) p.push_back(d(g));
    const GenResult a = e_off.generate({request(p, 0.0f, 12)})[0], b = e_on.generate({request(p, 0.0f, 12)})[0];
    EXPECT_EQ(a.token_ids, b.token_ids);
    EXPECT_EQ(a.logprobs, b.logprobs);  // the same bits: the move copies, nothing is recomputed
  }
}

// EngineOptions::packed_decode (off by default; serve turns it on): steps that decode one sequence alone read
// the weights' copy in the decode layout, built at the first such step and repacked after
// with_model; the tokens and log-probs are those of an engine without it, bit for bit,
// before and after a weight change, alone and in a batch's tail (sequences of different
// lengths: the last runs alone). An engine with it off never builds one.
TEST(Engine, PackedDecodeKeepsTheOutputsAndFollowsWeightChanges) {
  model::Transformer plain_m = model::init_random(tiny_config(), 42), packed_m = model::init_random(tiny_config(), 42);
  EngineOptions off = options(4, /*prefix_cache=*/false), on = off;
  EXPECT_FALSE(off.packed_decode);  // the default
  on.packed_decode = true;
  off.threads = on.threads = 2;
  Engine plain(plain_m, off), packed(packed_m, on);
  std::mt19937_64 g(9);
  auto same_outputs = [&](const std::string& what) {
    for (int i = 0; i < 2; ++i) {
      const TokenIds p = random_prompt(g, 6 + 5 * i);
      const GenResult a = plain.generate({request(p, 0.0f, 10)})[0], b = packed.generate({request(p, 0.0f, 10)})[0];
      EXPECT_EQ(a.token_ids, b.token_ids) << what << ", prompt " << i;
      EXPECT_EQ(a.logprobs, b.logprobs) << what << ", prompt " << i;
      const GenResult c = plain.generate({request(p, 0.8f, 10, 5 + i)})[0];
      const GenResult d = packed.generate({request(p, 0.8f, 10, 5 + i)})[0];
      EXPECT_EQ(c.token_ids, d.token_ids) << what << ", sampled, prompt " << i;
      EXPECT_EQ(c.logprobs, d.logprobs) << what << ", sampled, prompt " << i;
    }
  };
  same_outputs("before any change");
  EngineStats st = packed.stats();
  EXPECT_EQ(st.decode_layout_packs, 1);
  EXPECT_GT(st.decode_layout_bytes, 0);
  EXPECT_EQ(st.packed_decode_steps, st.decode_steps);  // every step had one row
  EXPECT_GT(st.decode_steps, 0);
  EXPECT_EQ(plain.stats().decode_layout_packs, 0);
  EXPECT_EQ(plain.stats().packed_decode_steps, 0);

  // A weight update through with_model, written past ATen (no version bump, as a raw load
  // would): only the repack at the next one-row step makes the outputs follow it.
  for (Engine* e : {&plain, &packed})
    e->with_model([](model::Transformer& m) {
      for (auto& p : m->named_parameters())
        if (p.key().find("mlp.gate_proj") != std::string::npos) {
          const at::Tensor next = p.value() * -1.5;
          std::memcpy(p.value().data_ptr(), next.data_ptr(), static_cast<size_t>(next.numel() * next.element_size()));
        }
    });
  same_outputs("after a weight change");
  EXPECT_EQ(packed.stats().decode_layout_packs, 2);
  // A read-only pass (with_model_read, as serve's prompt scoring) keeps the copy.
  packed.with_model_read([](model::Transformer&) {});
  same_outputs("after a read-only pass");
  EXPECT_EQ(packed.stats().decode_layout_packs, 2);

  // A batch whose sequences end at different lengths: the last runs alone.
  std::vector<GenRequest> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(request(random_prompt(g, 7), 0.0f, 4 + 6 * i));
  const int64_t before = packed.stats().packed_decode_steps, steps_before = packed.stats().decode_steps;
  const std::vector<GenResult> a = plain.generate(reqs);
  std::vector<std::future<GenResult>> futures;
  packed.pause();  // all three admitted together
  for (const GenRequest& r : reqs) futures.push_back(packed.submit(r));
  packed.resume();
  std::vector<GenResult> b;
  for (auto& f : futures) b.push_back(f.get());
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(a[i].token_ids, b[i].token_ids) << "batch, request " << i;
    EXPECT_EQ(a[i].logprobs, b[i].logprobs) << "batch, request " << i;
  }
  EXPECT_GT(packed.stats().packed_decode_steps, before);
  EXPECT_LT(packed.stats().packed_decode_steps - before, packed.stats().decode_steps - steps_before);
}

TEST(Engine, MixedBatchFromThreadsEqualsSoloRuns) {
  std::mt19937_64 g(2);
  std::vector<GenRequest> reqs;
  for (int i = 0; i < 12; ++i) {
    GenRequest r = request(random_prompt(g, 3 + 5 * i % 31), i % 2 ? 0.9f : 0.0f, 6 + (7 * i) % 17,
                           /*seed=*/100 + i);
    if (i % 4 == 1) r.sampling.top_p = 0.9f;
    if (i % 4 == 3) r.sampling.top_k = 20;
    reqs.push_back(r);
  }
  // Solo: one request at a time.
  std::vector<GenResult> solo;
  {
    Engine engine(tiny_model(), options(1));
    for (auto& r : reqs) solo.push_back(engine.submit(r).get());
  }
  // Together: submitted from 3 threads into an engine that holds 8 at once.
  std::vector<GenResult> batched(reqs.size());
  Engine engine(tiny_model(), options(8));
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      std::vector<std::pair<size_t, std::future<GenResult>>> fs;
      for (size_t i = t; i < reqs.size(); i += 3) fs.emplace_back(i, engine.submit(reqs[i]));
      for (auto& [i, f] : fs) batched[i] = f.get();
    });
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(batched[i].token_ids, solo[i].token_ids) << "request " << i;
    EXPECT_EQ(static_cast<int>(batched[i].token_ids.size()), reqs[i].sampling.max_new_tokens);
    for (size_t t = 0; t < solo[i].logprobs.size(); ++t)
      EXPECT_NEAR(batched[i].logprobs[t], solo[i].logprobs[t], 1e-4);
  }
  const EngineStats s = engine.stats();
  EXPECT_GT(s.max_decode_batch, 1);
  EXPECT_LE(s.max_decode_batch, 8);
  EXPECT_EQ(s.requests_finished, 12);
  // Sampling really happened: two seeds give different tokens.
  GenRequest a = request(random_prompt(g, 8), 1.0f, 16, 1), b = a;
  b.sampling.seed = 2;
  EXPECT_NE(engine.submit(a).get().token_ids, engine.submit(b).get().token_ids);
}

TEST(Engine, LogprobsEqualScoringPassWithTemperature) {
  std::mt19937_64 g(3);
  Engine engine(tiny_model(), options(4));
  for (float t : {0.6f, 1.0f, 1.7f}) {
    GenRequest r = request(random_prompt(g, 11), t, 20, /*seed=*/7);
    r.sampling.top_k = 30;  // truncation must not change the reported log-prob
    GenResult res = engine.submit(r).get();
    const auto ref = score(r.prompt_ids, res.token_ids, t);
    ASSERT_EQ(res.logprobs.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(res.logprobs[i], ref[i], 1e-4) << "T=" << t;
  }
}

// Toy detokenizer: each id is one to three copies of a lowercase letter.
// on_token streams every token, in order, from the worker before the future is ready;
// returning false aborts the request there, keeping what was sampled; a throwing
// callback fails only its own request.
TEST(Engine, OnTokenStreamsAbortsAndFails) {
  Engine engine(tiny_model(), options(/*max_batch=*/4));
  std::mt19937_64 g(7);
  const TokenIds prompt = random_prompt(g, 9);
  const GenResult plain = engine.submit(request(prompt, 1.0f, 24, /*seed=*/5)).get();
  ASSERT_EQ(plain.token_ids.size(), 24u);

  // Streamed: the callback's tokens are the result's, and all arrived before get().
  std::mutex mu;
  TokenIds seen;
  std::vector<float> seen_lp;
  GenRequest streamed = request(prompt, 1.0f, 24, 5);
  streamed.on_token = [&](TokenId id, float lp) {
    std::lock_guard<std::mutex> lk(mu);
    seen.push_back(id);
    seen_lp.push_back(lp);
    return true;
  };
  std::future<GenResult> f = engine.submit(std::move(streamed));
  const GenResult r = f.get();
  {
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_EQ(seen, plain.token_ids);
    EXPECT_EQ(seen_lp, r.logprobs);  // (not plain's: a cached prefix may move the last bits)
  }
  EXPECT_EQ(r.token_ids, plain.token_ids);
  EXPECT_EQ(r.finish, FinishReason::kLength);

  // Abort after the 7th token: 7 tokens, the first 7 of the plain run, kAborted.
  int calls = 0;
  GenRequest aborting = request(prompt, 1.0f, 24, 5);
  aborting.on_token = [&](TokenId, float) { return ++calls < 7; };
  // A neighbour in the same batch is not disturbed.
  std::future<GenResult> fa = engine.submit(std::move(aborting));
  std::future<GenResult> fb = engine.submit(request(prompt, 1.0f, 24, 5));
  const GenResult a = fa.get();
  EXPECT_EQ(a.finish, FinishReason::kAborted);
  ASSERT_EQ(a.token_ids.size(), 7u);
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(a.token_ids, TokenIds(plain.token_ids.begin(), plain.token_ids.begin() + 7));
  EXPECT_EQ(fb.get().token_ids, plain.token_ids);

  // A stop that fires on the aborting token wins (the request ended on its own).
  GenRequest stop_and_abort = request(prompt, 1.0f, 24, 5);
  stop_and_abort.sampling.stop_token_ids = {plain.token_ids[3]};
  const size_t first_stop =
      std::find(plain.token_ids.begin(), plain.token_ids.end(), plain.token_ids[3]) - plain.token_ids.begin();
  int n2 = 0;
  stop_and_abort.on_token = [&, first_stop](TokenId, float) { return static_cast<size_t>(++n2) <= first_stop; };
  const GenResult sa = engine.submit(std::move(stop_and_abort)).get();
  EXPECT_EQ(sa.finish, FinishReason::kStopToken);
  EXPECT_EQ(sa.token_ids.size(), first_stop + 1);

  // A throwing callback fails its request with an error naming it; the engine goes on.
  GenRequest throwing = request(prompt, 1.0f, 24, 5);
  throwing.on_token = [](TokenId, float) -> bool { throw std::runtime_error("sink closed"); };
  std::future<GenResult> ft = engine.submit(std::move(throwing));
  try {
    ft.get();
    ADD_FAILURE() << "expected the request to fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("on_token"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sink closed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.submit(request(prompt, 1.0f, 24, 5)).get().token_ids, plain.token_ids);
}

std::string letters(const TokenIds& ids) {
  std::string s;
  for (TokenId id : ids) s += std::string(1 + id % 3, static_cast<char>('a' + id % 26));
  return s;
}

TEST(Engine, StopConditions) {
  std::mt19937_64 g(4);
  EngineOptions o = options(4);
  o.detokenize = letters;
  Engine engine(tiny_model(), o);
  const TokenIds prompt = random_prompt(g, 9);
  const GenResult base = engine.submit(request(prompt, 0.0f, 30)).get();
  ASSERT_EQ(base.token_ids.size(), 30u);
  EXPECT_EQ(base.finish, FinishReason::kLength);

  // Stop token: output ends at its first occurrence, included.
  {
    GenRequest r = request(prompt, 0.0f, 30);
    r.sampling.stop_token_ids = {base.token_ids[6]};
    GenResult res = engine.submit(r).get();
    size_t first = 0;
    while (base.token_ids[first] != base.token_ids[6]) ++first;
    EXPECT_EQ(res.finish, FinishReason::kStopToken);
    EXPECT_EQ(res.token_ids, TokenIds(base.token_ids.begin(), base.token_ids.begin() + first + 1));
    EXPECT_EQ(res.logprobs.size(), res.token_ids.size());
  }
  // Stop string spanning several tokens: cut after the token completing it (the
  // shortest prefix of the greedy output whose text contains it).
  const std::string text = letters(base.token_ids);  // >= 30 letters
  for (size_t offset : {text.size() / 5, text.size() / 2, text.size() - 8}) {
    const std::string stop = text.substr(offset, 5);
    size_t expect_len = 1;
    while (letters(TokenIds(base.token_ids.begin(), base.token_ids.begin() + expect_len)).find(stop) ==
           std::string::npos)
      ++expect_len;
    GenRequest r = request(prompt, 0.0f, 30);
    r.sampling.stop_strings = {"zzzzzzzzzzzzzz", stop};
    GenResult res = engine.submit(r).get();
    EXPECT_EQ(res.finish, FinishReason::kStopString) << stop;
    EXPECT_EQ(res.token_ids, TokenIds(base.token_ids.begin(), base.token_ids.begin() + expect_len)) << stop;
  }
  // max_new_tokens.
  {
    GenResult res = engine.submit(request(prompt, 0.0f, 5)).get();
    EXPECT_EQ(res.finish, FinishReason::kLength);
    EXPECT_EQ(res.token_ids, TokenIds(base.token_ids.begin(), base.token_ids.begin() + 5));
  }
  // Context full: prompt 9 + 7 generated = max_context 16.
  {
    EngineOptions small = options(2);
    small.max_context = 16;
    Engine e2(tiny_model(), small);
    GenResult res = e2.submit(request(prompt, 0.0f, 100)).get();
    EXPECT_EQ(res.finish, FinishReason::kContextFull);
    EXPECT_EQ(res.token_ids, TokenIds(base.token_ids.begin(), base.token_ids.begin() + 7));
    // Stop strings need a detokenizer.
    GenRequest r = request(prompt, 0.0f, 5);
    r.sampling.stop_strings = {"x"};
    EXPECT_THROW(e2.submit(r), Error);
  }
}

TEST(Engine, PrefixCacheIsExactAndReusesGroupsAndTurns) {
  std::mt19937_64 g(5);
  const TokenIds prompt = random_prompt(g, 40);
  Engine on(tiny_model(), options(8, true));
  Engine off(tiny_model(), options(8, false));
  // A GRPO group: 6 samples of one prompt, different seeds.
  std::vector<GenRequest> group;
  for (int i = 0; i < 6; ++i) group.push_back(request(prompt, 1.0f, 12, /*seed=*/i));
  group[5].sampling.temperature = 0.0f;
  auto r_on = on.generate(group);
  auto r_off = off.generate(group);
  for (size_t i = 0; i < group.size(); ++i) {
    EXPECT_EQ(r_on[i].token_ids, r_off[i].token_ids) << "sample " << i;
    for (size_t t = 0; t < r_on[i].logprobs.size(); ++t)
      EXPECT_NEAR(r_on[i].logprobs[t], r_off[i].logprobs[t], 1e-4);
  }
  EngineStats s = on.stats();
  EXPECT_EQ(s.prompt_tokens, 6 * 40);
  EXPECT_EQ(s.prefill_tokens_reused, 5 * 39);  // all but the first compute one token
  EXPECT_EQ(s.prefill_tokens_computed, 40 + 5);
  EXPECT_EQ(off.stats().prefill_tokens_reused, 0);
  EXPECT_EQ(off.stats().prefill_tokens_computed, 6 * 40);

  // Turn 2 extends turn 1's prompt + response of sample 2 with an observation.
  TokenIds turn2 = prompt;
  turn2.insert(turn2.end(), r_on[2].token_ids.begin(), r_on[2].token_ids.end());
  const TokenIds obs = random_prompt(g, 6);
  turn2.insert(turn2.end(), obs.begin(), obs.end());
  on.reset_stats();
  GenRequest req2 = request(turn2, 0.8f, 10, 9);
  GenResult t_on = on.submit(req2).get();
  GenResult t_off = off.submit(req2).get();
  EXPECT_EQ(t_on.token_ids, t_off.token_ids);
  s = on.stats();
  // Everything but the last sampled token of turn 1 (never fed) is reused.
  EXPECT_EQ(s.prefill_tokens_reused, static_cast<int64_t>(prompt.size() + r_on[2].token_ids.size() - 1));
  EXPECT_EQ(s.prefill_tokens_computed, static_cast<int64_t>(1 + obs.size()));

  // After clear_prefix_cache nothing is reused.
  on.clear_prefix_cache();
  on.reset_stats();
  EXPECT_EQ(on.submit(req2).get().token_ids, t_off.token_ids);
  EXPECT_EQ(on.stats().prefill_tokens_reused, 0);
}

// A pool of 16 blocks holds one full-context sequence: requests reserve their worst
// case (prompt 20 + 40 new = 4 blocks), so at most 4 run at once, the rest wait, cached
// prefixes are evicted as needed, and every output equals an unconstrained engine's.
TEST(Engine, SmallBlockPoolQueuesRequestsAndEvictsCache) {
  std::mt19937_64 g(8);
  EngineOptions small = options(8, true);
  small.n_blocks = 16;
  Engine tight(tiny_model(), small);
  Engine roomy(tiny_model(), options(8, false));
  std::vector<GenRequest> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back(request(random_prompt(g, 20), i % 2 ? 0.0f : 1.0f, 40, i));
  auto a = tight.generate(reqs);
  auto b = roomy.generate(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(a[i].token_ids, b[i].token_ids) << "request " << i;
  const EngineStats s = tight.stats();
  EXPECT_EQ(s.requests_finished, 10);
  EXPECT_LE(s.max_decode_batch, 4);
  EXPECT_LE(s.kv_blocks_peak, 16);
  EXPECT_EQ(s.kv_blocks, 16);
  EXPECT_GT(roomy.stats().max_decode_batch, 4);
}

TEST(Engine, RejectsInvalidRequestsNamingTheValue) {
  Engine engine(tiny_model(), options(2));
  auto msg = [&](GenRequest r) {
    try {
      engine.submit(std::move(r));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(msg(request({}, 0.0f, 4)).find("prompt_ids is empty"), std::string::npos);
  EXPECT_NE(msg(request(TokenIds(256, 1), 0.0f, 4)).find("prompt has 256 tokens"), std::string::npos);
  EXPECT_NE(msg(request({1, 2}, 0.0f, 0)).find("max_new_tokens must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(msg(request({1, 2}, -1.0f, 4)).find("temperature must be >= 0"), std::string::npos);
  GenRequest r = request({1, 2}, 1.0f, 4);
  r.sampling.top_p = 0.0f;
  EXPECT_NE(msg(r).find("top_p must be in (0, 1]"), std::string::npos);
  r = request({1, 2}, 1.0f, 4);
  r.sampling.top_k = -3;
  EXPECT_NE(msg(r).find("top_k must be >= 0 (0 disables top-k), got -3"), std::string::npos);
  EXPECT_NE(msg(request({1, kVocab}, 0.0f, 4)).find("prompt_ids[1] = 160 is outside the vocabulary [0, 160)"),
            std::string::npos);
  EXPECT_NE(msg(request({-1}, 0.0f, 4)).find("prompt_ids[0] = -1"), std::string::npos);
  r = request({1, 2}, 1.0f, 4);
  r.sampling.stop_token_ids = {999};
  EXPECT_NE(msg(r).find("stop_token_ids[0] = 999"), std::string::npos);

  EngineOptions bad = options(4);
  bad.n_blocks = 15;  // max_context 256 needs 16 blocks of 16
  EXPECT_THROW(Engine(tiny_model(), bad), Error);
  bad = options(4);
  bad.block_size = 0;
  EXPECT_THROW(Engine(tiny_model(), bad), Error);
  bad = options(0);
  EXPECT_THROW(Engine(tiny_model(), bad), Error);
  bad = options(2);
  bad.max_context = 4096;  // > max_position_embeddings 512
  EXPECT_THROW(Engine(tiny_model(), bad), Error);
}

TEST(Engine, PauseVersionAndShutdown) {
  std::mt19937_64 g(6);
  auto engine = std::make_unique<Engine>(tiny_model(), options(2));
  engine->set_policy_version(7);
  EXPECT_EQ(engine->submit(request(random_prompt(g, 4), 0.0f, 3)).get().policy_version, 7);

  engine->pause();
  auto f = engine->submit(request(random_prompt(g, 4), 0.0f, 3));
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  engine->set_policy_version(8);
  engine->resume();
  EXPECT_EQ(f.get().policy_version, 8);

  bool ran = false;
  engine->with_model([&](model::Transformer& m) { ran = m->config().vocab_size == kVocab; });
  EXPECT_TRUE(ran);

  // Destroying the engine fails what has not finished.
  engine->pause();
  auto pending = engine->submit(request(random_prompt(g, 4), 0.0f, 3));
  engine.reset();
  EXPECT_THROW(pending.get(), Error);
}


// with_model_drained: no response straddles the swap. Requests admitted before it finish
// with the old version before fn runs; everything after is admitted under the new one.
TEST(Engine, WithModelDrainedSwapsOnlyBetweenResponses) {
  std::mt19937_64 g(9);
  Engine engine(tiny_model(), options(8));
  std::vector<std::future<GenResult>> fs;
  for (int i = 0; i < 6; ++i) fs.push_back(engine.submit(request(random_prompt(g, 5 + i), 0.0f, 30, i)));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // let some be admitted
  int64_t finished_inside = -1, failed_inside = -1;
  engine.with_model_drained([&](model::Transformer&) {
    const EngineStats s = engine.stats();
    finished_inside = s.requests_finished;
    failed_inside = s.requests_failed;
    engine.set_policy_version(1);
  });
  fs.push_back(engine.submit(request(random_prompt(g, 7), 0.0f, 10, 99)));
  int64_t v0 = 0;
  for (auto& f : fs) {
    const GenResult r = f.get();
    EXPECT_TRUE(r.policy_version == 0 || r.policy_version == 1) << r.policy_version;
    v0 += r.policy_version == 0;
  }
  EXPECT_EQ(failed_inside, 0);
  EXPECT_EQ(v0, finished_inside) << "every version-0 response had finished before the swap";
  EXPECT_GE(finished_inside, 1) << "requests admitted before the hold ran to the end";
  EXPECT_EQ(engine.stats().requests_finished, 7);
}

}  // namespace
}  // namespace agentr1::rollout

namespace agentr1::rollout {
namespace {

// set_threads between requests (as the trainer does each step when it sizes teams to
// the free cores): the batch-invariant engine samples the same tokens and log-probs bit
// for bit on 1, 2 and 3 threads, and the count reads back.
TEST(Engine, SetThreadsKeepsResultsBitForBit) {
  EngineOptions o = options(4, /*prefix_cache=*/false);
  o.threads = 2;
  Engine e(tiny_model(), o);
  EXPECT_EQ(e.threads(), 2);
  std::mt19937_64 g(3);
  std::vector<GenRequest> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(request(random_prompt(g, 9 + i), 1.0f, 12, 100 + i));
  const std::vector<GenResult> ref = e.generate(reqs);
  EXPECT_EQ(e.active_threads(), 2);
  for (int t : {1, 3, 2}) {
    e.set_threads(t);
    EXPECT_EQ(e.threads(), t);
    const std::vector<GenResult> got = e.generate(reqs);
    EXPECT_EQ(e.active_threads(), t) << "the pass after set_threads(" << t << ") ran on another count";
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(got[i].token_ids, ref[i].token_ids) << t << " threads, request " << i;
      ASSERT_EQ(got[i].logprobs.size(), ref[i].logprobs.size());
      EXPECT_EQ(0, std::memcmp(got[i].logprobs.data(), ref[i].logprobs.data(), ref[i].logprobs.size() * sizeof(float)))
          << t << " threads, request " << i;
    }
  }
  EXPECT_THROW(e.set_threads(0), Error);
}

}  // namespace
}  // namespace agentr1::rollout
