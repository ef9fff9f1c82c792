#include "agentr1/train/advantages.h"

#include <ATen/ATen.h>

#include "agentr1/algo/estimator.h"
#include "agentr1/algo/kl_controller.h"
#include "agentr1/core/error.h"

namespace agentr1::train {

AdvantageResult estimate_advantages(const std::vector<Trajectory>& trajs, const AlgorithmOptions& a,
                                    const AdvantageInputs& in) {
  const auto est = algo::make_estimator(a.adv_estimator);
  return estimate_advantages(trajs, *est, a.estimator, in);
}

AdvantageResult estimate_advantages(const std::vector<Trajectory>& trajs, const algo::AdvantageEstimator& estimator,
                                    const algo::EstimatorOptions& options, const AdvantageInputs& in) {
  const algo::AdvantageEstimator* est = &estimator;
  const bool step_values = est->step_level_values();
  AGENTR1_CHECK(!est->needs_values() || in.values != nullptr,
                "advantage estimator '" << est->name() << "' needs critic values");
  AdvantageResult out;
  out.advantages.resize(trajs.size());
  out.returns.resize(trajs.size());
  out.rewards.resize(trajs.size());
  for (size_t i = 0; i < trajs.size(); ++i) out.rewards[i] = trajs[i].total_reward();
  std::vector<algo::TrajectoryTokens> batch;
  std::vector<std::pair<size_t, std::vector<size_t>>> where;  // traj index, its non-empty steps
  for (size_t i = 0; i < trajs.size(); ++i) {
    out.advantages[i].resize(trajs[i].steps.size());
    out.returns[i].resize(trajs[i].steps.size());
    algo::TrajectoryTokens tt;
    tt.group = trajs[i].group;
    tt.outcome_reward = trajs[i].outcome_reward;
    std::vector<size_t> steps;
    for (size_t s = 0; s < trajs[i].steps.size(); ++s) {
      const Step& st = trajs[i].steps[s];
      if (st.response_ids.empty()) continue;
      algo::StepTokens x;
      x.reward = st.reward;
      x.n_tokens = static_cast<int64_t>(st.response_ids.size());
      if (in.values != nullptr && est->needs_values()) {
        const std::vector<float>& v = (*in.values).at(i).at(s);
        AGENTR1_CHECK(static_cast<int64_t>(v.size()) == x.n_tokens,
                      "trajectory " << i << " step " << s << ": " << v.size() << " critic values for "
                                    << x.n_tokens << " response tokens");
        if (step_values)
          x.value = v.front();
        else
          x.token_values = v;
      }
      if (in.token_kl != nullptr) x.token_kl = (*in.token_kl).at(i).at(s);
      const auto anchor = st.info.find("anchor");
      if (anchor != st.info.end() && anchor->is_string()) x.anchor = anchor->get<std::string>();
      tt.steps.push_back(std::move(x));
      steps.push_back(s);
    }
    if (tt.steps.empty()) continue;
    out.rewards[i] = algo::trajectory_score(tt, in.token_kl != nullptr ? in.kl_coef : 0.0);
    batch.push_back(std::move(tt));
    where.emplace_back(i, std::move(steps));
  }
  if (batch.empty()) return out;
  algo::EstimatorOptions eo = options;  // every configured field, as given
  eo.kl_coef = in.token_kl != nullptr ? in.kl_coef : 0.0;
  algo::AdvantageOutput r = est->compute(batch, eo);
  for (size_t b = 0; b < where.size(); ++b)
    for (size_t k = 0; k < where[b].second.size(); ++k) {
      out.advantages[where[b].first][where[b].second[k]] = r.advantages[b][k];
      out.returns[where[b].first][where[b].second[k]] = r.returns[b][k];
    }
  out.metrics = std::move(r.metrics);
  if (in.token_kl != nullptr) {
    out.mean_kl = algo::mean_sequence_kl(batch);
    // Also when kl_coef is 0 (the estimator only reports it for a positive coefficient).
    out.metrics["actor/reward_kl_penalty"] = out.mean_kl;
    out.metrics["actor/reward_kl_penalty_coeff"] = in.kl_coef;
  }
  return out;
}

StepTokenValues reward_token_kl(const std::vector<PackedRow>& rows, const std::vector<Trajectory>& trajs,
                                algo::KlType type) {
  StepTokenValues out(trajs.size());
  for (size_t i = 0; i < trajs.size(); ++i) out[i].resize(trajs[i].steps.size());
  for (const PackedRow& row : rows) {
    const int64_t n = static_cast<int64_t>(row.tokens.size());
    AGENTR1_CHECK(static_cast<int64_t>(row.old_logprob.size()) == n &&
                      static_cast<int64_t>(row.ref_logprob.size()) == n,
                  "KL in reward: a row of trajectory " << row.trajectory
                                                       << " lacks old or reference log-probs");
    const at::Tensor old_lp = at::from_blob(const_cast<float*>(row.old_logprob.data()), {1, n}, at::kFloat);
    const at::Tensor ref_lp = at::from_blob(const_cast<float*>(row.ref_logprob.data()), {1, n}, at::kFloat);
    const at::Tensor kl = algo::kl_penalty(old_lp, ref_lp, type).contiguous();
    const float* k = kl.data_ptr<float>();
    for (int64_t t = 0; t < n; ++t)
      if (row.action[static_cast<size_t>(t)])
        out[static_cast<size_t>(row.trajectory)][static_cast<size_t>(row.step_of[static_cast<size_t>(t)])]
            .push_back(k[t]);
  }
  return out;
}

AdvantagePhase::AdvantagePhase(const AlgorithmOptions& a)
    : options_(a), estimator_(with_context("algorithm.adv_estimator", [&] { return algo::make_estimator(a.adv_estimator); })) {
  if (a.use_kl_in_reward) kl_ctrl_ = algo::make_kl_controller(a.kl_ctrl);
}

AdvantagePhase::~AdvantagePhase() = default;

AdvantagePhase::Output AdvantagePhase::compute(const std::vector<Trajectory>& trajs, std::vector<PackedRow>& rows) {
  Output o;
  AdvantageInputs in;
  if (estimator_->needs_values()) {
    o.values = gather_step_tokens(rows, trajs, &PackedRow::value);
    in.values = &o.values;
  }
  if (kl_ctrl_) {
    o.token_kl = reward_token_kl(rows, trajs, options_.kl_penalty_type);
    in.token_kl = &o.token_kl;
    in.kl_coef = kl_ctrl_->value();
  }
  o.result = estimate_advantages(trajs, *estimator_, options_.estimator, in);
  scatter_step_tokens(rows, o.result.advantages, &PackedRow::advantage);
  if (estimator_->needs_values()) {
    scatter_step_tokens(rows, o.result.returns, &PackedRow::returns);
    set_value_mask(rows, estimator_->step_level_values());
  }
  if (kl_ctrl_) kl_ctrl_->update(o.result.mean_kl, static_cast<int64_t>(trajs.size()));
  return o;
}

double AdvantagePhase::kl_coef() const { return kl_ctrl_ ? kl_ctrl_->value() : 0.0; }

void AdvantagePhase::set_kl_coef(double coef) {
  if (!kl_ctrl_) return;
  algo::KlControllerOptions ko = options_.kl_ctrl;
  ko.kl_coef = coef;
  kl_ctrl_ = algo::make_kl_controller(ko);
}

void set_value_mask(std::vector<PackedRow>& rows, bool step_level) {
  for (PackedRow& row : rows) {
    row.value_mask.assign(row.tokens.size(), 0.0f);
    int32_t prev_step = -1;
    for (size_t t = 0; t < row.tokens.size(); ++t) {
      if (!row.action[t]) continue;
      if (!step_level || row.step_of[t] != prev_step) row.value_mask[t] = 1.0f;
      prev_step = row.step_of[t];
    }
  }
}

}  // namespace agentr1::train
