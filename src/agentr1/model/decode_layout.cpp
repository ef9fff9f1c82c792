#include "agentr1/model/decode_layout.h"

#include <memory>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/model/huge_pages.h"
#include "agentr1/model/spin_pool.h"

namespace agentr1::model {

DecodeLayout::DecodeLayout(std::vector<at::Tensor> weights, SpinPool* pool) {
  int64_t total = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    at::Tensor& w = weights[i];
    AGENTR1_CHECK(w.defined() && w.dim() == 2 && w.is_contiguous() && w.device().is_cpu() && w.numel() > 0 &&
                      (w.scalar_type() == at::kFloat || w.scalar_type() == at::kBFloat16 ||
                       w.scalar_type() == at::kHalf),
                  "DecodeLayout: weight #" << i << " must be a non-empty 2-D contiguous CPU tensor of float, "
                                           << "bfloat16 or half, got "
                                           << (w.defined() ? c10::str(w.sizes(), " ", w.scalar_type(), " on ", w.device())
                                                           : std::string("an undefined tensor")));
    if (index_.count(w.unsafeGetTensorImpl()) > 0) continue;  // a tied weight: once
    Entry e;
    e.w = w;
    e.offset = total;
    total += detail::packed_weight_elems(w.size(0), w.size(1), w.scalar_type()) *
             static_cast<int64_t>(w.element_size());  // a multiple of 64: whole lines
    index_.emplace(w.unsafeGetTensorImpl(), entries_.size());
    entries_.push_back(std::move(e));
  }
  bytes_ = total;
  if (total > 0) arena_ = huge_page_buffer(total);
  repack(pool);
}

void DecodeLayout::repack(SpinPool* pool) {
  auto* base = arena_.defined() ? static_cast<uint8_t*>(arena_.data_ptr()) : nullptr;
  for (Entry& e : entries_) {
    const at::Tensor& w = e.w;
    AGENTR1_CHECK(w.dim() == 2 && w.is_contiguous() && w.device().is_cpu() &&
                      (e.packed.data == nullptr ||
                       (w.size(0) == e.packed.O && w.size(1) == e.packed.K && w.scalar_type() == e.packed.dtype)),
                  "DecodeLayout::repack: a weight changed shape or dtype since it was packed (now "
                      << w.sizes() << " " << w.scalar_type() << ", packed [" << e.packed.O << ", " << e.packed.K
                      << "] " << e.packed.dtype << "); build a new DecodeLayout for the new model");
    uint8_t* dst = base + e.offset;
    // In the order this machine's one-row kernels read (row_linear.h: kDpPairs for bf16
    // with AVX-512 BF16, kFmaPairs for fp32 with AVX-512); under an ISA forced later,
    // row_linear reads w instead.
    const detail::PackOrder order = detail::pack_order_for(w.scalar_type(), detail::row_linear_isa());
    detail::pack_weight(w, dst, pool, order);
    e.packed = detail::PackedWeight{dst, w.size(0), w.size(1), w.scalar_type(), w.data_ptr(), nullptr, 0, nullptr, order};
    e.version = w._version();
  }
  // Decode order is the arena's (decode_weights: per layer q, k, v, o, gate, up, down,
  // then the head): each copy names the next, the last the first (the next step).
  // The arena stays alive while a helper warms it (SpinPool::warm), even past this layout.
  const auto owner = std::make_shared<const at::Tensor>(arena_);
  for (size_t i = 0; i < entries_.size(); ++i) {
    const detail::PackedWeight& n = entries_[(i + 1) % entries_.size()].packed;
    entries_[i].packed.next = n.data;
    entries_[i].packed.next_bytes =
        detail::packed_weight_elems(n.O, n.K, n.dtype) * static_cast<int64_t>(at::elementSize(n.dtype));
    entries_[i].packed.next_owner = owner;
  }
}

const detail::PackedWeight* DecodeLayout::find(const at::Tensor& w) const {
  if (!w.defined()) return nullptr;
  const auto it = index_.find(w.unsafeGetTensorImpl());
  if (it == index_.end()) return nullptr;
  const Entry& e = entries_[it->second];
  if (w.data_ptr() != e.packed.source || w._version() != e.version || w.dim() != 2 || w.size(0) != e.packed.O ||
      w.size(1) != e.packed.K || w.scalar_type() != e.packed.dtype)
    return nullptr;
  return &e.packed;
}

bool DecodeLayout::holds(const std::vector<at::Tensor>& weights) const {
  size_t distinct = 0;
  std::unordered_map<const c10::TensorImpl*, bool> seen;
  for (const at::Tensor& w : weights) {
    if (!w.defined() || index_.count(w.unsafeGetTensorImpl()) == 0) return false;
    if (seen.emplace(w.unsafeGetTensorImpl(), true).second) ++distinct;
  }
  return distinct == entries_.size();
}

int64_t DecodeLayout::bytes_needed(const std::vector<at::Tensor>& weights) {
  int64_t total = 0;
  std::unordered_map<const c10::TensorImpl*, bool> seen;
  for (const at::Tensor& w : weights)
    if (w.defined() && w.dim() == 2 && w.numel() > 0 && seen.emplace(w.unsafeGetTensorImpl(), true).second &&
        (w.scalar_type() == at::kFloat || w.scalar_type() == at::kBFloat16 || w.scalar_type() == at::kHalf))
      total += detail::packed_weight_elems(w.size(0), w.size(1), w.scalar_type()) * static_cast<int64_t>(w.element_size());
  return total;
}

}  // namespace agentr1::model
