// agentr1/train/rl_trainer.h — the RL loop of ARCHITECTURE.md (GRPO, PPO and kin): a
// loop of named phases, each a call into an object with one job.
//
//   TrainConfig cfg = load_train_config(tree);
//   RLTrainer trainer(cfg, tree);          // loads model + tokenizer, datasets, engine
//   RunSummary s = trainer.run(/*resume=*/false);
//
// One step (RLTrainer::run reads like this):
//   batch    = rollout_->collect(step)                    RolloutSource over the PromptSource: sync
//                                                         (the engine shares the policy) or async
//                                                         (rollout.max_staleness > 0: its own engine
//                                                         and weights copy, generating meanwhile)
//   rows     = pack_trajectories(trajectories)            batch.h (append-only steps merged)
//   learner_.score(rows)                                  old / ref log-probs, critic values
//   adv      = advantages_.compute(trajectories, rows)    estimator + KL in the reward
//   learner_.update(rows, step > critic_warmup)           critic, then actor (learner core)
//   rollout_->push_weights(step)                          later rollouts see version `step`
//   logger_.dump_step / validate / checkpointer_.save / logger_.metrics / logger_.progress
//
// Composition (who owns what): the trainer owns the tokenizer, template, policy, engine,
// pools and run directory, and hands references to the phases; the Learner owns the
// actor, the critic and the reference; the Checkpointer borrows the learner's optimiser
// and critic. The members are declared in dependency order (each after what it
// refers to), so destruction runs in the safe order: do not reorder them.
#pragma once


#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/cpu_load.h"
#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/model/transformer.h"
#include "agentr1/train/advantages.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/train/distributed/distributed.h"
#include "agentr1/train/evaluate.h"
#include "agentr1/train/health.h"
#include "agentr1/train/learner/learner.h"
#include "agentr1/train/prompt_source.h"
#include "agentr1/train/rollout/rollout_source.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/step_logger.h"
#include "agentr1/train/train_config.h"

namespace agentr1::text {
class Tokenizer;
class ChatTemplate;
}  // namespace agentr1::text
namespace agentr1::rollout {
class Engine;
}

namespace agentr1::train {

// How run() treats the run directory.
enum class RunMode {
  kFresh,      // a new run; Error if the directory already holds one (RunDir::has_run)
  kResume,     // continue from its latest checkpoint; what was logged after it is cut
  kOverwrite,  // remove the earlier run's files (RunDir::clear_run), then a new run
};

// Thrown by run() when a stop was requested (set_stop_flag): the run saved a checkpoint
// at the step it finished and can be resumed. what() says how.
struct StopRequested : Error {
  StopRequested(const std::string& what, int64_t step) : Error(what), step(step) {}
  int64_t step;
};

struct RunSummary {
  std::string run_dir;
  EvalResult baseline;          // before any RL step (or at resume)
  EvalResult final_eval;        // after the last step
  int64_t steps = 0;            // RL steps done in total
  double wall_s = 0;
};

class RLTrainer {
 public:
  // tree: the resolved config tree (written to config.yaml as given). Throws Error
  // naming the file or key (model, tokenizer, task family, datasets, device).
  RLTrainer(TrainConfig cfg, json tree);
  ~RLTrainer();
  // Runs the loop. kResume: continue from the run dir's latest checkpoint (its step
  // lines, validations and dumps after that step are cut first, so each step appears
  // once; the validation at the checkpoint's step is not repeated). kFresh into a
  // directory that holds a run throws Error naming it, with the HINT --resume /
  // --overwrite. Throws StopRequested when a stop was requested (see set_stop_flag).
  // A failure during start-up (before the baseline validation is logged) leaves no run
  // behind: what this call wrote is removed, and the directory too if this trainer's
  // construction found none. A later failure keeps the logs, records
  // {"failed": {"step", "error"}} in summary.json and rethrows as Error with how to go on.
  RunSummary run(RunMode mode);
  RunSummary run(bool resume) { return run(resume ? RunMode::kResume : RunMode::kFresh); }
  // A flag set asynchronously (e.g. by a SIGINT handler; 0 = keep going). It is read
  // at the end of each step, the next safe point: the step is logged, a checkpoint is
  // written (unless that step just saved one) and StopRequested is thrown. Not owned.
  // A health monitor listed in trainer.health.stop_on stops the run the same way.
  void set_stop_flag(const std::atomic<int>* flag) { stop_flag_ = flag; }
  // For messages: how to resume (the run directory).
  const std::string& run_dir() const { return run_dir_->path(); }
  // The data-parallel process group when this process is one of several ranks
  // (WORLD_SIZE > 1 in the environment; distributed.h), else nullptr.
  ProcessGroup* process_group() { return pg_.get(); }

 private:
  EvalResult validate(int64_t step);
  void save_checkpoint(int64_t step);
  // The body of run(); *started is set once start-up is over, *step to the step under way.
  RunSummary run_steps(RunMode mode, json& summary_json, bool* started, int64_t* step);

  TrainConfig cfg_;
  json tree_;
  at::Device device_;
  // Data parallelism: null in one process. Rank 0 alone writes (writer_).
  std::unique_ptr<ProcessGroup> pg_;
  bool writer_ = true;
  // Model side (owned here, shared by reference with the phases).
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatTemplate> chat_;
  model::Transformer policy_{nullptr};
  std::unique_ptr<rollout::Engine> engine_;
  // trainer.threads=0: the learner's and the engine's thread count follow the cores other
  // processes leave (measured each step); null for a fixed count.
  std::unique_ptr<core::FreeCores> free_cores_;
  int max_threads_ = 1;
  std::unique_ptr<ThreadPool> tool_pool_;
  std::unique_ptr<ThreadPool> drivers_;
  flow::FlowContext ctx_;
  std::vector<Sample> val_set_;
  std::unique_ptr<RunDir> run_dir_;
  bool run_dir_existed_ = false;  // when the trainer was built (else run() created it)
  // The phases.
  std::unique_ptr<PromptSource> prompts_;
  std::unique_ptr<RolloutBackend> backend_;  // the synchronous source's (the asynchronous one owns its own)
  std::unique_ptr<RolloutSource> rollout_;
  std::unique_ptr<Learner> learner_;
  std::unique_ptr<AdvantagePhase> advantages_;
  std::unique_ptr<StepLogger> logger_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<HealthMonitor> health_;
  const std::atomic<int>* stop_flag_ = nullptr;
};

// Prints the before/after table to stderr-like stream text (returned).
std::string format_before_after(const EvalResult& before, const EvalResult& after);

}  // namespace agentr1::train
