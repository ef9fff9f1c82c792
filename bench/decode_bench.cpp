// decode_bench — decoding at real size against the machine's memory bandwidth: how close
// the engine's products and whole decode steps come to the bound that streaming every
// weight once per step sets, for fp32 and bf16 weights, at 1..16 rows.
//
//   build/bench/decode_bench [--threads 2] [--rows 1,2,4,8,16] [--dtypes fp32,bf16]
//                            [--reps 5] [--new 16] [--engine-batches 1,8] [--no-engine] [--no-products]
//                            [--model DIR] [--prefill 512] [--hugepages] [--step-pairs 48]
//                            [--batch-pairs 24] [--contexts 1024,4096 | --no-contexts]
//
// 1. Bandwidth: a STREAM-style read (sum of a 1 GiB buffer, AVX2 when the CPU has it),
//    1..--threads threads, best of --reps: the bound below is bytes / this rate.
//    --hugepages: the buffer and the products' weights in transparent huge pages
//    (madvise; the engine's weights stay as loaded), to see what the TLB costs.
// 2. Products: one decode step's linear layers of Qwen3-0.6B's shape (28 layers of
//    q/k/v/o/gate/up/down, each its own weights, and the 151936 x 1024 head: 596M
//    weights, far beyond any cache) through model::detail::row_linear at N rows, q/k/v
//    and gate/up each in one region (row_linear_many) as the engine runs them. It
//    validates first (every shape's output against at::linear in fp64, relative error
//    within 1e-4 fp32 / 1e-2 bf16; row 0 of N rows equal bit for bit to the row alone),
//    then prints the step's time, its GB/s and the fraction of the measured bandwidth.
// 3. Engine: rollout::Engine on a random model of that shape (or --model DIR, loaded in
//    each dtype), --new greedy tokens per row after a 16-token prompt, at --engine-batches
//    rows: decode tokens/s (prefill timed apart and left out), against the bound
//    tokens/s = rows x bandwidth / weight bytes; then the prefill of one --prefill-token
//    prompt in prompt tokens/s. Row 0's tokens must not depend on the batch (checked).
//    Three configurations: the weights on 4 KiB pages and on huge pages read row-major
//    (the engine's defaults), then EngineOptions::packed_decode on (serve's default):
//    one-sequence steps read the weights' copy in the decode layout (model/decode_layout.h).
//    bench/llama_cpp_bench.sh runs this beside llama.cpp on the same weights.
// 4. Step pairs (--step-pairs N, after each dtype's engine runs, on the same model and
//    pages): N one-token decode steps of Transformer::forward_cached at batch 1 (the
//    engine's batch-invariant path, 2 threads), each followed at once by the step's
//    products alone (the model's own weights, grouped as the step runs them) and by a
//    read of the same bytes; printed per 12 steps as medians. The VM's bandwidth swings
//    from second to second; pairing each step with a read taken right after it shows
//    what the step and its products reach at the same moment, and step - products is
//    the time outside the products (attention, norms, hand-offs). Each pair also runs
//    the step and its products reading the weights' copy in the decode layout
//    (model::DecodeLayout), whose logits must equal the row-major step's bit for bit,
//    and the decode-layout step again with the gap warm off (SpinPool::warm: helper 1
//    reads the next region's front while the caller runs the norms and attention between
//    regions; row_linear.h set_decode_warm_bytes), the same bits again. Since session
//    21 the copies are also read on the step's own split (read_regions: each region's
//    front by helper 1, its back by the caller), and the decode-layout step and
//    products are printed as fractions of that read too.
// 5. Batch pairs (--batch-pairs N, default 24, after the step pairs): N pairs of one
//    one-sequence step (decode layout) and one 8-sequence step (row-major) of
//    Transformer::forward_cached, back to back (their order alternating), each pair then
//    a read of the weights:
//    8 rows' tokens/s over 1 row's per pair (the engine runs of section 3 time the two
//    batch sizes seconds apart, at different moments of the VM's bandwidth). Row 0 of
//    the 8 is the lone sequence: its logits must equal the lone step's bit for bit.
// 6. Long contexts (--contexts, after the batch pairs; not with --no-engine, whose model
//    they use): batch-1 steps (decode layout, as serve runs them) after C cached
//    positions (keys and values written at random, as a prefill would leave them,
//    without its minutes), each paired with a read of the bytes the step reads: the
//    weights and the cache blocks holding the row's positions. It validates first: the
//    logits of a step equal those of the same step on a pool of one more thread without
//    the layout, in a fresh cache holding the same keys and values (attention's split
//    over threads and the layout leave a row's bits alone), and agree with the portable
//    attention loops' within rounding (1e-2 fp32, 0.5 bf16: another summation order).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agentr1/core/log.h"
#include "agentr1/model/decode_layout.h"
#include "agentr1/model/paged_attention.h"
#include "agentr1/model/row_linear.h"
#include "agentr1/model/spin_pool.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "bench_env.h"
#include "bench_model.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif
#include <sys/mman.h>

using namespace agentr1;

namespace {

struct Args {
  int threads = 2;
  std::vector<int> rows = {1, 2, 4, 8, 16};
  std::vector<std::string> dtypes = {"fp32", "bf16"};
  int reps = 5;
  int max_new = 16;
  std::vector<int> engine_batches = {1, 8};
  bool engine = true;
  bool products = true;
  std::string model;   // a model directory instead of a random model of the 0.6B shape
  int prefill = 512;   // prompt tokens of the prefill measurement (0 = skip)
  bool hugepages = false;  // bandwidth buffer and product weights in transparent huge pages
  int step_pairs = 48;     // decode steps paired with their products and a read (0 = skip)
  int batch_pairs = 24;    // batch-1 steps paired with batch-8 steps (0 = skip)
  std::vector<int> contexts = {1024, 4096};  // batch-1 steps after this many cached positions
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "decode_bench: %s\nusage: decode_bench [--threads 2] [--rows 1,2,4,8,16] [--dtypes fp32,bf16] "
               "[--reps 5] [--new 16] [--engine-batches 1,8] [--no-engine] [--no-products] [--model DIR] [--prefill 512] [--hugepages] [--step-pairs 48] [--batch-pairs 24] [--contexts 1024,4096 | --no-contexts]\n",
               why);
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) out.push_back(x);
  return out;
}

std::vector<int> ints(const std::string& k, const std::string& v) {
  std::vector<int> out;
  for (const auto& s : split(v)) {
    char* end = nullptr;
    const long n = std::strtol(s.c_str(), &end, 10);
    if (*end || n < 1) usage((k + " needs integers >= 1, got '" + v + "'").c_str());
    out.push_back(static_cast<int>(n));
  }
  return out;
}

