#include "agentr1/train/advantages.h"

#include <ATen/ATen.h>

#include "agentr1/algo/estimator.h"
#include "agentr1/algo/kl_controller.h"
#include "agentr1/core/error.h"

namespace agentr1::train {

AdvantageResult estimate_advantages(const std::vector<Trajectory>& trajs, std::vector<PackedRow>& rows,
                                    const AlgorithmOptions& a, const AdvantageInputs& in) {
  const auto est = algo::make_estimator(a.adv_estimator);
  return estimate_advantages(trajs, rows, *est, a.estimator, in);
}

AdvantageResult estimate_advantages(const std::vector<Trajectory>& trajs, std::vector<PackedRow>& rows,
                                    const algo::AdvantageEstimator& est, const algo::EstimatorOptions& options,
                                    const AdvantageInputs& in) {
  const bool values = est.needs_values(), step_values = est.step_level_values();
  for (size_t r = 0; r < rows.size(); ++r) {
    PackedRow& row = rows[r];
    AGENTR1_CHECK(!values || row.value.size() == row.tokens.size(),
                  "advantage estimator '" << est.name() << "' needs critic values; row " << r << " of trajectory "
                                          << row.trajectory << " has " << row.value.size() << " for "
                                          << row.tokens.size() << " tokens");
    AGENTR1_CHECK(in.token_kl == nullptr || (r < in.token_kl->size() && (*in.token_kl)[r].size() == row.tokens.size()),
                  "KL in reward: no per-token KL for row " << r << " of trajectory " << row.trajectory);
    row.advantage.assign(row.tokens.size(), 0.0f);
    row.returns.assign(row.tokens.size(), 0.0f);
  }
  const StepSpans spans = step_spans(rows, trajs);
  AdvantageResult out;
  out.rewards.resize(trajs.size());
  for (size_t i = 0; i < trajs.size(); ++i) out.rewards[i] = trajs[i].total_reward();
  std::vector<algo::TrajectoryTokens> batch;
  std::vector<size_t> traj_of;  // batch entry -> trajectory index
  for (size_t i = 0; i < trajs.size(); ++i) {
    algo::TrajectoryTokens tt;
    tt.group = trajs[i].group;
    tt.outcome_reward = trajs[i].outcome_reward;
    for (size_t s = 0; s < trajs[i].steps.size(); ++s) {
      const TokenSpan& sp = spans[i][s];
      if (sp.n == 0) continue;
      const Step& st = trajs[i].steps[s];
      PackedRow& row = rows[static_cast<size_t>(sp.row)];
      const size_t b = static_cast<size_t>(sp.begin), n = static_cast<size_t>(sp.n);
      algo::StepTokens x;
      x.reward = st.reward;
      x.n_tokens = sp.n;
      if (values && step_values) x.value = row.value[b];
      if (values && !step_values) x.token_values = algo::FloatView(row.value.data() + b, n);
      if (in.token_kl != nullptr) x.token_kl = algo::FloatView((*in.token_kl)[static_cast<size_t>(sp.row)].data() + b, n);
      x.anchor = st.anchor;
      x.advantages = row.advantage.data() + b;
      x.returns = row.returns.data() + b;
      tt.steps.push_back(std::move(x));
    }
    if (tt.steps.empty()) continue;
    out.rewards[i] = algo::trajectory_score(tt, in.token_kl != nullptr ? in.kl_coef : 0.0);
    batch.push_back(std::move(tt));
    traj_of.push_back(i);
  }
  if (batch.empty()) return out;
  algo::EstimatorOptions eo = options;  // every configured field, as given
  eo.kl_coef = in.token_kl != nullptr ? in.kl_coef : 0.0;
  out.metrics = est.compute_into(batch, eo);
  if (in.token_kl != nullptr) {
    out.mean_kl = algo::mean_sequence_kl(batch);
    // Also when kl_coef is 0 (the estimator only reports it for a positive coefficient).
    out.metrics["actor/reward_kl_penalty"] = out.mean_kl;
    out.metrics["actor/reward_kl_penalty_coeff"] = in.kl_coef;
  }
  return out;
}

RowTokenValues reward_token_kl(const std::vector<PackedRow>& rows, algo::KlType type) {
  RowTokenValues out(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const PackedRow& row = rows[r];
    const int64_t n = static_cast<int64_t>(row.tokens.size());
    AGENTR1_CHECK(static_cast<int64_t>(row.old_logprob.size()) == n &&
                      static_cast<int64_t>(row.ref_logprob.size()) == n,
                  "KL in reward: a row of trajectory " << row.trajectory
                                                       << " lacks old or reference log-probs");
    const at::Tensor old_lp = at::from_blob(const_cast<float*>(row.old_logprob.data()), {1, n}, at::kFloat);
    const at::Tensor ref_lp = at::from_blob(const_cast<float*>(row.ref_logprob.data()), {1, n}, at::kFloat);
    const at::Tensor kl = algo::kl_penalty(old_lp, ref_lp, type).contiguous();
    const float* k = kl.data_ptr<float>();
    out[r].assign(static_cast<size_t>(n), 0.0f);
    for (int64_t t = 0; t < n; ++t)
      if (row.action[static_cast<size_t>(t)]) out[r][static_cast<size_t>(t)] = k[t];
  }
  return out;
}

AdvantagePhase::AdvantagePhase(const AlgorithmOptions& a)
    : options_(a), estimator_(with_context("algorithm.adv_estimator", [&] { return algo::make_estimator(a.adv_estimator); })) {
  if (a.use_kl_in_reward) kl_ctrl_ = algo::make_kl_controller(a.kl_ctrl);
  if (a.distill.enabled()) {
    options_.distill.resolve();
    distill_routing_ = std::make_unique<TeacherRouting>(options_.distill.resolved_teachers());
  }
}

AdvantagePhase::~AdvantagePhase() = default;

AdvantagePhase::Output AdvantagePhase::compute(const std::vector<Trajectory>& trajs, std::vector<PackedRow>& rows) {
  Output o;
  AdvantageInputs in;
  if (kl_ctrl_) {
    o.token_kl = reward_token_kl(rows, options_.kl_penalty_type);
    in.token_kl = &o.token_kl;
    in.kl_coef = kl_ctrl_->value();
  }
  o.result = estimate_advantages(trajs, rows, *estimator_, options_.estimator, in);
  if (estimator_->needs_values()) set_value_mask(rows, estimator_->step_level_values());
  if (distill_routing_) {
    // The teacher's judgement: its metrics, and k1_pg's reward in the advantages.
    merge_into(o.result.metrics, distill_metrics(rows, *distill_routing_, options_.distill.options));
    if (options_.distill.options.kind == algo::DistillLoss::kK1Pg) add_distill_advantages(rows, options_.distill.options);
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
