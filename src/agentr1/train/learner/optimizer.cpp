#include "agentr1/train/learner/optimizer.h"

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include <cmath>
#include <limits>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

namespace agentr1::train {

void OptimOptions::validate(const std::string& prefix) const {
  AGENTR1_CHECK(lr > 0 && std::isfinite(lr), prefix << ".lr must be a positive number, got " << lr);
  AGENTR1_CHECK(weight_decay >= 0, prefix << ".weight_decay must be >= 0, got " << weight_decay);
  AGENTR1_CHECK(beta1 >= 0 && beta1 < 1, prefix << ".beta1 must be in [0, 1), got " << beta1);
  AGENTR1_CHECK(beta2 >= 0 && beta2 < 1, prefix << ".beta2 must be in [0, 1), got " << beta2);
  AGENTR1_CHECK(eps > 0, prefix << ".eps must be > 0, got " << eps);
  AGENTR1_CHECK(warmup_steps >= 0, prefix << ".warmup_steps must be >= 0, got " << warmup_steps);
}

Optimizer::Optimizer(std::vector<at::Tensor> params, OptimOptions opts, std::string name,
                     int max_consecutive_skips, std::string hint)
    : params_(std::move(params)), opts_(opts), name_(std::move(name)),
      max_consecutive_skips_(max_consecutive_skips), hint_(std::move(hint)) {
  if (hint_.empty()) hint_ = "lower " + name_ + ".optim.lr or set " + name_ + ".optim.grad_clip (e.g. 1.0)";
  opts_.validate(name_ + ".optim");
  AGENTR1_CHECK(max_consecutive_skips_ >= 1,
                name_ << ".max_consecutive_skips must be >= 1, got " << max_consecutive_skips_);
  torch::optim::AdamWOptions o(opts_.lr);
  o.betas({opts_.beta1, opts_.beta2}).eps(opts_.eps).weight_decay(opts_.weight_decay);
  adam_ = std::make_unique<torch::optim::AdamW>(params_, o);
}

Optimizer::~Optimizer() = default;

void Optimizer::zero_grad() { adam_->zero_grad(); }

double Optimizer::current_lr() const {
  const int w = opts_.warmup_steps;
  if (w > 0 && steps_ < w) return opts_.lr * static_cast<double>(steps_ + 1) / (w + 1);
  return opts_.lr;
}

void Optimizer::count_skip(const std::string& why) {
  adam_->zero_grad();
  skipped_total_++;
  consecutive_skips_++;
  AGENTR1_LOG(WARN) << name_ << ": " << why << ": optimiser step skipped (" << consecutive_skips_ << " in a row)";
  AGENTR1_CHECK(consecutive_skips_ < max_consecutive_skips_,
                consecutive_skips_ << " consecutive " << name_ << " updates had a non-finite loss or gradient (last: "
                << why << "); stopping. HINT: " << hint_);
}

void Optimizer::skip(const std::string& why) { count_skip(why); }

void Optimizer::poison_gradients() {
  for (auto& p : params_)
    if (p.requires_grad()) p.mutable_grad() = at::full_like(p, std::numeric_limits<float>::quiet_NaN());
}

bool Optimizer::step(std::map<std::string, double>& m) {
  if (reducer_ != nullptr) reducer_->reduce(params_);
  double norm = 0;
  if (opts_.grad_clip > 0) {
    norm = torch::nn::utils::clip_grad_norm_(params_, opts_.grad_clip);
  } else {
    at::Tensor ss;
    for (const auto& p : params_) {
      if (!p.grad().defined()) continue;
      at::Tensor s = p.grad().to(at::kDouble).pow(2).sum();
      ss = ss.defined() ? ss + s : s;
    }
    norm = ss.defined() ? std::sqrt(ss.item<double>()) : 0.0;
  }
  if (!std::isfinite(norm)) {
    count_skip("non-finite gradient norm (" + std::to_string(norm) + ")");
    return false;
  }
  const double lr = current_lr();
  for (auto& group : adam_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  adam_->step();
  adam_->zero_grad();
  steps_++;
  consecutive_skips_ = 0;
  m[name_ + "/grad_norm"] += norm;
  m[name_ + "/lr"] = lr;
  return true;
}

void Optimizer::save(const std::string& path) { torch::save(*adam_, path); }

void Optimizer::load(const std::string& path) {
  try {
    // Moments go where the parameters are (a checkpoint may come from another device).
    if (params_.empty()) torch::load(*adam_, path);
    else torch::load(*adam_, path, params_.front().device());
  } catch (const c10::Error& e) {
    throw Error("loading optimiser state '" + path + "': " + e.what_without_backtrace());
  }
}

}  // namespace agentr1::train
