// agentr1/model/kv_cache.h — per-sequence key/value cache in fixed slots.
//
//   KVCache cache(cfg, /*n_slots=*/64, /*max_len=*/1024, torch::kFloat32, device);
//   auto logits = model->forward_cached(ids, slots, n_new, cache);  // appends
//   cache.copy_prefix(/*src=*/0, /*dst=*/3, /*len=*/prompt_len);     // share a prefix
//   cache.reset(slot);                                               // slot is free
//
// Each slot holds one sequence; slot s has length(s) valid positions (0..len-1),
// stored at the same index as the token's position id. Tensors per layer:
//   k(layer), v(layer): [n_slots, num_key_value_heads, max_len, head_dim]
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/model/config.h"

namespace agentr1::model {

class KVCache {
 public:
  KVCache(const ModelConfig& cfg, int64_t n_slots, int64_t max_len, at::ScalarType dtype,
          at::Device device);

  int64_t n_slots() const { return n_slots_; }
  int64_t max_len() const { return max_len_; }
  int64_t length(int64_t slot) const { return lengths_.at(slot); }
  void set_length(int64_t slot, int64_t len);  // throws Error if len > max_len
  void reset(int64_t slot) { set_length(slot, 0); }
  // Copies positions [0, len) of slot src into slot dst and sets dst's length to len.
  void copy_prefix(int64_t src, int64_t dst, int64_t len);

  at::Tensor& k(int64_t layer) { return k_[layer]; }
  at::Tensor& v(int64_t layer) { return v_[layer]; }
  int64_t num_layers() const { return static_cast<int64_t>(k_.size()); }
  size_t bytes() const;

 private:
  int64_t n_slots_;
  int64_t max_len_;
  std::vector<int64_t> lengths_;
  std::vector<at::Tensor> k_;
  std::vector<at::Tensor> v_;
};

}  // namespace agentr1::model
