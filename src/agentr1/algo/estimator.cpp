#include "agentr1/algo/estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "agentr1/algo/estimator_builtin.h"
#include "agentr1/core/error.h"
#include "agentr1/core/registry.h"

namespace agentr1::algo {
namespace {

using EstimatorRegistry = Registry<AdvantageEstimator>;
constexpr const char* kWhat = "advantage estimator (algorithm.adv_estimator)";

// Built-ins are registered on first use, from one place: no reliance on static
// initialisers in a static library (the linker would drop unreferenced ones).
void ensure_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto add = [](const std::string& name, EstimatorFactory f) {
      EstimatorRegistry::instance().add(name, std::move(f), kWhat);
    };
    detail::register_outcome_estimators(add);
    detail::register_reinforce_pp_estimators(add);
    detail::register_gae_estimators(add);
    detail::register_turn_level_estimators(add);
    detail::register_gigpo_estimators(add);
  });
}

}  // namespace

void EstimatorOptions::validate() const {
  AGENTR1_CHECK(gamma >= 0 && gamma <= 1, "algorithm.gamma must be in [0, 1], got " << gamma);
  AGENTR1_CHECK(lam >= 0 && lam <= 1, "algorithm.lam must be in [0, 1], got " << lam);
  AGENTR1_CHECK(eps > 0, "estimator eps must be > 0, got " << eps);
  AGENTR1_CHECK(std::isfinite(gigpo_step_weight) && gigpo_step_weight >= 0,
                "algorithm.gigpo_step_weight must be finite and >= 0, got " << gigpo_step_weight);
  AGENTR1_CHECK(whiten_level == "token" || whiten_level == "step",
                "algorithm.whiten_level must be token or step, got '" << whiten_level << "'");
  AGENTR1_CHECK(gigpo_mode == "mean_std_norm" || gigpo_mode == "mean_norm",
                "algorithm.gigpo_mode must be mean_std_norm or mean_norm, got '" << gigpo_mode << "'");
  AGENTR1_CHECK(kl_coef >= 0 && std::isfinite(kl_coef),
                "KL-in-reward coefficient (algorithm.kl_ctrl.kl_coef) must be finite and >= 0, got "
                    << kl_coef);
}

std::unique_ptr<AdvantageEstimator> make_estimator(const std::string& name) {
  ensure_builtins();
  return EstimatorRegistry::instance().create(name, kWhat);
}

void register_estimator(const std::string& name, EstimatorFactory factory) {
  ensure_builtins();
  EstimatorRegistry::instance().add(name, std::move(factory), kWhat);
}

std::vector<std::string> estimator_names() {
  ensure_builtins();
  return EstimatorRegistry::instance().names();  // std::map order: sorted
}

void validate_batch(const std::vector<TrajectoryTokens>& batch, bool needs_token_values,
                    const std::string& estimator) {
  AGENTR1_CHECK(!batch.empty(), estimator << ": the batch has no trajectories");
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& tr = batch[i];
    AGENTR1_CHECK(!tr.steps.empty(), estimator << ": trajectory " << i << " (group '" << tr.group
                                                << "') has no steps; drop it before estimation");
    AGENTR1_CHECK(std::isfinite(tr.outcome_reward),
                  estimator << ": trajectory " << i << " has a non-finite outcome reward");
    for (size_t t = 0; t < tr.steps.size(); ++t) {
      const auto& s = tr.steps[t];
      AGENTR1_CHECK(s.n_tokens >= 1, estimator << ": trajectory " << i << " step " << t << " has "
                                               << s.n_tokens
                                               << " action tokens; every step needs >= 1 (drop "
                                                  "empty steps before estimation)");
      AGENTR1_CHECK(s.advantages != nullptr, estimator << ": trajectory " << i << " step " << t
                                                       << " has no advantages output; point it at n_tokens "
                                                          "floats (or call compute())");
      AGENTR1_CHECK(std::isfinite(s.reward) && std::isfinite(s.value),
                    estimator << ": trajectory " << i << " step " << t
                              << " has a non-finite reward or value");
      AGENTR1_CHECK(s.token_kl.empty() || static_cast<int64_t>(s.token_kl.size()) == s.n_tokens,
                    estimator << ": trajectory " << i << " step " << t << " has "
                              << s.token_kl.size() << " token_kl entries for " << s.n_tokens
                              << " action tokens; give one per token or none");
      if (needs_token_values) {
        AGENTR1_CHECK(static_cast<int64_t>(s.token_values.size()) == s.n_tokens,
                      estimator << ": trajectory " << i << " step " << t << " has "
                                << s.token_values.size() << " token_values for " << s.n_tokens
                                << " action tokens; this estimator needs one critic value per "
                                   "action token");
      }
    }
  }
}

