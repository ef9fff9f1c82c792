// row_linear / silu_mul_rows_: close to an fp64 reference, equal bit for bit to the
// portable definition, and the same bit for bit for a row whatever other rows share
// the call and however many threads run it.
#include "agentr1/model/row_linear.h"

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstring>
#include <optional>

#include "agentr1/core/error.h"

namespace agentr1::model::detail {
namespace {

at::Tensor randn(std::vector<int64_t> shape, uint64_t seed, at::ScalarType dtype) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat)).to(dtype);
}

// Bitwise equality of two tensors of one dtype and shape.
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.numel() * ac.element_size()) == 0;
}

struct Shape {
  int64_t N, K, O;
  bool bias;
};

class RowLinear : public ::testing::TestWithParam<at::ScalarType> {};

// Against fp64: the error of a K-term fp32 dot product is bounded by about
// K * 2^-24 * sum_k |x_k w_k| (plus the final rounding to the storage type); we allow
// 4x that bound with K counted at least 64. For bf16/half outputs, one rounding of the
// result (2^-8 / 2^-11 relative) dominates.
TEST_P(RowLinear, MatchesFp64Reference) {
  const at::ScalarType dt = GetParam();
  for (const Shape s : {Shape{1, 64, 96, false}, Shape{5, 37, 11, true}, Shape{64, 256, 130, true},
                        Shape{7, 8, 3, false}, Shape{3, 1, 5, true}}) {
    const at::Tensor x = randn({s.N, s.K}, 1, dt), w = randn({s.O, s.K}, 2, dt);
    const at::Tensor b = s.bias ? randn({s.O}, 3, dt) : at::Tensor();
    const at::Tensor y = row_linear(x, w, b);
    ASSERT_EQ(y.scalar_type(), dt);
    ASSERT_EQ(y.sizes(), (std::vector<int64_t>{s.N, s.O}));
    const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
    at::Tensor ref = at::matmul(xd, wd.t());
    if (s.bias) ref = ref + b.to(at::kDouble);
    const at::Tensor mag = at::matmul(xd.abs(), wd.abs().t()) + (s.bias ? b.to(at::kDouble).abs() : at::zeros({1}, at::kDouble));
    const double out_eps = dt == at::kFloat ? 0x1p-24 : dt == at::kBFloat16 ? 0x1p-8 : 0x1p-11;
    const at::Tensor bound = mag * (4.0 * std::max<int64_t>(s.K, 64) * 0x1p-24) + ref.abs() * out_eps + 1e-30;
    const at::Tensor err = (y.to(at::kDouble) - ref).abs();
    EXPECT_TRUE((err <= bound).all().item<bool>())
        << "N " << s.N << " K " << s.K << " O " << s.O << ": max error " << err.max().item<double>()
        << ", max (error / bound) " << (err / bound).max().item<double>();
  }
}

// The ISAs this CPU can run (portable always; AVX2 and AVX-512 where it has them). The
// test log says which were covered: a machine without AVX-512 checks only the others.
std::vector<RowLinearIsa> supported_isas() {
  std::vector<RowLinearIsa> out;
  for (RowLinearIsa isa :
       {RowLinearIsa::kPortable, RowLinearIsa::kAvx2, RowLinearIsa::kAvx512, RowLinearIsa::kAvx512Bf16})
    if (row_linear_isa_supported(isa)) out.push_back(isa);
  return out;
}

// Restores the default choice when a test ends.
struct ForcedIsa {
  explicit ForcedIsa(RowLinearIsa isa) { force_row_linear_isa(isa); }
  ~ForcedIsa() { force_row_linear_isa(std::nullopt); }
};
// A pool's balanced split in pieces of one column unit while alive (the default after).
struct OnePiecePerUnit {
  OnePiecePerUnit() { set_row_linear_piece_bytes(1); }
  ~OnePiecePerUnit() { set_row_linear_piece_bytes(0); }
};

