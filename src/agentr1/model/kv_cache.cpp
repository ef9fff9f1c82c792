#include "agentr1/model/kv_cache.h"

#include "agentr1/core/error.h"

namespace agentr1::model {

KVCache::KVCache(const ModelConfig& cfg, int64_t n_blocks, int64_t block_size, at::ScalarType dtype,
                 at::Device device)
    : n_blocks_(n_blocks), block_size_(block_size) {
  AGENTR1_CHECK(n_blocks >= 1, "KVCache: n_blocks must be >= 1, got " << n_blocks);
  AGENTR1_CHECK(block_size >= 1, "KVCache: block_size must be >= 1, got " << block_size);
  cfg.validate();
  // Zero-filled so that never-written positions stay finite.
  const auto opts = at::TensorOptions().dtype(dtype).device(device);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    k_.push_back(at::zeros({n_blocks, block_size, cfg.num_key_value_heads, cfg.head_dim}, opts));
    v_.push_back(at::zeros({n_blocks, block_size, cfg.num_key_value_heads, cfg.head_dim}, opts));
  }
}

void KVCache::copy_block(int64_t src, int64_t dst, int64_t n) {
  AGENTR1_CHECK(src >= 0 && src < n_blocks_,
                "KVCache::copy_block: src block " << src << " out of range [0, " << n_blocks_ << ")");
  AGENTR1_CHECK(dst >= 0 && dst < n_blocks_,
                "KVCache::copy_block: dst block " << dst << " out of range [0, " << n_blocks_ << ")");
  AGENTR1_CHECK(n >= 0 && n <= block_size_,
                "KVCache::copy_block: n " << n << " must be in [0, block_size=" << block_size_ << "]");
  if (src == dst || n == 0) return;
  for (size_t l = 0; l < k_.size(); ++l) {
    k_[l][dst].narrow(0, 0, n).copy_(k_[l][src].narrow(0, 0, n));
    v_[l][dst].narrow(0, 0, n).copy_(v_[l][src].narrow(0, 0, n));
  }
}

size_t KVCache::bytes() const {
  size_t b = 0;
  for (const auto& t : k_) b += static_cast<size_t>(t.numel()) * t.element_size();
  for (const auto& t : v_) b += static_cast<size_t>(t.numel()) * t.element_size();
  return b;
}

size_t KVCache::bytes_per_token() const { return bytes() / static_cast<size_t>(n_blocks_ * block_size_); }

}  // namespace agentr1::model
