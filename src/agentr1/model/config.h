// agentr1/model/config.h — the HuggingFace `config.json` of a decoder-only model.
//
//   ModelConfig cfg = ModelConfig::load(dir + "/config.json");   // validates
//   cfg.save(out_dir + "/config.json");
//
// One struct covers Qwen2 (q/k/v bias), Qwen3 (q/k RMSNorm, no bias, explicit
// head_dim) and Llama. Key names are HF's, so files round-trip with transformers.
#pragma once

#include <cstdint>
#include <string>

#include "agentr1/core/json.h"

namespace agentr1::model {

enum class Arch { kQwen2, kQwen3, kLlama };
// "qwen2" | "qwen3" | "llama"; throws Error listing the valid names.
Arch arch_from_string(const std::string& name);
const char* arch_name(Arch a);

struct ModelConfig {
  Arch arch = Arch::kQwen3;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;    // GQA: must divide num_attention_heads
  int64_t head_dim = 0;               // Qwen3 states it; others: hidden/heads
  int64_t max_position_embeddings = 2048;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;        // q/k/v projection bias (true for Qwen2)
  bool qk_norm = false;               // per-head RMSNorm on q and k (Qwen3)
  int64_t bos_token_id = -1;          // -1 = absent
  int64_t eos_token_id = -1;
  std::string torch_dtype = "float32";  // dtype the weights are stored in

  // Parses HF config.json (model_type selects the arch). Throws Error naming the
  // missing/invalid key.
  static ModelConfig from_json(const json& j);
  static ModelConfig load(const std::string& path);
  json to_json() const;               // HF layout, with model_type and architectures
  void save(const std::string& path) const;
  // Throws Error on inconsistent sizes (heads not dividing, zero sizes, ...).
  void validate() const;
  int64_t num_parameters() const;
};

}  // namespace agentr1::model