std::vector<double> token_rewards(const TrajectoryTokens& traj, double kl_coef) {
  std::vector<double> r;
  for (const auto& s : traj.steps) {
    for (int64_t k = 0; k < s.n_tokens; ++k)
      r.push_back(s.token_kl.empty() ? 0.0 : -kl_coef * static_cast<double>(s.token_kl[k]));
    r.back() += s.reward;
  }
  r.back() += traj.outcome_reward;
  return r;
}

std::vector<double> step_rewards(const TrajectoryTokens& traj, double kl_coef) {
  std::vector<double> r;
  for (const auto& s : traj.steps) {
    double kl = 0;
    for (float x : s.token_kl) kl += x;
    r.push_back(static_cast<double>(s.reward) - kl_coef * kl);
  }
  r.back() += traj.outcome_reward;
  return r;
}

double trajectory_score(const TrajectoryTokens& traj, double kl_coef) {
  double s = 0;
  for (double x : token_rewards(traj, kl_coef)) s += x;
  return s;
}

double mean_sequence_kl(const std::vector<TrajectoryTokens>& batch) {
  if (batch.empty()) return 0.0;
  double total = 0;
  for (const auto& tr : batch) {
    double kl = 0;
    int64_t n = 0;
    for (const auto& s : tr.steps) {
      for (float x : s.token_kl) kl += x;
      n += s.n_tokens;
    }
    total += kl / static_cast<double>(std::max<int64_t>(n, 1));
  }
  return total / static_cast<double>(batch.size());
}

void whiten_in_place(std::vector<std::vector<std::vector<double>>>* values) {
  double sum = 0;
  int64_t n = 0;
  for (const auto& tr : *values)
    for (const auto& st : tr)
      for (double x : st) sum += x, ++n;
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  double ss = 0;
  for (const auto& tr : *values)
    for (const auto& st : tr)
      for (double x : st) ss += (x - mean) * (x - mean);
  const double var = n >= 2 ? ss / static_cast<double>(n - 1) : 0.0;
  const double inv = 1.0 / std::sqrt(var + 1e-8);
  for (auto& tr : *values)
    for (auto& st : tr)
      for (double& x : st) x = n >= 2 ? (x - mean) * inv : 0.0;
}

std::vector<std::vector<double>> split_by_steps(const TrajectoryTokens& traj,
                                                const std::vector<double>& flat) {
  std::vector<std::vector<double>> out;
  size_t pos = 0;
  for (const auto& s : traj.steps) {
    AGENTR1_CHECK(pos + static_cast<size_t>(s.n_tokens) <= flat.size(),
                  "split_by_steps: " << flat.size() << " values for more tokens");
    out.emplace_back(flat.begin() + pos, flat.begin() + pos + s.n_tokens);
    pos += s.n_tokens;
  }
  AGENTR1_CHECK(pos == flat.size(), "split_by_steps: " << flat.size() << " values for " << pos
                                                       << " tokens");
  return out;
}