// Every tile shape of every ISA: rows 1..17 (full 4- and 8-row tiles and every
// remainder), column counts that leave every remainder width (and fewer columns than one
// tile), K with and without a tail below 8; for the AVX-512 BF16 tiles' 32-k steps, K
// that leaves a 16-k step after them (16, 48, 88) with and without a lone 8-k step, on
// one row (whose tiles stream two column pairs at a time) and on several; on a pool,
// also in pieces of one column unit (many pieces moving between the threads).
TEST_P(RowLinear, EveryIsaEqualsPortableDefinitionBitForBit) {
  const at::ScalarType dt = GetParam();
  std::vector<Shape> shapes = {Shape{1, 64, 96, false}, Shape{5, 37, 11, true}, Shape{66, 300, 131, true},
                               Shape{9, 7, 2, false},   Shape{1, 88, 50, true},  Shape{1, 16, 24, false},
                               Shape{3, 48, 20, false}, Shape{8, 56, 17, true},  Shape{1, 1030, 64, true},
                               Shape{1, 1024, 200, false}, Shape{2, 1000, 131, true}};
  for (int64_t n = 1; n <= 17; ++n) shapes.push_back(Shape{n, n % 2 ? 72 : 45, 47 + 3 * n, n % 3 == 0});
  SpinPool pool(2);
  for (RowLinearIsa isa : supported_isas()) {
    ForcedIsa forced(isa);
    for (const Shape s : shapes) {
      const at::Tensor x = randn({s.N, s.K}, 4 + s.N, dt), w = randn({s.O, s.K}, 5 + s.O, dt);
      const at::Tensor b = s.bias ? randn({s.O}, 6, dt) : at::Tensor();
      const at::Tensor ref = row_linear_portable(x, w, b);
      EXPECT_TRUE(same_bits(row_linear(x, w, b), ref))
          << row_linear_isa_name(isa) << ": N " << s.N << " K " << s.K << " O " << s.O;
      EXPECT_TRUE(same_bits(row_linear(x, w, b, &pool), ref))
          << row_linear_isa_name(isa) << " on a pool: N " << s.N << " K " << s.K << " O " << s.O;
      // Pieces of one column unit each: the balanced split moves many pieces between the
      // threads, and each tile prefetches into the next piece.
      OnePiecePerUnit one;
      EXPECT_TRUE(same_bits(row_linear(x, w, b, &pool), ref))
          << row_linear_isa_name(isa) << " on a pool, one-unit pieces: N " << s.N << " K " << s.K << " O " << s.O;
    }
  }
  std::printf("row_linear ISAs checked on this CPU:");
  for (RowLinearIsa isa : supported_isas()) std::printf(" %s", row_linear_isa_name(isa));
  std::printf(" (default %s)\n", row_linear_isa_name(row_linear_isa()));
}

