#include "agentr1/algo/value_loss.h"

#include <cmath>

#include "agentr1/core/error.h"

namespace agentr1::algo {

void ValueLossOptions::validate() const {
  AGENTR1_CHECK(cliprange_value > 0 && std::isfinite(cliprange_value),
                "critic.cliprange_value must be finite and > 0, got " << cliprange_value);
}

ValueLossOut value_loss(const at::Tensor& vpreds, const at::Tensor& returns,
                        const at::Tensor& values, const at::Tensor& mask,
                        const ValueLossOptions& opts) {
  AGENTR1_CHECK(vpreds.dim() == 2 && vpreds.sizes() == returns.sizes() &&
                    vpreds.sizes() == values.sizes() && vpreds.sizes() == mask.sizes(),
                "value_loss: expected four [B,T] tensors of one shape: vpreds " << vpreds.sizes()
                    << ", returns " << returns.sizes() << ", values " << values.sizes()
                    << ", mask " << mask.sizes());
  opts.validate();
  const at::Tensor m = mask.to(vpreds.scalar_type());
  const at::Tensor vclip =
      values + (vpreds - values).clamp(-opts.cliprange_value, opts.cliprange_value);
  const at::Tensor l1 = (vpreds - returns).square();
  const at::Tensor l2 = (vclip - returns).square();
  ValueLossOut out;
  out.loss = 0.5 * aggregate_loss(at::maximum(l1, l2), m, opts.agg, opts.norm_len);
  {
    at::NoGradGuard no_grad;
    out.metrics["critic/vf_loss"] = out.loss.item<double>();
    out.metrics["critic/vf_clipfrac"] = masked_mean((l2 > l1).to(m.scalar_type()), m).item<double>();
    out.metrics["critic/vpred_mean"] = masked_mean(vpreds, m).item<double>();
  }
  return out;
}

}  // namespace agentr1::algo
