// agentr1/model/row_linear.h — batch-invariant kernels for Transformer::forward_cached
// (internal to the model layer; the cache's `batch_invariant` switch selects them).
//
//   at::Tensor y = detail::row_linear(x, w, b, pool);   // x [N,K], w [O,K], b [O] -> y [N,O]
//   auto qkv = detail::row_linear_many(x, {wq, wk, wv}, {bq, bk, bv}, pool);  // one region
//   y = detail::row_linear(x1, w, b, pool, &packed);    // one row from w's copy in the decode
//                                                       // layout (below; model/decode_layout.h)
//   detail::silu_mul_rows_(g, u, pool);                 // g = silu(g) * u, in place
//
// Why: BLAS picks its algorithm by shape (gemv for one row, packed gemm blocks for many,
// small-matrix kernels on some CPUs) and ATen's vectorised loops treat the tail of a
// chunk with scalar code, so a row's numbers change with how many rows it is computed
// beside and how the work is split over threads. These kernels fix the arithmetic of
// every output element by its own inputs only:
//   y[r,o] = dot(x[r,:], w[o,:]) (+ b[o]), the dot product accumulated in 8 fp32 lanes
//   with fused multiply-adds (lane u takes k = u, u+8, ... below K8 = K - K % 8, in
//   order), the lanes summed as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then k = K8..K-1
//   fused in order, then the bias added; rounded once to the storage type.
// The AVX-512, AVX2+FMA and portable kernels compute exactly these operations (AVX-512
// holds two columns' 8 lanes in one register), so the result is the same bit for bit
// for any N, any other rows, any thread count, whichever kernel the CPU runs. One
// exception, for bf16 on CPUs with AVX-512 BF16: those products use vdpbf16ps (two of the
// contract's steps per instruction, weights and x interleaved so that the order is the
// contract's), which flushes denormal inputs and results (|v| < 2^-126) to zero; there a
// bf16 result can differ from another CPU's where a denormal occurs, and nowhere else,
// and since every row count takes those tiles a row's bits still never depend on its
// batch (AGENTR1_ROW_LINEAR_ISA=avx512 gives the other CPUs' bits). Work is
// split by output columns: one element is never split. For decoding (1-16 rows) a tile
// holds up to 8 rows (AVX-512) or 4 (AVX2) and column chunks stay in the cache across
// row groups, so each weight comes from memory once per call, and the next tile's
// weights are prefetched while a tile computes (bench/decode_bench: fractions of the
// memory-bandwidth bound). One row can read a copy of the weights in the decode layout
// (kPackCols below): one sequential stream per thread, no software prefetch
// (set_row_linear_prefetch does not apply to it), the same bits.
// Cost (bench/batch_invariant_bench, bench/README.md): on 2 AMD EPYC cores the AVX2
// kernel matches OpenBLAS's sgemm at 64 rows of a 0.6B model's shapes and beats its gemv
// on one row; on a 4M model's narrow layers (K = 256) it is ~1.3x slower than sgemm at
// 64 rows. bf16/half inputs and weights are widened to fp32 exactly. Without AVX2+FMA
// (or off x86-64 GCC) the portable kernel runs: the same bits, several times slower (a
// warning says so once).
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/model/spin_pool.h"

namespace agentr1::model::detail {

// x [N,K] contiguous (K >= 1), w [O,K] contiguous, b [O] or undefined, all of one dtype
// (float, bfloat16 or half) on the CPU. Returns [N,O] in that dtype. Splits output
// columns over `pool`'s threads when given, else over OpenMP's. Throws Error on other
// shapes, dtypes or devices, naming them.
at::Tensor row_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, SpinPool* pool = nullptr);

enum class RowLinearIsa : int;  // below