// Several products in one parallel region (row_linear_many, the decode step's q/k/v and
// gate/up) give each product's bits as computed alone, on every ISA, with and without a
// pool: widths that end inside a column unit, biases on some, and shapes large enough
// to be split (the joint range's split falls inside the first or second product).
TEST_P(RowLinear, ManyEqualsEachAloneBitForBit) {
  const at::ScalarType dt = GetParam();
  SpinPool pool(2), pool3(3);
  for (RowLinearIsa isa : supported_isas()) {
    ForcedIsa forced(isa);
    for (int64_t N : {1, 3, 8, 13}) {
      // Widths that are and are not whole 48-column units, an empty product, and (with 3
      // threads over 2 + 1 + 3 units) a split that falls exactly on a product boundary.
      for (const std::vector<int64_t>& outs :
           {std::vector<int64_t>{400, 130, 77}, std::vector<int64_t>{47, 700}, std::vector<int64_t>{5},
            std::vector<int64_t>{96, 48, 130}, std::vector<int64_t>{0, 300, 0, 20}}) {
        const int64_t K = N % 2 ? 300 : 45;
        const at::Tensor x = randn({N, K}, 20 + N, dt);
        std::vector<at::Tensor> ws, bs;
        for (size_t i = 0; i < outs.size(); ++i) {
          ws.push_back(randn({outs[i], K}, 30 + i, dt));
          bs.push_back(i % 2 == 0 ? randn({outs[i]}, 40 + i, dt) : at::Tensor());
        }
        const std::vector<at::Tensor> pooled = row_linear_many(x, ws, bs, &pool), plain = row_linear_many(x, ws, bs),
                                      pooled3 = row_linear_many(x, ws, bs, &pool3);
        // One unit per piece: many pieces, each prefetching into the next one of its
        // product (clamped there; the default pieces also span product boundaries).
        std::vector<at::Tensor> pieces, pieces3;
        {
          OnePiecePerUnit one;
          pieces = row_linear_many(x, ws, bs, &pool);
          pieces3 = row_linear_many(x, ws, bs, &pool3);
        }
        ASSERT_EQ(pooled.size(), ws.size());
        ASSERT_EQ(plain.size(), ws.size());
        ASSERT_EQ(pooled3.size(), ws.size());
        ASSERT_EQ(pieces.size(), ws.size());
        ASSERT_EQ(pieces3.size(), ws.size());
        for (size_t i = 0; i < ws.size(); ++i) {
          const at::Tensor ref = row_linear_portable(x, ws[i], bs[i]);
          ASSERT_EQ(ref.sizes(), (std::vector<int64_t>{N, outs[i]}));
          EXPECT_TRUE(same_bits(pooled[i], ref)) << row_linear_isa_name(isa) << " N " << N << " product " << i;
          EXPECT_TRUE(same_bits(plain[i], ref)) << row_linear_isa_name(isa) << " N " << N << " product " << i;
          EXPECT_TRUE(same_bits(pooled3[i], ref)) << row_linear_isa_name(isa) << " N " << N << " product " << i;
          EXPECT_TRUE(same_bits(pieces[i], ref))
              << row_linear_isa_name(isa) << " N " << N << " product " << i << ", one-unit pieces";
          EXPECT_TRUE(same_bits(pieces3[i], ref))
              << row_linear_isa_name(isa) << " N " << N << " product " << i << ", one-unit pieces";
        }
      }
    }
  }
}

// A weight's copy in the decode layout, in a buffer of its own (torch's CPU allocator
// aligns to 64 bytes; checked); by default in the order the ISA in force reads.
struct Packed {
  at::Tensor buf;
  PackedWeight pw;
  explicit Packed(const at::Tensor& w, SpinPool* pool = nullptr, std::optional<PackOrder> order = std::nullopt) {
    const PackOrder o = order.value_or(pack_order_for(w.scalar_type(), row_linear_isa()));
    buf = at::empty({packed_weight_elems(w.size(0), w.size(1), w.scalar_type())}, w.options());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data_ptr()) % 64, 0u);
    pack_weight(w, buf.data_ptr(), pool, o);
    pw = PackedWeight{buf.data_ptr(), w.size(0), w.size(1), w.scalar_type(), w.data_ptr(), nullptr, 0, nullptr, o};
  }
};

