#include "agentr1/algo/returns.h"

#include "agentr1/core/error.h"

namespace agentr1::algo {

std::vector<double> discounted_returns(const std::vector<double>& rewards, double gamma) {
  std::vector<double> g(rewards.size());
  double running = 0;
  for (size_t k = rewards.size(); k-- > 0;) {
    running = rewards[k] + gamma * running;
    g[k] = running;
  }
  return g;
}

GaeResult gae(const std::vector<double>& rewards, const std::vector<double>& values, double gamma,
              double lam) {
  AGENTR1_CHECK(rewards.size() == values.size(),
                "gae: " << rewards.size() << " rewards but " << values.size() << " values");
  GaeResult out;
  out.advantages.resize(rewards.size());
  out.returns.resize(rewards.size());
  double next_value = 0, last = 0;
  for (size_t k = rewards.size(); k-- > 0;) {
    const double delta = rewards[k] + gamma * next_value - values[k];
    last = delta + gamma * lam * last;
    out.advantages[k] = last;
    out.returns[k] = last + values[k];
    next_value = values[k];
  }
  return out;
}

namespace {
void check_2d(const char* fn, const at::Tensor& a, const at::Tensor& b) {
  AGENTR1_CHECK(a.dim() == 2 && a.sizes() == b.sizes(),
                fn << ": expected two [B,T] tensors of one shape, got " << a.sizes() << " and "
                   << b.sizes());
}
}  // namespace

at::Tensor discounted_returns_masked(const at::Tensor& rewards, const at::Tensor& mask,
                                     double gamma) {
  check_2d("discounted_returns_masked", rewards, mask);
  const at::Tensor m = mask.to(rewards.scalar_type());
  at::Tensor out = at::zeros_like(rewards);
  at::Tensor running = at::zeros({rewards.size(0)}, rewards.options());  // [B]
  for (int64_t t = rewards.size(1) - 1; t >= 0; --t) {
    const at::Tensor mt = m.select(1, t);
    const at::Tensor updated = rewards.select(1, t) + gamma * running;
    running = mt * updated + (1 - mt) * running;  // skip non-action tokens
    out.select(1, t).copy_(running);
  }
  return out;
}

std::pair<at::Tensor, at::Tensor> gae_masked(const at::Tensor& rewards, const at::Tensor& values,
                                             const at::Tensor& mask, double gamma, double lam) {
  check_2d("gae_masked", rewards, values);
  check_2d("gae_masked", rewards, mask);
  const at::Tensor m = mask.to(rewards.scalar_type());
  at::Tensor adv = at::zeros_like(rewards);
  at::Tensor next_value = at::zeros({rewards.size(0)}, rewards.options());  // [B]
  at::Tensor last = at::zeros_like(next_value);
  for (int64_t t = rewards.size(1) - 1; t >= 0; --t) {
    const at::Tensor mt = m.select(1, t);
    const at::Tensor vt = values.select(1, t);
    const at::Tensor delta = rewards.select(1, t) + gamma * next_value - vt;
    const at::Tensor cand = delta + gamma * lam * last;
    next_value = mt * vt + (1 - mt) * next_value;
    last = mt * cand + (1 - mt) * last;
    adv.select(1, t).copy_(last);
  }
  return {adv, adv + values};
}

at::Tensor masked_whiten(const at::Tensor& x, const at::Tensor& mask) {
  AGENTR1_CHECK(x.sizes() == mask.sizes(),
                "masked_whiten: values " << x.sizes() << " and mask " << mask.sizes() << " differ");
  const at::Tensor m = mask.to(x.scalar_type());
  const double n = m.sum().item<double>();
  AGENTR1_CHECK(n >= 2, "masked_whiten: needs at least 2 unmasked values, got " << n);
  const at::Tensor mean = (x * m).sum() / n;
  const at::Tensor var = ((x - mean).square() * m).sum() / (n - 1);
  return (x - mean) * at::rsqrt(var + 1e-8);
}

}  // namespace agentr1::algo
