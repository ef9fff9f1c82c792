#include "agentr1/algo/gigpo.h"

#include <cmath>
#include <map>
#include <memory>
#include <utility>

#include "agentr1/algo/advantage.h"
#include "agentr1/algo/estimator.h"
#include "agentr1/algo/estimator_builtin.h"
#include "agentr1/algo/returns.h"
#include "agentr1/core/error.h"

namespace agentr1::algo {

GigpoStepAdvantages gigpo_step_advantages(const std::vector<std::vector<double>>& rewards,
                                          const std::vector<std::string>& groups,
                                          const std::vector<std::vector<std::string>>& anchors,
                                          double gamma, bool mean_std, double eps) {
  AGENTR1_CHECK(rewards.size() == groups.size() && rewards.size() == anchors.size(),
                "gigpo: " << rewards.size() << " trajectories, " << groups.size() << " groups, "
                          << anchors.size() << " anchor lists");
  GigpoStepAdvantages out;
  out.step_adv.resize(rewards.size());
  out.returns.resize(rewards.size());
  // (group, anchor) -> the (trajectory, step) pairs in it.
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<size_t, size_t>>> members;
  for (size_t i = 0; i < rewards.size(); ++i) {
    AGENTR1_CHECK(anchors[i].size() == rewards[i].size(),
                  "gigpo: trajectory " << i << " has " << rewards[i].size() << " steps but "
                                       << anchors[i].size() << " anchors");
    out.returns[i] = discounted_returns(rewards[i], gamma);
    out.step_adv[i].assign(rewards[i].size(), 0.0);
    for (size_t t = 0; t < anchors[i].size(); ++t) {
      if (anchors[i][t].empty()) continue;
      ++out.known_steps;
      members[{groups[i], anchors[i][t]}].emplace_back(i, t);
    }
  }
  for (const auto& [key, m] : members) {
    if (m.size() < 2) continue;
    ++out.anchor_groups;
    out.grouped_steps += static_cast<int64_t>(m.size());
    double sum = 0;
    for (const auto& [i, t] : m) sum += out.returns[i][t];
    const double mean = sum / static_cast<double>(m.size());
    double ss = 0;
    for (const auto& [i, t] : m) ss += (out.returns[i][t] - mean) * (out.returns[i][t] - mean);
    const double sd = std::sqrt(ss / static_cast<double>(m.size() - 1));
    for (const auto& [i, t] : m)
      out.step_adv[i][t] = mean_std ? (out.returns[i][t] - mean) / (sd + eps) : out.returns[i][t] - mean;
  }
  return out;
}

namespace {

class Gigpo final : public AdvantageEstimator {
 public:
  std::string name() const override { return "gigpo"; }
  EstimatorMetrics compute_into(const std::vector<TrajectoryTokens>& batch,
                          const EstimatorOptions& opts) const override {
    opts.validate();
    validate_batch(batch, false, name());
    const bool mean_std = opts.gigpo_mode == "mean_std_norm";
    std::vector<float> scores;
    std::vector<std::string> groups;
    std::vector<std::vector<double>> rewards;
    std::vector<std::vector<std::string>> anchors;
    for (const auto& tr : batch) {
      scores.push_back(static_cast<float>(trajectory_score(tr, opts.kl_coef)));
      groups.push_back(tr.group);
      rewards.push_back(step_rewards(tr, opts.kl_coef));
      anchors.emplace_back();
      for (const auto& s : tr.steps) anchors.back().push_back(s.anchor);
    }
    const std::vector<float> episode = grpo_advantages(scores, groups, mean_std, opts.eps);
    const GigpoStepAdvantages st = gigpo_step_advantages(rewards, groups, anchors, opts.gamma, mean_std, opts.eps);
    std::vector<std::vector<std::vector<double>>> adv(batch.size()), ret(batch.size());
    int64_t n_steps = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      for (size_t t = 0; t < batch[i].steps.size(); ++t) {
        const double a = static_cast<double>(episode[i]) + opts.gigpo_step_weight * st.step_adv[i][t];
        adv[i].emplace_back(batch[i].steps[t].n_tokens, a);
        ret[i].emplace_back(batch[i].steps[t].n_tokens, st.returns[i][t]);
        ++n_steps;
      }
    }
    EstimatorMetrics out = finish_output(batch, adv, ret, opts, false, false);
    out["gigpo/anchor_groups"] = static_cast<double>(st.anchor_groups);
    out["gigpo/grouped_step_fraction"] = static_cast<double>(st.grouped_steps) / static_cast<double>(n_steps);
    out["gigpo/known_anchor_fraction"] = static_cast<double>(st.known_steps) / static_cast<double>(n_steps);
    return out;
  }
};

}  // namespace

namespace detail {
void register_gigpo_estimators(const AddEstimator& add) {
  add("gigpo", [] { return std::make_unique<Gigpo>(); });
}
}  // namespace detail

}  // namespace agentr1::algo
