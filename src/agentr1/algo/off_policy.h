// agentr1/algo/off_policy.h — off-policy corrections for rollouts that a different
// policy sampled than the one the update starts from (asynchronous rollout with bounded
// staleness, or any engine whose log-probs drift from the learner's).
//
//   OffPolicyOptions o;  o.method = "tis";  o.level = "token";  o.cap = 2.0;  o.resolve();
//   OffPolicyWeights w = off_policy_weights(old_lp, behav_lp, mask, step_ids, o);
//   loss = policy_loss(logprob, old_lp, advantages * w.weight, w.mask, ...);
//
// Three log-probs per action token: pi_behav (the engine's, stored with each step:
// behaviour), pi_old (the learner's, scored before the update with the weights it starts
// from), pi_theta (the learner's during the update). Multiplying the advantages by a
// non-negative, gradient-free weight w is the same as multiplying each token's clipped
// surrogate by w (both branches of max(-A r, -A clip(r)) scale alike, and so does the
// dual clip), which is how both methods below are applied.
//
// decoupled_ppo — AReaL's decoupled PPO objective (Fu et al. 2025, arXiv 2505.24298,
//   sec. 5.2, after Hilton et al. 2021, arXiv 2110.00641), with pi_prox = pi_old:
//     J = E_{a ~ pi_behav}[ w * min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) ]
//     r = pi_theta / pi_prox,   w = pi_prox / pi_behav = exp(old - behav)
//   A token whose w exceeds `cap` is left out of the surrogate (w := 0; it still counts
//   in the aggregation's denominator), as AReaL's behav_imp_weight_cap does. Always per
//   token.
// tis — truncated importance sampling of pi_old / pi_behav, as verl's rollout
//   correction (rollout_is) does (Yao et al. 2025, "Your efficient RL framework secretly
//   brings you off-policy RL training"):
//     token:    w_t = min(exp(old_t - behav_t), cap)
//     sequence: w_t = min(exp(sum_{u in seq} (old_u - behav_u)), cap) for every token of
//               the sequence; a sequence is one step's response (one MDP action)
//   With reject, tokens (token level) or whole sequences (sequence level) whose raw
//   weight lies outside [1/cap, cap] leave the loss mask (verl's rollout rejection).
// Log-weights are clamped to [-20, 20] before exp (verl's safety bound).
#pragma once

#include <map>
#include <string>

#include <ATen/ATen.h>

namespace agentr1::algo {

enum class OffPolicyMethod { kNone, kDecoupledPpo, kTis };
enum class IsLevel { kToken, kSequence };

struct OffPolicyOptions {
  std::string method = "none";   // none | decoupled_ppo | tis
  std::string level = "token";   // tis: token | sequence (decoupled_ppo is per token)
  double cap = 2.0;              // > 1: decoupled_ppo drops tokens with w > cap; tis
                                 // truncates w at cap (and rejects outside [1/cap, cap])
  bool reject = false;           // tis only: leave out tokens / sequences outside [1/cap, cap]
  OffPolicyMethod parsed_method = OffPolicyMethod::kNone;  // resolve()
  IsLevel parsed_level = IsLevel::kToken;                  // resolve()

  template <class V>
  void visit(V& v) {
    v.field("method", method,
            "none | decoupled_ppo (AReaL: clip on pi/pi_old, weight pi_old/pi_behav, tokens over cap "
            "dropped) | tis (verl: min(pi_old/pi_behav, cap))");
    v.field("level", level, "tis importance ratio per token | sequence (one step's response)");
    v.field("cap", cap, "weight cap (> 1)");
    v.field("reject", reject, "tis: leave out tokens/sequences whose weight is outside [1/cap, cap]");
  }
  // Parses method and level, then checks cap > 1 (finite) and that reject and level go
  // with tis. Throws Error naming the key (prefix + "method" ...), the value and the rule.
  void resolve(const std::string& prefix = "actor.off_policy.");
  bool enabled() const { return parsed_method != OffPolicyMethod::kNone; }
};

struct OffPolicyWeights {
  at::Tensor weight;   // [B,T] fp32, no grad: multiplies the advantages (0 off the mask)
  at::Tensor mask;     // [B,T] the loss mask after rejection (= mask without it)
  // off_policy/is_weight_mean, _max (the raw weight pi_old/pi_behav over action
  // tokens, before the cap), off_policy/capped_frac (action tokens the cap changed),
  // off_policy/rejected_frac (tis with reject), off_policy/log_ratio_mean (old - behav).
  std::map<std::string, double> metrics;
};

// old_logprob, behav_logprob, mask: [B,T] (mask 1 on action tokens). seq_ids: [B,T]
// int64, the sequence (step) of each action token within its row, >= 0 where mask is 1;
// only read at level sequence (may be undefined otherwise). With method none, weight is
// the mask and mask is unchanged. Throws Error on shape mismatches or negative seq ids.
OffPolicyWeights off_policy_weights(const at::Tensor& old_logprob, const at::Tensor& behav_logprob,
                                    const at::Tensor& mask, const at::Tensor& seq_ids,
                                    const OffPolicyOptions& opts);

}  // namespace agentr1::algo
