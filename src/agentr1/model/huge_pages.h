// agentr1/model/huge_pages.h — a model's weights in transparent huge pages.
//
//   HugePageReport r = model::place_in_huge_pages(*model);   // once, before decoding
//   // r.tensors moved, r.bytes in the arena, r.huge_bytes of it backed by 2 MiB pages
//
// Why: decoding streams every weight once per token. On 4 KiB pages each 4 KiB costs a
// TLB miss (in a virtual machine a two-level page walk) and the hardware prefetchers
// stop at every 4 KiB boundary. libtorch 1.13's CPU allocator knows nothing of huge
// pages, and with THP in "madvise" mode (Debian's default) its memory stays on 4 KiB
// pages. Measured (bench/decode_bench --hugepages, 2 AMD EPYC cores of a VM): a 0.6B
// model's bf16 decode products at one row 55 ms -> 39 ms per step.
//
// What it does: copies the module's CPU parameters and buffers whose storage holds at
// least `min_bytes` into one anonymous arena on a 2 MiB boundary, advised MADV_HUGEPAGE
// before it is written (so its page faults take huge pages where THP is "always" or
// "madvise"), and points each tensor at its copy with Tensor::set_data: the same tensor
// objects, so optimizers, engines and weight syncs holding them see the move, with the
// same bits. Tensors that share a storage (tied embeddings) share the copy. A storage
// that something outside the module also holds (another model's tensor, a LoRA copy's
// shared base) is left where it is: moving it would duplicate it; so is a storage in an
// arena already (a second call moves nothing). Old storages are freed as they are
// replaced (peak: the arena plus the largest storage) and glibc is asked to return them
// (malloc_trim). Linux only; elsewhere, where THP is "never" or unreadable, or where the
// arena cannot be mapped or advised, nothing moves (a report of zero) and nothing
// throws. The arena is unmapped when the last tensor in it is freed. Nothing may compute
// on the module during the call (its tensors' memory changes).
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}

namespace agentr1::model {

struct HugePageReport {
  int64_t tensors = 0;     // tensors pointed at the arena
  int64_t bytes = 0;       // bytes copied into it
  int64_t skipped = 0;     // eligible storages held outside the module too (left in place)
  int64_t huge_bytes = -1; // of the arena, bytes on huge pages (AnonHugePages in
                           // /proc/self/smaps); -1 where unknown
  std::string thp_mode;    // /sys/kernel/mm/transparent_hugepage/enabled's choice, "" if unknown
};

HugePageReport place_in_huge_pages(torch::nn::Module& module, int64_t min_bytes = int64_t{2} << 20);

// A new uint8 CPU tensor of `bytes` (>= 1) in an anonymous mapping of its own, advised
// for huge pages before it is written, as the arena above (zero-filled); where that
// cannot be had (not Linux, THP "never", mmap or madvise failing), an ordinary
// at::zeros. 64-byte aligned either way.
at::Tensor huge_page_buffer(int64_t bytes);

// MemAvailable of /proc/meminfo in bytes; -1 where it cannot be read (not Linux).
int64_t mem_available_bytes();

}  // namespace agentr1::model