// A count for --step-pairs / --batch-pairs: 0 (skip) to 100000.
int count(const std::string& k, const std::string& v, const char* what) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 0 || n > 100000)
    usage((k + " takes a count of " + what + ", 0 (skip) to 100000, got '" + v + "'").c_str());
  return static_cast<int>(n);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + k).c_str());
      return argv[++i];
    };
    if (k == "--threads") a.threads = ints(k, val())[0];
    else if (k == "--reps") a.reps = ints(k, val())[0];
    else if (k == "--new") a.max_new = ints(k, val())[0];
    else if (k == "--rows") a.rows = ints(k, val());
    else if (k == "--engine-batches") a.engine_batches = ints(k, val());
    else if (k == "--dtypes") a.dtypes = split(val());
    else if (k == "--no-engine") a.engine = false;
    else if (k == "--no-products") a.products = false;
    else if (k == "--model") a.model = val();
    else if (k == "--prefill") a.prefill = std::atoi(val().c_str());
    else if (k == "--hugepages") a.hugepages = true;
    else if (k == "--step-pairs") a.step_pairs = count(k, val(), "steps");
    else if (k == "--batch-pairs") a.batch_pairs = count(k, val(), "pairs");
    else if (k == "--contexts") a.contexts = ints(k, val());
    else if (k == "--no-contexts") a.contexts.clear();
    else usage(("unknown argument " + k).c_str());
  }
  for (const auto& d : a.dtypes)
    if (d != "fp32" && d != "bf16") usage(("--dtypes takes fp32 and bf16, got '" + d + "'").c_str());
  return a;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- 1. bandwidth ----------------------------------------------------------------

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) float sum_avx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  alignas(32) float o[8];
  _mm256_store_ps(o, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  return o[0] + o[1] + o[2] + o[3] + o[4] + o[5] + o[6] + o[7];
}
#endif

float sum_plain(const float* p, size_t n) {
  float a[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int u = 0; u < 8; ++u) a[u] += p[i + u];
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

bool g_hugepages = false;

// `bytes` of memory: 64-byte aligned on the allocator's pages, or (huge) on 2 MiB
// boundaries advised into transparent huge pages before it is touched, so that its
// faults take huge pages where THP allows.
void* bench_alloc(size_t bytes, bool huge) {
  const size_t align = huge ? size_t{2} << 20 : 64;
  const size_t size = (bytes + align - 1) / align * align;
  void* q = std::aligned_alloc(align, size);
  if (q == nullptr) {
    std::fprintf(stderr, "decode_bench: cannot allocate %zu bytes\n", size);
    std::exit(1);
  }
  if (huge && ::madvise(q, size, MADV_HUGEPAGE) != 0)
    std::fprintf(stderr, "decode_bench: madvise(MADV_HUGEPAGE) failed: %s\n", std::strerror(errno));
  return q;
}

// The machine's THP mode and how much of this process sits in huge pages (kB).
std::string hugepage_state() {
  std::string mode = "?", line;
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  if (thp) std::getline(thp, mode);
  long kb = -1;
  std::ifstream smaps("/proc/self/smaps_rollup");
  while (std::getline(smaps, line))
    if (line.rfind("AnonHugePages:", 0) == 0) kb = std::atol(line.c_str() + 14);
  return "THP '" + mode + "', AnonHugePages " + std::to_string(kb) + " kB";
}

// A copy of w in bench_alloc memory (huge pages with --hugepages).
at::Tensor bench_copy(const at::Tensor& w) {
  const size_t bytes = static_cast<size_t>(w.numel() * w.element_size());
  void* q = bench_alloc(bytes, g_hugepages);
  std::memcpy(q, w.data_ptr(), bytes);
  return at::from_blob(q, w.sizes(), [](void* v) { std::free(v); }, w.options());
}

// Read bandwidth in bytes/s of 1 GiB on 4 KiB pages (huge = false) or on huge pages,
// with `threads` threads, best of `reps`.
double read_bandwidth_of(int threads, int reps, bool huge) {
  const size_t n = size_t{1} << 28;  // 1 GiB of floats, allocated and filled once
  auto make = [&](bool h) {
    float* q = static_cast<float*>(bench_alloc(n * sizeof(float), h));
    for (size_t i = 0; i < n; ++i) q[i] = 1.0f;
    return q;
  };
  static float* p4k = make(false);
  static float* p2m = make(true);
  const float* p = huge ? p2m : p4k;
#if defined(__x86_64__) && defined(__GNUC__)
  const bool avx2 = __builtin_cpu_supports("avx2");
#endif
  double best = 1e30;
  float total = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<float> part(static_cast<size_t>(threads));
    const double t0 = now_s();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        const size_t b = n * t / threads / 32 * 32, e = n * (t + 1) / threads / 32 * 32;
#if defined(__x86_64__) && defined(__GNUC__)
        part[t] = avx2 ? sum_avx2(p + b, e - b) : sum_plain(p + b, e - b);
#else
        part[t] = sum_plain(p + b, e - b);
#endif
      });
    for (auto& t : ts) t.join();
    best = std::min(best, now_s() - t0);
    for (float v : part) total += v;
  }
  if (total <= 0) usage("bandwidth test summed to nothing");  // keeps the sums alive
  return static_cast<double>(n * sizeof(float)) / best;
}

// The bound's bandwidth: the best of both page sizes (the most this machine reads).
double read_bandwidth(int threads, int reps) {
  return std::max(read_bandwidth_of(threads, reps, false), read_bandwidth_of(threads, reps, true));
}

// The bytes a step must read, where they lie: each weight tensor's memory.
struct Span {
  const char* p;
  size_t n;
};

std::vector<Span> spans_of(const std::vector<at::Tensor>& ts) {
  std::vector<Span> out;
  for (const auto& t : ts)
    out.push_back({static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel() * t.element_size())});
  return out;
}

// A sum of n bytes as 64-bit integers (integer adds: no float assist on whatever bit
// patterns bf16 pairs make), 128 bytes per iteration as the float read above.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) uint64_t sum_bytes_avx2(const char* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  alignas(32) uint64_t o[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(o),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  uint64_t s = o[0] + o[1] + o[2] + o[3];
  for (; i < n; ++i) s += static_cast<unsigned char>(p[i]);
  return s;
}
#endif

uint64_t sum_bytes_plain(const char* p, size_t n) {
  uint64_t s = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    s += v;
  }
  for (; i < n; ++i) s += static_cast<unsigned char>(p[i]);
  return s;
}

// sum_bytes_avx2 where the CPU has AVX2, else sum_bytes_plain.
uint64_t sum_bytes(const char* p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? sum_bytes_avx2(p, n) : sum_bytes_plain(p, n);
#else
  return sum_bytes_plain(p, n);
#endif
}

uint64_t g_sink = 0;  // keeps the sums alive

