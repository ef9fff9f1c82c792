// agentr1/algo/gigpo.h — GiGPO (Feng et al., "Group-in-Group Policy Optimization for
// LLM Agent Training", arXiv 2505.10978; verl-agent): a critic-free estimator with an
// episode-level and a step-level group baseline.
//
//   algorithm.adv_estimator=gigpo  algorithm.gamma=0.95
//   algorithm.gigpo_step_weight=1.0  algorithm.gigpo_mode=mean_std_norm
//
// For the trajectories of one prompt (one group):
//   episode  A_E(i) = (s_i - mean_g s) / (std_g s + eps)      (mean_norm: s_i - mean_g s)
//            s_i the trajectory score (estimator.h), exactly GRPO's advantage (a
//            singleton group keeps GRPO's rule);
//   step     R_t = sum_{k >= t} gamma^(k-t) r_k, the discounted return from step t
//            (per-step rewards r_k of estimator.h, the outcome on the last step);
//            steps of the group whose anchor states are equal (StepTokens::anchor, the
//            env's raw observation the action was taken in) form an anchor group;
//            A_S(i, t) = (R_t - mean_anchor R) / (std_anchor R + eps)   (mean_norm:
//            R_t - mean_anchor R); a step alone in its anchor group, or with an empty
//            (unknown) anchor, gets A_S = 0;
//   A(i, t) = A_E(i) + gigpo_step_weight * A_S(i, t), broadcast to the step's tokens.
// std is the unbiased (n-1) standard deviation, as GRPO's here and torch.std in the
// reference. Returns are R_t. Metrics: gigpo/anchor_groups (anchor groups with >= 2
// steps), gigpo/grouped_step_fraction (steps in such a group), gigpo/known_anchor_fraction.
#pragma once

#include <string>
#include <vector>

namespace agentr1::algo {

struct GigpoStepAdvantages {
  std::vector<std::vector<double>> step_adv;  // [trajectory][step], A_S
  std::vector<std::vector<double>> returns;   // [trajectory][step], R_t
  int64_t anchor_groups = 0;                  // anchor groups of size >= 2
  int64_t grouped_steps = 0;                  // steps in those groups
  int64_t known_steps = 0;                    // steps with a non-empty anchor
};

// The step-level part from per-step rewards, each trajectory's group and its steps'
// anchors (same shape as rewards). mean_std: mean_std_norm (true) or mean_norm.
GigpoStepAdvantages gigpo_step_advantages(const std::vector<std::vector<double>>& rewards,
                                          const std::vector<std::string>& groups,
                                          const std::vector<std::vector<std::string>>& anchors,
                                          double gamma, bool mean_std, double eps);

}  // namespace agentr1::algo
