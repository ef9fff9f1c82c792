// Helpers shared by the model layer's tests (not part of the library).
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/function.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "agentr1/model/transformer.h"

namespace agentr1::model::testing {

// Small configs of each arch. Qwen3's head_dim (32) != hidden/heads (16) on purpose.
inline ModelConfig tiny_config(Arch arch, bool tied = false) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = 97;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = arch == Arch::kQwen3 ? 32 : 16;
  c.max_position_embeddings = 256;
  c.rope_theta = arch == Arch::kLlama ? 500000.0 : 25000.0;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = tied;
  c.attention_bias = arch == Arch::kQwen2;
  c.qk_norm = arch == Arch::kQwen3;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

// A model whose weights are large enough that outputs depend strongly on every
// input (HF's 0.02 init gives near-uniform logits, which hide bugs).
inline Transformer spicy_model(const ModelConfig& cfg, uint64_t seed) {
  Transformer m = init_random(cfg, seed);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1000);
  at::NoGradGuard ng;
  for (auto& p : m->named_parameters()) {
    at::Tensor& t = p.value();
    const std::string& n = p.key();
    if (n.size() >= 11 && n.compare(n.size() - 11, 11, "norm.weight") == 0) {
      t.normal_(1.0, 0.2, gen);
    } else if (t.dim() == 1) {
      t.normal_(0.0, 0.3, gen);
    } else {
      t.normal_(0.0, 1.5 / std::sqrt(static_cast<double>(t.size(1))), gen);
    }
  }
  m->eval();
  return m;
}

// Whether the autograd graph behind t contains a node whose name has `part` (a test's
// proof that a custom function, e.g. "Checkpointed" or "BlockedAttention", really ran).
inline bool graph_has(const at::Tensor& t, const std::string& part) {
  std::vector<torch::autograd::Node*> todo{t.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    torch::autograd::Node* n = todo.back();
    todo.pop_back();
    if (n == nullptr || !seen.insert(n).second) continue;
    if (n->name().find(part) != std::string::npos) return true;
    for (const auto& e : n->next_edges()) todo.push_back(e.function.get());
  }
  return false;
}

// Random ids [B,T] in [0, vocab).
inline at::Tensor random_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(vocab, {B, T}, gen, at::kLong);
}

inline std::string temp_dir(const std::string& tag) {
  std::string t = "/tmp/agentr1_" + tag + "_XXXXXX";
  if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
  return t;
}

// temp_dir removed (with what it holds) when the scope ends, however the test ends.
struct ScopedTempDir {
  explicit ScopedTempDir(const std::string& tag) : path(temp_dir(tag)) {}
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string path;
};

}  // namespace agentr1::model::testing