// Seconds to read every span `passes` times with the pool's threads, the bytes split
// evenly over the threads in span order (a STREAM-style read of exactly the step's
// weights on exactly their pages: the bound the step itself can reach).
double read_spans(const std::vector<Span>& spans, model::SpinPool& pool, int passes) {
  size_t total = 0;
  for (const auto& s : spans) total += s.n;
  const int threads = pool.threads();
  std::vector<uint64_t> part(static_cast<size_t>(threads));
  const std::function<void(int64_t, int64_t)> job = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const size_t b = total * static_cast<size_t>(t) / threads, e = total * static_cast<size_t>(t + 1) / threads;
      uint64_t s = 0;
      size_t at = 0;
      for (const auto& sp : spans) {
        const size_t lo = std::max(b, at), hi = std::min(e, at + sp.n);
        if (lo < hi) {
          const char* q = sp.p + (lo - at);
          s += sum_bytes(q, hi - lo);
        }
        at += sp.n;
      }
      part[static_cast<size_t>(t)] += s;
    }
  };
  const double t0 = now_s();
  for (int i = 0; i < passes; ++i) pool.parallel_for(threads, job);
  const double dt = now_s() - t0;
  for (uint64_t v : part) g_sink += v;
  return dt;
}

// read_spans with each region (spans [ends[i-1], ends[i])) split as one engine call
// splits it: its bytes cut evenly into threads() ranges, range 0 to helper 1, range t to
// helper t + 1, the last to the caller (SpinPool::parallel_chunks' order), so that each
// thread reads the bytes the step gave it. Why: which core reads which bytes matters at
// this VM's fast moments. A read of the 311 MB head whose halves the threads had swapped
// since the engine's product before it reached 66-72 GB/s where the same read on the
// product's split reached 81-87 GB/s, seconds apart (bench/README.md, session 21). A read
// split as read_spans splits (the caller the first half of all the bytes) could make
// the step's fraction of it too high; in the step pairs at ~82 GB/s the two measured the
// same (80-83 and 81-84 GB/s). Returns -1 (after a FAIL line) if the threads' ranges did
// not cover every byte exactly once.
double read_regions(const std::vector<Span>& spans, const std::vector<size_t>& ends, model::SpinPool& pool,
                    int passes) {
  const int threads = pool.threads();
  std::vector<uint64_t> part(static_cast<size_t>(threads));
  std::vector<size_t> got(static_cast<size_t>(threads));
  const std::function<void(int64_t, int64_t)> job = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      got[static_cast<size_t>(t)] = 0;
      const size_t range = static_cast<size_t>((t + threads - 1) % threads);  // parallel_chunks' own range
      uint64_t s = 0;
      size_t first = 0;
      for (size_t end : ends) {
        size_t total = 0;
        for (size_t i = first; i < end; ++i) total += spans[i].n;
        const size_t b = total * range / static_cast<size_t>(threads), e = total * (range + 1) / static_cast<size_t>(threads);
        size_t at = 0;
        for (size_t i = first; i < end; ++i) {
          const Span& sp = spans[i];
          const size_t lo = std::max(b, at), hi = std::min(e, at + sp.n);
          if (lo < hi) {
            got[static_cast<size_t>(t)] += hi - lo;
            s += sum_bytes(sp.p + (lo - at), hi - lo);
          }
          at += sp.n;
        }
        first = end;
      }
      part[static_cast<size_t>(t)] += s;
    }
  };
  const double t0 = now_s();
  for (int i = 0; i < passes; ++i) pool.parallel_for(threads, job);
  const double dt = now_s() - t0;
  for (uint64_t v : part) g_sink += v;
  size_t want = 0, have = 0;
  for (const auto& sp : spans) want += sp.n;
  for (size_t v : got) have += v;
  if (have != want || ends.empty() || ends.back() != spans.size()) {
    std::printf("FAIL: read_regions read %zu bytes of %zu (regions ending at span %zu of %zu)\n", have, want,
                ends.empty() ? size_t{0} : ends.back(), spans.size());
    return -1.0;
  }
  return dt;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- 2. products -----------------------------------------------------------------


// One decode step's linear layers of the 0.6B shape: per layer q, k, v, o, gate, up,
// down (each its own tensor), then the head.
std::vector<at::Tensor> step_weights(const model::ModelConfig& c, at::ScalarType dt) {
  std::vector<at::Tensor> ws;
  at::Generator gen = at::detail::createCPUGenerator(7);
  const int64_t H = c.hidden_size, I = c.intermediate_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim;
  auto make = [&](int64_t o, int64_t k) {
    ws.push_back(bench_copy((at::randn({o, k}, gen, at::TensorOptions().dtype(at::kFloat)) * 0.02).to(dt).contiguous()));
  };
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    make(q, H);
    make(kv, H);
    make(kv, H);
    make(H, q);
    make(I, H);
    make(I, H);
    make(H, I);
  }
  make(c.vocab_size, H);
  return ws;
}

// A layer's seven weights (q, k, v, o, gate, up, down) as the engine's regions: (first,
// count) per region, q/k/v in one and gate/up in one.
constexpr std::pair<size_t, size_t> kLayerRegions[] = {{0, 3}, {3, 1}, {4, 2}, {6, 1}};

// The products of one step at N rows (inputs of the right widths, reused), grouped as
// the engine runs them: per layer kLayerRegions; then the head.
double step_products(const std::vector<at::Tensor>& ws, const std::vector<at::Tensor>& xs, model::SpinPool& pool,
                     const model::DecodeLayout* packed = nullptr) {
  auto copies = [&](const std::vector<at::Tensor>& group) {
    std::vector<const model::detail::PackedWeight*> out;
    for (const auto& w : group) out.push_back(packed != nullptr ? packed->find(w) : nullptr);
    return out;
  };
  auto input = [&](const at::Tensor& w) -> const at::Tensor& {
    return xs[static_cast<size_t>(w.size(1) == xs[0].size(1) ? 0 : w.size(1) == xs[1].size(1) ? 1 : 2)];
  };
  const double t0 = now_s();
  size_t i = 0;
  for (; i + 7 <= ws.size(); i += 7) {
    for (const auto& [first, count] : kLayerRegions) {
      const std::vector<at::Tensor> group(ws.begin() + static_cast<long>(i + first),
                                          ws.begin() + static_cast<long>(i + first + count));
      const std::vector<at::Tensor> ys =
          model::detail::row_linear_many(input(group[0]), group, std::vector<at::Tensor>(count), &pool, copies(group));
      (void)ys;
    }
  }
  for (; i < ws.size(); ++i)
    (void)model::detail::row_linear(input(ws[i]), ws[i], {}, &pool, packed != nullptr ? packed->find(ws[i]) : nullptr);
  return now_s() - t0;
}

