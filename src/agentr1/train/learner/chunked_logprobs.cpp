#include "agentr1/train/learner/chunked_logprobs.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "agentr1/core/error.h"

namespace agentr1::train {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Logits / temperature of rows [lo, hi) in fp32, formed as the dense path forms them.
at::Tensor chunk_logits(const at::Tensor& h, const at::Tensor& w, int64_t lo, int64_t hi, double temperature) {
  at::Tensor z = at::linear(h.narrow(0, lo, hi - lo), w).to(at::kFloat);
  return temperature != 1.0 ? z / temperature : z;
}

struct ChunkedLogprobs : public torch::autograd::Function<ChunkedLogprobs> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                               const at::Tensor& targets, double temperature, int64_t chunk) {
    at::NoGradGuard ng;
    const int64_t n = hidden.size(0);
    at::Tensor lp = at::empty({n, targets.size(1)}, hidden.options().dtype(at::kFloat));  // [N,K]
    at::Tensor ent = at::empty({n}, hidden.options().dtype(at::kFloat));
    for (int64_t lo = 0; lo < n; lo += chunk) {
      const int64_t hi = std::min(n, lo + chunk);
      const at::Tensor logp = at::log_softmax(chunk_logits(hidden, weight, lo, hi, temperature), -1);
      lp.narrow(0, lo, hi - lo).copy_(logp.gather(-1, targets.narrow(0, lo, hi - lo)));
      ent.narrow(0, lo, hi - lo).copy_(-(logp.exp() * logp).sum(-1));
    }
    ctx->save_for_backward({hidden, weight, targets, ent});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["chunk"] = chunk;
    return {lp, ent};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &hidden = saved[0], &weight = saved[1], &targets = saved[2], &ent = saved[3];
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const int64_t n = hidden.size(0);
    const at::Tensor g_lp =
        grads[0].defined() ? grads[0] : at::zeros({n, targets.size(1)}, hidden.options().dtype(at::kFloat));  // [N,K]
    const at::Tensor g_ent = grads[1].defined() ? grads[1] : at::Tensor();
    const bool need_h = ctx->needs_input_grad(0), need_w = ctx->needs_input_grad(1);
    at::Tensor gh = need_h ? at::empty_like(hidden) : at::Tensor();
    at::Tensor gw = need_w ? at::zeros(weight.sizes(), weight.options().dtype(at::kFloat)) : at::Tensor();
    at::NoGradGuard ng;
    for (int64_t lo = 0; lo < n; lo += chunk) {
      const int64_t hi = std::min(n, lo + chunk), m = hi - lo;
      const at::Tensor logp = at::log_softmax(chunk_logits(hidden, weight, lo, hi, temperature), -1);  // [m,V]
      const at::Tensor p = logp.exp();
      // dlp_k/dz = onehot(y_k) - p, summed over the K gathered ids; dH/dz = -p (log p + H)
      at::Tensor gz = p * (-g_lp.narrow(0, lo, m).sum(/*dim=*/-1, /*keepdim=*/true));
      gz.scatter_add_(-1, targets.narrow(0, lo, m), g_lp.narrow(0, lo, m));
      if (g_ent.defined())
        gz.sub_(p * (logp + ent.narrow(0, lo, m).unsqueeze(-1)) * g_ent.narrow(0, lo, m).unsqueeze(-1));
      if (temperature != 1.0) gz.div_(temperature);
      if (need_h) gh.narrow(0, lo, m).copy_(at::mm(gz, weight.to(at::kFloat)).to(hidden.scalar_type()));
      if (need_w) gw.addmm_(gz.t(), hidden.narrow(0, lo, m).to(at::kFloat));
    }
    return {gh, need_w ? gw.to(weight.scalar_type()) : at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

std::pair<at::Tensor, at::Tensor> chunked_token_logprobs(const at::Tensor& hidden, const at::Tensor& head_weight,
                                                         const at::Tensor& targets, double temperature,
                                                         int64_t chunk) {
  AGENTR1_CHECK(hidden.dim() == 2 && head_weight.dim() == 2 && hidden.size(1) == head_weight.size(1) &&
                    (targets.dim() == 1 || (targets.dim() == 2 && targets.size(1) >= 1)) &&
                    targets.size(0) == hidden.size(0),
                "chunked_token_logprobs: hidden " << hidden.sizes() << ", head " << head_weight.sizes()
                                                  << ", targets " << targets.sizes() << " do not fit");
  AGENTR1_CHECK(chunk >= 1 && temperature > 0, "chunked_token_logprobs: chunk " << chunk << ", temperature "
                                                                                << temperature);
  const bool one = targets.dim() == 1;
  const variable_list out =
      ChunkedLogprobs::apply(hidden, head_weight, one ? targets.unsqueeze(-1) : targets, temperature, chunk);
  return {one ? out[0].squeeze(-1) : out[0], out[1]};
}

TopkLogprobs chunked_topk_logprobs(const at::Tensor& hidden, const at::Tensor& head_weight, int64_t k,
                                   double temperature, int64_t chunk, const at::Tensor& targets, int64_t max_id) {
  const int64_t limit = max_id > 0 ? std::min(max_id, head_weight.size(0)) : head_weight.size(0);
  AGENTR1_CHECK(hidden.dim() == 2 && head_weight.dim() == 2 && hidden.size(1) == head_weight.size(1) && k >= 1 &&
                    k <= limit && chunk >= 1 && temperature > 0 &&
                    (!targets.defined() || (targets.dim() == 1 && targets.size(0) == hidden.size(0))),
                "chunked_topk_logprobs: hidden " << hidden.sizes() << ", head " << head_weight.sizes() << ", k " << k
                                                 << " of the first " << limit << " ids, chunk " << chunk
                                                 << ", temperature " << temperature);
  at::NoGradGuard ng;
  const int64_t n = hidden.size(0);
  TopkLogprobs out;
  out.ids = at::empty({n, k}, hidden.options().dtype(at::kLong));
  out.lp = at::empty({n, k}, hidden.options().dtype(at::kFloat));
  if (targets.defined()) out.target_lp = at::empty({n}, hidden.options().dtype(at::kFloat));
  for (int64_t lo = 0; lo < n; lo += chunk) {
    const int64_t hi = std::min(n, lo + chunk);
    const at::Tensor logp = at::log_softmax(chunk_logits(hidden, head_weight, lo, hi, temperature), -1);  // [m,V]
    const auto [v, i] = logp.narrow(/*dim=*/-1, 0, limit).topk(k, -1);
    out.lp.narrow(0, lo, hi - lo).copy_(v);
    out.ids.narrow(0, lo, hi - lo).copy_(i);
    if (targets.defined())
      out.target_lp.narrow(0, lo, hi - lo).copy_(logp.gather(-1, targets.narrow(0, lo, hi - lo).unsqueeze(-1)).squeeze(-1));
  }
  return out;
}

}  // namespace agentr1::train
