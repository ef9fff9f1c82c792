#include "agentr1/algo/loss_agg.h"

#include "agentr1/core/error.h"

namespace agentr1::algo {

LossAgg loss_agg_from_string(const std::string& name) {
  if (name == "token-mean") return LossAgg::kTokenMean;
  if (name == "seq-mean-token-sum") return LossAgg::kSeqMeanTokenSum;
  if (name == "seq-mean-token-mean") return LossAgg::kSeqMeanTokenMean;
  if (name == "seq-mean-token-sum-norm") return LossAgg::kSeqMeanTokenSumNorm;
  throw Error("unknown loss_agg_mode '" + name +
              "'; valid: token-mean, seq-mean-token-sum, seq-mean-token-mean, "
              "seq-mean-token-sum-norm");
}

const char* loss_agg_name(LossAgg a) {
  switch (a) {
    case LossAgg::kTokenMean: return "token-mean";
    case LossAgg::kSeqMeanTokenSum: return "seq-mean-token-sum";
    case LossAgg::kSeqMeanTokenMean: return "seq-mean-token-mean";
    case LossAgg::kSeqMeanTokenSumNorm: return "seq-mean-token-sum-norm";
  }
  return "?";
}

at::Tensor masked_mean(const at::Tensor& x, const at::Tensor& mask) {
  const at::Tensor m = mask.to(x.scalar_type());
  return (x * m).sum() / m.sum().clamp_min(1.0);
}

at::Tensor aggregate_loss(const at::Tensor& per_token, const at::Tensor& mask, LossAgg mode,
                          double norm_len) {
  AGENTR1_CHECK(per_token.sizes() == mask.sizes(),
                "aggregate_loss: loss " << per_token.sizes() << " and mask " << mask.sizes()
                                        << " must have the same shape");
  const at::Tensor m = mask.to(per_token.scalar_type());
  switch (mode) {
    case LossAgg::kTokenMean:
      return masked_mean(per_token, m);
    case LossAgg::kSeqMeanTokenSum: {
      at::Tensor seq = (per_token * m).sum(/*dim=*/-1);            // [B]
      at::Tensor has = (m.sum(/*dim=*/-1) > 0).to(seq.scalar_type());
      return (seq * has).sum() / has.sum().clamp_min(1.0);
    }
    case LossAgg::kSeqMeanTokenMean: {
      at::Tensor cnt = m.sum(/*dim=*/-1);                            // [B]
      at::Tensor seq = (per_token * m).sum(/*dim=*/-1) / cnt.clamp_min(1.0);
      at::Tensor has = (cnt > 0).to(seq.scalar_type());
      return (seq * has).sum() / has.sum().clamp_min(1.0);
    }
    case LossAgg::kSeqMeanTokenSumNorm: {
      const double n = norm_len > 0 ? norm_len : static_cast<double>(per_token.size(-1));
      at::Tensor seq = (per_token * m).sum(/*dim=*/-1);
      return seq.sum() / n;   // verl: sum over sequences / norm_len (not a mean)
    }
  }
  throw Error("aggregate_loss: bad mode");
}

}  // namespace agentr1::algo
