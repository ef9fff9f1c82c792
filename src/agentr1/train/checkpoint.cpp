#include "agentr1/train/checkpoint.h"

#include <torch/torch.h>

#include <filesystem>
#include <regex>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/train/run_dir.h"

namespace agentr1::train {

namespace fs = std::filesystem;

void copy_tokenizer_files(const std::string& src_dir, const std::string& dst_dir) {
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    const fs::path src = fs::path(src_dir) / f;
    if (!fs::exists(src)) continue;
    std::error_code ec;
    fs::copy_file(src, fs::path(dst_dir) / f, fs::copy_options::overwrite_existing, ec);
    AGENTR1_CHECK(!ec, "copying " << src << " to " << dst_dir << ": " << ec.message());
  }
}

void save_checkpoint(const std::string& dir, int64_t step, model::Transformer& policy, Optimizer& policy_optim,
                     const std::string& tokenizer_dir, Critic* critic, const json& extra_state) {
  const std::string tmp = dir + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  make_dirs(tmp);
  // LoRA: the adapter in PEFT's format (the base is tokenizer_dir's model, unchanged);
  // else the whole policy.
  if (policy->lora() != nullptr)
    model::save_lora_adapter(policy, tmp, fs::absolute(tokenizer_dir).lexically_normal().string());
  else
    model::save_pretrained(policy, tmp, at::kFloat);
  copy_tokenizer_files(tokenizer_dir, tmp);
  policy_optim.save(tmp + "/optimizer.pt");
  json st = extra_state.is_object() ? extra_state : json::object();
  st["step"] = step;
  st["optimizer_steps"] = policy_optim.steps();
  if (critic != nullptr) {
    critic->save(tmp + "/critic");
    st["critic_optimizer_steps"] = critic->optimizer().steps();
  }
  RunDir(tmp).write_json("trainer_state.json", st);
  // Durable before it becomes visible: every file, then the directory, then the rename.
  for (const auto& e : fs::recursive_directory_iterator(tmp))
    if (e.is_regular_file()) fsync_path(e.path().string());
  fsync_path(tmp);
  fs::remove_all(dir, ec);
  fs::rename(tmp, dir, ec);
  AGENTR1_CHECK(!ec, "cannot move checkpoint into place at '" << dir << "': " << ec.message());
  fsync_path(fs::path(dir).parent_path().string());
}

namespace {

// A complete checkpoint directory: trainer_state.json parses and names its step.
bool complete_checkpoint(const fs::path& dir) {
  const fs::path st = dir / "trainer_state.json";
  if (!fs::is_regular_file(st) ||
      !(fs::is_regular_file(dir / "model.safetensors") || fs::is_regular_file(dir / "adapter_model.safetensors")))
    return false;
  const json j = json::parse(read_text_file(st.string()), nullptr, false);
  return !j.is_discarded() && j.is_object() && j.contains("step") && j["step"].is_number_integer();
}

}  // namespace

std::optional<std::string> latest_checkpoint(const std::string& checkpoints_dir) {
  if (!fs::is_directory(checkpoints_dir)) return std::nullopt;
  // The pointer, written last by Checkpointer::save; a missing or stale one (a crash
  // between the rename and the pointer, a deleted directory) falls back to the scan.
  const fs::path pointer = fs::path(checkpoints_dir) / "latest";
  if (fs::is_regular_file(pointer)) {
    std::string name = read_text_file(pointer.string());
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    const fs::path named = fs::path(checkpoints_dir) / name;
    if (!name.empty() && name.find('/') == std::string::npos && complete_checkpoint(named)) {
      // Only if no complete checkpoint of a later step exists (the pointer lags by at
      // most one save).
      bool later = false;
      static const std::regex step_re("step_([0-9]+)");
      std::smatch pm;
      const int64_t pointed = std::regex_match(name, pm, step_re) ? std::stoll(pm[1]) : -1;
      for (const auto& e : fs::directory_iterator(checkpoints_dir)) {
        std::smatch m;
        const std::string n = e.path().filename().string();
        if (e.is_directory() && std::regex_match(n, m, step_re) && std::stoll(m[1]) > pointed &&
            complete_checkpoint(e.path()))
          later = true;
      }
      if (!later) return named.string();
    }
  }
  static const std::regex re("step_([0-9]+)");
  int64_t best = -1;
  std::string best_path;
  for (const auto& e : fs::directory_iterator(checkpoints_dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !std::regex_match(name, m, re)) continue;
    if (!complete_checkpoint(e.path())) continue;
    const int64_t s = std::stoll(m[1]);
    if (s > best) {
      best = s;
      best_path = e.path().string();
    }
  }
  if (best < 0) return std::nullopt;
  return best_path;
}

