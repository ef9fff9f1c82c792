#include "agentr1/serve/prompt_scoring.h"

#include <algorithm>
#include <cmath>

#include "agentr1/core/error.h"

namespace agentr1::serve {

PromptLogprobs prompt_logprobs(model::TransformerImpl& model, const TokenIds& ids, double temperature, int k) {
  AGENTR1_CHECK(!ids.empty(), "prompt_logprobs: the prompt is empty");
  AGENTR1_CHECK(temperature > 0 && std::isfinite(temperature),
                "prompt_logprobs: temperature must be > 0, got " << temperature);
  const int64_t vocab = model.config().vocab_size;
  AGENTR1_CHECK(k >= 0 && k <= vocab, "prompt_logprobs: k must be in 0.." << vocab << ", got " << k);
  at::NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(ids.size());
  const size_t kk = static_cast<size_t>(k);
  PromptLogprobs out;
  out.logprob.assign(ids.size(), 0.0f);
  out.rank.assign(ids.size(), 0);
  out.top_ids.assign(ids.size() * kk, 0);
  out.top_logprob.assign(ids.size() * kk, 0.0f);
  if (n < 2) return out;
  const at::Device dev = model.lm_head_weight().device();
  const std::vector<int64_t> v(ids.begin(), ids.end());
  const at::Tensor in = at::tensor(v, at::kLong).view({1, n}).to(dev);
  const at::Tensor pos = at::arange(n, at::TensorOptions().dtype(at::kLong)).view({1, n}).to(dev);
  const at::Tensor h = model.hidden_states(in, pos)[0];  // [n,H]
  // Logits of a chunk of positions at a time: [c,V] fp32 of at most ~64 MiB.
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 24) / std::max<int64_t>(vocab, 1));
  for (int64_t s = 0; s < n - 1; s += chunk) {
    const int64_t e = std::min(n - 1, s + chunk);
    const at::Tensor logits = model.logits_from_hidden(h.slice(/*dim=*/0, s, e)).to(at::kFloat);  // [c,V]
    const at::Tensor lp = at::log_softmax(logits / temperature, /*dim=*/-1);                       // [c,V]
    const at::Tensor target = in[0].slice(/*dim=*/0, s + 1, e + 1).unsqueeze(1);                   // [c,1]
    const at::Tensor got = lp.gather(/*dim=*/1, target);                                            // [c,1]
    const at::Tensor rank = (lp > got).sum(/*dim=*/1) + 1;                                          // [c]
    const at::Tensor got_h = got.squeeze(1).cpu().contiguous(), rank_h = rank.cpu().contiguous();
    const float* g = got_h.data_ptr<float>();
    const int64_t* r = rank_h.data_ptr<int64_t>();
    for (int64_t t = s; t < e; ++t) {
      out.logprob[static_cast<size_t>(t + 1)] = g[t - s];
      out.rank[static_cast<size_t>(t + 1)] = r[t - s];
    }
    if (k == 0) continue;
    const auto [top_v, top_i] = lp.topk(k, /*dim=*/-1);  // [c,k] descending
    const at::Tensor tv = top_v.cpu().contiguous(), ti = top_i.cpu().contiguous();
    const float* pv = tv.data_ptr<float>();
    const int64_t* pi = ti.data_ptr<int64_t>();
    for (int64_t t = s; t < e; ++t)
      for (size_t j = 0; j < kk; ++j) {
        const size_t src = static_cast<size_t>(t - s) * kk + j, dst = static_cast<size_t>(t + 1) * kk + j;
        out.top_ids[dst] = static_cast<TokenId>(pi[src]);
        out.top_logprob[dst] = pv[src];
      }
  }
  return out;
}

PromptScorer engine_prompt_scorer(rollout::Engine& engine) {
  return [&engine](const std::vector<TokenIds>& prompts, double temperature, int k) {
    std::vector<PromptLogprobs> out;
    out.reserve(prompts.size());
    engine.with_model_read([&](model::Transformer& m) {
      for (const TokenIds& p : prompts) out.push_back(prompt_logprobs(*m, p, temperature, k));
    });
    return out;
  };
}

}  // namespace agentr1::serve
