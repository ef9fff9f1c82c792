// agentr1/train/learner/critic.h — the value model (PPO critic): a transformer body plus a
// Linear(hidden, 1) value head, its values on packed rows and its clipped-loss update.
//
//   ValueModel vm = make_value_model(opts.model_path, policy, dtype, device);  // "" = copy of policy
//   Critic critic(vm, opts);
//   critic.fill_values(rows);          // rows[i].value: V at the state before each token
//   ...                                // estimator -> rows[i].returns, rows[i].value_mask
//   auto m = critic.update(rows);      // critic/vf_loss, critic/vf_clipfrac, ...
//   critic.save(dir);  critic.load(dir);
//
// Position convention (verl dp_critic: values[:, -response_length-1:-1]): the value of
// a token is read at the position BEFORE it, i.e. from the hidden state of the state
// that produced it. With the [B,T-1] layout of batch.h, column c of value_predictions()
// belongs to row token prefix_len + c + 1 and is the head applied to the hidden state
// of row token prefix_len + c — exactly where target_logprobs() reads the logit. So
// step-level gae's V(s_t) "at the last prompt token" is the value of the step's first
// action token, and token_gae's value of action token k is the value at its column.
//
// Numerics: body in the model's dtype, head and losses in fp32. The value head starts
// at zero (V = 0 everywhere; deterministic, and already on the scale of 0/1 rewards).
// A non-finite loss or gradient skips that optimiser step (critic/skipped_updates);
// max_consecutive_skips in a row throws Error.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

#include "agentr1/algo/value_loss.h"
#include "agentr1/model/transformer.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/learner/metrics.h"
#include "agentr1/train/learner/optimizer.h"
#include "agentr1/train/distributed/distributed.h"
#include "agentr1/train/learner/update.h"

namespace agentr1::train {

struct CriticOptions {
  std::string model_path;           // HF model dir of the critic body (config.json,
                                    // model.safetensors, optionally value_head.safetensors);
                                    // "" = a copy of the policy's initial weights
  OptimOptions optim;               // critic optimiser (own lr; see the constructor)
  model::LoraOptions lora;          // LoRA on the critic's body (rank 0 = train the whole body):
                                    // the body frozen, its adapters and the value head trained.
                                    // Initialised from a LoRA policy, the body shares the
                                    // policy's frozen base tensors: no second copy of the model
  LoopOptions loop;                 // epochs, mini/micro-batches, shared prefix, skips
  double cliprange_value = 0.5;     // clipped value loss: how far vpreds may move from old values
  std::string loss_agg_mode = "token-mean";  // value-loss aggregation (algo::LossAgg names)
  algo::ValueLossOptions loss;      // resolved from cliprange_value and loss_agg_mode
  // lr 1e-3: the head starts at zero and must reach returns of order 1 within a few
  // dozen steps; AdamW moves each weight ~lr per step, so with a hidden size of ~128
  // (the built-in model) the prediction moves ~0.1 per step at 1e-3 but ~1e-4 at the
  // policy's 1e-5. The built-in model's SFT uses 3e-3, so 1e-3 is within what the body
  // tolerates. Lower it for large pretrained critics (verl's default is 1e-5).
  CriticOptions() { optim.lr = 1e-3; }
  // Parses loss_agg_mode into `loss`, then validate(). Throws Error naming the key.
  void resolve();
  void validate() const;
  template <class V>
  void visit(V& v) {
    v.field("model_path", model_path, "critic model directory; empty = initialise from the policy");
    v.section("optim", optim, "critic optimiser (AdamW)");
    v.section("lora", lora, "LoRA adapters on the critic's body (the value head trains whole); rank 0 = the whole body");
    v.field("cliprange_value", cliprange_value, "value clip range around the rollout-time values");
    loop.visit(v);
    v.field("loss_agg_mode", loss_agg_mode,
            "token-mean | seq-mean-token-sum | seq-mean-token-mean | seq-mean-token-sum-norm");
  }
};

class ValueModelImpl : public torch::nn::Module {
 public:
  // body: any transformer (its lm_head is unused); the head is zero-initialised fp32.
  explicit ValueModelImpl(model::Transformer body);
  // ids/positions/segment_ids: [B,T], prefix_ids: [P] (Transformer::hidden_states) ->
  // values [B,T] fp32: the head at every position of ids (prefix positions excluded).
  at::Tensor forward(const at::Tensor& ids, const at::Tensor& positions = {},
                     const at::Tensor& segment_ids = {}, const at::Tensor& prefix_ids = {});
  model::Transformer& body() { return body_; }
  torch::nn::Linear& head() { return head_; }

 private:
  model::Transformer body_{nullptr};
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(ValueModel);

// model_path "": a new body with the policy's config, dtype, device and current weights
// (copied, not shared). Otherwise the HF model at model_path in `dtype` on `device`,
// plus its value_head.safetensors when present (a saved critic). Throws Error naming
// the path. With lora enabled the body gets adapters (its base frozen); when it is
// initialised from a policy that has adapters itself (so a frozen base), the body's base
// parameters are the policy's tensors, shared, not copied.
ValueModel make_value_model(const std::string& model_path, model::Transformer& policy,
                            at::ScalarType dtype, at::Device device, const model::LoraOptions& lora = {});

// Values of `batch` in the [B,T-1] target layout (see the header comment), fp32. Grad
// flows unless under NoGradGuard.
at::Tensor value_predictions(ValueModel& model, const TrainBatch& batch);

class Critic {
 public:
  // The learner's tensors go to the body's device (the head is moved there).
  Critic(ValueModel model, CriticOptions opts);
  ~Critic();

  ValueModel& model() { return model_; }
  const CriticOptions& options() const { return opts_; }
  Optimizer& optimizer() { return *optim_; }
  // Data parallelism (distributed.h): updates forward this rank's share and the
  // optimiser sums the gradients over the ranks. nullptr (default) = one process.
  void set_process_group(ProcessGroup* pg);

  // Fills rows[i].value for every token (0 at position 0), no grad.
  void fill_values(std::vector<PackedRow>& rows);

  // One critic step over `rows` (value, returns and value_mask filled). Rows of one
  // trajectory stay in one mini-batch. Returns averaged critic/vf_loss,
  // critic/vf_clipfrac, critic/vpred_mean, critic/loss, critic/grad_norm, critic/lr,
  // and critic/updates, critic/skipped_updates. Throws Error after max_consecutive_skips.
  Metrics update(const std::vector<PackedRow>& rows);

  // The clipped value loss of one micro-batch (what update() minimises). For tests.
  at::Tensor micro_batch_loss(const TrainBatch& b, const MicroBatchScale& s, Metrics& m);

  // dir/: config.json + model.safetensors (body, fp32), value_head.safetensors,
  // optimizer.pt. With LoRA the body is a PEFT adapter instead (adapter_config.json +
  // adapter_model.safetensors over `base_model`, set_base_model). load() restores them
  // in place; throws Error naming the file.
  void save(const std::string& dir);
  void load(const std::string& dir);
  // The base model directory a LoRA critic's adapter names (adapter_config.json's
  // base_model_name_or_path): the trainer sets critic.model_path, or the policy's.
  void set_base_model(std::string dir) { base_model_ = std::move(dir); }

 private:
  ValueModel model_;
  CriticOptions opts_;
  at::Device device_;
  std::unique_ptr<Optimizer> optim_;
  ProcessGroup* pg_ = nullptr;
  std::unique_ptr<GradientAllReduce> reducer_;
  std::string base_model_;
};

}  // namespace agentr1::train
