// agentr1/algo/turn_level.h — turn_rloo: turn-level advantages for per-step rewards in
// groups whose trajectories have different numbers of steps.
//
//   // rewards[i][t]: per-step reward of trajectory i (outcome added to its last step)
//   TurnAdvantages a = turn_rloo_advantages(rewards, groups, /*gamma=*/1.0);
//   a.advantages[i][t] is broadcast to the action tokens of step t of trajectory i.
//   // as an estimator: make_estimator("turn_rloo")
//
// Definition. In a group g (the rollout.n trajectories of one prompt, drawn
// independently), trajectory i has L_i steps and per-step rewards r^i_t, with
// reward-to-go G^i_t = sum_{k>=t} gamma^{k-t} r^i_k. Its advantage at turn t is
//
//   A_{i,t} = G^i_t - mean{ G^j_t : j in g, j != i, L_j > t }     if some other j reached turn t
//   A_{i,t} = (G^i_0 - B_i) / gamma^t                              otherwise,
//   B_i     = mean{ G^j_0 : j in g, j != i }  (0 in a group of one, as verl's rloo)
//
// and the returns are G^i_t. With turn_norm_by_std the group's advantages are divided by
// (std + eps) of all its G^j_t pooled (unbiased std; 1 if fewer than 2).
//
// Why this choice. A baseline b_{i,t} leaves the policy gradient
// E[sum_t grad log pi(a_t|s_t) (G_t - b_{i,t})] unbiased iff it does not depend on a^i_t
// or anything after it (Williams 1992; Greensmith, Bartlett & Baxter, JMLR 2004).
// The naive per-turn-index baseline b_t = mean{G^j_t : L_j > t} over the group
// INCLUDING i breaks this twice: (1) it contains G^i_t itself, so step t's gradient is
// shrunk by the factor (1 - 1/n_t), where n_t = members still running at turn t depends
// on the other trajectories' lengths — turns are weighted unequally, and where i is the
// only member left (a 3-step trajectory next to 1-step ones) n_t = 1 and its later turns
// get exactly 0 advantage whatever they earned; (2) aligning instead by remaining horizon
// (steps from the end) makes the baseline depend on i's own future length, i.e. on
// its later actions. Here every baseline is built only from the OTHER members (the
// leave-one-out construction of Kool, van Hoof & Welling 2019, "Buy 4 REINFORCE
// samples, get a baseline for free!", used for LLMs as RLOO by Ahmadian et al. 2024,
// arXiv 2402.14740), which are independent of trajectory i, so the estimator is
// unbiased for E[sum_t grad log pi(a_t|s_t) G_t] (turn_level_test enumerates a small
// MDP exactly to check this). The others' reward-to-go at the same turn index estimates
// V(s^i_t) without needing state identity (GiGPO-style anchor states are not available
// here). Where no other member reached turn t, the fallback baseline
// (B_i - sum_{k<t} gamma^k r^i_k) / gamma^t depends only on the other members and on
// i's rewards before turn t (part of s^i_t), so it is still valid; it makes that step's
// advantage the trajectory's RLOO advantage (exactly so for gamma = 1). Properties: a
// group of identical trajectories gets zero advantages; with one step per trajectory
// (or outcome-only rewards and gamma = 1 with equal lengths) this is rloo.
// Requires gamma > 0 (the fallback rescales by gamma^-t).
#pragma once

#include <string>
#include <vector>

namespace agentr1::algo {

struct TurnAdvantages {
  std::vector<std::vector<double>> advantages;  // [trajectory][step]
  std::vector<std::vector<double>> returns;     // [trajectory][step], G^i_t
};

// rewards[i] must be non-empty; groups.size() == rewards.size(); 0 < gamma <= 1.
TurnAdvantages turn_rloo_advantages(const std::vector<std::vector<double>>& rewards,
                                    const std::vector<std::string>& groups, double gamma,
                                    bool norm_by_std = false, double eps = 1e-6);

}  // namespace agentr1::algo