// The decode layout: a weight [O,K] copied so that a one-row product reads it as one
// sequential stream. Row-major, a one-row tile reads 4 columns at a time, each a short
// stream (K elements) that restarts every tile; at this VM's fast moments the hardware
// prefetchers follow them late (products at 71-80% of a plain read of the same bytes,
// bench/README.md session 16). Layout: groups of kPackCols columns; within a group the
// columns' 64-byte lines interleaved, line by line:
//   element (c, k) at ((c / 4) * Kl + k / L) * 4L + (c % 4) * L + k % L
// with L = 64 / sizeof(element) and Kl = ceil(K / L) lines per column; the padding
// (columns >= O, k >= K) is zero. The one-row tiles that read it perform the contract's
// operations on the same values in the same order: the same bits as w itself.
inline constexpr int kPackCols = 4;
// The order of a copy's words within each group's lines. kLines: as above. kDpPairs (bf16
// only, for the AVX-512 BF16 kernels): each 32-k step j < J = K / 32 (rounded down) of a
// group holds its four lines as vdpbf16ps takes them, so the kernel reads its operands
// from memory with no permute (half the instructions per byte, which at this VM's fast
// moments decides how many lines a core keeps in flight: bench/README.md, session 22):
//   line 2h + c%4/2, word (c%2)*16 + 2u + 1 holds (c, 32j + 16h + u)      (u < 8)
//                    word (c%2)*16 + 2u     holds (c, 32j + 16h + 8 + u)  (h = 0, 1)
// i.e. column pair (0,1) then (2,3), k's low 16 then high 16, each column's words
// interleaved (k+8+u, k+u) as the dot-product instruction pairs them; the lines of k >=
// 32J (a last 16- or 8-step, or a partial line) are in kLines order. kFmaPairs (fp32
// only, for the AVX-512 kernels): likewise for the fused multiply-adds, each 16-k step j
// < J = K / 16 (rounded down) as
//   line 2h + c%4/2, float (c%2)*8 + u holds (c, 16j + 8h + u)   (u < 8, h = 0, 1)
// and the lines of k >= 16J in kLines order. Every order holds the same values and zeros,
// so the same size.
enum class PackOrder { kLines = 0, kDpPairs = 1, kFmaPairs = 2 };
// Elements of w's dtype in the layout of an [O,K] weight of `dtype` (float, bf16, half),
// in any order.
int64_t packed_weight_elems(int64_t O, int64_t K, at::ScalarType dtype);
// Writes w (2-D, contiguous, CPU; float, bf16 or half) into dst in the layout
// (packed_weight_elems elements, 64-byte aligned) in `order` (kDpPairs: bf16 only,
// kFmaPairs: float only, Error otherwise); split over `pool` when given.
void pack_weight(const at::Tensor& w, void* dst, SpinPool* pool = nullptr, PackOrder order = PackOrder::kLines);
// A weight's copy in the layout, for row_linear / row_linear_many below.
struct PackedWeight {
  const void* data = nullptr;    // packed_weight_elems(O, K, dtype) elements, 64-byte aligned
  int64_t O = 0, K = 0;
  at::ScalarType dtype = at::kFloat;
  const void* source = nullptr;  // w.data_ptr() of the weight it copies
  // The copy a decode step reads after this one (DecodeLayout: the arena's next entry,
  // the first after the last), its bytes, and what owns its memory: a one-row product on
  // a pool warms its front (SpinPool::warm) for the next region. Null: none.
  const void* next = nullptr;
  int64_t next_bytes = 0;
  std::shared_ptr<const void> next_owner;
  PackOrder order = PackOrder::kLines;  // how pack_weight wrote it
};
// The order the one-row kernels of `isa` read a `dtype` copy in: kDpPairs for bf16 on
// kAvx512Bf16, kFmaPairs for float on kAvx512 and kAvx512Bf16, kLines otherwise
// (DecodeLayout packs in it).
PackOrder pack_order_for(at::ScalarType dtype, RowLinearIsa isa);
// With x of one row and `packed` a copy of w (its O, K, dtype and source checked: Error
// if they differ), the product reads the copy: the same bits as without it. Other row
// counts read w, and so does one row when the copy's order is not pack_order_for(its
// dtype, row_linear_isa()) (an ISA forced after packing: the same bits either way).
at::Tensor row_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, SpinPool* pool,
                      const PackedWeight* packed);

