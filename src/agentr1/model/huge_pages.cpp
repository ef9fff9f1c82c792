#include "agentr1/model/huge_pages.h"

#if defined(__linux__)
#include <malloc.h>
#include <sys/mman.h>
#endif

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "agentr1/core/error.h"

namespace agentr1::model {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kAlign = 64;  // each storage's start in the arena (a cache line)

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return "";
  const size_t a = line.find('['), b = line.find(']');
  return a != std::string::npos && b != std::string::npos && b > a ? line.substr(a + 1, b - a - 1) : "";
}

// AnonHugePages (bytes) of the mappings overlapping [lo, hi), from /proc/self/smaps;
// -1 where it cannot be read.
int64_t huge_bytes_in(uintptr_t lo, uintptr_t hi) {
  std::ifstream f("/proc/self/smaps");
  if (!f) return -1;
  std::string line;
  bool inside = false;
  int64_t kb = 0;
  while (std::getline(f, line)) {
    unsigned long s = 0, e = 0;
    // A mapping's header ("start-end perms ..."); field lines start with a name and ':'.
    if (std::sscanf(line.c_str(), "%lx-%lx ", &s, &e) == 2 && line.find(':') > line.find(' ')) {
      inside = s < hi && e > lo;
      continue;
    }
    long v = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &v) == 1) kb += v;
  }
  return kb * 1024;
}

// One anonymous mapping; its memory goes when the last storage placed in it does.
struct Arena {
  void* map = nullptr;
  size_t map_len = 0;
  ~Arena() {
#if defined(__linux__)
    if (map != nullptr) ::munmap(map, map_len);
#endif
  }
};

void release_arena_ref(void* ctx) { delete static_cast<std::shared_ptr<Arena>*>(ctx); }

#if defined(__linux__)
// An anonymous mapping of at least `len` bytes from a 2 MiB boundary, advised
// MADV_HUGEPAGE before anything is written; null (and nothing mapped) on failure.
std::shared_ptr<Arena> map_huge_arena(size_t len, uint8_t** base) {
  auto arena = std::make_shared<Arena>();
  const size_t rounded = round_up(len, kHugePage);
  arena->map_len = rounded + kHugePage;  // room to start on a 2 MiB boundary
  void* m = ::mmap(nullptr, arena->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  arena->map = m;
  *base = reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(m), kHugePage));
  if (::madvise(*base, rounded, MADV_HUGEPAGE) != 0) return nullptr;  // (unmapped with the arena)
  return arena;
}
#endif

struct Group {  // the module's tensors on one storage
  std::vector<at::Tensor> tensors;
  std::set<const c10::TensorImpl*> impls;
};

}  // namespace

HugePageReport place_in_huge_pages(torch::nn::Module& module, int64_t min_bytes) {
  HugePageReport r;
  r.thp_mode = thp_mode();
#if defined(__linux__)
  if (r.thp_mode.empty() || r.thp_mode == "never") return r;  // no huge pages to be had: no copy
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> all = module.parameters(/*recurse=*/true);
  for (const at::Tensor& b : module.buffers(/*recurse=*/true)) all.push_back(b);
  std::vector<const c10::StorageImpl*> order;  // first seen first: a stable layout
  std::unordered_map<const c10::StorageImpl*, Group> groups;
  for (const at::Tensor& t : all) {
    if (!t.defined() || !t.device().is_cpu() || !t.has_storage() || t.storage().data() == nullptr) continue;
    const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
    if (static_cast<int64_t>(t.storage().nbytes()) < min_bytes) continue;
    if (t.storage().data_ptr().get_deleter() == &release_arena_ref) continue;  // in an arena already
    auto [it, fresh] = groups.try_emplace(s);
    if (fresh) order.push_back(s);
    if (it->second.impls.insert(t.unsafeGetTensorImpl()).second) it->second.tensors.push_back(t);
  }
  // Only storages the module alone holds: each holder tensor counts once.
  std::vector<const c10::StorageImpl*> take;
  size_t total = 0;
  for (const c10::StorageImpl* s : order) {
    const Group& g = groups[s];
    if (g.tensors.front().storage().use_count() != g.impls.size()) {
      ++r.skipped;
      continue;
    }
    take.push_back(s);
    total += round_up(g.tensors.front().storage().nbytes(), kAlign);
  }
  if (take.empty()) return r;
  uint8_t* base = nullptr;
  const std::shared_ptr<Arena> arena = map_huge_arena(total, &base);
  if (arena == nullptr) return r;  // nothing was moved yet
  size_t off = 0;
  for (const c10::StorageImpl* s : take) {
    Group& g = groups[s];
    const c10::Storage old = g.tensors.front().storage();
    const size_t nbytes = old.nbytes();
    uint8_t* dst = base + off;
    std::memcpy(dst, old.data(), nbytes);
    c10::Storage fresh(c10::Storage::use_byte_size_t(), nbytes,
                       at::DataPtr(dst, new std::shared_ptr<Arena>(arena), &release_arena_ref, at::Device(at::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
    for (at::Tensor& t : g.tensors) {
      at::Tensor moved = at::empty({0}, t.options()).set_(fresh, t.storage_offset(), t.sizes(), t.strides());
      t.set_data(moved);
      ++r.tensors;
    }
    r.bytes += static_cast<int64_t>(nbytes);
    off += round_up(nbytes, kAlign);
  }
  // The old storages were freed one by one; glibc keeps freed heap chunks (weights of a
  // few MiB often live on its heap) until asked, which would leave the weights resident
  // twice.
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
  const auto lo = reinterpret_cast<uintptr_t>(base);
  r.huge_bytes = huge_bytes_in(lo, lo + off);
#else
  (void)module;
  (void)min_bytes;
#endif
  return r;
}

at::Tensor huge_page_buffer(int64_t bytes) {
  AGENTR1_CHECK(bytes >= 1, "huge_page_buffer: bytes must be >= 1, got " << bytes);
  const auto plain = [&] { return at::zeros({bytes}, at::TensorOptions().dtype(at::kByte)); };
#if defined(__linux__)
  const std::string mode = thp_mode();
  if (mode.empty() || mode == "never") return plain();
  uint8_t* base = nullptr;
  const std::shared_ptr<Arena> arena = map_huge_arena(static_cast<size_t>(bytes), &base);
  if (arena == nullptr) return plain();
  c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(bytes),
                       at::DataPtr(base, new std::shared_ptr<Arena>(arena), &release_arena_ref, at::Device(at::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
  return at::empty({0}, at::TensorOptions().dtype(at::kByte)).set_(storage, 0, {bytes}, {1});
#else
  return plain();
#endif
}

int64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    long kb = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %ld kB", &kb) == 1) return int64_t{kb} * 1024;
  }
  return -1;
}

}  // namespace agentr1::model