bool validate_products(const std::vector<at::Tensor>& ws, at::ScalarType dt, model::SpinPool& pool) {
  at::Generator gen = at::detail::createCPUGenerator(11);
  // One of each distinct shape (the first layer's seven and the head).
  for (size_t i = 0; i < 8; ++i) {
    const at::Tensor& w = i < 7 ? ws[i] : ws.back();
    const at::Tensor x = at::randn({5, w.size(1)}, gen, at::TensorOptions().dtype(at::kFloat)).to(dt);
    const at::Tensor y = model::detail::row_linear(x, w, {}, &pool);
    const at::Tensor ref = at::linear(x.to(at::kDouble), w.to(at::kDouble));
    const double rel = ((y.to(at::kDouble) - ref).abs().max() / ref.abs().max()).item<double>();
    const double tol = dt == at::kFloat ? 1e-4 : 1e-2;
    if (!(rel <= tol)) {
      std::printf("FAIL: product %zu [%ld x %ld] relative error %.3g > %.0e\n", i, (long)w.size(0), (long)w.size(1),
                  rel, tol);
      return false;
    }
    const at::Tensor y1 = model::detail::row_linear(x.narrow(0, 0, 1).contiguous(), w, {}, &pool);
    if (std::memcmp(y1.data_ptr(), y.data_ptr(), static_cast<size_t>(y1.numel() * y1.element_size())) != 0) {
      std::printf("FAIL: product %zu: row 0 of 5 rows differs from the row alone\n", i);
      return false;
    }
  }
  // The grouped products the step times (q/k/v, gate/up): each the bits of its product alone.
  for (const auto& [first, count] : {std::pair<size_t, size_t>{0, 3}, {4, 2}}) {
    const std::vector<at::Tensor> group(ws.begin() + static_cast<long>(first),
                                        ws.begin() + static_cast<long>(first + count));
    const at::Tensor x = at::randn({3, group[0].size(1)}, gen, at::TensorOptions().dtype(at::kFloat)).to(dt);
    const std::vector<at::Tensor> ys = model::detail::row_linear_many(x, group, std::vector<at::Tensor>(count), &pool);
    for (size_t j = 0; j < count; ++j) {
      const at::Tensor alone = model::detail::row_linear(x, group[j], {}, &pool);
      if (std::memcmp(alone.data_ptr(), ys[j].data_ptr(), static_cast<size_t>(alone.numel() * alone.element_size())) !=
          0) {
        std::printf("FAIL: product %zu computed in a group differs from it alone\n", first + j);
        return false;
      }
    }
  }
  return true;
}

// ---- 3. engine -------------------------------------------------------------------

struct EngineRun {
  double decode_tok_s = 0;
  double same_bytes = 0;  // median over reps of (reading the weights as often) / (decoding)
  double read_gbs = 0;    // median over reps of that read's GB/s
  std::vector<GenResult> out;
};

EngineRun engine_decode(model::Transformer& m, int batch, int max_new, int threads, int reps, bool huge_pages,
                        bool packed, const std::function<std::vector<Span>()>& weights, model::SpinPool& pool) {
  rollout::EngineOptions o;
  o.huge_pages = huge_pages;
  o.packed_decode = packed;
  o.max_batch = batch;
  o.max_context = 64 + max_new;
  o.prefix_cache = false;
  o.threads = threads;
  rollout::Engine e(m, o);
  std::mt19937_64 g(5);
  std::uniform_int_distribution<int> d(0, 150000);
  std::vector<GenRequest> reqs, pre;
  for (int b = 0; b < batch; ++b) {
    TokenIds p;
    for (int i = 0; i < 16; ++i) p.push_back(d(g));
    SamplingParams s;
    s.temperature = 0.0f;
    s.max_new_tokens = max_new;
    reqs.push_back({p, s});
    s.max_new_tokens = 1;
    pre.push_back({p, s});
  }
  // The prefill plus one token, timed apart: decode time = full - this. Best of `reps`.
  std::vector<GenRequest> warm = pre;  // warm-up: allocations, RoPE table, the decode layout (one decode step)
  for (auto& w : warm) w.sampling.max_new_tokens = 2;
  e.generate(warm);
  // The weights where the engine left them (moved into huge pages or not), read as many
  // times as the decode steps read them, right after each repetition: the bound of the
  // same bytes on the same pages at the same moment (this VM's bandwidth swings 1.5x
  // within a minute, so a bound sampled apart says little about one run).
  const std::vector<Span> spans = weights();
  size_t bytes = 0;
  for (const auto& sp : spans) bytes += sp.n;
  EngineRun r;
  std::vector<double> ratios, rates;
  for (int rep = 0; rep < reps; ++rep) {
    const double t0 = now_s();
    e.generate(pre);
    const double t_pre = now_s() - t0;
    const double t1 = now_s();
    r.out = e.generate(reqs);
    const double t_all = now_s() - t1;
    const double t_decode = std::max(1e-9, t_all - t_pre);
    r.decode_tok_s = std::max(r.decode_tok_s, static_cast<double>(batch) * (max_new - 1) / t_decode);
    if (max_new < 2) continue;  // no decode step to pair a read with
    const double t_read = read_spans(spans, pool, max_new - 1);
    ratios.push_back(t_read / t_decode);
    rates.push_back(static_cast<double>(bytes) * (max_new - 1) / t_read / 1e9);
  }
  r.same_bytes = median(ratios);
  r.read_gbs = median(rates);
  return r;
}

// ---- 4. step pairs -----------------------------------------------------------------

