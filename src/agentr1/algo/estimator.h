// agentr1/algo/estimator.h — advantage estimators behind one contract, chosen by name.
//
//   std::vector<TrajectoryTokens> batch = ...;          // one entry per trajectory
//   EstimatorOptions o;  o.gamma = 1.0;  o.lam = 0.95;
//   auto est = make_estimator("rloo");                  // algorithm.adv_estimator
//   AdvantageOutput out = est->compute(batch, o);       // owns [trajectory][step][token]
//   float a = out.advantages[i][t][k];                  // trajectory i, step t, action token k
//   // unknown name -> Error "unknown advantage estimator 'x'; known: gae, grpo, ..."
//
// The trainer does not copy per-token data in or out: a step's inputs (critic values,
// token KL) are FloatViews of the packed rows' columns and its outputs are written
// through StepTokens::advantages / returns straight into them (compute_into; see
// train/advantages.h). compute() is the same with outputs it allocates (tests, one-offs).
//
// Every estimator takes the same batch: per trajectory its group (rollout.n samples of
// one prompt share it), its outcome reward and its steps; per step the step reward,
// the number of action (response) tokens, and where an estimator needs them, the
// critic's values and the per-token KL to the reference policy.
//
// Reward layout, shared by all estimators (verl's token_level_rewards, generalised to
// several steps). On the trajectory's action tokens taken in order across steps:
//   token reward = -kl_coef * token_kl[k]                    on every action token
//                + step.reward                               at the last token of its step
//                + outcome_reward                            at the very last token
// Outcome estimators use the trajectory score s = sum of all token rewards
// (= outcome + sum of step rewards - kl_coef * sum of token KL), as verl's
// token_level_rewards.sum(-1). Step-level estimators use per-step rewards
// r_t = step.reward - kl_coef * sum_k token_kl (+ outcome on the last step).
//
// Built in (names as verl's algorithm.adv_estimator): grpo, rloo, reinforce_plus_plus,
// reinforce_plus_plus_baseline, gae (step level), token_gae, turn_rloo (turn level,
// see turn_level.h), gigpo (episode + anchor-state step groups, see gigpo.h). Each one's formula is documented where it is registered and in
// the header of its file pair.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace agentr1::algo {

