// GAE estimators (Schulman et al. 2016, arXiv 1506.02438); both need a critic.
//   gae (step level, Agent-R1's step MDP): one value per step, V(s_t) read at the last
//     prompt token; per-step rewards r_t (estimator.h; outcome on the last step);
//     delta_t = r_t + gamma*V(s_{t+1}) - V(s_t), V after the last step = 0,
//     A_t = delta_t + gamma*lam*A_{t+1}; returns R_t = A_t + V(s_t). A_t and R_t are
//     broadcast to the step's action tokens; gamma and lam act per step.
//   token_gae: the same recursion over the trajectory's action tokens in order across
//     steps, one value per action token, token rewards in the shared layout (step reward
//     at each step's last token, outcome at the very last) — verl's
//     compute_gae_advantage_return with a response mask that zeroes observation tokens.
// Advantages are then whitened over all action tokens of the batch (whiten_advantages,
// default true, as verl); returns are not. gae with whiten_level=step whitens over the
// batch's steps instead, each step one value whatever its length (StepPO, arXiv
// 2604.18401: step rows, not tokens).
#include <algorithm>
#include <memory>

#include "agentr1/algo/estimator.h"
#include "agentr1/algo/estimator_builtin.h"
#include "agentr1/algo/returns.h"
#include "agentr1/core/error.h"

namespace agentr1::algo {
namespace {

using Nested = std::vector<std::vector<std::vector<double>>>;

class StepGae final : public AdvantageEstimator {
 public:
  std::string name() const override { return "gae"; }
  bool needs_values() const override { return true; }
  bool step_level_values() const override { return true; }
  EstimatorMetrics compute_into(const std::vector<TrajectoryTokens>& batch,
                          const EstimatorOptions& opts) const override {
    opts.validate();
    validate_batch(batch, false, name());
    Nested adv(batch.size()), ret(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      std::vector<double> values;
      for (const auto& s : batch[i].steps) values.push_back(s.value);
      const GaeResult g = gae(step_rewards(batch[i], opts.kl_coef), values, opts.gamma, opts.lam);
      for (size_t t = 0; t < batch[i].steps.size(); ++t) {
        adv[i].emplace_back(batch[i].steps[t].n_tokens, g.advantages[t]);
        ret[i].emplace_back(batch[i].steps[t].n_tokens, g.returns[t]);
      }
    }
    if (opts.whiten_advantages && opts.whiten_level == "step") {
      Nested per_step(batch.size());
      for (size_t i = 0; i < batch.size(); ++i)
        for (const auto& a : adv[i]) per_step[i].push_back({a.front()});
      whiten_in_place(&per_step);
      for (size_t i = 0; i < batch.size(); ++i)
        for (size_t t = 0; t < adv[i].size(); ++t) std::fill(adv[i][t].begin(), adv[i][t].end(), per_step[i][t][0]);
    } else if (opts.whiten_advantages) {
      whiten_in_place(&adv);
    }
    return finish_output(batch, adv, ret, opts, /*uses_step_values=*/true, false);
  }
};

class TokenGae final : public AdvantageEstimator {
 public:
  std::string name() const override { return "token_gae"; }
  bool needs_values() const override { return true; }
  EstimatorMetrics compute_into(const std::vector<TrajectoryTokens>& batch,
                          const EstimatorOptions& opts) const override {
    opts.validate();
    AGENTR1_CHECK(opts.whiten_level == "token",
                  "algorithm.whiten_level=step needs one advantage per step (gae); token_gae has one per token");
    validate_batch(batch, /*needs_token_values=*/true, name());
    Nested adv, ret;
    for (const auto& tr : batch) {
      std::vector<double> values;
      for (const auto& s : tr.steps) values.insert(values.end(), s.token_values.begin(), s.token_values.end());
      const GaeResult g = gae(token_rewards(tr, opts.kl_coef), values, opts.gamma, opts.lam);
      adv.push_back(split_by_steps(tr, g.advantages));
      ret.push_back(split_by_steps(tr, g.returns));
    }
    if (opts.whiten_advantages) whiten_in_place(&adv);
    return finish_output(batch, adv, ret, opts, false, /*uses_token_values=*/true);
  }
};

}  // namespace

namespace detail {
void register_gae_estimators(const AddEstimator& add) {
  add("gae", [] { return std::make_unique<StepGae>(); });
  add("token_gae", [] { return std::make_unique<TokenGae>(); });
}
}  // namespace detail

}  // namespace agentr1::algo
