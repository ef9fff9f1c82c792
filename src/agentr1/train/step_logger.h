// agentr1/train/step_logger.h — what a step leaves behind: metrics.jsonl, trajectory
// dumps, the progress line, TensorBoard event files (trainer.logger); and the batch
// metrics computed from a step's rollouts.
//
//   StepLogger log(run, tokenizer, cfg.trainer.dump_trajectories, /*progress=*/true, /*tensorboard=*/false);
//   Metrics more = rollout_metrics(trajs, adv.result);   // merged into the step's metrics
//   log.dump_step(step, trajs, rows, adv, dump_columns); // trajectories/step_NNNNNN.jsonl
//   log.metrics(step, m);                               // one line of metrics.jsonl
//   log.progress(step, total, m, seconds);              // stderr, with an ETA
//
// Dumps (per trajectory): the trajectory's JSON (steps with prompt/response ids and
// log-probs), "score" (outcome + step rewards), "advantage" (mean over its tokens),
// "reward" (the KL-penalised score, with KL in the reward), each step's
// "response_text", the first step's "prompt_text", and the audit columns:
// "advantage"/"advantages", "returns", "values" (per action token, or one per step for
// step-level values), "token_kl", and "learner_logprobs" (per action token: the
// learner's log-prob before the update, PackedRow::old_logprob, when the learner scored
// them; aligned with "response_logprobs", the engine's, whose gap it shows).
//
// TensorBoard (tensorboard = true): every metrics line becomes scalars at its step (tag
// = the metric's name), and each step that dumps trajectories a text summary
// "trajectories/sample" of its first two (markdown). Written to <run>/tensorboard/ and
// flushed with each metrics line.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/trajectory.h"
#include "agentr1/train/advantages.h"
#include "agentr1/train/evaluate.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/tensorboard.h"
#include "agentr1/train/learner/metrics.h"

namespace agentr1::text {
class Tokenizer;
}

namespace agentr1::train {

// Which audit columns a dump carries.
struct DumpColumns {
  bool values = false;       // a critic produced values
  bool step_level = false;   // values, returns and advantages are one per step (gae)
  bool token_kl = false;     // KL in the reward
  bool learner_logprobs = false;  // the learner scored old log-probs (no bypass): dump them
};

// critic/score/{mean,max,min} (trajectory total reward), critic/rewards/mean (with the
// KL penalty), env/<metric>/mean for every trajectory metric, response_length/mean,
// env/success/mean.
Metrics rollout_metrics(const std::vector<Trajectory>& trajs, const AdvantageResult& est);

class StepLogger {
 public:
  // dump_trajectories: per step, 0 = none, -1 = all. Neither run nor tokenizer is owned.
  // tensorboard: also write <run>/tensorboard/ (the file appears at the first write).
  StepLogger(const RunDir& run, const text::Tokenizer& tokenizer, int dump_trajectories, bool progress,
             bool tensorboard = false);
  ~StepLogger();
  // One line of metrics.jsonl (and the step's scalars in TensorBoard, flushed). Throws
  // Error naming the file when a write fails.
  void metrics(int64_t step, const Metrics& m) const;
  // The run resumed from its checkpoint at `step`: TensorBoard is told (a SessionLog START
  // at step + 1) to drop what the interrupted run logged after it.
  void resumed(int64_t step) const;
  // The audit columns are read from `rows` (packed from trajs, after the advantage
  // phase) and adv.token_kl.
  void dump_step(int64_t step, const std::vector<Trajectory>& trajs, const std::vector<PackedRow>& rows,
                 const AdvantagePhase::Output& adv, const DumpColumns& columns) const;
  // Appends trajectories left out of training (infra_failure set, or alone in their group
  // after the rest failed) to the step's dump, without advantages, with "excluded": why
  // when `why` is not ""; all of them, whatever dump_trajectories says (they are rare and
  // what one looks for).
  void dump_excluded(int64_t step, const std::vector<Trajectory>& trajs, const std::string& why) const;
  // val_<step>.jsonl: up to 16 greedy trajectories with their samples; val/* metrics line;
  // a log line.
  void validation(int64_t step, const EvalResult& r, const std::vector<Sample>& samples) const;
  // "step k/N reward ... ETA" on the log (INFO), with an exponential moving average of
  // the step time.
  void progress(int64_t step, int64_t total, const Metrics& m, double step_seconds);

 private:
  const RunDir& run_;
  const text::Tokenizer& tokenizer_;
  int dump_;
  bool progress_;
  std::unique_ptr<TensorBoardWriter> tb_;  // null unless trainer.logger has tensorboard
  double step_time_ema_ = 0;
};

}  // namespace agentr1::train