// The layout as row_linear.h documents it, element by element: (c, k) at
// ((c / 4) * Kl + k / L) * 4L + (c % 4) * L + k % L, zeros elsewhere.
// kDpPairs (bf16) and kFmaPairs (float): the steps j < K / L as row_linear.h spells them
// out, the rest as kLines.
TEST_P(RowLinear, PackWeightWritesTheDocumentedLayout) {
  const at::ScalarType dt = GetParam();
  const int64_t L = 64 / static_cast<int64_t>(c10::elementSize(dt));
  SpinPool pool(2);
  std::vector<PackOrder> orders = {PackOrder::kLines};
  if (dt == at::kBFloat16) orders.push_back(PackOrder::kDpPairs);
  if (dt == at::kFloat) orders.push_back(PackOrder::kFmaPairs);
  for (PackOrder order : orders)
    for (auto [O, K] : {std::pair<int64_t, int64_t>{1, 1}, {5, 37}, {8, 64}, {13, 100}, {40, 33}, {6, 48}, {3, 1030}}) {
      const at::Tensor w = randn({O, K}, 50 + O, dt);
      const Packed p(w, &pool, order);
      const int64_t Kl = (K + L - 1) / L, groups = (O + 3) / 4, J = order == PackOrder::kLines ? 0 : K / L;
      ASSERT_EQ(p.buf.numel(), groups * Kl * 4 * L);
      const auto* got = static_cast<const uint8_t*>(p.buf.data_ptr());
      const auto* src = static_cast<const uint8_t*>(w.data_ptr());
      const int64_t es = static_cast<int64_t>(w.element_size());
      std::vector<bool> covered(static_cast<size_t>(p.buf.numel()), false);
      for (int64_t c = 0; c < O; ++c)
        for (int64_t k = 0; k < K; ++k) {
          int64_t at = ((c / 4) * Kl + k / L) * 4 * L + (c % 4) * L + k % L;
          if (k / L < J) {  // half a step (L / 2 k) of a column, in the instruction's order
            const int64_t j = k / L, h = k % L / (L / 2), u = k % 8;
            const int64_t word = order == PackOrder::kDpPairs ? (k % 16 < 8 ? 2 * u + 1 : 2 * u) : u;
            at = ((c / 4) * Kl + j) * 4 * L + (2 * h + c % 4 / 2) * L + (c % 2) * (L / 2) + word;
          }
          ASSERT_FALSE(covered[static_cast<size_t>(at)]) << "two elements at " << at;
          covered[static_cast<size_t>(at)] = true;
          ASSERT_EQ(std::memcmp(got + at * es, src + (c * K + k) * es, es), 0)
              << "order " << static_cast<int>(order) << " O " << O << " K " << K << " c " << c << " k " << k;
        }
      for (int64_t i = 0; i < p.buf.numel(); ++i)
        if (!covered[static_cast<size_t>(i)])
          for (int64_t j = 0; j < es; ++j) ASSERT_EQ(got[i * es + j], 0) << "padding element " << i << " not zero";
    }
  if (dt != at::kBFloat16) EXPECT_THROW(pack_weight(randn({4, 32}, 1, dt), at::empty({256}).data_ptr(), nullptr, PackOrder::kDpPairs), Error);
  if (dt != at::kFloat) EXPECT_THROW(pack_weight(randn({4, 32}, 1, dt), at::empty({256}).data_ptr(), nullptr, PackOrder::kFmaPairs), Error);
}

// One row read from the decode layout: the portable definition's bits on every ISA, alone,
// on a pool, in one-unit pieces, and inside row_linear_many beside products read
// row-major; every K tail (below 8, a 16-k step, a lone 8-k step) and every last-group
// width (O % 4). Several rows ignore the copy and read w.
TEST_P(RowLinear, PackedCopyGivesTheSameBitsOnEveryIsa) {
  const at::ScalarType dt = GetParam();
  SpinPool pool(2), pool3(3);
  std::vector<Shape> shapes;
  for (int64_t K : {1, 7, 8, 16, 37, 48, 88, 300, 1030})
    for (int64_t O : {1, 3, 4, 6, 50, 131}) shapes.push_back(Shape{1, K, O, (K + O) % 2 == 0});
  shapes.push_back(Shape{1, 1024, 200, true});
  // Many groups in one call (too small to be split over threads: the one-row kernels'
  // 16-column blocks run back to back, a partial one at the end), with and without a bias.
  shapes.push_back(Shape{1, 40, 301, true});
  shapes.push_back(Shape{1, 88, 1030, false});
  for (RowLinearIsa isa : supported_isas()) {
    ForcedIsa forced(isa);
    for (const Shape s : shapes) {
      const at::Tensor x = randn({1, s.K}, 60 + s.K, dt), w = randn({s.O, s.K}, 61 + s.O, dt);
      const at::Tensor b = s.bias ? randn({s.O}, 62, dt) : at::Tensor();
      Packed p(w);
      const at::Tensor ref = row_linear_portable(x, w, b);
      const std::string where = std::string(row_linear_isa_name(isa)) + ": K " + std::to_string(s.K) + " O " +
                                std::to_string(s.O);
      EXPECT_TRUE(same_bits(row_linear(x, w, b, nullptr, &p.pw), ref)) << where;
      EXPECT_TRUE(same_bits(row_linear(x, w, b, &pool, &p.pw), ref)) << where << " on a pool";
      {
        OnePiecePerUnit one;
        EXPECT_TRUE(same_bits(row_linear(x, w, b, &pool3, &p.pw), ref)) << where << " on 3 threads, one-unit pieces";
      }
      // Beside a row-major product of the same x, in one region.
      const at::Tensor w2 = randn({70, s.K}, 63, dt);
      const std::vector<at::Tensor> two = row_linear_many(x, {w2, w}, {at::Tensor(), b}, &pool, {nullptr, &p.pw});
      EXPECT_TRUE(same_bits(two[0], row_linear_portable(x, w2, {}))) << where << " many, row-major one";
      EXPECT_TRUE(same_bits(two[1], ref)) << where << " many, packed one";
      // Three rows: the copy is not read.
      const at::Tensor x3 = randn({3, s.K}, 64, dt);
      EXPECT_TRUE(same_bits(row_linear(x3, w, b, &pool, &p.pw), row_linear_portable(x3, w, b))) << where << " 3 rows";
      // The copy is what one row reads: zeroed, the products are the bias alone.
      p.buf.zero_();
      const at::Tensor bias_only = s.bias ? b.unsqueeze(0) : at::zeros({1, s.O}, x.options());
      EXPECT_TRUE(same_bits(row_linear(x, w, b, &pool, &p.pw), bias_only)) << where << " zeroed copy";
      // A copy in the order another ISA reads is not read: w is, the same bits.
      if (dt != at::kHalf) {
        const PackOrder pairs = dt == at::kBFloat16 ? PackOrder::kDpPairs : PackOrder::kFmaPairs;
        const PackOrder other = p.pw.order == PackOrder::kLines ? pairs : PackOrder::kLines;
        Packed q(w, nullptr, other);
        q.buf.zero_();
        EXPECT_TRUE(same_bits(row_linear(x, w, b, &pool, &q.pw), ref)) << where << " a copy in the other order";
      }
    }
  }
}

