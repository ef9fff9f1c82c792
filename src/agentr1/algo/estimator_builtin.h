// agentr1/algo/estimator_builtin.h — internal: how the built-in estimators register.
// Each file pair of estimators defines one of these; estimator.cpp calls them once.
#pragma once

#include <functional>
#include <string>

#include "agentr1/algo/estimator.h"

namespace agentr1::algo::detail {

using AddEstimator = std::function<void(const std::string&, EstimatorFactory)>;

void register_outcome_estimators(const AddEstimator& add);       // grpo, rloo (outcome.cpp)
void register_reinforce_pp_estimators(const AddEstimator& add);  // reinforce_plus_plus{,_baseline}
void register_gae_estimators(const AddEstimator& add);           // gae, token_gae (gae.cpp)
void register_turn_level_estimators(const AddEstimator& add);    // turn_rloo (turn_level.cpp)
void register_gigpo_estimators(const AddEstimator& add);         // gigpo (gigpo.cpp)

}  // namespace agentr1::algo::detail
