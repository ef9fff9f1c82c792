#include "agentr1/algo/entropy.h"

#include "agentr1/core/error.h"

namespace agentr1::algo {

at::Tensor entropy_from_logits(const at::Tensor& logits) {
  AGENTR1_CHECK(logits.dim() >= 1, "entropy_from_logits: logits need a vocabulary dimension");
  const at::Tensor z = logits.scalar_type() == at::kDouble ? logits : logits.to(at::kFloat);
  const at::Tensor p = at::softmax(z, /*dim=*/-1);
  return at::logsumexp(z, /*dim=*/-1) - (p * z).sum(/*dim=*/-1);
}

EntropyOut entropy_loss(const at::Tensor& logits, const at::Tensor& mask, LossAgg agg,
                        double norm_len) {
  AGENTR1_CHECK(logits.dim() == 3 && mask.dim() == 2 && logits.size(0) == mask.size(0) &&
                    logits.size(1) == mask.size(1),
                "entropy_loss: expected logits [B,T,V] and mask [B,T], got " << logits.sizes()
                    << " and " << mask.sizes());
  const at::Tensor h = entropy_from_logits(logits);  // [B,T]
  EntropyOut out;
  out.loss = aggregate_loss(h, mask.to(h.scalar_type()), agg, norm_len);
  out.metrics["actor/entropy"] = out.loss.detach().item<double>();
  return out;
}

}  // namespace agentr1::algo
