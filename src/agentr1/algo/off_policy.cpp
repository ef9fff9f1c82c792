#include "agentr1/algo/off_policy.h"

#include <cmath>

#include "agentr1/core/error.h"

namespace agentr1::algo {

namespace {
constexpr double kLogBound = 20.0;  // exp(+-20): verl's safety bound on log-ratios
}  // namespace

void OffPolicyOptions::resolve(const std::string& prefix) {
  if (method == "none") parsed_method = OffPolicyMethod::kNone;
  else if (method == "decoupled_ppo") parsed_method = OffPolicyMethod::kDecoupledPpo;
  else if (method == "tis") parsed_method = OffPolicyMethod::kTis;
  else
    throw Error(prefix + "method: unknown '" + method + "'; known: none, decoupled_ppo, tis");
  if (level == "token") parsed_level = IsLevel::kToken;
  else if (level == "sequence") parsed_level = IsLevel::kSequence;
  else
    throw Error(prefix + "level: unknown '" + level + "'; known: token, sequence");
  AGENTR1_CHECK(std::isfinite(cap) && cap > 1.0,
                prefix << "cap must be a finite number > 1 (weights are capped at it), got " << cap);
  AGENTR1_CHECK(!reject || parsed_method == OffPolicyMethod::kTis,
                prefix << "reject=true applies to method tis only (decoupled_ppo already drops tokens over the "
                          "cap), got method " << method);
  AGENTR1_CHECK(parsed_level == IsLevel::kToken || parsed_method == OffPolicyMethod::kTis,
                prefix << "level=sequence applies to method tis only (decoupled_ppo weights each token), got method "
                       << method);
}

OffPolicyWeights off_policy_weights(const at::Tensor& old_logprob, const at::Tensor& behav_logprob,
                                    const at::Tensor& mask, const at::Tensor& seq_ids,
                                    const OffPolicyOptions& opts) {
  AGENTR1_CHECK(old_logprob.dim() == 2 && old_logprob.sizes() == behav_logprob.sizes() &&
                    old_logprob.sizes() == mask.sizes(),
                "off_policy_weights: old, behaviour log-probs and mask must be [B,T] of one shape, got "
                    << old_logprob.sizes() << ", " << behav_logprob.sizes() << ", " << mask.sizes());
  at::NoGradGuard no_grad;
  OffPolicyWeights out;
  const at::Tensor m = mask.to(at::kFloat);
  if (!opts.enabled()) {
    out.weight = m;
    out.mask = mask;
    return out;
  }
  const at::Tensor log_ratio = (old_logprob.to(at::kDouble) - behav_logprob.to(at::kDouble)) * m.to(at::kDouble);
  at::Tensor log_w = log_ratio;  // per token
  const bool sequence = opts.parsed_method == OffPolicyMethod::kTis && opts.parsed_level == IsLevel::kSequence;
  if (sequence) {
    AGENTR1_CHECK(seq_ids.defined() && seq_ids.sizes() == mask.sizes(),
                  "off_policy_weights: level sequence needs seq_ids of shape " << mask.sizes());
    const at::Tensor on = m > 0;
    const at::Tensor ids = seq_ids.to(at::kLong).masked_fill(on.logical_not(), 0);
    AGENTR1_CHECK(ids.numel() == 0 || ids.min().item<int64_t>() >= 0,
                  "off_policy_weights: seq_ids must be >= 0 on action tokens");
    const int64_t k = ids.numel() ? ids.max().item<int64_t>() + 1 : 1;
    const int64_t b = mask.size(0);
    // key = row * k + seq: sums of the log-ratio per (row, sequence), read back per token.
    const at::Tensor keys = (at::arange(b, ids.options()).unsqueeze(1) * k + ids).reshape({-1});
    at::Tensor sums = at::zeros({b * k}, log_ratio.options());
    sums.index_add_(0, keys, log_ratio.reshape({-1}));
    log_w = sums.index_select(0, keys).reshape(mask.sizes());
  }
  const at::Tensor raw = log_w.clamp(-kLogBound, kLogBound).exp() * m.to(at::kDouble);  // 0 off the mask
  at::Tensor w;
  at::Tensor capped;
  at::Tensor keep = m > 0;
  if (opts.parsed_method == OffPolicyMethod::kDecoupledPpo) {
    capped = (raw > opts.cap).logical_and(keep);
    w = raw.masked_fill(capped, 0.0);
  } else {
    capped = (raw > opts.cap).logical_and(keep);
    w = raw.clamp_max(opts.cap);
    if (opts.reject) {
      const at::Tensor out_of_range = ((raw > opts.cap).logical_or(raw < 1.0 / opts.cap)).logical_and(keep);
      out.metrics["off_policy/rejected_frac"] = 0;
      const double n_act = keep.sum().item<double>();
      if (n_act > 0) out.metrics["off_policy/rejected_frac"] = out_of_range.sum().item<double>() / n_act;
      keep = keep.logical_and(out_of_range.logical_not());
      w = w.masked_fill(out_of_range, 0.0);
    }
  }
  out.weight = w.to(at::kFloat);
  out.mask = keep.to(mask.scalar_type());
  const at::Tensor on = m > 0;
  const double n = on.sum().item<double>();
  if (n > 0) {
    out.metrics["off_policy/is_weight_mean"] = raw.masked_select(on).mean().item<double>();
    out.metrics["off_policy/is_weight_max"] = raw.masked_select(on).max().item<double>();
    out.metrics["off_policy/capped_frac"] = capped.sum().item<double>() / n;
    out.metrics["off_policy/log_ratio_mean"] = log_ratio.masked_select(on).mean().item<double>();
  }
  return out;
}

}  // namespace agentr1::algo