// Which order each ISA's one-row kernels read (row_linear.h): the instructions' operand
// order where those kernels load operands whole (bf16 with vdpbf16ps, fp32 on AVX-512),
// the plain lines elsewhere.
TEST(RowLinearPackOrder, EachIsaReadsItsOwnOrder) {
  using I = RowLinearIsa;
  EXPECT_EQ(pack_order_for(at::kBFloat16, I::kAvx512Bf16), PackOrder::kDpPairs);
  EXPECT_EQ(pack_order_for(at::kFloat, I::kAvx512Bf16), PackOrder::kFmaPairs);
  EXPECT_EQ(pack_order_for(at::kFloat, I::kAvx512), PackOrder::kFmaPairs);
  for (I isa : {I::kPortable, I::kAvx2, I::kAvx512, I::kAvx512Bf16}) {
    EXPECT_EQ(pack_order_for(at::kHalf, isa), PackOrder::kLines);
    if (isa != I::kAvx512Bf16) EXPECT_EQ(pack_order_for(at::kBFloat16, isa), PackOrder::kLines);
    if (isa == I::kPortable || isa == I::kAvx2) EXPECT_EQ(pack_order_for(at::kFloat, isa), PackOrder::kLines);
  }
}

TEST(RowLinearErrors, PackedCopyOfAnotherWeightIsRefused) {
  const at::Tensor x = randn({1, 40}, 1, at::kFloat), w = randn({9, 40}, 2, at::kFloat), v = w.clone();
  const Packed p(w);
  EXPECT_NO_THROW(row_linear(x, w, {}, nullptr, &p.pw));
  try {
    row_linear(x, v, {}, nullptr, &p.pw);  // the same values, another tensor: not its copy
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pack the weight again"), std::string::npos) << e.what();
  }
  EXPECT_THROW(row_linear_many(x, {w, w}, {at::Tensor(), at::Tensor()}, nullptr, {&p.pw}), Error);
  EXPECT_THROW(pack_weight(at::zeros({3}), p.buf.data_ptr()), Error);
  EXPECT_THROW(packed_weight_elems(0, 4, at::kFloat), Error);
}

