// agentr1/algo/kl_controller.h — the KL-in-reward coefficient (algorithm.kl_ctrl).
//
//   KlControllerOptions o;  o.type = "adaptive";  o.kl_coef = 0.001;  o.target_kl = 0.1;
//   auto ctl = make_kl_controller(o);
//   opts.kl_coef = ctl->value();                                     // EstimatorOptions
//   AdvantageOutput a = est->compute(batch, opts);
//   ctl->update(a.metrics["actor/reward_kl_penalty"], /*n_steps=*/batch.size());
//
// fixed: the value never changes. adaptive (Ziegler et al. 2019, arXiv 1909.08593;
// verl AdaptiveKLController):
//   e = clip(current_kl / target_kl - 1, -0.2, 0.2);   value *= 1 + e * n_steps / horizon
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace agentr1::algo {

struct KlControllerOptions {
  std::string type = "fixed";  // algorithm.kl_ctrl.type: fixed | adaptive
  double kl_coef = 0.001;      // algorithm.kl_ctrl.kl_coef: initial (fixed: constant) coefficient
  double target_kl = 0.1;      // algorithm.kl_ctrl.target_kl: adaptive target per-token KL
  double horizon = 10000;      // algorithm.kl_ctrl.horizon: adaptive time constant, in samples
  void validate() const;       // throws Error naming the bad value
  template <class V>
  void visit(V& v) {
    v.field("type", type, "fixed | adaptive (Ziegler et al. 2019)");
    v.field("kl_coef", kl_coef, "initial (fixed: constant) KL-in-reward coefficient");
    v.field("target_kl", target_kl, "adaptive: target mean per-token KL");
    v.field("horizon", horizon, "adaptive: time constant in trajectories");
  }
};

class KlController {
 public:
  virtual ~KlController() = default;
  virtual double value() const = 0;
  // current_kl: the batch's mean per-token KL; n_steps: samples in the batch (verl passes
  // the batch size). Fixed: no-op.
  virtual void update(double current_kl, int64_t n_steps) = 0;
};

class FixedKlController final : public KlController {
 public:
  explicit FixedKlController(double kl_coef) : value_(kl_coef) {}
  double value() const override { return value_; }
  void update(double, int64_t) override {}

 private:
  double value_;
};

class AdaptiveKlController final : public KlController {
 public:
  AdaptiveKlController(double init_kl_coef, double target_kl, double horizon);
  double value() const override { return value_; }
  void update(double current_kl, int64_t n_steps) override;

 private:
  double value_, target_, horizon_;
};

// Validates the options; throws Error on an unknown type (listing fixed, adaptive).
std::unique_ptr<KlController> make_kl_controller(const KlControllerOptions& opts);

}  // namespace agentr1::algo
