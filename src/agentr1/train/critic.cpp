#include "agentr1/train/critic.h"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "agentr1/algo/loss_agg.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/model/safetensors.h"
#include "agentr1/train/run_dir.h"

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
  AGENTR1_CHECK(cliprange_value > 0 && std::isfinite(cliprange_value),
                "critic.cliprange_value must be finite and > 0, got " << cliprange_value);
  AGENTR1_CHECK(ppo_epochs >= 1, "critic.ppo_epochs must be >= 1, got " << ppo_epochs);
  AGENTR1_CHECK(ppo_mini_batch_size >= 0,
                "critic.ppo_mini_batch_size must be >= 0 (0 = whole batch), got " << ppo_mini_batch_size);
  AGENTR1_CHECK(micro_batch_size >= 1, "critic.micro_batch_size must be >= 1, got " << micro_batch_size);
  AGENTR1_CHECK(micro_batch_max_tokens >= 0,
                "critic.micro_batch_max_tokens must be >= 0 (0 = none), got " << micro_batch_max_tokens);
  AGENTR1_CHECK(min_shared_prefix >= 0, "critic.min_shared_prefix must be >= 0 (0 = off), got " << min_shared_prefix);
  AGENTR1_CHECK(max_consecutive_skips >= 1,
                "critic.max_consecutive_skips must be >= 1, got " << max_consecutive_skips);
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
  auto s = src.named_parameters();
  AGENTR1_CHECK(d.size() == s.size(), what << ": parameter count " << s.size() << " != " << d.size());
  for (const auto& kv : s) {
    at::Tensor* t = d.find(kv.key());
    AGENTR1_CHECK(t != nullptr, what << ": unexpected parameter '" << kv.key() << "'");
    AGENTR1_CHECK(t->sizes() == kv.value().sizes(), what << ": parameter '" << kv.key() << "' has shape "
                                                        << kv.value().sizes() << ", expected " << t->sizes());
    t->copy_(kv.value());
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

ValueModel make_value_model(const std::string& model_path, model::Transformer& policy, at::ScalarType dtype) {
  if (model_path.empty()) {
    model::Transformer body(policy->config());
    body->to(dtype);
    copy_params(*body, *policy, "initialising the critic from the policy");
    return ValueModel(body);
  }
  return with_context("loading the critic from '" + model_path + "' (critic.model_path)", [&] {
    model::Transformer body = model::load_pretrained(model_path, dtype, at::kCPU);
    ValueModel vm(body);
    const std::string head = (fs::path(model_path) / kHeadFile).string();
    if (fs::exists(head)) load_head(vm->head(), head);
    return vm;
  });
}

at::Tensor value_predictions(ValueModel& model, const TrainBatch& batch) {
  // values: [B,T]; position t's value belongs to the token at t+1 -> keep 0..T-2.
  return model->forward(batch.input_ids, batch.positions, batch.segment_ids, batch.prefix_ids)
      .slice(/*dim=*/1, 0, -1);
}

Critic::Critic(ValueModel model, CriticOptions opts) : model_(std::move(model)), opts_(std::move(opts)) {
  opts_.resolve();
  torch::optim::AdamWOptions o(opts_.optim.lr);
  o.betas({opts_.optim.beta1, opts_.optim.beta2}).eps(opts_.optim.eps).weight_decay(opts_.optim.weight_decay);
  optim_ = std::make_unique<torch::optim::AdamW>(model_->parameters(), o);
}

Critic::~Critic() = default;

double Critic::current_lr() const {
  const int w = opts_.optim.warmup_steps;
  if (w > 0 && steps_ < w) return opts_.optim.lr * static_cast<double>(steps_ + 1) / (w + 1);
  return opts_.optim.lr;
}

void Critic::fill_values(std::vector<PackedRow>& rows) {
  torch::NoGradGuard no_grad;
  const bool was_training = model_->is_training();
  model_->eval();
  for (const auto& mb : make_micro_batches(rows, opts_.micro_batch_size, opts_.micro_batch_max_tokens)) {
    TrainBatch b = collate(rows, mb, opts_.min_shared_prefix);
    at::Tensor v = value_predictions(model_, b).contiguous();
    auto acc = v.accessor<float, 2>();
    const size_t p = static_cast<size_t>(b.prefix_len);
    for (size_t i = 0; i < mb.size(); ++i) {
      PackedRow& row = rows[mb[i]];
      row.value.assign(row.tokens.size(), 0.0f);  // tokens 1..p (inside the prefix) stay 0
      for (size_t t = p + 1; t < row.tokens.size(); ++t) row.value[t] = acc[i][static_cast<int64_t>(t - p - 1)];
    }
  }
  model_->train(was_training);
}

bool Critic::optimizer_step(std::map<std::string, double>& m) {
  std::vector<at::Tensor> params = model_->parameters();
  double norm = 0;
  if (opts_.optim.grad_clip > 0) {
    norm = torch::nn::utils::clip_grad_norm_(params, opts_.optim.grad_clip);
  } else {
    double ss = 0;
    for (auto& p : params)
      if (p.grad().defined()) ss += p.grad().pow(2).sum().item<double>();
    norm = std::sqrt(ss);
  }
  if (!std::isfinite(norm)) {
    optim_->zero_grad();
    skipped_total_++;
    consecutive_skips_++;
    AGENTR1_LOG(WARN) << "critic: non-finite gradient norm (" << norm << "): optimiser step skipped ("
                      << consecutive_skips_ << " in a row)";
    AGENTR1_CHECK(consecutive_skips_ < opts_.max_consecutive_skips,
                  consecutive_skips_ << " consecutive critic updates had a non-finite loss or gradient; "
                  "stopping. HINT: lower critic.optim.lr or enable critic.optim.grad_clip");
    return false;
  }
  m["critic/grad_norm"] += norm;
  const double lr = current_lr();
  for (auto& group : optim_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  optim_->step();
  optim_->zero_grad();
  steps_++;
  consecutive_skips_ = 0;
  m["critic/lr"] = lr;
  return true;
}

std::map<std::string, double> Critic::update(const std::vector<PackedRow>& rows) {
  model_->train();
  std::map<std::string, double> sum;
  int64_t n_updates = 0;
  auto value_tokens = [](const PackedRow& r) {
    double n = 0;
    for (float m : r.value_mask) n += m;
    return n;
  };
  const bool by_token = opts_.loss.agg == algo::LossAgg::kTokenMean;
  const auto minis = trajectory_mini_batches(rows, opts_.ppo_mini_batch_size);
  for (int epoch = 0; epoch < opts_.ppo_epochs; ++epoch) {
    for (const auto& mini : minis) {
      double mini_tokens = 0;
      int64_t mini_rows = 0;
      for (const auto& r : mini) {
        const double n = value_tokens(r);
        mini_tokens += n;
        mini_rows += n > 0;
      }
      if (mini_tokens == 0) continue;
      optim_->zero_grad();
      std::map<std::string, double> step_m;
      bool finite = true;
      for (const auto& mb : make_micro_batches(mini, opts_.micro_batch_size, opts_.micro_batch_max_tokens)) {
        TrainBatch b = collate(mini, mb, opts_.min_shared_prefix);
        AGENTR1_CHECK(b.values.defined() && b.returns.defined() && b.value_mask.defined(),
                      "Critic::update: rows lack old values, returns or the value mask");
        const double mb_tokens = b.value_mask.sum().item<double>();
        if (mb_tokens == 0) continue;
        int64_t mb_rows = 0;
        for (int64_t r : mb) mb_rows += value_tokens(mini[r]) > 0;
        // Weight so that the sum over micro-batches equals the mini-batch aggregate.
        const double w = by_token ? mb_tokens / mini_tokens
                                  : static_cast<double>(mb_rows) / static_cast<double>(mini_rows);
        at::Tensor vpreds = value_predictions(model_, b);
        algo::ValueLossOut vl = algo::value_loss(vpreds, b.returns, b.values, b.value_mask, opts_.loss);
        if (!std::isfinite(vl.loss.item<double>())) {
          finite = false;
          break;
        }
        for (const auto& kv : vl.metrics) step_m[kv.first] += kv.second * w;
        (vl.loss * w).backward();
      }
      if (!finite) {
        optim_->zero_grad();
        skipped_total_++;
        consecutive_skips_++;
        AGENTR1_LOG(WARN) << "critic: non-finite value loss: optimiser step skipped (" << consecutive_skips_
                          << " in a row)";
        AGENTR1_CHECK(consecutive_skips_ < opts_.max_consecutive_skips,
                      consecutive_skips_ << " consecutive critic updates had a non-finite loss; stopping. "
                      "HINT: lower critic.optim.lr");
        continue;
      }
      if (optimizer_step(step_m)) {
        for (const auto& kv : step_m) sum[kv.first] += kv.second;
        n_updates++;
      }
    }
  }
  std::map<std::string, double> out;
  for (const auto& kv : sum) out[kv.first] = n_updates > 0 ? kv.second / n_updates : 0.0;
  out["critic/updates"] = static_cast<double>(n_updates);
  out["critic/skipped_updates"] = static_cast<double>(skipped_total_);
  return out;
}

void Critic::save(const std::string& dir) {
  make_dirs(dir);
  model::save_pretrained(model_->body(), dir, at::kFloat);
  model::write_safetensors((fs::path(dir) / kHeadFile).string(),
                           {{"score.weight", model_->head()->weight.detach().to(at::kFloat)},
                            {"score.bias", model_->head()->bias.detach().to(at::kFloat)}});
  torch::save(*optim_, dir + "/optimizer.pt");
}

void Critic::load(const std::string& dir) {
  with_context("loading the critic from '" + dir + "'", [&] {
    model::Transformer loaded = model::load_pretrained(dir, at::kFloat, at::kCPU);
    copy_params(*model_->body(), *loaded, dir + "/model.safetensors");
    load_head(model_->head(), (fs::path(dir) / kHeadFile).string());
    if (fs::exists(dir + "/optimizer.pt")) torch::load(*optim_, dir + "/optimizer.pt");
  });
}

}  // namespace agentr1::train