TEST(RowLinearErrors, ManyNamesTheShapeAndTheBiasCount) {
  const at::Tensor x = at::zeros({2, 3}), w = at::zeros({4, 3}), bad = at::zeros({4, 5});
  EXPECT_THROW(row_linear_many(x, {w, w}, {at::Tensor()}), Error);
  try {
    row_linear_many(x, {w, bad}, {at::Tensor(), at::Tensor()});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[4, 5]"), std::string::npos) << e.what();
  }
}

TEST(RowLinearIsaSwitch, RefusesWhatTheCpuLacksAndNamesIt) {
  for (RowLinearIsa isa : {RowLinearIsa::kAvx2, RowLinearIsa::kAvx512, RowLinearIsa::kAvx512Bf16}) {
    if (row_linear_isa_supported(isa)) continue;
    try {
      force_row_linear_isa(isa);
      FAIL() << "forced an ISA the CPU lacks";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(row_linear_isa_name(isa)), std::string::npos) << e.what();
    }
  }
  force_row_linear_isa(RowLinearIsa::kPortable);
  EXPECT_EQ(row_linear_isa(), RowLinearIsa::kPortable);
  force_row_linear_isa(std::nullopt);
  EXPECT_TRUE(row_linear_isa_supported(row_linear_isa()));
}

// Row 0 alone, among 63 others, at every place in the batch, with 1 and 2 OpenMP
// threads and with a 2-thread SpinPool: one bit pattern.
TEST_P(RowLinear, RowIsTheSameWhateverItIsBatchedWith) {
  const at::ScalarType dt = GetParam();
  const int64_t K = 200, O = 515;
  const at::Tensor w = randn({O, K}, 7, dt), b = randn({O}, 8, dt);
  const at::Tensor row = randn({1, K}, 9, dt);
  const int saved = at::get_num_threads();
  SpinPool pool(2);
  for (RowLinearIsa isa : supported_isas()) {
  ForcedIsa forced(isa);
  const at::Tensor alone = row_linear(row, w, b);
  for (int64_t n : {2, 3, 4, 5, 8, 9, 16, 17, 64}) {
    at::Tensor batch = randn({n, K}, 10 + n, dt);
    const int64_t at_row = n / 2;
    batch[at_row].copy_(row[0]);
    for (int threads : {1, 2}) {
      at::set_num_threads(threads);
      EXPECT_TRUE(same_bits(row_linear(batch, w, b)[at_row].unsqueeze(0), alone))
          << "batch of " << n << ", " << threads << " OpenMP threads";
    }
    EXPECT_TRUE(same_bits(row_linear(batch, w, b, &pool)[at_row].unsqueeze(0), alone)) << "batch of " << n << ", pool";
  }
  }
  at::set_num_threads(saved);
}

