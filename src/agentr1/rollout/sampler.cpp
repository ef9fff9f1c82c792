#include "agentr1/rollout/sampler.h"

#include <algorithm>
#include <cmath>

#include "agentr1/core/error.h"
#include "agentr1/core/fast_exp.h"

namespace agentr1::rollout {

void validate_sampling(const SamplingParams& p) {
  AGENTR1_CHECK(p.temperature >= 0.0f && std::isfinite(p.temperature),
                "sampling.temperature must be >= 0 (0 = greedy), got " << p.temperature);
  AGENTR1_CHECK(p.top_p > 0.0f && p.top_p <= 1.0f,
                "sampling.top_p must be in (0, 1] (1 disables nucleus sampling), got " << p.top_p);
  AGENTR1_CHECK(p.top_k >= 0, "sampling.top_k must be >= 0 (0 disables top-k), got " << p.top_k);
  AGENTR1_CHECK(p.max_new_tokens >= 1,
                "sampling.max_new_tokens must be >= 1, got " << p.max_new_tokens);
}

namespace {

struct Cand {
  float x;     // logit / T
  int32_t id;
};

// Descending by value, ties towards the lowest id: a strict total order, so sorting is
// deterministic.
inline bool before(const Cand& a, const Cand& b) {
  return a.x > b.x || (a.x == b.x && a.id < b.id);
}

inline double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1), 53 random bits
}

// The candidate set after temperature, top-k and top-p.
struct Kept {
  bool truncated = false;      // false: the whole vocabulary in id order (no sort done)
  std::vector<Cand> cands;     // when truncated: the kept tokens, best first
  std::vector<double> w;       // unnormalised weights exp(x - max), parallel to the set
  double total = 0.0;          // sum of w over the kept set
  double lse = 0.0;            // logsumexp of x over the full vocabulary
  std::vector<float> x;        // scaled logits, full vocabulary
  std::vector<float> e;        // exp_f(x - max), full vocabulary
};

void compute_kept(const float* logits, int64_t vocab, const SamplingParams& p, Kept& k) {
  AGENTR1_CHECK(vocab >= 1, "sampler: vocabulary size must be >= 1, got " << vocab);
  k.x.resize(static_cast<size_t>(vocab));
  float m = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) {
    k.x[i] = logits[i] / p.temperature;  // fp32 division, as logits / T in torch
    m = std::max(m, k.x[i]);
  }
  k.e.resize(static_cast<size_t>(vocab));
  // exp of the whole vocabulary at vector speed (core::exp_f, within 2 ulp), summed in
  // double in a fixed order: the same on every CPU.
  const double z = core::sum_exp_shifted(k.x.data(), m, vocab, k.e.data());
  k.lse = m + std::log(z);
  AGENTR1_CHECK(std::isfinite(k.lse),
                "sampler: logits are not finite (max " << m << ", sum " << z
                                                       << "); the model produced NaN/inf");

  const int64_t top_k = (p.top_k > 0 && p.top_k < vocab) ? p.top_k : vocab;
  const bool use_p = p.top_p < 1.0f;
  if (top_k == vocab && !use_p) {
    k.truncated = false;
    k.w.assign(k.e.begin(), k.e.end());
    k.total = z;
    return;
  }

  k.truncated = true;
  std::vector<Cand> all(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) all[i] = {k.x[i], static_cast<int32_t>(i)};

  // Sort only as much as needed: the top-k set, or (top-p alone) a growing prefix until
  // it holds mass >= p.
  int64_t n = top_k;
  double z_set = 0.0;  // mass of the top-k set, the denominator of the nucleus test
  if (top_k < vocab) {
    std::partial_sort(all.begin(), all.begin() + n, all.end(), before);
    for (int64_t i = 0; i < n; ++i) z_set += k.e[all[i].id];
  } else {
    z_set = z;
    n = std::min<int64_t>(vocab, 64);
    for (;;) {
      std::partial_sort(all.begin(), all.begin() + n, all.end(), before);
      double cum = 0.0;
      for (int64_t i = 0; i < n; ++i) cum += k.e[all[i].id];
      if (n == vocab || cum >= static_cast<double>(p.top_p) * z_set) break;
      n = std::min<int64_t>(vocab, n * 4);
    }
  }

  int64_t keep = n;
  if (use_p) {
    const double need = static_cast<double>(p.top_p) * z_set;
    double cum = 0.0;
    keep = 0;
    while (keep < n) {
      cum += k.e[all[keep].id];
      ++keep;
      if (cum >= need) break;
    }
  }
  k.cands.assign(all.begin(), all.begin() + keep);
  k.w.resize(static_cast<size_t>(keep));
  k.total = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    k.w[i] = k.e[k.cands[i].id];
    k.total += k.w[i];
  }
}

TokenId argmax_lowest(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;  // strict: ties keep the lowest id
  return static_cast<TokenId>(best);
}

double logsumexp(const float* logits, int64_t vocab) {
  float m = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) m = std::max(m, logits[i]);
  return m + std::log(core::sum_exp_shifted(logits, m, vocab));
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  validate_sampling(params_);
}

SampledToken Sampler::sample(const float* logits, int64_t vocab) {
  AGENTR1_CHECK(vocab >= 1, "sampler: vocabulary size must be >= 1, got " << vocab);
  SampledToken out;
  if (params_.greedy()) {
    out.id = argmax_lowest(logits, vocab);
    const double lse = logsumexp(logits, vocab);
    AGENTR1_CHECK(std::isfinite(lse), "sampler: logits are not finite; the model produced NaN/inf");
    out.logprob = static_cast<float>(logits[out.id] - lse);
    return out;
  }
  Kept k;
  compute_kept(logits, vocab, params_, k);
  const double u = uniform01(rng_) * k.total;
  double cum = 0.0;
  size_t pick = k.w.size() - 1;
  for (size_t i = 0; i < k.w.size(); ++i) {
    cum += k.w[i];
    if (u < cum) {
      pick = i;
      break;
    }
  }
  // Rounding can leave u >= the final cumulative sum; the last kept token with
  // nonzero weight then takes it.
  while (pick > 0 && k.w[pick] == 0.0) --pick;
  out.id = k.truncated ? k.cands[pick].id : static_cast<TokenId>(pick);
  out.logprob = static_cast<float>(k.x[out.id] - k.lse);
  return out;
}

std::vector<double> Sampler::distribution(const float* logits, int64_t vocab,
                                          const SamplingParams& params) {
  validate_sampling(params);
  AGENTR1_CHECK(vocab >= 1, "sampler: vocabulary size must be >= 1, got " << vocab);
  std::vector<double> probs(static_cast<size_t>(vocab), 0.0);
  if (params.greedy()) {
    probs[argmax_lowest(logits, vocab)] = 1.0;
    return probs;
  }
  Kept k;
  compute_kept(logits, vocab, params, k);
  for (size_t i = 0; i < k.w.size(); ++i) {
    const int64_t id = k.truncated ? k.cands[i].id : static_cast<int64_t>(i);
    probs[id] = k.w[i] / k.total;
  }
  return probs;
}

}  // namespace agentr1::rollout
