#include "agentr1/core/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "agentr1/core/error.h"

namespace agentr1 {
namespace {

// ---------------------------------------------------------------- independent reference
//
// A Python implementation written from the published definitions (MT19937-64 from
// Matsumoto & Nishimura's mt19937-64.c parameters, splitmix64's finaliser, Lemire's
// bounded integers, Box-Muller, Fisher-Yates), not from rng.cpp. It prints one
// "name value..." line per check; the tests below compare against it.
const char* kReferenceScript = R"PY(
import math
M = (1 << 64) - 1

class MT64:
    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & M
        for i in range(1, 312):
            self.mt[i] = (6364136223846793005 * (self.mt[i-1] ^ (self.mt[i-1] >> 62)) + i) & M
        self.i = 312
    def next(self):
        if self.i >= 312:
            for k in range(312):
                x = (self.mt[k] & 0xFFFFFFFF80000000) | (self.mt[(k+1) % 312] & 0x7FFFFFFF)
                xa = x >> 1
                if x & 1:
                    xa ^= 0xB5026F5AA96619E9
                self.mt[k] = self.mt[(k+156) % 312] ^ xa
            self.i = 0
        y = self.mt[self.i]; self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & M
    def uniform(self):
        return (self.next() >> 11) * 2.0**-53
    def below(self, n):
        m = self.next() * n
        low = m & M
        if low < n:
            t = ((1 << 64) - n) % n
            while low < t:
                m = self.next() * n
                low = m & M
        return m >> 64
    def uniform_int(self, lo, hi):
        span = (hi - lo) & M
        off = self.next() if span == M else self.below(span + 1)
        v = (lo + off) & M
        return v - (1 << 64) if v >= (1 << 63) else v
    def normal(self, mean, sd):
        u1 = 1.0 - self.uniform()
        u2 = self.uniform()
        return mean + sd * (math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586476925286766559 * u2))
    def shuffle(self, a):
        for i in range(len(a), 1, -1):
            j = self.below(i)
            a[i-1], a[j] = a[j], a[i-1]

G = 0x9E3779B97F4A7C15
def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)
def derive(base, path):
    h = mix64((base + G) & M)
    for p in path:
        h = mix64((mix64(h ^ 0xD1B54A32D192ED03) + (p + 1) * G) & M)
    return h

r = MT64(5489)
first = [r.next() for _ in range(10000)]
print("mt_first", first[0], first[1], first[2])
print("mt_10000", first[9999])
r = MT64(42)
print("u64", *[r.next() for _ in range(5)])
r = MT64(42)
print("uniform", *[repr(r.uniform()) for _ in range(5)])
r = MT64(7)
print("die", *[r.uniform_int(1, 6) for _ in range(20)])
r = MT64(7)
print("wide", *[r.uniform_int(-(1 << 63), (1 << 63) - 1) for _ in range(3)])
r = MT64(7)
print("big_below", *[r.below((1 << 63) + 1) for _ in range(5)])
r = MT64(7)
print("neg_range", *[r.uniform_int(-1000000007, -3) for _ in range(5)])
r = MT64(11)
print("normal", *[repr(r.normal(0.5, 2.0)) for _ in range(5)])
r = MT64(3)
a = list(range(10)); r.shuffle(a)
print("shuffle", *a)
print("mix64", mix64(0), mix64(1), mix64(0xDEADBEEF))
print("derive", derive(0, []), derive(1, [2]), derive(123, [4, 5, 6]), derive(M, [M]))
)PY";

std::map<std::string, std::vector<std::string>> reference() {
  static std::map<std::string, std::vector<std::string>> ref;
  if (!ref.empty()) return ref;
  const std::string dir = ::testing::TempDir();
  const std::string script = dir + "agentr1_rng_ref.py";
  const std::string out = dir + "agentr1_rng_ref.txt";
  {
    std::ofstream f(script);
    f << kReferenceScript;
  }
  const std::string cmd = std::string(AGENTR1_PYTHON) + " " + script + " > " + out;
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  std::ifstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key, v;
    ls >> key;
    while (ls >> v) ref[key].push_back(v);
  }
  std::remove(script.c_str());
  std::remove(out.c_str());
  return ref;
}

