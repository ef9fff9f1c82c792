// agentr1/algo/advantage.h — advantage estimators over trajectory outcomes.
//
//   std::vector<float> adv = grpo_advantages(scores, groups, /*norm_by_std=*/true);
//   // adv[i] is broadcast to every action token of every step of trajectory i
//
// scores[i] is trajectory i's total reward (outcome + step rewards); groups[i] names
// the sample it came from (the rollout.n trajectories of a sample share it).
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace agentr1::algo {

// GRPO (Shao et al. 2024, arXiv 2402.03300), verl's compute_grpo_outcome_advantage:
//   A_i = (s_i - mean_g) / (std_g + eps)   with std the unbiased (n-1) std of the group;
//   norm_by_std = false gives Dr.GRPO (arXiv 2503.20783): A_i = s_i - mean_g.
//   A group of one trajectory has mean 0 and std 1 (so A_i = s_i / (1 + eps)).
// Loop implementation (the reference for the vectorised one).
std::vector<float> grpo_advantages(const std::vector<float>& scores,
                                   const std::vector<std::string>& groups, bool norm_by_std,
                                   double eps = 1e-6);

// Same on tensors: scores [N] fp32, group_index [N] int64 in [0, G). Returns [N].
at::Tensor grpo_advantages_vectorized(const at::Tensor& scores, const at::Tensor& group_index,
                                      int64_t num_groups, bool norm_by_std, double eps = 1e-6);

// RLOO (Kool et al. 2019; Ahmadian et al. 2024, arXiv 2402.14740), verl's
// compute_rloo_outcome_advantage: leave-one-out baseline
//   A_i = s_i - mean_{j != i in g} s_j  (= n/(n-1) * (s_i - mean_g));
//   a group of one trajectory keeps its score (A_i = s_i), as verl.
std::vector<float> rloo_advantages(const std::vector<float>& scores,
                                   const std::vector<std::string>& groups);
// Same on tensors: scores [N], group_index [N] int64 in [0, G). Returns [N].
at::Tensor rloo_advantages_vectorized(const at::Tensor& scores, const at::Tensor& group_index,
                                      int64_t num_groups);

// Group mean subtraction (REINFORCE++-baseline, verl): A_i = s_i - mean_g, a group of
// one has mean 0 (A_i = s_i). Equals grpo_advantages(..., norm_by_std=false).
std::vector<float> group_mean_centred(const std::vector<float>& scores,
                                      const std::vector<std::string>& groups);

// Maps group names to dense indices 0..G-1 in order of first appearance.
std::vector<int64_t> group_indices(const std::vector<std::string>& groups, int64_t* num_groups);

}  // namespace agentr1::algo