// See the header: N batch-1 decode steps, each paired with its products alone and a read
// of their bytes. The weights are where the engine runs above left them.
bool step_pairs(model::Transformer& m, int n, model::SpinPool& pool) {
  at::NoGradGuard ng;
  const model::ModelConfig& c = m->config();
  std::map<std::string, at::Tensor> named;
  for (const auto& kv : m->named_parameters()) named[kv.key()] = kv.value();
  std::vector<at::Tensor> ws;  // per layer q, k, v, o, gate, up, down; then the head
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    for (const char* s : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
      const auto it = named.find("model.layers." + std::to_string(l) + "." + s + ".weight");
      if (it == named.end()) {
        std::printf("FAIL: step pairs: no %s weight in layer %ld\n", s, static_cast<long>(l));
        return false;
      }
      ws.push_back(it->second);
    }
  ws.push_back(m->lm_head_weight());
  const std::vector<Span> spans = spans_of(ws);
  size_t bytes = 0;
  for (const auto& sp : spans) bytes += sp.n;
  const at::ScalarType dt = ws[0].scalar_type();
  at::Generator gen = at::detail::createCPUGenerator(13);
  const auto fo = at::TensorOptions().dtype(at::kFloat);
  const std::vector<at::Tensor> xs = {at::randn({1, c.hidden_size}, gen, fo).to(dt),
                                      at::randn({1, c.num_attention_heads * c.head_dim}, gen, fo).to(dt),
                                      at::randn({1, c.intermediate_size}, gen, fo).to(dt)};
  const int64_t prompt = 16, bs = 16;
  if (prompt + n > c.max_position_embeddings) {
    std::printf("FAIL: --step-pairs %d: the sequence would pass the model's %ld positions (at most %ld steps)\n", n,
                static_cast<long>(c.max_position_embeddings), static_cast<long>(c.max_position_embeddings - prompt));
    return false;
  }
  model::KVCache cache(c, (prompt + n + bs - 1) / bs + 1, bs, dt, at::kCPU);
  cache.batch_invariant = true;
  std::vector<int32_t> blocks(static_cast<size_t>(cache.n_blocks()));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  const auto lopts = at::TensorOptions().dtype(at::kLong);
  const at::Tensor prompt_ids = at::randint(0, c.vocab_size, {prompt}, gen, lopts);
  at::Tensor logits = m->forward_cached(prompt_ids, {model::CachedRow{0, prompt, &blocks}}, cache, &pool);
  int64_t tok = logits.argmax(-1).item<int64_t>();
  // The same steps reading the weights' copies in the decode layout (model::DecodeLayout,
  // as the engine's one-sequence steps do), in a second cache: its logits must equal the
  // row-major step's bit for bit (checked every step).
  const model::DecodeLayout packed(m->decode_weights(), &pool);
  // The copies the decode-layout step reads, in its regions (per layer kLayerRegions;
  // then the head), for a read on the step's own split (read_regions).
  std::vector<Span> copies;
  std::vector<size_t> regions;
  for (size_t l = 0; l + 7 <= ws.size(); l += 7)
    for (const auto& [first, count] : kLayerRegions) regions.push_back(l + first + count);
  regions.push_back(ws.size());
  for (size_t i = 0; i < ws.size(); ++i) {
    const model::detail::PackedWeight* pw = packed.find(ws[i]);
    if (pw == nullptr) {
      std::printf("FAIL: step pairs: weight %zu has no copy in the decode layout\n", i);
      return false;
    }
    copies.push_back({static_cast<const char*>(pw->data),
                      static_cast<size_t>(model::detail::packed_weight_elems(pw->O, pw->K, pw->dtype)) *
                          static_cast<size_t>(ws[i].element_size())});
  }
  model::KVCache cache_p(c, cache.n_blocks(), bs, dt, at::kCPU);
  cache_p.batch_invariant = true;
  (void)m->forward_cached(prompt_ids, {model::CachedRow{0, prompt, &blocks}}, cache_p, &pool, &packed);
  // And the decode-layout step with the gap warm off (model::detail::set_decode_warm_bytes:
  // helper 1 reads the next region's front between regions), in a third cache: the same
  // bits again.
  model::KVCache cache_n(c, cache.n_blocks(), bs, dt, at::kCPU);
  cache_n.batch_invariant = true;
  (void)m->forward_cached(prompt_ids, {model::CachedRow{0, prompt, &blocks}}, cache_n, &pool, &packed);
  std::printf("\n## Batch-1 decode steps of Transformer::forward_cached (%s), row-major and in the decode layout "
              "(%.2f GB copied), each paired with its products alone and a read of the same bytes (%.2f GB), medians "
              "of 12 steps; the decode-layout step also without the gap warm\n\n"
              "| read GB/s | step ms | of read | products ms | of read | step - products ms | packed step ms | of read "
              "| packed products ms | of read | packed step - products ms | packed / row-major step "
              "| packed step, no warm, of read | no warm / warm step | read of the copies on the step's split GB/s "
              "| packed step of it | packed products of it |\n"
              "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
              dt == at::kFloat ? "fp32" : "bf16", static_cast<double>(packed.bytes()) / 1e9,
              static_cast<double>(bytes) / 1e9);
  std::vector<double> te, tp, tr, tpe, tpp, speed, tpn, warm_gain, trm;
  size_t copy_bytes = 0;
  for (const auto& sp : copies) copy_bytes += sp.n;
  for (int i = 0; i < n; ++i) {
    const at::Tensor id = at::full({1}, tok, lopts);
    const double t0 = now_s();
    logits = m->forward_cached(id, {model::CachedRow{prompt + i, 1, &blocks}}, cache, &pool);
    const double t1 = now_s();
    (void)step_products(ws, xs, pool);
    const double t2 = now_s();
    const at::Tensor logits_p = m->forward_cached(id, {model::CachedRow{prompt + i, 1, &blocks}}, cache_p, &pool, &packed);
    const double t3 = now_s();
    (void)step_products(ws, xs, pool, &packed);
    const double t4 = now_s();
    model::detail::set_decode_warm_bytes(0);
    pool.warm(nullptr, 0, nullptr);  // nor what the products before it left to warm
    const at::Tensor logits_n = m->forward_cached(id, {model::CachedRow{prompt + i, 1, &blocks}}, cache_n, &pool, &packed);
    const double t5 = now_s();
    model::detail::set_decode_warm_bytes(-1);
    tr.push_back(read_spans(spans, pool, 1));
    trm.push_back(read_regions(copies, regions, pool, 1));
    if (trm.back() < 0) return false;
    tok = logits.argmax(-1).item<int64_t>();
    te.push_back(t1 - t0);
    tp.push_back(t2 - t1);
    tpe.push_back(t3 - t2);
    tpp.push_back(t4 - t3);
    speed.push_back((t1 - t0) / (t3 - t2));
    tpn.push_back(t5 - t4);
    warm_gain.push_back((t5 - t4) / (t3 - t2));
    if (!std::isfinite(logits.max().item<float>())) {
      std::printf("FAIL: step %d's logits are not finite\n", i);
      return false;
    }
    if (logits.sizes() != logits_p.sizes() ||
        std::memcmp(logits.data_ptr(), logits_p.data_ptr(), static_cast<size_t>(logits.numel()) * sizeof(float)) != 0) {
      std::printf("FAIL: step %d's logits from the decode layout differ from the row-major step's\n", i);
      return false;
    }
    if (std::memcmp(logits_n.data_ptr(), logits_p.data_ptr(), static_cast<size_t>(logits.numel()) * sizeof(float)) != 0) {
      std::printf("FAIL: step %d's logits without the gap warm differ from those with it\n", i);
      return false;
    }
    if (te.size() == 12 || i == n - 1) {
      const double e = median(te), p = median(tp), r = median(tr), pe = median(tpe), pp = median(tpp);
      const double rm = median(trm);
      std::printf("| %.1f | %.2f | %.0f%% | %.2f | %.0f%% | %.2f | %.2f | %.0f%% | %.2f | %.0f%% | %.2f | %.2fx | %.0f%% "
                  "| %.3fx | %.1f | %.0f%% | %.0f%% |\n",
                  static_cast<double>(bytes) / r / 1e9, e * 1e3, 100.0 * r / e, p * 1e3, 100.0 * r / p, (e - p) * 1e3,
                  pe * 1e3, 100.0 * r / pe, pp * 1e3, 100.0 * r / pp, (pe - pp) * 1e3, median(speed),
                  100.0 * r / median(tpn), median(warm_gain), static_cast<double>(copy_bytes) / rm / 1e9,
                  100.0 * rm / pe, 100.0 * rm / pp);
      std::fflush(stdout);
      te.clear();
      tp.clear();
      tr.clear();
      tpe.clear();
      tpp.clear();
      speed.clear();
      tpn.clear();
      warm_gain.clear();
      trm.clear();
    }
  }
  return true;
}

// ---- 5. batch pairs ------------------------------------------------------------------