// A bf16 product's rounding, checked by hand: K = 1 and x = 1 make each output exactly
// w + b in fp32 (w, b chosen so), then one rounding to bf16 to nearest, ties to even, NaN
// to 0x7fc0 (c10's rule). Ties both ways, a tie and a sum past bf16's largest value (to
// infinity), NaNs of either sign, infinities. 12 cases over 30 columns (the AVX-512 BF16
// path rounds 16 outputs at a time: a full block and a part), read from the decode layout
// on every ISA (one call each: too few products to be split over threads), and row-major
// on 3, 8 and 11 rows. Then K = 2: the product and the bias are summed in fp32 before the
// one rounding.
TEST(RowLinearBf16, PackedProductsRoundToNearestEvenWithC10sNaN) {
  struct Case {
    uint16_t w, b, want;
  };
  const Case cases[] = {
      {0x3f80, 0x3b80, 0x3f80},  // 1 + 2^-8: a tie, down to the even 1
      {0x3f81, 0x3b80, 0x3f82},  // 1 + 3 * 2^-8: a tie, up to the even 1 + 2^-6
      {0x3f80, 0x3b81, 0x3f81},  // 1 + 2^-8 + 2^-15: past the tie, up
      {0xbf80, 0xbb80, 0xbf80},  // -(1 + 2^-8): a tie, to the even -1
      {0x7f7f, 0x7b80, 0x7f80},  // bf16's largest + 2^120 = 2^128: fp32 overflows, +inf
      {0x7f7f, 0x7b00, 0x7f80},  // bf16's largest + 2^119: a tie, to the even: +inf
      {0x7f7e, 0x7b00, 0x7f7e},  // a tie below it, to the even 0x7f7e
      {0x7fc1, 0x0000, 0x7fc0},  // NaN (another payload)
      {0xffc1, 0x0000, 0x7fc0},  // a negative NaN
      {0x7f80, 0x0000, 0x7f80},  // +inf
      {0xff80, 0x7f80, 0x7fc0},  // -inf + inf
      {0x4040, 0x3f00, 0x4060},  // 3 + 0.5
  };
  constexpr int64_t O = 30;
  const auto bits = [](uint16_t v) { return c10::BFloat16(v, c10::BFloat16::from_bits()); };
  at::Tensor x = at::ones({1, 1}, at::kBFloat16), w = at::empty({O, 1}, at::kBFloat16), b = at::empty({O}, at::kBFloat16);
  for (int64_t o = 0; o < O; ++o) {
    const Case& c = cases[o % 12];
    w.data_ptr<c10::BFloat16>()[o] = bits(c.w);
    b.data_ptr<c10::BFloat16>()[o] = bits(c.b);
  }
  // x = (1, 1), w = (1, 2^-8), b = 2^-9: 1 + 3 * 2^-9 in fp32, which rounds up to 1 + 2^-7
  // (0x3f81); rounding the product 1 + 2^-8 first (a tie, to 1) and then adding would not.
  // 16 such columns: whole tiles of every width, rounded by the 16-at-a-time stores.
  constexpr int64_t O2 = 16;
  const at::Tensor x2 = at::ones({1, 2}, at::kBFloat16);
  at::Tensor w2 = at::empty({O2, 2}, at::kBFloat16), b2 = at::empty({O2}, at::kBFloat16);
  for (int64_t o = 0; o < O2; ++o) {
    w2.data_ptr<c10::BFloat16>()[2 * o] = bits(0x3f80);
    w2.data_ptr<c10::BFloat16>()[2 * o + 1] = bits(0x3b80);
    b2.data_ptr<c10::BFloat16>()[o] = bits(0x3b00);
  }
  // The cases again at K = 64 (two whole 32-k steps: kDpPairs lines), each value at k = 37
  // and zeros elsewhere.
  constexpr int64_t K64 = 64;
  const at::Tensor x64 = at::ones({1, K64}, at::kBFloat16);
  at::Tensor w64 = at::zeros({O, K64}, at::kBFloat16);
  for (int64_t o = 0; o < O; ++o) w64.data_ptr<c10::BFloat16>()[o * K64 + 37] = bits(cases[o % 12].w);
  for (RowLinearIsa isa : supported_isas()) {
    ForcedIsa forced(isa);
    const Packed p(w), p2(w2), p64(w64);  // in the order this ISA reads
    const at::Tensor y = row_linear(x, w, b, nullptr, &p.pw);
    const at::Tensor y64 = row_linear(x64, w64, b, nullptr, &p64.pw);
    for (int64_t o = 0; o < O; ++o) {
      EXPECT_EQ(y.data_ptr<c10::BFloat16>()[o].x, cases[o % 12].want)
          << row_linear_isa_name(isa) << " column " << o << " (case " << o % 12 << ")";
      EXPECT_EQ(y64.data_ptr<c10::BFloat16>()[o].x, cases[o % 12].want)
          << row_linear_isa_name(isa) << " K = 64, column " << o << " (case " << o % 12 << ")";
    }
    const at::Tensor y1 = row_linear(x2, w2, b2, nullptr, &p2.pw);
    for (int64_t o = 0; o < O2; ++o)
      EXPECT_EQ(y1.data_ptr<c10::BFloat16>()[o].x, 0x3f81) << row_linear_isa_name(isa) << " K = 2, column " << o;
    // Several rows read the weights row-major (the 8-row tiles and the 1-7-row tails):
    // every row rounds the same way.
    for (int64_t n : {3, 8, 11}) {
      const at::Tensor yn = row_linear(at::ones({n, 1}, at::kBFloat16), w, b);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t o = 0; o < O; ++o)
          EXPECT_EQ(yn.data_ptr<c10::BFloat16>()[r * O + o].x, cases[o % 12].want)
              << row_linear_isa_name(isa) << " " << n << " rows: row " << r << " column " << o << " (case " << o % 12
              << ")";
      const at::Tensor y2 = row_linear(at::ones({n, 2}, at::kBFloat16), w2, b2);
      for (int64_t i = 0; i < n * O2; ++i)
        EXPECT_EQ(y2.data_ptr<c10::BFloat16>()[i].x, 0x3f81)
            << row_linear_isa_name(isa) << " K = 2, " << n << " rows: row " << i / O2 << " column " << i % O2;
    }
  }
}

