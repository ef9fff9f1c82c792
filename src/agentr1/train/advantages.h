// agentr1/train/advantages.h — the estimator over the packed rows: critic values, KL in
// the reward, advantages and returns per action token, read and written in place.
//
//   RowTokenValues kl = reward_token_kl(rows, algo::KlType::kK1);   // old - ref, per row token
//   AdvantageInputs in;  in.token_kl = &kl;  in.kl_coef = ctl->value();
//   AdvantageResult r = estimate_advantages(trajs, rows, cfg.algorithm, in);
//   // rows[*].advantage and rows[*].returns now hold the estimator's output
//
// No per-token data is copied into another shape: each step of the estimator's batch
// (algo::StepTokens) views its span of the rows' value and KL columns and writes its
// advantages and returns straight into the rows' columns (step_spans, batch.h).
//
// KL in the reward (verl apply_kl_penalty with algorithm.kl_penalty): token_kl is
// kl_penalty(old_logprob, ref_logprob) on every action token; the estimator subtracts
// kl_coef * token_kl from each token's reward (algo/estimator.h's reward layout), so the
// trajectory score becomes outcome + step rewards - kl_coef * sum(token_kl).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/algo/estimator.h"
#include "agentr1/algo/kl.h"
#include "agentr1/algo/kl_controller.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/train/distill.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/learner/metrics.h"
#include "agentr1/train/train_config.h"

namespace agentr1::train {

// Per row, per token (0 off actions): the KL column of the rows.
using RowTokenValues = std::vector<std::vector<float>>;

struct AdvantageInputs {
  const RowTokenValues* token_kl = nullptr;   // per row token KL (reward_token_kl); nullptr = no
                                              // KL in reward
  double kl_coef = 0;                         // KL-in-reward coefficient (algorithm.kl_ctrl)
};

struct AdvantageResult {
  std::vector<double> rewards;       // per trajectory: score with the KL penalty (= total_reward
                                     // without KL in reward, and for trajectories without tokens)
  double mean_kl = 0;                // mean over trajectories of their token-mean KL (verl's
                                     // current_kl for the adaptive controller); 0 without KL
  std::map<std::string, double> metrics;  // the estimator's (critic/advantages/..., critic/returns/...,
                                          // critic/values/..., actor/reward_kl_penalty{,_coeff})
};

// Runs `estimator` with `options` (kl_coef taken from `in`) over `rows` (packed from
// `trajs`): sets every row's advantage and returns columns (0 off actions). Steps and
// trajectories without response tokens are left out of the estimator's batch. With
// needs_values(), reads the rows' value column: step-level estimators (gae) get
// V(s_t) = the value at the step's first action token (read at its last prompt token),
// token_gae every action token's. Throws Error if the estimator needs values and the
// rows have none, or in.token_kl does not match the rows.
AdvantageResult estimate_advantages(const std::vector<Trajectory>& trajs, std::vector<PackedRow>& rows,
                                    const algo::AdvantageEstimator& estimator, const algo::EstimatorOptions& options,
                                    const AdvantageInputs& in);
// The same with the estimator looked up by algorithm.adv_estimator (tests, one-off use).
AdvantageResult estimate_advantages(const std::vector<Trajectory>& trajs, std::vector<PackedRow>& rows,
                                    const AlgorithmOptions& algo, const AdvantageInputs& in);

// The advantage phase of the trainer: the estimator and the KL-in-reward controller,
// resolved once from the algorithm section.
//
//   AdvantagePhase adv(cfg.algorithm);
//   AdvantagePhase::Output o = adv.compute(trajs, rows);  // rows: old (ref, value) filled
//   // rows[*].advantage set; with a critic also returns and value_mask; KL coefficient updated
class AdvantagePhase {
 public:
  explicit AdvantagePhase(const AlgorithmOptions& algorithm);  // Error naming the estimator
  ~AdvantagePhase();
  struct Output {
    AdvantageResult result;       // KL-penalised rewards, mean KL, metrics
    RowTokenValues token_kl;      // per row token KL (KL in the reward; else empty)
  };
  // Reads rows' value (needs_values()) and old/ref log-probs (KL in reward), writes
  // rows' advantage and returns (+ value_mask with a critic), then updates the KL
  // controller with the batch's KL. With algorithm.distill, adds distill/* metrics from
  // the rows' teacher log-probs, and for loss k1_pg the distillation reward to every
  // action token's advantage (add_distill_advantages: the estimator's advantage kept
  // only with use_task_rewards).
  Output compute(const std::vector<Trajectory>& trajs, std::vector<PackedRow>& rows);
  const algo::AdvantageEstimator& estimator() const { return *estimator_; }
  bool needs_values() const { return estimator_->needs_values(); }
  bool step_level_values() const { return estimator_->step_level_values(); }
  bool kl_in_reward() const { return kl_ctrl_ != nullptr; }
  double kl_coef() const;               // 0 without KL in the reward
  void set_kl_coef(double coef);        // on resume (no-op without KL in the reward)

 private:
  AlgorithmOptions options_;
  std::unique_ptr<algo::AdvantageEstimator> estimator_;
  std::unique_ptr<algo::KlController> kl_ctrl_;
  std::unique_ptr<TeacherRouting> distill_routing_;  // algorithm.distill: which teacher judged a row
};

// kl_penalty(old_logprob, ref_logprob, type) at every action token of `rows`, per row
// token (0 off actions). Throws Error if a row lacks old or reference log-probs.
RowTokenValues reward_token_kl(const std::vector<PackedRow>& rows, algo::KlType type);

// rows[i].value_mask: 1 at the action tokens whose value the critic is trained on —
// every action token (step_level = false, token_gae) or each step's first action token
// (step_level = true: V(s_t) read at the last prompt token, gae).
void set_value_mask(std::vector<PackedRow>& rows, bool step_level);

}  // namespace agentr1::train
