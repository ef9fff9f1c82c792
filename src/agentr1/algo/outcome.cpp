// Outcome estimators: one score per trajectory, one advantage broadcast to all of its
// action tokens; returns = advantages (as verl).
//   grpo  (s_i - mean_g) / (std_g + eps), or s_i - mean_g with norm_adv_by_std_in_grpo=false
//   rloo  s_i - mean_{j != i} s_j  (singletons keep s_i)
// s_i = trajectory_score(): outcome + step rewards - kl_coef * sum token KL.
#include <memory>

#include "agentr1/algo/advantage.h"
#include "agentr1/algo/estimator.h"
#include "agentr1/algo/estimator_builtin.h"

namespace agentr1::algo {
namespace {

using Nested = std::vector<std::vector<std::vector<double>>>;

// Broadcasts adv[i] to every action token of trajectory i.
Nested broadcast(const std::vector<TrajectoryTokens>& batch, const std::vector<float>& adv) {
  Nested out(batch.size());
  for (size_t i = 0; i < batch.size(); ++i)
    for (const auto& s : batch[i].steps) out[i].emplace_back(s.n_tokens, static_cast<double>(adv[i]));
  return out;
}

class OutcomeEstimator : public AdvantageEstimator {
 public:
  EstimatorMetrics compute_into(const std::vector<TrajectoryTokens>& batch,
                          const EstimatorOptions& opts) const override {
    opts.validate();
    validate_batch(batch, /*needs_token_values=*/false, name());
    std::vector<float> scores;
    std::vector<std::string> groups;
    for (const auto& tr : batch) {
      scores.push_back(static_cast<float>(trajectory_score(tr, opts.kl_coef)));
      groups.push_back(tr.group);
    }
    const Nested adv = broadcast(batch, advantages(scores, groups, opts));
    return finish_output(batch, adv, adv, opts, false, false);
  }

 protected:
  virtual std::vector<float> advantages(const std::vector<float>& scores,
                                        const std::vector<std::string>& groups,
                                        const EstimatorOptions& opts) const = 0;
};

class GrpoEstimator final : public OutcomeEstimator {
 public:
  std::string name() const override { return "grpo"; }

 protected:
  std::vector<float> advantages(const std::vector<float>& scores,
                                const std::vector<std::string>& groups,
                                const EstimatorOptions& opts) const override {
    return grpo_advantages(scores, groups, opts.norm_adv_by_std_in_grpo, opts.eps);
  }
};

class RlooEstimator final : public OutcomeEstimator {
 public:
  std::string name() const override { return "rloo"; }

 protected:
  std::vector<float> advantages(const std::vector<float>& scores,
                                const std::vector<std::string>& groups,
                                const EstimatorOptions&) const override {
    return rloo_advantages(scores, groups);
  }
};

}  // namespace

namespace detail {
void register_outcome_estimators(const AddEstimator& add) {
  add("grpo", [] { return std::make_unique<GrpoEstimator>(); });
  add("rloo", [] { return std::make_unique<RlooEstimator>(); });
}
}  // namespace detail

}  // namespace agentr1::algo
