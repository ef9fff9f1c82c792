#include "agentr1/algo/kl_controller.h"

#include <algorithm>
#include <cmath>

#include "agentr1/core/error.h"

namespace agentr1::algo {

void KlControllerOptions::validate() const {
  AGENTR1_CHECK(type == "fixed" || type == "adaptive",
                "unknown algorithm.kl_ctrl.type '" << type << "'; known: adaptive, fixed");
  AGENTR1_CHECK(kl_coef >= 0 && std::isfinite(kl_coef),
                "algorithm.kl_ctrl.kl_coef must be finite and >= 0, got " << kl_coef);
  if (type == "adaptive") {
    AGENTR1_CHECK(target_kl > 0, "algorithm.kl_ctrl.target_kl must be > 0 for the adaptive "
                                 "controller, got " << target_kl);
    AGENTR1_CHECK(horizon > 0, "algorithm.kl_ctrl.horizon must be > 0 for the adaptive "
                               "controller, got " << horizon);
  }
}

AdaptiveKlController::AdaptiveKlController(double init_kl_coef, double target_kl, double horizon)
    : value_(init_kl_coef), target_(target_kl), horizon_(horizon) {
  AGENTR1_CHECK(target_kl > 0 && horizon > 0,
                "AdaptiveKlController: target_kl and horizon must be > 0, got " << target_kl
                                                                                << " and " << horizon);
}

void AdaptiveKlController::update(double current_kl, int64_t n_steps) {
  AGENTR1_CHECK(std::isfinite(current_kl),
                "AdaptiveKlController::update: current KL is not finite (" << current_kl << ")");
  const double err = std::clamp(current_kl / target_ - 1.0, -0.2, 0.2);
  value_ *= 1.0 + err * static_cast<double>(n_steps) / horizon_;
}

std::unique_ptr<KlController> make_kl_controller(const KlControllerOptions& opts) {
  opts.validate();
  if (opts.type == "adaptive")
    return std::make_unique<AdaptiveKlController>(opts.kl_coef, opts.target_kl, opts.horizon);
  return std::make_unique<FixedKlController>(opts.kl_coef);
}

}  // namespace agentr1::algo
