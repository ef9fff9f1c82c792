// agentr1/algo/distill.h — online policy distillation (OPD): a teacher's per-token
// judgement of the tokens the student sampled, as a reward or as a loss.
//
//   DistillOptions o;  o.loss = "k1_pg";  o.resolve("algorithm.distill.");
//   K1Reward r = k1_distill_reward(teacher_lp, old_lp, o);    // [B,T] each; no grad
//   // advantage_t = (use_task_rewards ? task advantage_t : 0) + coef * r.reward_t
//   at::Tensor fkl = topk_forward_kl(student_topk_lp, teacher_topk_lp, o);  // [B,T,K] -> [B,T]
//   // actor loss += coef * aggregate_loss(fkl, action_mask, ...)
//
// Two losses, as verl's distillation_loss names them (docs/algo/opd.md there):
//   k1_pg     PG OPD (Thinking Machines' on-policy distillation): the reward of token t is
//             r_t = sg(log p_teacher(y_t) - log p_student(y_t)), the negative k1 estimate of
//             the reverse KL(student || teacher) at the sampled token, used as that token's
//             advantage (no discounting: each token is credited with its own term) inside
//             the configured policy loss. The student's log-prob is pi_old's, scored once
//             per step (the rows' old_logprob), so every epoch and minibatch sees one reward.
//   topk_fkl  GKD-style: the forward KL(teacher || student) over the teacher's top-k ids
//             plus one bucket for the rest of the vocabulary (verl's forward_kl_topk_tail):
//               sum_{v in topk} p_T(v) (log p_T(v) - log pi(v)) + p_T(tail) log(p_T(tail) / pi(tail)),
//             p(tail) = max(1 - sum_{v in topk} p(v), 1e-6), differentiated through the
//             student's log-probs directly. A KL between two (k+1)-outcome distributions:
//             >= 0, and 0 with a zero gradient when the student is the teacher (without
//             the tail bucket, verl's plain forward_kl_topk, a student equal to its
//             teacher would still be pushed to move mass into the top k).
// Clamps (verl's names): log_prob_min_clamp raises every log-prob below it to it before
// the k1 difference (a token one model deems impossible cannot dominate; k1_pg only: the
// tail bucket needs the log-probs as they are, as in verl); loss_max_clamp bounds each
// token's divergence term to [-clamp, clamp] (both losses). loss_max_clamp <= 0 or
// log_prob_min_clamp >= 0 turns that clamp off.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/ATen.h>

namespace agentr1::algo {

enum class DistillLoss { kK1Pg, kTopkFkl };

// Accepts k1_pg, topk_fkl; throws Error listing them otherwise.
DistillLoss distill_loss_from_string(const std::string& name);
const char* distill_loss_name(DistillLoss l);

struct DistillOptions {
  std::string loss = "k1_pg";        // k1_pg (reverse-KL reward in the policy gradient) |
                                     // topk_fkl (forward KL on the teacher's top-k, direct)
  int64_t topk = 32;                 // k of topk_fkl (the teacher's top-k log-probs per token)
  double coef = 1.0;                 // weight of the distillation term: of r_t in the
                                     // advantage (k1_pg) or of the loss (topk_fkl)
  bool use_task_rewards = false;     // also the task's advantage (the estimator's, from the
                                     // environment's rewards): advantage = task + coef * r_t;
                                     // false = the distillation term alone
  double loss_max_clamp = 10.0;      // per-token divergence clamped to [-c, c]; <= 0 = none
  double log_prob_min_clamp = -10.0; // k1_pg's log-probs raised to at least this; >= 0 = none
  DistillLoss kind = DistillLoss::kK1Pg;  // parsed `loss` (resolve())
  // Parses `loss`, then validate(). prefix: the config path for messages
  // ("algorithm.distill.").
  void resolve(const std::string& prefix);
  void validate(const std::string& prefix) const;
  template <class V>
  void visit(V& v) {
    v.field("loss", loss, "k1_pg (reverse-KL reward, policy gradient) | topk_fkl (forward KL on the teacher's top-k)");
    v.field("topk", topk, "k of topk_fkl: teacher log-probs kept per token");
    v.field("coef", coef, "weight of the distillation reward (k1_pg) or loss (topk_fkl)");
    v.field("use_task_rewards", use_task_rewards,
            "add the task's advantage (the estimator's) to the distillation term; false = distillation alone");
    v.field("loss_max_clamp", loss_max_clamp, "per-token divergence clamped to [-c, c]; <= 0 = no clamp");
    v.field("log_prob_min_clamp", log_prob_min_clamp, "k1_pg: log-probs raised to at least this; >= 0 = no clamp");
  }
};

inline constexpr double kTailMassEps = 1e-6;  // floor of the tail bucket's mass (topk_fkl)

struct K1Reward {
  at::Tensor reward;   // r_t = -clamp(max(s, lo) - max(t, lo), -c, c), the shape of the inputs
  at::Tensor clamped;  // 1 where loss_max_clamp bound the term, else 0 (same shape, fp32)
};

// teacher_lp, student_lp: the two models' log-probs of the sampled tokens, same shape
// ([B,T] or [N]). No gradient flows (the reward is a constant of the update).
K1Reward k1_distill_reward(const at::Tensor& teacher_lp, const at::Tensor& student_lp, const DistillOptions& o);

// Per-token forward KL on the teacher's top-k and a tail bucket (see the top):
// student_topk_lp, teacher_topk_lp [..., K] (the student's log-probs of the teacher's
// top-k ids, and the teacher's own) -> [...], clamped to [-c, c]. Gradient flows through
// student_topk_lp.
at::Tensor topk_forward_kl(const at::Tensor& student_topk_lp, const at::Tensor& teacher_topk_lp,
                           const DistillOptions& o);

}  // namespace agentr1::algo
