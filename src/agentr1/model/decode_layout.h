// agentr1/model/decode_layout.h — a model's weights copied into the decode layout, for
// batch-1 decoding.
//
//   model::DecodeLayout packed(model->decode_weights(), pool);  // one copy of every weight
//   logits = model->forward_cached(ids, rows, cache, pool, &packed);  // one-row products read it
//   ... the weights change (an update, a weight sync) ...
//   packed.repack(pool);                                         // before the next use
//
// Why: at batch 1 a decode step reads every weight once, so its speed is how fast the
// weights stream in. Row-major, a one-row tile reads 4 columns at a time: 4 short streams
// that restart every tile, which this VM's prefetchers follow late at its fast moments;
// the decode layout (detail::pack_weight, row_linear.h) makes each product one
// sequential stream, with the same bits (bench/decode_bench --step-pairs: products and
// steps against a read of the same bytes, row-major and packed side by side).
// Cost: a second copy of the weights (one arena, on transparent huge pages where the
// kernel gives them), and one pass over them per repack.
//
// Staleness: find() returns a copy only while its weight has the data pointer and
// version counter (in-place ops through ATen bump it: copy_, an optimizer's add_) it had
// when packed; otherwise null, and the product reads the weight itself (the same bits,
// slower). Writes that bypass ATen (into data_ptr(), a c10d broadcast) are not seen: who
// writes so must call repack(). The tensors are held, not copied: the layout follows
// Tensor::set_data moves (place_in_huge_pages) once repacked.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/model/row_linear.h"

namespace agentr1::model {

class DecodeLayout {
 public:
  // weights: 2-D contiguous CPU tensors of float, bfloat16 or half (duplicates, such as a
  // tied head, are packed once). Throws Error naming the first that is not.
  explicit DecodeLayout(std::vector<at::Tensor> weights, SpinPool* pool = nullptr);
  DecodeLayout(const DecodeLayout&) = delete;
  DecodeLayout& operator=(const DecodeLayout&) = delete;

  // w's copy while it is current (see above: the same data pointer, version, shape and
  // dtype); null otherwise or if w is not packed here.
  const detail::PackedWeight* find(const at::Tensor& w) const;
  // Copies every weight's current values again (their shapes and dtypes must not have
  // changed: Error otherwise).
  void repack(SpinPool* pool = nullptr);
  int64_t bytes() const { return bytes_; }
  int64_t weights() const { return static_cast<int64_t>(entries_.size()); }
  // Whether `weights` are the tensors packed here (the same objects, duplicates aside):
  // false after a model's parameters were replaced, when a new layout is needed.
  bool holds(const std::vector<at::Tensor>& weights) const;
  // The arena a layout of `weights` takes (what the constructor allocates), in bytes.
  static int64_t bytes_needed(const std::vector<at::Tensor>& weights);

 private:
  struct Entry {
    at::Tensor w;
    detail::PackedWeight packed;
    int64_t offset = 0;   // bytes into the arena
    int64_t version = 0;
  };
  at::Tensor arena_;  // uint8, 64-byte aligned entries
  std::vector<Entry> entries_;
  std::unordered_map<const c10::TensorImpl*, size_t> index_;
  int64_t bytes_ = 0;
};

}  // namespace agentr1::model
