// REINFORCE++ (Hu 2025, arXiv 2501.03262), as verl's estimators of the same names.
//   reinforce_plus_plus: token rewards in the shared layout (estimator.h: -kl_coef*KL on
//     every action token, step reward at each step's last token, outcome at the very last),
//     discounted returns G_k = r_k + gamma*G_{k+1} over the trajectory's action tokens in
//     order across steps; advantages = G whitened over all action tokens of the batch
//     (mean, unbiased variance, rsqrt(var + 1e-8)); returns = G.
//   reinforce_plus_plus_baseline: s_i - mean_g (group of one: mean 0) broadcast to every
//     action token, then whitened over the batch; returns = advantages.
//   reinforce: advantages = returns = G (vanilla REINFORCE, no baseline, no whitening).
// With one step per trajectory and gamma = 1 both equal verl's; across steps the return
// is carried over the observation between steps (see returns.h).
#include <memory>

#include "agentr1/algo/advantage.h"
#include "agentr1/algo/estimator.h"
#include "agentr1/algo/estimator_builtin.h"
#include "agentr1/algo/returns.h"

namespace agentr1::algo {
namespace {

using Nested = std::vector<std::vector<std::vector<double>>>;

// Per trajectory, per step, per action token: the discounted return G_k of the token
// rewards (shared by reinforce and reinforce_plus_plus).
Nested batch_returns(const std::vector<TrajectoryTokens>& batch, const EstimatorOptions& opts) {
  Nested ret;
  for (const auto& tr : batch)
    ret.push_back(split_by_steps(tr, discounted_returns(token_rewards(tr, opts.kl_coef), opts.gamma)));
  return ret;
}

class ReinforcePlusPlus final : public AdvantageEstimator {
 public:
  std::string name() const override { return "reinforce_plus_plus"; }
  EstimatorMetrics compute_into(const std::vector<TrajectoryTokens>& batch,
                          const EstimatorOptions& opts) const override {
    opts.validate();
    validate_batch(batch, false, name());
    const Nested ret = batch_returns(batch, opts);
    Nested adv = ret;
    whiten_in_place(&adv);
    return finish_output(batch, adv, ret, opts, false, false);
  }
};

// Vanilla REINFORCE (Williams 1992): the advantage of every action token is its discounted
// return G_k itself (the same token rewards and returns as reinforce_plus_plus), with no
// baseline and no whitening. Pair it with actor.policy_loss=reinforce for the textbook
// estimator; with the clipped loss it is a PPO-style update on raw returns.
class Reinforce final : public AdvantageEstimator {
 public:
  std::string name() const override { return "reinforce"; }
  EstimatorMetrics compute_into(const std::vector<TrajectoryTokens>& batch,
                          const EstimatorOptions& opts) const override {
    opts.validate();
    validate_batch(batch, false, name());
    const Nested ret = batch_returns(batch, opts);
    return finish_output(batch, ret, ret, opts, false, false);
  }
};

class ReinforcePlusPlusBaseline final : public AdvantageEstimator {
 public:
  std::string name() const override { return "reinforce_plus_plus_baseline"; }
  EstimatorMetrics compute_into(const std::vector<TrajectoryTokens>& batch,
                          const EstimatorOptions& opts) const override {
    opts.validate();
    validate_batch(batch, false, name());
    std::vector<float> scores;
    std::vector<std::string> groups;
    for (const auto& tr : batch) {
      scores.push_back(static_cast<float>(trajectory_score(tr, opts.kl_coef)));
      groups.push_back(tr.group);
    }
    const std::vector<float> centred = group_mean_centred(scores, groups);
    Nested adv(batch.size());
    for (size_t i = 0; i < batch.size(); ++i)
      for (const auto& s : batch[i].steps) adv[i].emplace_back(s.n_tokens, centred[i]);
    whiten_in_place(&adv);
    return finish_output(batch, adv, adv, opts, false, false);
  }
};

}  // namespace

namespace detail {
void register_reinforce_pp_estimators(const AddEstimator& add) {
  add("reinforce", [] { return std::make_unique<Reinforce>(); });
  add("reinforce_plus_plus", [] { return std::make_unique<ReinforcePlusPlus>(); });
  add("reinforce_plus_plus_baseline", [] { return std::make_unique<ReinforcePlusPlusBaseline>(); });
}
}  // namespace detail

}  // namespace agentr1::algo