std::uint64_t u64(const std::string& s) { return std::stoull(s); }
std::int64_t i64(const std::string& s) { return std::stoll(s); }

// ---------------------------------------------------------------- determinism

TEST(RngReference, Mt19937_64StandardValues) {
  // Values fixed by the C++ standard ([rand.predef]) and the reference implementation.
  Rng r(5489);
  EXPECT_EQ(r.next_u64(), 14514284786278117030ULL);
  for (int i = 1; i < 9999; ++i) r.next_u64();
  EXPECT_EQ(r.next_u64(), 9981545732273789042ULL);
  // The Python reference agrees with the standard, so it is a valid oracle.
  auto ref = reference();
  ASSERT_EQ(ref["mt_first"].size(), 3u);
  EXPECT_EQ(u64(ref["mt_first"][0]), 14514284786278117030ULL);
  EXPECT_EQ(u64(ref["mt_10000"][0]), 9981545732273789042ULL);
}

TEST(RngReference, TransformsMatchPython) {
  auto ref = reference();
  {
    Rng r(42);
    ASSERT_EQ(ref["u64"].size(), 5u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(r.next_u64(), u64(ref["u64"][i]));
  }
  {
    Rng r(42);
    ASSERT_EQ(ref["uniform"].size(), 5u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(r.uniform(), std::stod(ref["uniform"][i]));
  }
  {
    Rng r(7);
    ASSERT_EQ(ref["die"].size(), 20u);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(r.uniform_int(1, 6), i64(ref["die"][i]));
  }
  {
    Rng r(7);
    ASSERT_EQ(ref["wide"].size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(r.uniform_int(std::numeric_limits<std::int64_t>::min(),
                              std::numeric_limits<std::int64_t>::max()),
                i64(ref["wide"][i]));
    }
  }
  {
    Rng r(7);
    ASSERT_EQ(ref["big_below"].size(), 5u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(r.below((1ULL << 63) + 1), u64(ref["big_below"][i]));
  }
  {
    Rng r(7);
    ASSERT_EQ(ref["neg_range"].size(), 5u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(r.uniform_int(-1000000007, -3), i64(ref["neg_range"][i]));
  }
  {
    Rng r(11);
    ASSERT_EQ(ref["normal"].size(), 5u);
    for (int i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(r.normal(0.5, 2.0), std::stod(ref["normal"][i]));
  }
  {
    Rng r(3);
    std::vector<int> a(10);
    for (int i = 0; i < 10; ++i) a[i] = i;
    r.shuffle(a.begin(), a.end());
    ASSERT_EQ(ref["shuffle"].size(), 10u);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(a[i], i64(ref["shuffle"][i]));
  }
}

TEST(RngReference, SeedMixingMatchesPython) {
  auto ref = reference();
  ASSERT_EQ(ref["mix64"].size(), 3u);
  EXPECT_EQ(mix64(0), u64(ref["mix64"][0]));
  EXPECT_EQ(mix64(1), u64(ref["mix64"][1]));
  EXPECT_EQ(mix64(0xDEADBEEF), u64(ref["mix64"][2]));
  ASSERT_EQ(ref["derive"].size(), 4u);
  EXPECT_EQ(derive_seed(0, {}), u64(ref["derive"][0]));
  EXPECT_EQ(derive_seed(1, {2}), u64(ref["derive"][1]));
  EXPECT_EQ(derive_seed(123, {4, 5, 6}), u64(ref["derive"][2]));
  EXPECT_EQ(derive_seed(123, std::vector<std::uint64_t>{4, 5, 6}), u64(ref["derive"][2]));
  EXPECT_EQ(derive_seed(UINT64_MAX, {UINT64_MAX}), u64(ref["derive"][3]));
}

TEST(Rng, SameSeedSameStreamAndStateRoundTrip) {
  Rng a(2024), b(2024), c(2025);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    differs |= x != c.next_u64();
  }
  EXPECT_TRUE(differs);
  const std::string state = a.save_state();
  std::vector<double> expect;
  for (int i = 0; i < 10; ++i) expect.push_back(a.normal());
  Rng restored(0);
  restored.load_state(state);
  EXPECT_EQ(restored.seed(), 2024u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(restored.normal(), expect[i]);
  EXPECT_THROW(restored.load_state("not a state"), Error);
  // fork does not advance the parent and is reproducible.
  Rng p(9), q(9);
  Rng child = p.fork(3);
  EXPECT_EQ(p.next_u64(), q.next_u64());
  EXPECT_EQ(child.seed(), derive_seed(9, {3}));
  EXPECT_EQ(child.next_u64(), Rng(derive_seed(9, {3})).next_u64());
}

// ---------------------------------------------------------------- bounds and errors

TEST(Rng, BoundsAreInclusiveAndHit) {
  Rng r(1);
  std::set<std::int64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const std::int64_t v = r.uniform_int(-3, 2);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 2);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_EQ(r.uniform_int(5, 5), 5);
  for (int i = 0; i < 1000; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const double w = r.uniform(-2.0, 3.0);
    ASSERT_GE(w, -2.0);
    ASSERT_LT(w, 3.0);
    ASSERT_LT(r.below((1ULL << 63) + 1), (1ULL << 63) + 1);
    ASSERT_LT(r.choice(7), 7u);
  }
  EXPECT_THROW(r.uniform_int(3, 2), Error);
  EXPECT_THROW(r.below(0), Error);
  EXPECT_THROW(r.choice(std::size_t{0}), Error);
  EXPECT_THROW(r.uniform(1.0, 0.0), Error);
  EXPECT_THROW(r.bernoulli(1.5), Error);
  EXPECT_THROW(r.bernoulli(-0.1), Error);
  EXPECT_THROW(r.normal(0.0, -1.0), Error);
  EXPECT_THROW(r.choice(std::vector<double>{}), Error);
  EXPECT_THROW(r.choice(std::vector<double>{0.0, 0.0}), Error);
  EXPECT_THROW(r.choice(std::vector<double>{1.0, -1.0}), Error);
  EXPECT_THROW(r.choice(std::vector<double>{1.0, std::nan("")}), Error);
}

// ---------------------------------------------------------------- rough statistics
// Fixed seeds, tolerances of ~5 standard errors: these cannot flake, but a biased
// transform (e.g. modulo bias at a large n, a wrong Box-Muller constant) fails them.

TEST(RngStats, UniformMeanAndVariance) {
  Rng r(101);
  const int n = 200000;
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    const double u = r.uniform();
    s += u;
    s2 += u * u;
  }
  const double mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(var, 1.0 / 12, 0.002);
}

TEST(RngStats, DieChiSquare) {
  Rng r(202);
  const int n = 60000;
  std::vector<int> counts(6, 0);
  for (int i = 0; i < n; ++i) counts[static_cast<std::size_t>(r.uniform_int(1, 6) - 1)]++;
  double chi2 = 0;
  for (int c : counts) chi2 += (c - n / 6.0) * (c - n / 6.0) / (n / 6.0);
  EXPECT_LT(chi2, 20.5);  // df = 5, p = 0.001
}

TEST(RngStats, LargeBoundIsUnbiased) {
  // n = 3 * 2^62: modulo reduction of a 64-bit draw would give P(x < 2^62) = 1/2, not 1/3.
  Rng r(303);
  const std::uint64_t n = 3ULL << 62;
  const int draws = 30000;
  int low = 0;
  for (int i = 0; i < draws; ++i) low += r.below(n) < (1ULL << 62);
  EXPECT_NEAR(low / static_cast<double>(draws), 1.0 / 3, 0.015);
}

TEST(RngStats, NormalMomentsAndTails) {
  Rng r(404);
  const int n = 200000;
  double s = 0, s2 = 0, s3 = 0, s4 = 0;
  int tail = 0;
  for (int i = 0; i < n; ++i) {
    const double z = r.normal();
    s += z;
    s2 += z * z;
    s3 += z * z * z;
    s4 += z * z * z * z;
    tail += std::fabs(z) > 1.959963984540054;
  }
  EXPECT_NEAR(s / n, 0.0, 0.012);
  EXPECT_NEAR(s2 / n, 1.0, 0.02);
  EXPECT_NEAR(s3 / n, 0.0, 0.05);
  EXPECT_NEAR(s4 / n, 3.0, 0.1);
  EXPECT_NEAR(tail / static_cast<double>(n), 0.05, 0.0025);
  Rng m(405);
  double sm = 0;
  for (int i = 0; i < 20000; ++i) sm += m.normal(10.0, 0.5);
  EXPECT_NEAR(sm / 20000, 10.0, 0.02);
}

TEST(RngStats, BernoulliAndWeightedChoice) {
  Rng r(505);
  const int n = 100000;
  int hits = 0;
  for (int i = 0; i < n; ++i) hits += r.bernoulli(0.3);
  EXPECT_NEAR(hits / static_cast<double>(n), 0.3, 0.0075);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FALSE(r.bernoulli(0.0));
    ASSERT_TRUE(r.bernoulli(1.0));
  }
  std::vector<int> counts(3, 0);
  for (int i = 0; i < n; ++i) counts[r.choice(std::vector<double>{1.0, 0.0, 3.0})]++;
  EXPECT_EQ(counts[1], 0);
  EXPECT_NEAR(counts[0] / static_cast<double>(n), 0.25, 0.007);
  EXPECT_NEAR(counts[2] / static_cast<double>(n), 0.75, 0.007);
}

TEST(RngStats, ShuffleIsAUniformPermutation) {
  Rng r(606);
  // Every one of the 6 orders of 3 items appears about equally often.
  std::map<std::vector<int>, int> orders;
  const int n = 60000;
  for (int i = 0; i < n; ++i) {
    std::vector<int> a{0, 1, 2};
    r.shuffle(a.begin(), a.end());
    orders[a]++;
  }
  ASSERT_EQ(orders.size(), 6u);
  double chi2 = 0;
  for (const auto& kv : orders) chi2 += (kv.second - n / 6.0) * (kv.second - n / 6.0) / (n / 6.0);
  EXPECT_LT(chi2, 20.5);
  std::vector<std::size_t> p = r.permutation(1000);
  std::vector<std::size_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_NE(p, sorted);
  std::vector<int> empty, one{7};
  r.shuffle(empty.begin(), empty.end());
  r.shuffle(one.begin(), one.end());
  EXPECT_EQ(one, std::vector<int>{7});
}

// ---------------------------------------------------------------- derived seeds

TEST(DeriveSeed, DistinctAndOrderSensitive) {
  std::set<std::uint64_t> seen;
  for (std::uint64_t base = 0; base < 4; ++base) {
    for (std::uint64_t i = 0; i < 25000; ++i) seen.insert(derive_seed(base, {i}));
  }
  EXPECT_EQ(seen.size(), 100000u);
  EXPECT_NE(derive_seed(1, {2, 3}), derive_seed(1, {3, 2}));
  EXPECT_NE(derive_seed(1, {}), derive_seed(1, {0}));
  EXPECT_NE(derive_seed(1, {0}), derive_seed(1, {0, 0}));
  // Not envpool's plain seed + id: swapped (base, id) pairs and base == id do not collide.
  EXPECT_NE(derive_seed(1, {0}), derive_seed(0, {1}));
  EXPECT_NE(derive_seed(0, {0}), derive_seed(1, {1}));
  EXPECT_NE(derive_seed(5, {7}), derive_seed(7, {5}));
}

TEST(DeriveSeed, NeighbouringStreamsAreUncorrelated) {
  // Correlation between the k-th uniform of stream i and of stream i+1, over many i.
  const int streams = 4000;
  for (int k : {0, 5}) {
    std::vector<double> x(streams);
    for (int i = 0; i < streams; ++i) {
      Rng r(derive_seed(77, {static_cast<std::uint64_t>(i)}));
      for (int j = 0; j < k; ++j) r.next_u64();
      x[static_cast<std::size_t>(i)] = r.uniform();
    }
    double sa = 0, sb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i + 1 < streams; ++i) {
      const double a = x[static_cast<std::size_t>(i)], b = x[static_cast<std::size_t>(i) + 1];
      sa += a, sb += b, sab += a * b, saa += a * a, sbb += b * b;
    }
    const double m = streams - 1;
    const double cov = sab / m - (sa / m) * (sb / m);
    const double corr = cov / std::sqrt((saa / m - sa * sa / m / m) * (sbb / m - sb * sb / m / m));
    EXPECT_LT(std::fabs(corr), 0.08) << "k=" << k;  // ~5 standard errors at n=4000
  }
}

}  // namespace
}  // namespace agentr1
