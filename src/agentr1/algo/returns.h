// agentr1/algo/returns.h — discounted returns, GAE and masked whitening on token
// sequences, each as a loop over one sequence and as a batched tensor form.
//
//   std::vector<double> g = discounted_returns(rewards, /*gamma=*/0.99);
//   GaeResult r = gae(rewards, values, /*gamma=*/1.0, /*lam=*/0.95);
//   auto [adv, ret] = gae_masked(rewards, values, mask, 1.0, 0.95);   // [B,T] each
//
// The tensor forms follow verl's padded layout: a row holds one trajectory's tokens,
// mask is 1 on action tokens and 0 on observation/padding tokens. Masked positions
// are skipped: the recursion carries its state across them unchanged (verl's
// compute_gae_advantage_return does this for GAE; for returns this differs from verl's
// compute_reinforce_plus_plus_outcome_advantage, which resets at every mask-0 token and
// so would cut a multi-turn trajectory's return at each observation).
#pragma once

#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace agentr1::algo {

// G_k = r_k + gamma * G_{k+1}, G after the last = 0.
std::vector<double> discounted_returns(const std::vector<double>& rewards, double gamma);

struct GaeResult {
  std::vector<double> advantages;  // A_k = delta_k + gamma*lam*A_{k+1}
  std::vector<double> returns;     // A_k + V_k
};
// delta_k = r_k + gamma*V_{k+1} - V_k with V after the last = 0 (Schulman et al. 2016,
// arXiv 1506.02438). rewards and values have the same length.
GaeResult gae(const std::vector<double>& rewards, const std::vector<double>& values, double gamma,
              double lam);

// rewards, mask: [B,T] -> returns [B,T] (0 where mask is 0 before any action token).
at::Tensor discounted_returns_masked(const at::Tensor& rewards, const at::Tensor& mask,
                                     double gamma);

// rewards, values, mask: [B,T] -> {advantages [B,T], returns = advantages + values [B,T]},
// not whitened. Values at masked positions are ignored.
std::pair<at::Tensor, at::Tensor> gae_masked(const at::Tensor& rewards, const at::Tensor& values,
                                             const at::Tensor& mask, double gamma, double lam);

// verl masked_whiten: (x - mean) * rsqrt(var + 1e-8), mean and unbiased variance over the
// masked elements; x, mask: [B,T] -> [B,T]. Needs sum(mask) >= 2 (throws otherwise).
at::Tensor masked_whiten(const at::Tensor& x, const at::Tensor& mask);

}  // namespace agentr1::algo
