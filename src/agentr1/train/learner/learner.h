// agentr1/train/learner/learner.h — the learner of an RL step: the actor, the critic (estimators
// with values) and the frozen reference (KL loss or KL in the reward), on one device.
//
//   Learner learner(policy, reference_or_null, std::move(critic_or_null), cfg.actor, device);
//   Metrics m = learner.score(rows);          // old log-probs, ref log-probs, old values
//   ...                                       // advantages (AdvantagePhase)
//   m = learner.update(rows, /*update_actor=*/step > critic_warmup);
//
// score() fills what the losses need and nothing else: old_logprob always (the
// engine's behaviour log-probs with actor.use_rollout_logprobs, else a scoring pass),
// ref_logprob when there is a reference, value when there is a critic, the teacher
// columns when there are distillation teachers. The reference
// is scored with score_logprobs (no optimiser, no grad). How far the learner's log-probs
// of the sampled tokens are from the engine's (rollout/logprob_max_diff: the same
// weights score the same tokens, so this is the exactness check of a step) comes from
// the scoring pass, or with the bypass from the update's first forward.
#pragma once

#include <memory>
#include <vector>

#include "agentr1/model/transformer.h"
#include "agentr1/train/learner/actor.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/learner/critic.h"
#include "agentr1/train/distill.h"
#include "agentr1/train/learner/metrics.h"
#include "agentr1/train/learner/update.h"

namespace agentr1::train {

class Learner {
 public:
  // reference: null = none; the policy itself under LoRA (scored as its base, adapters
  // off). critic: null = none. All on `device` already.
  Learner(model::Transformer policy, model::Transformer reference, std::unique_ptr<Critic> critic,
          ActorOptions actor_opts, at::Device device);
  ~Learner();

  // Fills rows' old_logprob (+ ref_logprob, value). Returns timing/old_log_prob,
  // timing/ref, timing/values, rollout/logprob_max_diff, batch/rows, batch/action_tokens.
  Metrics score(std::vector<PackedRow>& rows);
  // The critic's update (if any), then the actor's if update_actor. Returns their
  // metrics and timing/update_critic, timing/update_actor.
  Metrics update(const std::vector<PackedRow>& rows, bool update_actor);

  // Data parallelism (distributed.h): score() fills the columns of this rank's rows
  // and shares them (every rank then holds the whole scored batch); update() forwards
  // this rank's share and sums the gradients. nullptr (default) = one process.
  void set_process_group(ProcessGroup* pg);

  // Online policy distillation: score() also fills the rows' teacher columns from these
  // teachers (distill.h), after the old log-probs. nullptr (default) = none.
  void set_teachers(std::unique_ptr<TeacherSet> teachers);
  const TeacherSet* teachers() const { return teachers_.get(); }

  Actor& actor() { return actor_; }
  Critic* critic() { return critic_.get(); }
  bool has_reference() const { return !reference_.is_empty(); }

 private:
  Actor actor_;
  model::Transformer reference_{nullptr};
  std::unique_ptr<Critic> critic_;
  std::unique_ptr<TeacherSet> teachers_;
  at::Device device_;
  ProcessGroup* pg_ = nullptr;

  void fill_columns(std::vector<PackedRow>& rows, Metrics& m);
};

}  // namespace agentr1::train
