#include "agentr1/model/kv_cache.h"

#include "agentr1/core/error.h"

namespace agentr1::model {

KVCache::KVCache(const ModelConfig& cfg, int64_t n_slots, int64_t max_len, at::ScalarType dtype,
                 at::Device device)
    : n_slots_(n_slots), max_len_(max_len) {
  AGENTR1_CHECK(n_slots >= 1, "KVCache: n_slots must be >= 1, got " << n_slots);
  AGENTR1_CHECK(max_len >= 1, "KVCache: max_len must be >= 1, got " << max_len);
  cfg.validate();
  lengths_.assign(static_cast<size_t>(n_slots), 0);
  // Zero-filled so that masked-out (never written) positions stay finite.
  const auto opts = at::TensorOptions().dtype(dtype).device(device);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    k_.push_back(at::zeros({n_slots, cfg.num_key_value_heads, max_len, cfg.head_dim}, opts));
    v_.push_back(at::zeros({n_slots, cfg.num_key_value_heads, max_len, cfg.head_dim}, opts));
  }
}

void KVCache::set_length(int64_t slot, int64_t len) {
  AGENTR1_CHECK(slot >= 0 && slot < n_slots_, "KVCache: slot " << slot << " out of range [0, " << n_slots_ << ")");
  AGENTR1_CHECK(len >= 0 && len <= max_len_,
                "KVCache: length " << len << " for slot " << slot << " must be in [0, max_len=" << max_len_ << "]");
  lengths_[static_cast<size_t>(slot)] = len;
}

void KVCache::copy_prefix(int64_t src, int64_t dst, int64_t len) {
  AGENTR1_CHECK(src >= 0 && src < n_slots_, "KVCache::copy_prefix: src slot " << src << " out of range [0, "
                                                                              << n_slots_ << ")");
  AGENTR1_CHECK(dst >= 0 && dst < n_slots_, "KVCache::copy_prefix: dst slot " << dst << " out of range [0, "
                                                                              << n_slots_ << ")");
  AGENTR1_CHECK(len >= 0 && len <= length(src), "KVCache::copy_prefix: len " << len << " must be in [0, length(src="
                                                                             << src << ")=" << length(src) << "]");
  if (src != dst && len > 0) {
    for (size_t l = 0; l < k_.size(); ++l) {
      k_[l][dst].narrow(1, 0, len).copy_(k_[l][src].narrow(1, 0, len));
      v_[l][dst].narrow(1, 0, len).copy_(v_[l][src].narrow(1, 0, len));
    }
  }
  set_length(dst, len);
}

size_t KVCache::bytes() const {
  size_t b = 0;
  for (const auto& t : k_) b += static_cast<size_t>(t.numel()) * t.element_size();
  for (const auto& t : v_) b += static_cast<size_t>(t.numel()) * t.element_size();
  return b;
}

}  // namespace agentr1::model
