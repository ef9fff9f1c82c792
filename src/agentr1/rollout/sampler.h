// agentr1/rollout/sampler.h — turns one row of logits into one token, per request.
//
//   Sampler s(req.sampling);                       // validates; owns its RNG (seeded)
//   SampledToken t = s.sample(logits_row, vocab);  // t.id, t.logprob
//
// Order of operations (HF/vLLM): divide by temperature, keep the top-k tokens, keep
// the nucleus (smallest most-likely set whose mass, renormalised after top-k, is >= p;
// the top token is always kept), renormalise, draw. Greedy (temperature 0) takes the
// argmax, ties broken towards the lowest id.
//
// The returned logprob is log_softmax(logits / T)[id] over the FULL vocabulary, before
// top-k/top-p truncation, with T = 1 when greedy (core/generator.h's convention).
//
// Determinism: each Sampler owns a std::mt19937_64 seeded from SamplingParams::seed and
// draws exactly one 53-bit uniform per sampled (non-greedy) token, so the tokens of a
// request do not depend on what else is in the batch. Ties in the sort are broken by
// id, and the uniform is derived from the raw engine output (not from an
// implementation-defined std distribution), so results are the same on every platform.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "agentr1/core/generator.h"

namespace agentr1::rollout {

struct SampledToken {
  TokenId id = 0;
  float logprob = 0.0f;  // log_softmax(logits / T)[id], T = 1 when greedy
};

// Throws Error if params are out of range (temperature < 0 or NaN, top_p not in
// (0, 1], top_k < 0, max_new_tokens < 1), naming the value and the rule.
void validate_sampling(const SamplingParams& params);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // validates params

  // logits: [vocab] fp32 (host memory). Draws from this sampler's RNG (unless greedy).
  SampledToken sample(const float* logits, int64_t vocab);

  // The distribution `sample` draws from: [vocab] probabilities after temperature,
  // top-k and top-p, renormalised (one-hot at the argmax when greedy). For tests and
  // inspection; does not touch any RNG.
  static std::vector<double> distribution(const float* logits, int64_t vocab,
                                          const SamplingParams& params);

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace agentr1::rollout
