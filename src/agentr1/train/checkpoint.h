// agentr1/train/checkpoint.h — checkpoints in the HF layout plus trainer state.
//
//   save_checkpoint(run + "/checkpoints/step_000010", 10, policy, actor.optimizer(), model_dir);
//   auto dir = latest_checkpoint(run + "/checkpoints");     // highest step_N
//   int64_t step = load_checkpoint(*dir, policy, actor.optimizer());   // weights + optimiser
//   save_checkpoint(dir, 10, policy, actor.optimizer(), model_dir, &critic, {{"kl_coef", 0.01}});
//
// A checkpoint directory is a loadable HF model (config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json copied from the source model) plus
// trainer_state.json {step, optimizer_steps, critic_optimizer_steps?, ...extra} and
// optimizer.pt (AdamW moments); with a critic, critic/ holds Critic::save's files.
// Under LoRA the model files are the adapter in PEFT's format instead
// (adapter_config.json with base_model_name_or_path = the model directory,
// adapter_model.safetensors): load it with PEFT or `agentr1 serve --lora`, or write a
// plain model with `agentr1 merge-lora`; optimizer.pt then holds the adapters' moments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "agentr1/core/json.h"
#include "agentr1/model/transformer.h"
#include "agentr1/train/learner/critic.h"
#include "agentr1/train/learner/optimizer.h"
#include "agentr1/train/run_dir.h"

namespace agentr1::train {

// Writes into dir.tmp, fsyncs every file, then renames, so a crash never leaves a half
// checkpoint under dir (a stale dir.tmp is ignored and replaced by the next save).
// critic: saved into dir/critic when given. extra_state: more keys for
// trainer_state.json (e.g. the KL controller's coefficient).
void save_checkpoint(const std::string& dir, int64_t step, model::Transformer& policy, Optimizer& policy_optim,
                     const std::string& tokenizer_dir, Critic* critic = nullptr,
                     const json& extra_state = json::object());
// The checkpoint a resume loads: the one named by checkpoints_dir/latest (written last by
// Checkpointer::save) when it is complete and no complete later step exists; otherwise
// the complete step_N directory (model.safetensors and a trainer_state.json that parses)
// with the highest N. std::nullopt when there is none.
std::optional<std::string> latest_checkpoint(const std::string& checkpoints_dir);
// Loads weights into `policy` (in place, same shapes, on the policy's device) and the
// optimiser state; returns
// the step. With a critic, restores it from dir/critic (Error with a HINT if the
// checkpoint has none). state (optional) receives trainer_state.json. Throws Error
// naming the file on any mismatch.
int64_t load_checkpoint(const std::string& dir, model::Transformer& policy, Optimizer& policy_optim,
                        Critic* critic = nullptr, json* state = nullptr);
// The trainer's checkpoint phase: what a resume needs, in one place.
//   Checkpointer ck(run.file("checkpoints"), model_dir, policy, actor.optimizer(), critic);
//   ck.save(step, {{"kl_coef", adv.kl_coef()}});            // checkpoints/step_NNNNNN/
//   if (auto r = ck.restore_latest()) { step = r->step; ... r->state["kl_coef"] ... }
class Checkpointer {
 public:
  // policy is a shared module handle; the optimiser and the critic (may be null) are
  // borrowed and must outlive the Checkpointer.
  Checkpointer(std::string checkpoints_dir, std::string tokenizer_dir, model::Transformer policy,
               Optimizer& policy_optim, Critic* critic);
  // checkpoints/step_NNNNNN/ (save_checkpoint), then the `latest` pointer, atomically.
  void save(int64_t step, const json& extra_state = json::object());
  struct Restored {
    std::string dir;    // the checkpoint directory loaded
    int64_t step = 0;   // its RL step
    json state;  // trainer_state.json
  };
  // Loads the latest checkpoint into the policy, its optimiser and the critic;
  // std::nullopt if there is none. Throws Error naming the file on a bad checkpoint.
  std::optional<Restored> restore_latest();
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string tokenizer_dir_;
  model::Transformer policy_;
  Optimizer& optim_;
  Critic* critic_;
};

// Copies tokenizer.json / tokenizer_config.json (those present) from src to dst.
void copy_tokenizer_files(const std::string& src_dir, const std::string& dst_dir);

}  // namespace agentr1::train
