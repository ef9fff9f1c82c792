#include "agentr1/train/learner/critic.h"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "agentr1/algo/loss_agg.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/model/safetensors.h"
#include "agentr1/train/device.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/learner/scoring.h"

namespace agentr1::train {

namespace fs = std::filesystem;

namespace {
constexpr const char* kHeadFile = "value_head.safetensors";
}  // namespace

void CriticOptions::resolve() {
  loss.cliprange_value = cliprange_value;
  loss.agg = with_context("critic.loss_agg_mode", [&] { return algo::loss_agg_from_string(loss_agg_mode); });
  validate();
}

void CriticOptions::validate() const {
  optim.validate("critic.optim");
  lora.validate("critic.lora");
  AGENTR1_CHECK(cliprange_value > 0 && std::isfinite(cliprange_value),
                "critic.cliprange_value must be finite and > 0, got " << cliprange_value);
  loop.validate("critic");
}

ValueModelImpl::ValueModelImpl(model::Transformer body) : body_(std::move(body)) {
  register_module("model", body_);
  head_ = register_module("score", torch::nn::Linear(body_->config().hidden_size, 1));
  torch::NoGradGuard no_grad;
  head_->weight.zero_();
  head_->bias.zero_();
}

at::Tensor ValueModelImpl::forward(const at::Tensor& ids, const at::Tensor& positions,
                                   const at::Tensor& segment_ids, const at::Tensor& prefix_ids) {
  at::Tensor h = body_->hidden_states(ids, positions, segment_ids, prefix_ids);  // [B,T,H]
  return head_->forward(h.to(at::kFloat)).squeeze(-1);                            // [B,T]
}

namespace {

void copy_params(torch::nn::Module& dst, torch::nn::Module& src, const std::string& what) {
  torch::NoGradGuard no_grad;
  auto d = dst.named_parameters();
  // A LoRA policy's adapters are not the critic's (it starts from the base; a new
  // adapter changes nothing anyway).
  std::vector<std::pair<std::string, at::Tensor>> s;
  for (const auto& kv : src.named_parameters())
    if (kv.key().find(".lora_") == std::string::npos) s.emplace_back(kv.key(), kv.value());
  AGENTR1_CHECK(d.size() == s.size(), what << ": parameter count " << s.size() << " != " << d.size());
  for (const auto& kv : s) {
    at::Tensor* t = d.find(kv.first);
    AGENTR1_CHECK(t != nullptr, what << ": unexpected parameter '" << kv.first << "'");
    AGENTR1_CHECK(t->sizes() == kv.second.sizes(), what << ": parameter '" << kv.first << "' has shape "
                                                       << kv.second.sizes() << ", expected " << t->sizes());
    t->copy_(kv.second);
  }
}

void load_head(torch::nn::Linear& head, const std::string& path) {
  torch::NoGradGuard no_grad;
  bool w = false, b = false;
  for (const auto& [name, t] : model::read_safetensors(path)) {
    at::Tensor* dst = name == "score.weight" ? &head->weight : name == "score.bias" ? &head->bias : nullptr;
    AGENTR1_CHECK(dst != nullptr, path << ": unexpected tensor '" << name << "' (expected score.weight, score.bias)");
    AGENTR1_CHECK(t.sizes() == dst->sizes(), path << ": tensor '" << name << "' has shape " << t.sizes()
                                                  << ", the critic expects " << dst->sizes());
    dst->copy_(t);
    (name == "score.weight" ? w : b) = true;
  }
  AGENTR1_CHECK(w && b, path << ": missing " << (w ? "score.bias" : "score.weight"));
}

}  // namespace

ValueModel make_value_model(const std::string& model_path, model::Transformer& policy, at::ScalarType dtype,
                            at::Device device, const model::LoraOptions& lora) {
  if (model_path.empty()) {
    model::Transformer body(policy->config());
    body->to(device, dtype);
    if (lora.enabled() && policy->lora() != nullptr) {
      // Both frozen: the critic's base is the policy's, the same tensors.
      torch::NoGradGuard no_grad;
      auto mine = body->named_parameters();
      for (const auto& kv : policy->named_parameters()) {
        if (kv.key().find(".lora_") != std::string::npos) continue;  // the policy's adapters
        at::Tensor* t = mine.find(kv.key());
        AGENTR1_CHECK(t != nullptr, "initialising the critic from the policy: no parameter '" << kv.key() << "'");
        if (kv.value().requires_grad()) {
          t->copy_(kv.value().detach());  // a module the policy trains whole (modules_to_save): a copy
        } else {
          t->set_data(kv.value());
        }
      }
    } else {
      copy_params(*body, *policy, "initialising the critic from the policy");
    }
    if (lora.enabled()) body->add_lora(lora, /*seed=*/1);
    return ValueModel(body);
  }
  return with_context("loading the critic from '" + model_path + "' (critic.model_path)", [&] {
    model::Transformer body = model::load_pretrained(model_path, dtype, device);
    if (lora.enabled()) body->add_lora(lora, /*seed=*/1);
    ValueModel vm(body);
    vm->head()->to(device);
    const std::string head = (fs::path(model_path) / kHeadFile).string();
    if (fs::exists(head)) load_head(vm->head(), head);
    return vm;
  });
}

at::Tensor value_predictions(ValueModel& model, const TrainBatch& batch) {
  // values: [B,T]; position t's value belongs to the token at t+1 -> keep 0..T-2.
  if (!batch.tree_ids.defined())
    return model->forward(batch.input_ids, batch.positions, batch.segment_ids, batch.prefix_ids)
        .slice(/*dim=*/1, 0, -1);
  const at::Tensor h = batch_hidden_states(*model->body(), batch);  // [B,T,H]
  return model->head()->forward(h.to(at::kFloat)).squeeze(-1).slice(/*dim=*/1, 0, -1);
}

Critic::Critic(ValueModel model, CriticOptions opts)
    : model_(std::move(model)), opts_(std::move(opts)), device_(module_device(*model_->body())) {
  opts_.resolve();
  model_->head()->to(device_);  // the body's device; a new head is created on the host
  AGENTR1_CHECK(opts_.lora.enabled() == (model_->body()->lora() != nullptr),
                "Critic: critic.lora.rank is " << opts_.lora.rank << " but the value model's body "
                                               << (model_->body()->lora() ? "has" : "has no")
                                               << " LoRA adapters (make_value_model adds them)");
  // Under LoRA the frozen body has no gradients and no moments: adapters and head only.
  std::vector<at::Tensor> trained;
  for (const auto& p : model_->parameters())
    if (p.requires_grad()) trained.push_back(p);
  optim_ = std::make_unique<Optimizer>(trained, opts_.optim, "critic", opts_.loop.max_consecutive_skips);
}

Critic::~Critic() = default;

void Critic::fill_values(std::vector<PackedRow>& rows) {
  const bool was_training = model_->is_training();
  model_->eval();
  try {
    score_rows(rows, &PackedRow::value, opts_.loop.scoring(device_),
               [this](const TrainBatch& b) { return value_predictions(model_, b); });
  } catch (...) {
    model_->train(was_training);
    throw;
  }
  model_->train(was_training);
}

at::Tensor Critic::micro_batch_loss(const TrainBatch& b, const MicroBatchScale& s, Metrics& m) {
  AGENTR1_CHECK(b.values.defined() && b.returns.defined() && b.value_mask.defined(),
                "Critic::update: rows lack old values, returns or the value mask");
  algo::ValueLossOptions lo = opts_.loss;
  lo.norm_len = s.norm_len;
  const at::Tensor vpreds = value_predictions(model_, b);
  algo::ValueLossOut vl = algo::value_loss(vpreds, b.returns, b.values, b.value_mask, lo);
  for (const auto& kv : vl.metrics) m[kv.first] += kv.second;
  return vl.loss;
}

Metrics Critic::update(const std::vector<PackedRow>& rows) {
  model_->train();
  LossSpec spec;
  spec.agg = opts_.loss.agg;
  spec.norm_len = opts_.loss.norm_len;
  spec.units = [](const PackedRow& r) {
    double n = 0;
    for (float x : r.value_mask) n += x;
    return n;
  };
  UpdateLoopOptions loop = opts_.loop.update_loop(device_);
  loop.process_group = pg_;
  const double reduce_s = reducer_ ? reducer_->seconds() : 0.0;
  Metrics m = run_update(rows, loop, spec, *optim_, [this](const TrainBatch& b, const MicroBatchScale& s, Metrics& m) {
    return micro_batch_loss(b, s, m);
  });
  if (reducer_) m["timing/allreduce_critic"] = reducer_->seconds() - reduce_s;
  return m;
}

void Critic::set_process_group(ProcessGroup* pg) {
  pg_ = pg;
  reducer_ = pg != nullptr ? std::make_unique<GradientAllReduce>(*pg, "critic gradients") : nullptr;
  optim_->set_gradient_reducer(reducer_.get());
}

void Critic::save(const std::string& dir) {
  make_dirs(dir);
  if (model_->body()->lora() != nullptr)
    model::save_lora_adapter(model_->body(), dir, base_model_);
  else
    model::save_pretrained(model_->body(), dir, at::kFloat);
  model::write_safetensors((fs::path(dir) / kHeadFile).string(),
                           // safetensors are written from host memory
                           {{"score.weight", model_->head()->weight.detach().to(at::Device(at::kCPU), at::kFloat)},
                            {"score.bias", model_->head()->bias.detach().to(at::Device(at::kCPU), at::kFloat)}});
  optim_->save(dir + "/optimizer.pt");
}

void Critic::load(const std::string& dir) {
  with_context("loading the critic from '" + dir + "'", [&] {
    if (model_->body()->lora() != nullptr) {
      AGENTR1_CHECK(fs::exists(dir + "/adapter_config.json"),
                    "the critic has LoRA adapters (critic.lora.rank " << opts_.lora.rank
                        << ") but " << dir << " holds no adapter_config.json (saved by a critic without LoRA?)");
      model::load_lora_adapter(model_->body(), dir);
    } else {
      AGENTR1_CHECK(!fs::exists(dir + "/adapter_config.json"),
                    dir << " holds a LoRA adapter (saved by a critic with critic.lora.rank > 0) but this critic has "
                           "none; HINT: resume with the same critic.lora settings");
      // Staged in host memory (see load_checkpoint), then copied onto the critic's device.
      model::Transformer loaded = model::load_pretrained(dir, at::kFloat, at::Device(at::kCPU));
      copy_params(*model_->body(), *loaded, dir + "/model.safetensors");
    }
    load_head(model_->head(), (fs::path(dir) / kHeadFile).string());
    if (fs::exists(dir + "/optimizer.pt")) optim_->load(dir + "/optimizer.pt");
  });
}

}  // namespace agentr1::train