namespace {

struct Stats {
  double sum = 0, mx = -std::numeric_limits<double>::infinity(),
         mn = std::numeric_limits<double>::infinity();
  int64_t n = 0;
  void add(double x) { sum += x, ++n, mx = std::max(mx, x), mn = std::min(mn, x); }
  void put(std::map<std::string, double>* m, const std::string& key) const {
    (*m)[key + "/mean"] = n > 0 ? sum / static_cast<double>(n) : 0.0;
    (*m)[key + "/max"] = n > 0 ? mx : 0.0;
    (*m)[key + "/min"] = n > 0 ? mn : 0.0;
  }
};

// Writes x[i][t][k] as floats through dest(step i,t) (skipped where it is null), adding
// every value to stats.
void write_out(const std::vector<TrajectoryTokens>& batch, const std::vector<std::vector<std::vector<double>>>& x,
               float* StepTokens::*dest, Stats* stats) {
  AGENTR1_CHECK(x.size() == batch.size(), "finish_output: " << x.size() << " trajectories of output for "
                                                            << batch.size() << " in the batch");
  for (size_t i = 0; i < x.size(); ++i) {
    AGENTR1_CHECK(x[i].size() == batch[i].steps.size(), "finish_output: trajectory " << i << " has " << x[i].size()
                                                                                     << " steps of output for "
                                                                                     << batch[i].steps.size());
    for (size_t t = 0; t < x[i].size(); ++t) {
      const StepTokens& s = batch[i].steps[t];
      AGENTR1_CHECK(static_cast<int64_t>(x[i][t].size()) == s.n_tokens,
                    "finish_output: trajectory " << i << " step " << t << " has " << x[i][t].size()
                                                 << " outputs for " << s.n_tokens << " action tokens");
      float* out = s.*dest;
      for (size_t k = 0; k < x[i][t].size(); ++k) {
        if (out != nullptr) out[k] = static_cast<float>(x[i][t][k]);
        stats->add(x[i][t][k]);
      }
    }
  }
}

}  // namespace

EstimatorMetrics finish_output(const std::vector<TrajectoryTokens>& batch,
                              const std::vector<std::vector<std::vector<double>>>& adv,
                              const std::vector<std::vector<std::vector<double>>>& ret,
                              const EstimatorOptions& opts, bool uses_step_values,
                              bool uses_token_values) {
  EstimatorMetrics out;
  Stats a, r;
  write_out(batch, adv, &StepTokens::advantages, &a);
  write_out(batch, ret, &StepTokens::returns, &r);
  a.put(&out, "critic/advantages");
  r.put(&out, "critic/returns");
  if (uses_step_values || uses_token_values) {
    Stats v;  // per action token, as verl (values are masked by the response mask)
    for (const auto& tr : batch)
      for (const auto& s : tr.steps)
        for (int64_t k = 0; k < s.n_tokens; ++k) v.add(uses_token_values ? s.token_values[k] : s.value);
    v.put(&out, "critic/values");
  }
  if (opts.kl_coef > 0) {
    out["actor/reward_kl_penalty"] = mean_sequence_kl(batch);
    out["actor/reward_kl_penalty_coeff"] = opts.kl_coef;
  }
  return out;
}

AdvantageOutput AdvantageEstimator::compute(const std::vector<TrajectoryTokens>& batch,
                                            const EstimatorOptions& opts) const {
  AdvantageOutput out;
  out.advantages.resize(batch.size());
  out.returns.resize(batch.size());
  std::vector<TrajectoryTokens> b = batch;  // the views are cheap to copy; outputs re-pointed
  for (size_t i = 0; i < b.size(); ++i) {
    out.advantages[i].resize(b[i].steps.size());
    out.returns[i].resize(b[i].steps.size());
    for (size_t t = 0; t < b[i].steps.size(); ++t) {
      StepTokens& s = b[i].steps[t];
      const size_t n = static_cast<size_t>(std::max<int64_t>(s.n_tokens, 0));
      out.advantages[i][t].assign(n, 0.0f);
      out.returns[i][t].assign(n, 0.0f);
      s.advantages = out.advantages[i][t].data();
      s.returns = out.returns[i][t].data();
    }
  }
  out.metrics = compute_into(b, opts);
  return out;
}

}  // namespace agentr1::algo