// n pairs of decode steps of Transformer::forward_cached at the same moment: one sequence
// alone (the decode layout, as the engine's one-sequence steps read the weights) and 8
// sequences together (row-major), one right after the other (the one-row step first in
// even pairs, second in odd ones), each pair then a read of the weights. Tokens per
// second at 8 rows over tokens per second at 1 row, per pair: the VM's bandwidth swings
// by half from one second to the next, so two runs seconds apart compare moments as
// much as batch sizes. Row 0 of the 8 is the lone sequence (same
// prompt, same greedy tokens): its logits must equal the lone step's bit for bit.
bool batch_pairs(model::Transformer& m, int n, model::SpinPool& pool) {
  at::NoGradGuard ng;
  const model::ModelConfig& c = m->config();
  const std::vector<at::Tensor> ws = m->decode_weights();
  const std::vector<Span> spans = spans_of(ws);
  size_t bytes = 0;
  for (const auto& sp : spans) bytes += sp.n;
  const at::ScalarType dt = ws[0].scalar_type();
  constexpr int64_t kRows = 8, kPrompt = 16, kBs = 16;
  if (kPrompt + n > c.max_position_embeddings) {
    std::printf("FAIL: --batch-pairs %d: the sequences would pass the model's %ld positions (at most %ld pairs)\n", n,
                static_cast<long>(c.max_position_embeddings), static_cast<long>(c.max_position_embeddings - kPrompt));
    return false;
  }
  const int64_t per_row = (kPrompt + n + kBs - 1) / kBs + 1;
  model::KVCache one(c, per_row, kBs, dt, at::kCPU), eight(c, kRows * per_row, kBs, dt, at::kCPU);
  one.batch_invariant = eight.batch_invariant = true;
  std::vector<std::vector<int32_t>> blocks(kRows);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t i = 0; i < per_row; ++i) blocks[r].push_back(static_cast<int32_t>(r * per_row + i));
  const model::DecodeLayout packed(ws, &pool);
  at::Generator gen = at::detail::createCPUGenerator(19);
  const auto lopts = at::TensorOptions().dtype(at::kLong);
  const at::Tensor prompts = at::randint(0, c.vocab_size, {kRows * kPrompt}, gen, lopts);
  std::vector<model::CachedRow> rows;
  for (int64_t r = 0; r < kRows; ++r) rows.push_back(model::CachedRow{0, kPrompt, &blocks[r]});
  at::Tensor l8 = m->forward_cached(prompts, rows, eight, &pool);
  at::Tensor l1 = m->forward_cached(prompts.slice(0, 0, kPrompt), {model::CachedRow{0, kPrompt, &blocks[0]}}, one,
                                    &pool, &packed);
  if (std::memcmp(l1.data_ptr(), l8.data_ptr(), static_cast<size_t>(l1.numel()) * sizeof(float)) != 0) {
    std::printf("FAIL: batch pairs: the lone sequence's prefill logits differ from row 0's of the 8\n");
    return false;
  }
  std::printf("\n## Batch pairs (%s): a one-sequence decode step (decode layout) and an 8-sequence step (row-major) of "
              "Transformer::forward_cached, one right after the other, then a read of the weights (%.2f GB); medians "
              "of 12 pairs\n\n"
              "| read GB/s | 1 row ms | 8 rows ms | 1 row tok/s | 8 rows tok/s | 8 rows / 1 row tok/s | lowest pair |\n"
              "|--:|--:|--:|--:|--:|--:|--:|\n",
              dt == at::kFloat ? "fp32" : "bf16", static_cast<double>(bytes) / 1e9);
  std::vector<double> t1s, t8s, ratios, reads, all;
  for (int i = 0; i < n; ++i) {
    const at::Tensor next = l8.argmax(-1);  // [8]: each row's greedy token
    for (int64_t r = 0; r < kRows; ++r) rows[r] = model::CachedRow{kPrompt + i, 1, &blocks[r]};
    // The one-row step first in even pairs, the 8-row step first in odd ones.
    double a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    for (int which = 0; which < 2; ++which) {
      if ((which == 0) == (i % 2 == 0)) {
        a0 = now_s();
        l1 = m->forward_cached(next.slice(0, 0, 1), {model::CachedRow{kPrompt + i, 1, &blocks[0]}}, one, &pool,
                               &packed);
        a1 = now_s();
      } else {
        b0 = now_s();
        l8 = m->forward_cached(next, rows, eight, &pool);
        b1 = now_s();
      }
    }
    reads.push_back(read_spans(spans, pool, 1));
    if (!std::isfinite(l8.max().item<float>()) ||
        std::memcmp(l1.data_ptr(), l8.data_ptr(), static_cast<size_t>(l1.numel()) * sizeof(float)) != 0) {
      std::printf("FAIL: batch pair %d: the lone sequence's logits differ from row 0's of the 8 (or are not "
                  "finite)\n", i);
      return false;
    }
    t1s.push_back(a1 - a0);
    t8s.push_back(b1 - b0);
    ratios.push_back(kRows * (a1 - a0) / (b1 - b0));
    all.push_back(ratios.back());
    if (t1s.size() == 12 || i == n - 1) {
      const double a = median(t1s), b = median(t8s);
      std::printf("| %.1f | %.2f | %.2f | %.1f | %.1f | %.2fx | %.2fx |\n", static_cast<double>(bytes) / median(reads) / 1e9,
                  a * 1e3, b * 1e3, 1.0 / a, kRows / b, median(ratios), *std::min_element(ratios.begin(), ratios.end()));
      std::fflush(stdout);
      t1s.clear();
      t8s.clear();
      ratios.clear();
      reads.clear();
    }
  }
  std::printf("All %d pairs: 8 rows / 1 row tok/s median %.2fx, lowest %.2fx, highest %.2fx\n", n, median(all),
              *std::min_element(all.begin(), all.end()), *std::max_element(all.begin(), all.end()));
  return true;
}

// ---- 6. long contexts ---------------------------------------------------------------

