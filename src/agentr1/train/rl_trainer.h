// agentr1/train/rl_trainer.h — the RL loop of ARCHITECTURE.md (GRPO and kin).
//
//   TrainConfig cfg = load_train_config(tree);
//   RLTrainer trainer(cfg, tree);          // loads model + tokenizer, datasets, engine
//   RunSummary s = trainer.run(/*resume=*/false);
//
// Per step: prompts -> rollout.n trajectories each (AgentFlow, continuous batching) ->
// outcome rewards -> packed rows -> old (and reference) log-probs, critic values (gae,
// token_gae) -> KL in the reward (algorithm.use_kl_in_reward: token_kl = kl_penalty(old,
// ref), coefficient from algorithm.kl_ctrl, updated with the batch's KL) -> advantages
// and returns -> critic update (clipped value loss) -> PPO-style actor update (skipped
// during the first trainer.critic_warmup steps) -> the engine uses the new weights (same
// module; prefix cache cleared) -> metrics, trajectory dumps (per step: advantages,
// returns, values; token_kl and the KL-penalised reward with KL in the reward),
// validation every trainer.test_freq, checkpoints (policy, critic, KL coefficient).
//
// The engine and the learner share one model: no weight copy, and rollouts after an
// update always see the updated weights (policy_version = step).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/train/evaluate.h"
#include "agentr1/train/train_config.h"

namespace agentr1::train {

struct RunSummary {
  std::string run_dir;
  EvalResult baseline;          // before any RL step (or at resume)
  EvalResult final_eval;        // after the last step
  int64_t steps = 0;            // RL steps done in total
  double wall_s = 0;
};

class RLTrainer {
 public:
  // tree: the resolved config tree (written to config.yaml as given).
  RLTrainer(TrainConfig cfg, json tree);
  ~RLTrainer();
  // Runs the loop. resume: continue from the last checkpoint in the run dir.
  RunSummary run(bool resume);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Prints the before/after table to stderr-like stream text (returned).
std::string format_before_after(const EvalResult& before, const EvalResult& after);

}  // namespace agentr1::train