int64_t load_checkpoint(const std::string& dir, model::Transformer& policy, Optimizer& policy_optim, Critic* critic,
                        json* state) {
  return with_context("loading checkpoint '" + dir + "'", [&]() -> int64_t {
    const bool adapter = fs::exists(dir + "/adapter_config.json");
    AGENTR1_CHECK(adapter == (policy->lora() != nullptr),
                  (adapter ? "the checkpoint holds a LoRA adapter but actor.lora.rank is 0"
                           : "the checkpoint holds a full model but the run trains LoRA adapters (actor.lora.rank > 0)")
                      << "; HINT: resume with the run's original actor.lora settings");
    if (adapter) {
      model::load_lora_adapter(policy, dir);  // checks rank, scaling and targets against the run's
    } else {
      // Staged in host memory, then copied into the live weights on their device: loading
      // onto the device would hold a second full fp32 copy of the model there.
      model::Transformer loaded = model::load_pretrained(dir, at::kFloat, at::Device(at::kCPU));
      torch::NoGradGuard no_grad;
      auto dst = policy->named_parameters();
      auto src = loaded->named_parameters();
      AGENTR1_CHECK(dst.size() == src.size(), "parameter count " << src.size() << " != model's " << dst.size());
      for (const auto& kv : src) {
        at::Tensor* d = dst.find(kv.key());
        AGENTR1_CHECK(d != nullptr, "unexpected parameter '" << kv.key() << "'");
        AGENTR1_CHECK(d->sizes() == kv.value().sizes(), "parameter '" << kv.key() << "' has shape "
                                      << kv.value().sizes() << ", model expects " << d->sizes());
        d->copy_(kv.value());
      }
    }
    if (fs::exists(dir + "/optimizer.pt")) policy_optim.load(dir + "/optimizer.pt");
    json st = json::parse(read_text_file(dir + "/trainer_state.json"));
    policy_optim.set_steps(st.value("optimizer_steps", int64_t{0}));
    if (critic != nullptr) {
      AGENTR1_CHECK(fs::is_directory(dir + "/critic"),
                    "no critic/ in the checkpoint (saved by a run without a critic); HINT: resume with "
                    "the run's original algorithm.adv_estimator, or start a new run");
      critic->load(dir + "/critic");
      critic->optimizer().set_steps(st.value("critic_optimizer_steps", int64_t{0}));
    }
    if (state != nullptr) *state = st;
    return st.at("step").get<int64_t>();
  });
}

Checkpointer::Checkpointer(std::string checkpoints_dir, std::string tokenizer_dir, model::Transformer policy,
                           Optimizer& policy_optim, Critic* critic)
    : dir_(std::move(checkpoints_dir)), tokenizer_dir_(std::move(tokenizer_dir)), policy_(std::move(policy)),
      optim_(policy_optim), critic_(critic) {}

void Checkpointer::save(int64_t step, const json& extra_state) {
  save_checkpoint(dir_ + "/" + step_name(step), step, policy_, optim_, tokenizer_dir_, critic_, extra_state);
  RunDir(dir_).write_text("latest", step_name(step) + "\n");  // last: the checkpoint is complete
}

std::optional<Checkpointer::Restored> Checkpointer::restore_latest() {
  auto ck = latest_checkpoint(dir_);
  if (!ck) return std::nullopt;
  Restored r;
  r.dir = *ck;
  r.step = load_checkpoint(*ck, policy_, optim_, critic_, &r.state);
  return r;
}

}  // namespace agentr1::train