// The one documented difference of the AVX-512 BF16 tiles: vdpbf16ps flushes denormal
// inputs and results to zero, the other kernels keep them. Elsewhere (normal values, the
// tests above) the bits are the contract's.
TEST(RowLinearAvx512Bf16, FlushesDenormalsAsDocumented) {
  if (!row_linear_isa_supported(RowLinearIsa::kAvx512Bf16)) {
    std::printf("no AVX-512 BF16 on this CPU: nothing to check\n");
    return;
  }
  const int64_t K = 24;  // one 16-block and a lone step of 8
  for (int64_t at_k : {int64_t{3}, int64_t{12}, int64_t{19}}) {
    at::Tensor x = at::zeros({1, K}, at::kBFloat16), w = at::zeros({2, K}, at::kBFloat16);
    x[0][at_k] = std::ldexp(1.0, -130);  // a denormal bf16 input
    w[0][at_k] = 2.0;
    w[1][at_k] = std::ldexp(1.0, 100);  // a normal product from the denormal input
    const at::Tensor kept = row_linear_portable(x, w, {}).to(at::kFloat);
    EXPECT_EQ(kept[0][0].item<float>(), std::ldexp(1.0f, -129)) << "k " << at_k;  // bf16 keeps it: 2^-129
    ForcedIsa forced(RowLinearIsa::kAvx512Bf16);
    const at::Tensor flushed = row_linear(x, w, {}).to(at::kFloat);
    EXPECT_EQ(flushed[0][0].item<float>(), 0.0f) << "k " << at_k;
    EXPECT_EQ(flushed[0][1].item<float>(), 0.0f) << "k " << at_k;  // the input itself read as 0
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RowLinear, ::testing::Values(at::kFloat, at::kBFloat16, at::kHalf),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

TEST(RowLinearErrors, NameTheShapes) {
  const at::Tensor x = at::zeros({2, 3}), w = at::zeros({4, 5});
  try {
    row_linear(x, w, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 5]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(row_linear(x.to(at::kDouble), w.to(at::kDouble).narrow(1, 0, 3), {}), Error);
}

TEST(SiluMulRows, MatchesReferenceAndIsSplitInvariant) {
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const at::Tensor g0 = randn({40, 1000}, 11, dt) * 4, u = randn({40, 1000}, 12, dt);
    // Reference in fp64 with the same roundings to the storage type.
    const at::Tensor gd = g0.to(at::kDouble);
    const at::Tensor silu = (gd / (1 + at::exp(-gd))).to(dt).to(at::kDouble);
    const at::Tensor ref = silu * u.to(at::kDouble);
    at::Tensor g = g0.clone();
    silu_mul_rows_(g, u);  // 40k elements: split over threads
    const double tol = dt == at::kFloat ? 1e-6 : 1e-2;  // one or two roundings to the storage type
    EXPECT_LE(((g.to(at::kDouble) - ref).abs() / (ref.abs() + 1e-3)).max().item<double>(), tol);
    // Row 17 computed alone: the same bits.
    at::Tensor one = g0[17].unsqueeze(0).clone();
    silu_mul_rows_(one, u[17].unsqueeze(0).contiguous());
    EXPECT_TRUE(same_bits(one, g[17].unsqueeze(0))) << c10::toString(dt);
    SpinPool pool(2);
    at::Tensor gp = g0.clone();
    silu_mul_rows_(gp, u, &pool);
    EXPECT_TRUE(same_bits(gp, g)) << c10::toString(dt);
  }
}

}  // namespace
}  // namespace agentr1::model::detail
