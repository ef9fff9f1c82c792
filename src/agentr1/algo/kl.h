// agentr1/algo/kl.h — per-token KL estimators between the policy and a reference.
//
//   at::Tensor kl = kl_penalty(logprob, ref_logprob, KlType::kLowVarKl);   // [B,T]
//
// With r = ref_logprob - logprob (log of pi_ref/pi at the sampled token):
//   k1          logprob - ref_logprob                   (unbiased, high variance)
//   abs         |logprob - ref_logprob|
//   k2 / mse    0.5 * (logprob - ref_logprob)^2
//   k3 / low_var_kl   exp(r) - r - 1, r clamped to [-20, 20], result to [-10, 10]   (Schulman's k3; verl)
#pragma once

#include <string>

#include <ATen/ATen.h>

namespace agentr1::algo {

enum class KlType { kK1, kAbs, kK2, kLowVarKl };

// Accepts k1|kl, abs, k2|mse, k3|low_var_kl; throws Error listing them otherwise.
KlType kl_type_from_string(const std::string& name);
const char* kl_type_name(KlType t);

// logprob, ref_logprob: [B,T] -> [B,T]
at::Tensor kl_penalty(const at::Tensor& logprob, const at::Tensor& ref_logprob, KlType type);

}  // namespace agentr1::algo
