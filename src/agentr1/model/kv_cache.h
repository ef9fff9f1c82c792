// agentr1/model/kv_cache.h — paged key/value storage for incremental decoding.
//
//   KVCache cache(cfg, /*n_blocks=*/512, /*block_size=*/16, torch::kFloat32, device);
//   std::vector<int32_t> table = {7, 3};         // the row's blocks: positions 0..31
//   CachedRow row{/*start=*/0, /*n_new=*/20, &table};
//   auto logits = model->forward_cached(ids, {row}, cache);   // writes positions 0..19
//   cache.copy_block(/*src=*/3, /*dst=*/9, /*n=*/4);           // copy-on-write of a partial block
//
// Keys and values live in fixed-size blocks of `block_size` positions; a sequence is a
// block table (which block holds positions [i*bs, (i+1)*bs)), kept by the caller
// (rollout::BlockPool). Sequences sharing a prefix share its full blocks by reference;
// nothing here counts references or lengths: the cache is storage only. Per layer:
//   k(layer), v(layer): [n_blocks, block_size, num_key_value_heads, head_dim]
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/model/config.h"

namespace agentr1::model {

class KVCache {
 public:
  // Zero-filled. Throws Error if n_blocks or block_size < 1.
  KVCache(const ModelConfig& cfg, int64_t n_blocks, int64_t block_size, at::ScalarType dtype,
          at::Device device);

  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  at::ScalarType dtype() const { return k_.front().scalar_type(); }
  // Copies positions [0, n) of block src into block dst, all layers (n <= block_size).
  void copy_block(int64_t src, int64_t dst, int64_t n);

  at::Tensor& k(int64_t layer) { return k_[layer]; }
  at::Tensor& v(int64_t layer) { return v_[layer]; }
  int64_t num_layers() const { return static_cast<int64_t>(k_.size()); }
  size_t bytes() const;            // all blocks, keys and values
  size_t bytes_per_token() const;  // one position, all layers, keys and values

  // Attention over blocks: true (default) = agentr1's fused CPU kernel (online softmax,
  // no gathered copies, memory O(tokens x heads)); false = the portable tensor path
  // (gathers each row's blocks, materialises [B, heads, T, S] scores; used on devices
  // other than the CPU and by the tests as the reference).
  bool fused_attention = true;
  // true: every row computed as if alone (row_linear.h's products and silu, whose
  // per-element arithmetic depends on that element's inputs only), so a row's logits are
  // the same bit for bit whatever other rows share the forward, whether its prefix came
  // from the cache or a chunked prefill, and for any thread count. Needs the fused CPU
  // path (fused_attention on a CPU cache). false: BLAS products, whose rounding depends
  // on the number of rows (gemv vs gemm) and the split over threads.
  bool batch_invariant = false;

 private:
  int64_t n_blocks_;
  int64_t block_size_;
  std::vector<at::Tensor> k_;
  std::vector<at::Tensor> v_;
};

// One row of Transformer::forward_cached: n_new new tokens at positions
// [start, start + n_new), appended after `start` cached positions. `blocks` covers at
// least start + n_new positions; the positions [start, start + n_new) are written.
struct CachedRow {
  int64_t start = 0;
  int64_t n_new = 0;
  const std::vector<int32_t>* blocks = nullptr;
};

}  // namespace agentr1::model
