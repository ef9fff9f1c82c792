#include "agentr1/algo/turn_level.h"

#include <cmath>
#include <memory>

#include "agentr1/algo/advantage.h"
#include "agentr1/algo/estimator.h"
#include "agentr1/algo/estimator_builtin.h"
#include "agentr1/algo/returns.h"
#include "agentr1/core/error.h"

namespace agentr1::algo {

TurnAdvantages turn_rloo_advantages(const std::vector<std::vector<double>>& rewards,
                                    const std::vector<std::string>& groups, double gamma,
                                    bool norm_by_std, double eps) {
  AGENTR1_CHECK(rewards.size() == groups.size(), "turn_rloo: " << rewards.size()
                                                               << " trajectories but "
                                                               << groups.size() << " groups");
  AGENTR1_CHECK(gamma > 0 && gamma <= 1,
                "turn_rloo needs algorithm.gamma in (0, 1] (its fallback baseline rescales by "
                "gamma^-t), got " << gamma);
  const size_t n = rewards.size();
  TurnAdvantages out;
  out.returns.resize(n);
  out.advantages.resize(n);
  for (size_t i = 0; i < n; ++i) {
    AGENTR1_CHECK(!rewards[i].empty(), "turn_rloo: trajectory " << i << " has no steps");
    out.returns[i] = discounted_returns(rewards[i], gamma);
  }
  int64_t num_groups = 0;
  const std::vector<int64_t> gid = group_indices(groups, &num_groups);
  std::vector<std::vector<size_t>> members(num_groups);
  for (size_t i = 0; i < n; ++i) members[gid[i]].push_back(i);

  for (const auto& mem : members) {
    for (size_t i : mem) {
      const auto& g_i = out.returns[i];
      // B_i: mean total return of the other members.
      double b_sum = 0;
      for (size_t j : mem)
        if (j != i) b_sum += out.returns[j][0];
      const double b_i = mem.size() > 1 ? b_sum / static_cast<double>(mem.size() - 1) : 0.0;
      auto& a = out.advantages[i];
      a.resize(g_i.size());
      for (size_t t = 0; t < g_i.size(); ++t) {
        double sum = 0;
        int64_t cnt = 0;
        for (size_t j : mem) {
          if (j == i || out.returns[j].size() <= t) continue;
          sum += out.returns[j][t];
          ++cnt;
        }
        if (cnt > 0) {
          a[t] = g_i[t] - sum / static_cast<double>(cnt);
        } else {
          a[t] = (g_i[0] - b_i) / std::pow(gamma, static_cast<double>(t));
        }
      }
    }
    if (norm_by_std) {
      double sum = 0;
      int64_t cnt = 0;
      for (size_t j : mem)
        for (double x : out.returns[j]) sum += x, ++cnt;
      double sd = 1.0;
      if (cnt >= 2) {
        const double mean = sum / static_cast<double>(cnt);
        double ss = 0;
        for (size_t j : mem)
          for (double x : out.returns[j]) ss += (x - mean) * (x - mean);
        sd = std::sqrt(ss / static_cast<double>(cnt - 1));
      }
      for (size_t j : mem)
        for (double& x : out.advantages[j]) x /= sd + eps;
    }
  }
  return out;
}

namespace {

class TurnRloo final : public AdvantageEstimator {
 public:
  std::string name() const override { return "turn_rloo"; }
  EstimatorMetrics compute_into(const std::vector<TrajectoryTokens>& batch,
                          const EstimatorOptions& opts) const override {
    opts.validate();
    validate_batch(batch, false, name());
    std::vector<std::vector<double>> rewards;
    std::vector<std::string> groups;
    for (const auto& tr : batch) {
      rewards.push_back(step_rewards(tr, opts.kl_coef));
      groups.push_back(tr.group);
    }
    const TurnAdvantages ta =
        turn_rloo_advantages(rewards, groups, opts.gamma, opts.turn_norm_by_std, opts.eps);
    std::vector<std::vector<std::vector<double>>> adv(batch.size()), ret(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      for (size_t t = 0; t < batch[i].steps.size(); ++t) {
        adv[i].emplace_back(batch[i].steps[t].n_tokens, ta.advantages[i][t]);
        ret[i].emplace_back(batch[i].steps[t].n_tokens, ta.returns[i][t]);
      }
    }
    return finish_output(batch, adv, ret, opts, false, false);
  }
};

}  // namespace

namespace detail {
void register_turn_level_estimators(const AddEstimator& add) {
  add("turn_rloo", [] { return std::make_unique<TurnRloo>(); });
}
}  // namespace detail

}  // namespace agentr1::algo
