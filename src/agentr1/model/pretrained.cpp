// Weights in and out of a Transformer: HF-style random init, load/save in the
// HuggingFace directory layout (config.json + safetensors).
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/model/safetensors.h"
#include "agentr1/model/transformer.h"

namespace agentr1::model {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_str(at::IntArrayRef s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

at::ScalarType parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "float32") return at::kFloat;
  if (name == "bf16" || name == "bfloat16") return at::kBFloat16;
  if (name == "fp16" || name == "float16") return at::kHalf;
  throw Error("unknown dtype '" + name + "': expected fp32, bf16 or fp16 (or float32, bfloat16, float16)");
}

const char* hf_dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: break;
  }
  throw Error(std::string("model dtype ") + c10::toString(dtype) + " is not supported; use fp32, bf16 or fp16");
}

Transformer init_random(const ModelConfig& cfg, uint64_t seed) {
  Transformer m(cfg);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::NoGradGuard no_grad;
  for (auto& p : m->named_parameters()) {
    const std::string& name = p.key();
    at::Tensor& t = p.value();
    if (ends_with(name, "norm.weight")) {
      t.fill_(1.0);
    } else if (ends_with(name, ".bias")) {
      t.zero_();
    } else {
      t.normal_(/*mean=*/0.0, /*std=*/0.02, gen);
    }
  }
  return m;
}

Transformer load_pretrained(const std::string& dir, at::ScalarType dtype, at::Device device) {
  hf_dtype_name(dtype);  // validates
  const ModelConfig cfg = ModelConfig::load((fs::path(dir) / "config.json").string());
  Transformer m(cfg);
  m->to(dtype);
  TensorList tensors = read_safetensors_dir(dir);
  auto params = m->named_parameters();
  std::map<std::string, at::Tensor> found;
  for (auto& [name, t] : tensors) {
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;  // HF buffer, recomputed here
    found[name] = t;
  }
  at::NoGradGuard no_grad;
  for (auto& p : params) {
    auto it = found.find(p.key());
    AGENTR1_CHECK(it != found.end(), dir << ": missing tensor '" << p.key() << "' (expected shape "
                                         << shape_str(p.value().sizes()) << " for " << arch_name(cfg.arch)
                                         << "); the checkpoint does not match config.json");
    const at::Tensor& t = it->second;
    AGENTR1_CHECK(t.sizes() == p.value().sizes(), dir << ": tensor '" << p.key() << "': expected "
                                                      << shape_str(p.value().sizes()) << ", found "
                                                      << shape_str(t.sizes()) << " (check config.json sizes)");
    AGENTR1_CHECK(at::isFloatingType(t.scalar_type()),
                  dir << ": tensor '" << p.key() << "' has non-float dtype " << t.scalar_type());
    p.value().copy_(t);
    found.erase(it);
  }
  if (cfg.tie_word_embeddings) {
    // Some exporters store the tied head anyway; accept it only if it really is tied.
    auto it = found.find("lm_head.weight");
    if (it != found.end()) {
      const at::Tensor& emb = *params.find("model.embed_tokens.weight");
      AGENTR1_CHECK(it->second.sizes() == emb.sizes() && it->second.to(emb.scalar_type()).equal(emb),
                    dir << ": config.json says tie_word_embeddings=true but tensor 'lm_head.weight' differs "
                           "from model.embed_tokens.weight; set tie_word_embeddings to false");
      found.erase(it);
    }
  }
  AGENTR1_CHECK(found.empty(), dir << ": unexpected tensor '" << found.begin()->first << "' (shape "
                                   << shape_str(found.begin()->second.sizes()) << ") not used by a "
                                   << arch_name(cfg.arch) << " model with this config.json");
  m->to(device);
  m->eval();
  return m;
}

void save_pretrained(Transformer& model, const std::string& dir, at::ScalarType dtype, int64_t max_shard_bytes) {
  ModelConfig cfg = model->config();
  cfg.torch_dtype = hf_dtype_name(dtype);
  fs::create_directories(dir);
  TensorList tensors;
  for (const auto& p : model->named_parameters()) tensors.emplace_back(p.key(), p.value().detach().to(dtype));
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  write_safetensors_dir(dir, tensors, max_shard_bytes);
  cfg.save((fs::path(dir) / "config.json").string());
}

}  // namespace agentr1::model