// Several products of one x (a layer's q/k/v, or gate/up): ys[i] equals
// row_linear(x, ws[i], bs[i]) bit for bit, computed in one parallel region over all
// their columns (one thread hand-off instead of one per product; x widened once).
// bs has one entry per weight (an undefined tensor for none). Same checks as row_linear.
std::vector<at::Tensor> row_linear_many(const at::Tensor& x, const std::vector<at::Tensor>& ws,
                                        const std::vector<at::Tensor>& bs, SpinPool* pool = nullptr);
// The same with copies in the decode layout: packed empty or one entry per weight (null:
// read ws[i]), as row_linear's `packed` above.
std::vector<at::Tensor> row_linear_many(const at::Tensor& x, const std::vector<at::Tensor>& ws,
                                        const std::vector<at::Tensor>& bs, SpinPool* pool,
                                        const std::vector<const PackedWeight*>& packed);

// Which code computes the products. Every one computes the contract's bits; they differ
// in speed only: AVX-512 puts two output columns in a register (twice the multiply-adds
// per instruction) with up to 8 rows per tile; AVX2+FMA 3-8 columns x 1-4 rows; portable
// is plain C++ (one lane at a time).
// AVX-512 BF16 is AVX-512 plus vdpbf16ps for bf16 products (fp32 and half take the
// AVX-512 tiles): the contract's bits, except that the instruction flushes denormal
// inputs and results to zero (|v| < 2^-126; absent from normal activations and weights),
// on every row count alike.
enum class RowLinearIsa : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3 };
// The one row_linear uses: forced (below), else AGENTR1_ROW_LINEAR_ISA (portable | avx2 |
// avx512 | avx512bf16; Error if unknown or if the CPU lacks it), else the best the CPU has.
RowLinearIsa row_linear_isa();
bool row_linear_isa_supported(RowLinearIsa isa);
const char* row_linear_isa_name(RowLinearIsa isa);
// Tests and benches: run every later call on `isa` (Error if the CPU lacks it), or back
// to the default with nullopt. Process-wide.
void force_row_linear_isa(std::optional<RowLinearIsa> isa);
// Benches: the software prefetch of the next tile's weights on (the default) or off.
// Hints only: the results are the same bits either way.
void set_row_linear_prefetch(bool on);
// Tests and benches: the weight bytes per piece of a pool's balanced split
// (SpinPool::parallel_chunks); 0 = the default (128 KiB). Any size gives the same bits.
void set_row_linear_piece_bytes(int64_t bytes);
// Benches: how many bytes of the next copy a one-row product on a pool warms for the
// next region (PackedWeight::next; at most the next copy's share per thread); 0 = off,
// negative = the default (512 KiB). Hints only: the same bits either way.
void set_decode_warm_bytes(int64_t bytes);

// dst[i] = float(src[i]) for i < n: exact (bf16 moves up 16 bits; half converts), with
// AVX2/F16C where the CPU has them. For kernels that widen a block once and then run
// fp32 loops over it.
void widen_to_float(const c10::BFloat16* src, float* dst, int64_t n);
void widen_to_float(const c10::Half* src, float* dst, int64_t n);
inline void widen_to_float(const float* src, float* dst, int64_t n) { std::copy(src, src + n, dst); }

// The same contract computed by the portable code only (no vector unit, one thread):
// tests compare the dispatched kernel with it bit for bit.
at::Tensor row_linear_portable(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

// g, u [N,I] contiguous CPU, one dtype (float, bfloat16, half): g[i] = T(T(silu(g[i])) *
// u[i]) with silu(v) = v / (1 + exp(-v)) in fp32 (std::exp), element by element:
// independent of N and of the split (ATen's vectorised silu rounds the tail of a chunk
// differently). Throws Error (before writing) on other shapes, dtypes or devices.
void silu_mul_rows_(at::Tensor& g, const at::Tensor& u, SpinPool* pool = nullptr);

}  // namespace agentr1::model::detail