// A read-only view of n floats owned elsewhere: a packed row's column, a test's vector.
// The owner must outlive the view (a view of a temporary vector does not compile).
class FloatView {
 public:
  FloatView() = default;
  FloatView(const float* data, size_t n) : data_(data), n_(n) {}
  FloatView(const std::vector<float>& v) : data_(v.data()), n_(v.size()) {}  // NOLINT: implicit on purpose
  FloatView(std::vector<float>&&) = delete;
  const float* begin() const { return data_; }
  const float* end() const { return data_ + n_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  float operator[](size_t i) const { return data_[i]; }

 private:
  const float* data_ = nullptr;
  size_t n_ = 0;
};

// One step (turn) of a trajectory as the estimators see it.
struct StepTokens {
  float reward = 0;                 // step reward from the environment (tools, checkers)
  int64_t n_tokens = 0;             // action (response) tokens the policy sampled; must be >= 1
  float value = 0;                  // step-level critic value V(s_t), read at the last prompt token (gae)
  FloatView token_values;           // per action token critic values (token_gae); else empty
  FloatView token_kl;               // per action token logprob - ref_logprob (KL in reward); empty = 0
  std::string anchor;               // gigpo: the env state the step acted in (Step::anchor); "" = unknown
  // Outputs of compute_into: n_tokens floats each, owned elsewhere (the packed row's
  // advantage / returns columns at this step's action tokens). returns may be null
  // (not wanted: no critic); advantages may not.
  float* advantages = nullptr;
  float* returns = nullptr;
};

struct TrajectoryTokens {
  std::string group;                // which sample it came from; group baselines compare within it
  float outcome_reward = 0;         // reward-model score at the end of the trajectory
  std::vector<StepTokens> steps;    // in order; at least one
};

struct EstimatorOptions {
  double gamma = 1.0;               // discount (algorithm.gamma): per action token (token-level
                                    //   estimators) or per step (gae, turn_rloo)
  double lam = 1.0;                 // GAE lambda (algorithm.lam)
  bool norm_adv_by_std_in_grpo = true;  // grpo: divide by the group std (false = Dr.GRPO)
  double eps = 1e-6;                // added to standard deviations before dividing (grpo, turn_rloo)
  double kl_coef = 0;               // KL-in-reward coefficient (algorithm.kl_ctrl value); 0 = off
  bool whiten_advantages = true;    // gae, token_gae: whiten advantages over all action tokens of
                                    //   the batch, as verl's compute_gae_advantage_return always does
  std::string whiten_level = "token";  // gae: whiten over the batch's action tokens (verl) or
                                    //   over its steps, each step counted once (StepPO); the
                                    //   other estimators do not whiten
  bool turn_norm_by_std = false;    // turn_rloo: divide by the std of the group's pooled per-step
                                    //   returns (GRPO-style scale; slightly biased, so off by default)
  double gigpo_step_weight = 1.0;   // gigpo: omega, the weight of the step-level (anchor) advantage
  std::string gigpo_mode = "mean_std_norm";  // gigpo: mean_std_norm | mean_norm (no std division)
  void validate() const;            // throws Error naming the bad value
  // Config keys (the algorithm section, verl names). kl_coef is not a key: the trainer
  // sets it from algorithm.kl_ctrl every step.
  template <class V>
  void visit(V& v) {
    v.field("gamma", gamma, "discount factor (per token, or per step for gae / turn_rloo)");
    v.field("lam", lam, "GAE lambda");
    v.field("norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo, "grpo: divide by the group std (false: Dr.GRPO)");
    v.field("eps", eps, "added to standard deviations before dividing (grpo, turn_rloo)");
    v.field("whiten_advantages", whiten_advantages, "gae, token_gae: whiten advantages over the batch's action tokens");
    v.field("whiten_level", whiten_level, "gae: token (verl: over action tokens) | step (StepPO: each step once)");
    v.field("turn_norm_by_std", turn_norm_by_std, "turn_rloo: divide by the std of the group's per-step returns");
    v.field("gigpo_step_weight", gigpo_step_weight, "gigpo: weight of the step-level (anchor-state group) advantage");
    v.field("gigpo_mode", gigpo_mode, "gigpo: mean_std_norm | mean_norm (group baselines without the std division)");
  }
};

// critic/advantages/{mean,max,min}, critic/returns/{mean,max,min} over all action
// tokens; critic/values/{mean,max,min} for estimators that use values;
// actor/reward_kl_penalty{,_coeff} when kl_coef > 0; an estimator's own (gigpo/...).
using EstimatorMetrics = std::map<std::string, double>;

struct AdvantageOutput {
  // [trajectory][step][action token], shaped like the input.
  std::vector<std::vector<std::vector<float>>> advantages;
  std::vector<std::vector<std::vector<float>>> returns;
  EstimatorMetrics metrics;
};

// An advantage estimator. Stateless; compute() is const and thread-safe.
class AdvantageEstimator {
 public:
  virtual ~AdvantageEstimator() = default;
  virtual std::string name() const = 0;
  // True when compute() reads StepTokens::value (gae) or token_values (token_gae).
  virtual bool needs_values() const { return false; }
  // With needs_values(): true when the values are one per step (StepTokens::value, gae),
  // false when one per action token (token_values, token_gae).
  virtual bool step_level_values() const { return false; }
  // Validates the batch and the options (Error naming trajectory/step and the rule),
  // writes each step's advantages and returns per action token through
  // StepTokens::advantages / returns (finish_output does it), returns the metrics.
  virtual EstimatorMetrics compute_into(const std::vector<TrajectoryTokens>& batch,
                                        const EstimatorOptions& opts) const = 0;
  // compute_into with outputs shaped [trajectory][step][token] that it allocates (the
  // batch's own output pointers are ignored).
  AdvantageOutput compute(const std::vector<TrajectoryTokens>& batch, const EstimatorOptions& opts) const;
};

using EstimatorFactory = std::function<std::unique_ptr<AdvantageEstimator>()>;

// Creates the estimator registered as `name`; throws Error listing the known names.
std::unique_ptr<AdvantageEstimator> make_estimator(const std::string& name);
// Adds a user estimator; throws Error if the name is taken (built-ins included).
void register_estimator(const std::string& name, EstimatorFactory factory);
// Registered names, sorted.
std::vector<std::string> estimator_names();

// ---- helpers shared by the estimators (also used by tests) ----

// Throws Error if a step has n_tokens < 1, token_kl/token_values of the wrong length,
// no advantages output, a trajectory has no steps, or (needs_token_values) token_values
// is missing.
void validate_batch(const std::vector<TrajectoryTokens>& batch, bool needs_token_values,
                    const std::string& estimator);

// Token rewards of trajectory `traj` in the layout above, flattened over its steps.
std::vector<double> token_rewards(const TrajectoryTokens& traj, double kl_coef);
// Per-step rewards r_t (step reward - kl_coef * step KL, outcome added to the last step).
std::vector<double> step_rewards(const TrajectoryTokens& traj, double kl_coef);
// Trajectory score = sum of token rewards.
double trajectory_score(const TrajectoryTokens& traj, double kl_coef);

// Mean over trajectories of each trajectory's token-mean token_kl (steps without KL
// count as 0): verl apply_kl_penalty's current_kl, reported as actor/reward_kl_penalty
// and fed to the adaptive KL controller. 0 for an empty batch.
double mean_sequence_kl(const std::vector<TrajectoryTokens>& batch);

// verl masked_whiten over a ragged set: (x - mean) / sqrt(var + 1e-8) with the mean
// and the unbiased (n-1) variance over all n values; n < 2 gives zeros.
void whiten_in_place(std::vector<std::vector<std::vector<double>>>* values);

// Shapes a per-trajectory flat token vector back into [step][token].
std::vector<std::vector<double>> split_by_steps(const TrajectoryTokens& traj,
                                                const std::vector<double>& flat);

// Writes adv and ret (shaped [trajectory][step][token]) as floats through each step's
// advantages / returns pointers and returns the standard metrics.
EstimatorMetrics finish_output(const std::vector<TrajectoryTokens>& batch,
                              const std::vector<std::vector<std::vector<double>>>& adv,
                              const std::vector<std::vector<std::vector<double>>>& ret,
                              const EstimatorOptions& opts, bool uses_step_values,
                              bool uses_token_values);

}  // namespace agentr1::algo
