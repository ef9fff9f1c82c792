#include "agentr1/algo/distill.h"

#include <cmath>

#include "agentr1/core/error.h"

namespace agentr1::algo {

DistillLoss distill_loss_from_string(const std::string& name) {
  if (name == "k1_pg") return DistillLoss::kK1Pg;
  if (name == "topk_fkl") return DistillLoss::kTopkFkl;
  throw Error("unknown distillation loss '" + name +
              "'; valid: k1_pg (the teacher's log-prob minus the student's as each token's reward, in the "
              "policy gradient), topk_fkl (forward KL on the teacher's top-k log-probs, a direct loss)");
}

const char* distill_loss_name(DistillLoss l) {
  switch (l) {
    case DistillLoss::kK1Pg: return "k1_pg";
    case DistillLoss::kTopkFkl: return "topk_fkl";
  }
  return "?";
}

void DistillOptions::resolve(const std::string& prefix) {
  kind = with_context(prefix + "loss", [&] { return distill_loss_from_string(loss); });
  validate(prefix);
}

void DistillOptions::validate(const std::string& prefix) const {
  AGENTR1_CHECK(std::isfinite(coef) && coef >= 0,
                prefix << "coef must be a finite number >= 0, got " << coef);
  AGENTR1_CHECK(kind != DistillLoss::kTopkFkl || (topk >= 1 && topk <= 1024),
                prefix << "topk must be in 1..1024 for loss=topk_fkl (the teacher's log-probs kept per token), got "
                       << topk);
  AGENTR1_CHECK(std::isfinite(loss_max_clamp), prefix << "loss_max_clamp must be finite (<= 0 = no clamp), got "
                                                      << loss_max_clamp);
  AGENTR1_CHECK(std::isfinite(log_prob_min_clamp),
                prefix << "log_prob_min_clamp must be finite (>= 0 = no clamp), got " << log_prob_min_clamp);
}

namespace {

at::Tensor floor_logprob(const at::Tensor& lp, const DistillOptions& o) {
  return o.log_prob_min_clamp < 0 ? lp.clamp_min(o.log_prob_min_clamp) : lp;
}

}  // namespace

K1Reward k1_distill_reward(const at::Tensor& teacher_lp, const at::Tensor& student_lp, const DistillOptions& o) {
  AGENTR1_CHECK(teacher_lp.sizes() == student_lp.sizes(),
                "k1_distill_reward: teacher " << teacher_lp.sizes() << " and student " << student_lp.sizes()
                                              << " log-probs differ in shape");
  at::NoGradGuard ng;
  const at::Tensor k1 = floor_logprob(student_lp.to(at::kFloat), o) - floor_logprob(teacher_lp.to(at::kFloat), o);
  K1Reward r;
  if (o.loss_max_clamp > 0) {
    r.clamped = (k1.abs() > o.loss_max_clamp).to(at::kFloat);
    r.reward = -k1.clamp(-o.loss_max_clamp, o.loss_max_clamp);
  } else {
    r.clamped = at::zeros_like(k1);
    r.reward = -k1;
  }
  return r;
}

at::Tensor topk_forward_kl(const at::Tensor& student_topk_lp, const at::Tensor& teacher_topk_lp,
                           const DistillOptions& o) {
  AGENTR1_CHECK(student_topk_lp.sizes() == teacher_topk_lp.sizes() && student_topk_lp.dim() >= 1,
                "topk_forward_kl: student " << student_topk_lp.sizes() << " and teacher " << teacher_topk_lp.sizes()
                                            << " top-k log-probs differ in shape");
  const at::Tensor t = teacher_topk_lp.to(at::kFloat).detach();
  const at::Tensor s = student_topk_lp.to(at::kFloat);
  const at::Tensor pt = t.exp();
  const at::Tensor tail_t = (1.0 - pt.sum(/*dim=*/-1)).clamp_min(kTailMassEps);
  const at::Tensor tail_s = (1.0 - s.exp().sum(/*dim=*/-1)).clamp_min(kTailMassEps);
  const at::Tensor kl = (pt * (t - s)).sum(/*dim=*/-1) + tail_t * (tail_t.log() - tail_s.log());
  return o.loss_max_clamp > 0 ? kl.clamp(-o.loss_max_clamp, o.loss_max_clamp) : kl;
}

}  // namespace agentr1::algo