bool long_contexts(model::Transformer& m, const std::vector<int>& contexts, model::SpinPool& pool) {
  at::NoGradGuard ng;
  const model::ModelConfig& c = m->config();
  const at::ScalarType dt = m->lm_head_weight().scalar_type();
  const std::vector<at::Tensor> ws = m->decode_weights();
  size_t wbytes = 0;
  for (const auto& w : ws) wbytes += static_cast<size_t>(w.numel() * w.element_size());
  const model::DecodeLayout packed(ws, &pool);
  std::printf("\n## Batch-1 decode steps after long contexts (%s, decode layout), each paired with a read of the "
              "weights and the row's cached keys and values, medians of 12 steps\n\n"
              "| context | KV GB read | step ms | tok/s | same-bytes read GB/s | of same-bytes read |\n"
              "|--:|--:|--:|--:|--:|--:|\n",
              dt == at::kFloat ? "fp32" : "bf16");
  const int64_t bs = 16, steps = 12;
  const auto lopts = at::TensorOptions().dtype(at::kLong);
  std::vector<int> cs = {16};
  cs.insert(cs.end(), contexts.begin(), contexts.end());
  for (int C : cs) {
    const int64_t nb = (C + steps + bs - 1) / bs + 1;
    model::KVCache cache(c, nb, bs, dt, at::kCPU);
    cache.batch_invariant = true;
    at::Generator gen = at::detail::createCPUGenerator(17);
    for (int64_t l = 0; l < cache.num_layers(); ++l) {
      cache.k(l).normal_(0.0, 1.0, gen);
      cache.v(l).normal_(0.0, 1.0, gen);
    }
    std::vector<int32_t> blocks(static_cast<size_t>(nb));
    for (int64_t i = 0; i < nb; ++i) blocks[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    int64_t tok = 7;
    // Validation: the first step's logits in two copies of the cache as it is, on a pool of
    // one more thread without the layout and on `pool` with it: the same bits.
    {
      auto step_in_copy = [&](model::SpinPool* p, const model::DecodeLayout* layout) {
        model::KVCache copy(c, nb, bs, dt, at::kCPU);
        copy.batch_invariant = true;
        for (int64_t l = 0; l < cache.num_layers(); ++l) {
          copy.k(l).copy_(cache.k(l));
          copy.v(l).copy_(cache.v(l));
        }
        return m->forward_cached(at::full({1}, tok, lopts), {model::CachedRow{C, 1, &blocks}}, copy, p, layout);
      };
      model::SpinPool more(pool.threads() + 1);
      const at::Tensor a = step_in_copy(&more, nullptr);
      const at::Tensor b = step_in_copy(&pool, &packed);
      if (!std::isfinite(a.max().item<float>()) ||
          std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<size_t>(a.numel()) * sizeof(float)) != 0) {
        std::printf("FAIL: at context %d the step's logits depend on the thread split or the layout\n", C);
        return false;
      }
      // And against the portable loops of the attention (another summation order): within
      // float rounding (fp32) or the bf16 cache's and products' rounding.
      model::detail::force_attention_avx512(false);
      const at::Tensor p = step_in_copy(&pool, nullptr);
      model::detail::force_attention_avx512(std::nullopt);
      const double diff = (p - a).abs().max().item<double>(), tol = dt == at::kFloat ? 1e-2 : 0.5;
      if (!(diff <= tol)) {
        std::printf("FAIL: at context %d the step's logits differ from the portable attention's by %g (> %g)\n", C,
                    diff, tol);
        return false;
      }
    }
    std::vector<double> te, tr, tb, ratio, kv_bytes;
    for (int64_t i = 0; i < steps; ++i) {
      const at::Tensor id = at::full({1}, tok, lopts);
      const double t0 = now_s();
      const at::Tensor logits = m->forward_cached(id, {model::CachedRow{C + i, 1, &blocks}}, cache, &pool, &packed);
      const double t1 = now_s();
      tok = logits.argmax(-1).item<int64_t>();
      // What the step read: the weights and, per layer, the blocks holding positions 0..C+i.
      const int64_t used = (C + i) / bs + 1;
      std::vector<at::Tensor> read = ws;
      for (int64_t l = 0; l < cache.num_layers(); ++l) {
        read.push_back(cache.k(l).narrow(0, 0, used));
        read.push_back(cache.v(l).narrow(0, 0, used));
      }
      const std::vector<Span> spans = spans_of(read);
      size_t total = 0;
      for (const auto& sp : spans) total += sp.n;
      kv_bytes.push_back(static_cast<double>(total - wbytes));
      tr.push_back(read_spans(spans, pool, 1));
      tb.push_back(static_cast<double>(total) / tr.back());
      te.push_back(t1 - t0);
      ratio.push_back(tr.back() / te.back());
    }
    const double e = median(te);
    std::printf("| %d | %.3f | %.2f | %.1f | %.1f | %.0f%% |\n", C, median(kv_bytes) / 1e9, e * 1e3, 1.0 / e,
                median(tb) / 1e9, 100.0 * median(ratio));
    std::fflush(stdout);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  g_hugepages = a.hugepages;
  at::set_num_threads(1);
  std::printf("decode_bench: %s, %d threads, load %s\n", bench::cpu_name().c_str(), a.threads,
              bench::load_average().c_str());

  std::printf("\n## Read bandwidth (1 GiB, best of %d; the bound below takes the better page size)\n\n"
              "| threads | 4 KiB pages GB/s | huge pages GB/s |\n|--:|--:|--:|\n", a.reps);
  for (int t = 1; t <= a.threads; ++t)
    std::printf("| %d | %.1f | %.1f |\n", t, read_bandwidth_of(t, a.reps, false) / 1e9,
                read_bandwidth_of(t, a.reps, true) / 1e9);
  std::printf("\n%s (after the bandwidth buffers)\n", hugepage_state().c_str());

  const model::ModelConfig c = bench::qwen3_06b_shape();
  model::SpinPool pool(a.threads);
  std::printf("\n## One decode step's products, Qwen3-0.6B shape (row_linear, %d threads, best of %d)\n\n", a.threads,
              4 * a.reps);
  std::printf("| dtype | kernel | rows | weights GB | ms / step | GB/s | of bandwidth | same-bytes read GB/s | of same-bytes read | bound tok/s | tok/s |\n");
  std::printf("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  std::vector<model::detail::RowLinearIsa> isas;
  for (auto i : {model::detail::RowLinearIsa::kAvx2, model::detail::RowLinearIsa::kAvx512,
                 model::detail::RowLinearIsa::kAvx512Bf16})
    if (model::detail::row_linear_isa_supported(i)) isas.push_back(i);
  if (isas.empty()) isas.push_back(model::detail::RowLinearIsa::kPortable);
  for (const auto& dn : a.products ? a.dtypes : std::vector<std::string>{}) {
    const at::ScalarType dt = dn == "fp32" ? at::kFloat : at::kBFloat16;
    const std::vector<at::Tensor> ws = step_weights(c, dt);
    double bytes = 0;
    for (const auto& w : ws) bytes += static_cast<double>(w.numel() * w.element_size());
    if (!validate_products(ws, dt, pool)) return 1;
    const std::vector<Span> spans = spans_of(ws);
    if (a.hugepages) std::printf("--hugepages: %s (with the %s weights)\n", hugepage_state().c_str(), dn.c_str());
    for (int n : a.rows)
    for (auto isa : isas)
    for (bool prefetch : {true, false}) {
      // fp32 takes the AVX-512 tiles under avx512bf16 (vdpbf16ps is for bf16 operands).
      if (isa == model::detail::RowLinearIsa::kAvx512Bf16 && dt != at::kBFloat16) continue;
      model::detail::force_row_linear_isa(isa);
      model::detail::set_row_linear_prefetch(prefetch);
      at::Generator gen = at::detail::createCPUGenerator(3);
      const auto fo = at::TensorOptions().dtype(at::kFloat);
      const std::vector<at::Tensor> xs = {
          at::randn({n, c.hidden_size}, gen, fo).to(dt),
          at::randn({n, c.num_attention_heads * c.head_dim}, gen, fo).to(dt),
          at::randn({n, c.intermediate_size}, gen, fo).to(dt)};
      // The bandwidth is sampled beside each repetition (the machine is shared: what
      // other processes take changes both alike); the best of each is kept.
      // And each step is paired with a read of its own weights right after it (the same
      // bytes on the same pages): the median of those ratios is the kernels' fraction of
      // what a plain read of the bytes reaches at that moment.
      double best = 1e30, bw_here = 0;
      std::vector<double> ratios, reads;
      for (int r = 0; r < a.reps; ++r) {
        bw_here = std::max(bw_here, read_bandwidth(a.threads, 1));
        for (int pair = 0; pair < 4; ++pair) {
          const double t = step_products(ws, xs, pool);
          best = std::min(best, t);
          reads.push_back(read_spans(spans, pool, 1));
          ratios.push_back(reads.back() / t);
        }
      }
      const double bw = bw_here;
      const double gbs = bytes / best / 1e9;
      std::printf("| %s | %s%s | %d | %.2f | %.1f | %.1f | %.0f%% | %.1f | %.0f%% | %.1f | %.1f |\n", dn.c_str(),
                  model::detail::row_linear_isa_name(isa), prefetch ? "" : " no-prefetch", n, bytes / 1e9, best * 1e3,
                  gbs, 100.0 * gbs * 1e9 / bw, bytes / median(reads) / 1e9, 100.0 * median(ratios), n * bw / bytes, n / best);
      std::fflush(stdout);
    }
    model::detail::force_row_linear_isa(std::nullopt);
    model::detail::set_row_linear_prefetch(true);
  }

  if (!a.engine) return 0;
  std::printf("\n## Engine decode, random Qwen3-0.6B-shape model, greedy, %d new tokens per row\n\n", a.max_new);
  std::printf("| dtype | weights on | rows | decode tok/s | bound tok/s | of bound | same-bytes read GB/s | of same-bytes read |\n"
              "|---|---|--:|--:|--:|--:|--:|--:|\n");
  for (const auto& dn : a.dtypes) {
    const at::ScalarType dt = dn == "fp32" ? at::kFloat : at::kBFloat16;
    torch::manual_seed(1);
    model::Transformer m{nullptr};
    if (a.model.empty()) {
      m = model::Transformer(c);
      m->to(dt);
    } else {
      m = model::load_pretrained(a.model, dt, at::kCPU);
    }
    m->eval();
    const model::ModelConfig& mc = m->config();
    double bytes = 0;
    for (const auto& p : m->parameters()) bytes += static_cast<double>(p.numel() * p.element_size());
    bytes -= static_cast<double>(mc.vocab_size * mc.hidden_size) * (dt == at::kFloat ? 4 : 2) *
             (mc.tie_word_embeddings ? 0 : 1);  // an untied embedding is read per token, not per row
    std::vector<GenResult> first;
    std::vector<double> small_pages, row_major;
    // First with the weights where the loader put them (EngineOptions::huge_pages off),
    // then moved into huge pages (they stay there), both reading the weights row-major
    // (the engine's default); then with packed_decode on (serve's default), whose
    // one-sequence steps read the weights' copy in the decode layout (batch 1 only: a
    // batch reads the weights).
    for (int variant = 0; variant < 3; ++variant) {
      const bool huge = variant > 0, packed = variant == 2;
      for (size_t bi = 0; bi < a.engine_batches.size(); ++bi) {
        const int b = a.engine_batches[bi];
        // The bytes `bytes` counts: every parameter, less an untied input embedding.
        auto weights = [&] {
          std::vector<at::Tensor> ts;
          for (const auto& kv : m->named_parameters())
            if (mc.tie_word_embeddings || kv.key().find("embed_tokens") == std::string::npos) ts.push_back(kv.value());
          return spans_of(ts);
        };
        EngineRun r = engine_decode(m, b, a.max_new, a.threads, a.reps, huge, packed, weights, pool);
        if (first.empty()) first = r.out;
        // Batch invariance (and the move keeping the bits): row 0 decodes the same tokens.
        if (r.out[0].token_ids != first[0].token_ids) {
          std::printf("FAIL: %s row 0 at batch %d (%s) differs from batch %d on 4 KiB pages\n", dn.c_str(), b,
                      packed ? "decode layout" : huge ? "huge pages" : "4 KiB pages", a.engine_batches[0]);
          return 1;
        }
        double bw_here = 0;
        for (int rep = 0; rep < a.reps; ++rep) bw_here = std::max(bw_here, read_bandwidth(a.threads, 1));
        const double bound = b * bw_here / bytes;
        std::printf("| %s | %s | %d | %.1f | %.1f | %.0f%% | %.1f | %.0f%% |", dn.c_str(),
                    packed ? "huge pages, decode layout" : huge ? "huge pages" : "4 KiB pages", b,
                    r.decode_tok_s, bound, 100.0 * r.decode_tok_s / bound, r.read_gbs, 100.0 * r.same_bytes);
        if (variant == 0) small_pages.push_back(r.decode_tok_s);
        if (variant == 1) {
          row_major.push_back(r.decode_tok_s);
          std::printf(" %.2fx the 4 KiB pages' tok/s", r.decode_tok_s / small_pages[bi]);
        }
        if (variant == 2) std::printf(" %.2fx row-major's tok/s", r.decode_tok_s / row_major[bi]);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    if (a.step_pairs > 0) {
      if (!step_pairs(m, a.step_pairs, pool)) return 1;
    }
    if (a.batch_pairs > 0) {
      if (!batch_pairs(m, a.batch_pairs, pool)) return 1;
    }
    if (!a.contexts.empty()) {
      if (!long_contexts(m, a.contexts, pool)) return 1;
    }
    if (a.prefill > 0) {
      rollout::EngineOptions o;
      o.max_batch = 1;
      o.max_context = a.prefill + 8;
      o.prefix_cache = false;
      o.prefill_chunk = a.prefill;
      o.threads = a.threads;
      rollout::Engine e(m, o);
      std::mt19937_64 g(9);
      std::uniform_int_distribution<int> d(0, static_cast<int>(mc.vocab_size) - 1);
      GenRequest req;
      for (int i = 0; i < a.prefill; ++i) req.prompt_ids.push_back(d(g));
      req.sampling.temperature = 0.0f;
      req.sampling.max_new_tokens = 1;
      double best = 1e30;
      for (int rep = 0; rep < std::max(1, a.reps / 2); ++rep) {
        const double t0 = now_s();
        e.generate({req});
        best = std::min(best, now_s() - t0);
      }
      std::printf("| %s | prefill %d | %.1f prompt tok/s | | |\n", dn.c_str(), a.prefill, a.prefill / best);
      std::fflush(stdout);
    }
  }
  return 0;
}
