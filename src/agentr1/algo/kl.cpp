#include "agentr1/algo/kl.h"

#include "agentr1/core/error.h"

namespace agentr1::algo {

KlType kl_type_from_string(const std::string& name) {
  if (name == "k1" || name == "kl") return KlType::kK1;
  if (name == "abs") return KlType::kAbs;
  if (name == "k2" || name == "mse") return KlType::kK2;
  if (name == "k3" || name == "low_var_kl") return KlType::kLowVarKl;
  throw Error("unknown kl_loss_type '" + name + "'; valid: k1 (kl), abs, k2 (mse), k3 (low_var_kl)");
}

const char* kl_type_name(KlType t) {
  switch (t) {
    case KlType::kK1: return "k1";
    case KlType::kAbs: return "abs";
    case KlType::kK2: return "k2";
    case KlType::kLowVarKl: return "low_var_kl";
  }
  return "?";
}

at::Tensor kl_penalty(const at::Tensor& logprob, const at::Tensor& ref_logprob, KlType type) {
  switch (type) {
    case KlType::kK1:
      return logprob - ref_logprob;
    case KlType::kAbs:
      return (logprob - ref_logprob).abs();
    case KlType::kK2:
      return 0.5 * (logprob - ref_logprob).square();
    case KlType::kLowVarKl: {
      at::Tensor r = (ref_logprob - logprob).clamp(-20.0, 20.0);
      return (r.exp() - r - 1.0).clamp(-10.0, 10.0);
    }
  }
  throw Error("kl_penalty: bad type");
}

}  // namespace agentr1::algo
