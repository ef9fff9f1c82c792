#include "agentr1/core/rng.h"

#include <cmath>
#include <locale>
#include <sstream>

#include "agentr1/core/error.h"

namespace agentr1 {
namespace {
constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio
constexpr std::uint64_t kStep = 0xD1B54A32D192ED03ULL;    // any odd constant != kGolden

// One link of the chain. For a fixed h it is a bijection in p ((p + 1) * kGolden is one
// because kGolden is odd; mix64 is one), and h and p enter through different functions,
// so (base, i) and (i, base) do not collide.
std::uint64_t chain(std::uint64_t h, std::uint64_t p) {
  return mix64(mix64(h ^ kStep) + (p + 1) * kGolden);
}
}  // namespace

std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t derive_seed(std::uint64_t base, std::initializer_list<std::uint64_t> path) {
  std::uint64_t h = mix64(base + kGolden);
  for (std::uint64_t p : path) h = chain(h, p);
  return h;
}

std::uint64_t derive_seed(std::uint64_t base, const std::vector<std::uint64_t>& path) {
  std::uint64_t h = mix64(base + kGolden);
  for (std::uint64_t p : path) h = chain(h, p);
  return h;
}

double Rng::uniform(double lo, double hi) {
  AGENTR1_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi,
                "Rng::uniform(lo, hi) needs finite lo <= hi, got lo=" << lo << ", hi=" << hi);
  return lo + (hi - lo) * uniform();
}

std::uint64_t Rng::below(std::uint64_t n) {
  AGENTR1_CHECK(n > 0, "Rng::below(n) needs n >= 1, got 0");
  // Lemire: the high word of x * n is uniform on [0, n) once the low word is outside
  // the 2^64 mod n values that would over-represent some results.
  unsigned __int128 m = static_cast<unsigned __int128>(engine_()) * n;
  auto low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    while (low < threshold) {
      m = static_cast<unsigned __int128>(engine_()) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

std::int64_t Rng::uniform_int(std::int64_t lo, std::int64_t hi) {
  AGENTR1_CHECK(lo <= hi, "Rng::uniform_int(lo, hi) needs lo <= hi, got lo=" << lo
                                                                            << ", hi=" << hi);
  const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
  const std::uint64_t offset = span == UINT64_MAX ? engine_() : below(span + 1);
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + offset);
}

double Rng::normal(double mean, double stddev) {
  AGENTR1_CHECK(stddev >= 0 && std::isfinite(stddev),
                "Rng::normal needs a finite stddev >= 0, got " << stddev);
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  const double two_pi = 6.283185307179586476925286766559;
  return mean + stddev * (std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2));
}

bool Rng::bernoulli(double p) {
  AGENTR1_CHECK(p >= 0.0 && p <= 1.0, "Rng::bernoulli(p) needs 0 <= p <= 1, got " << p);
  return uniform() < p;
}

std::size_t Rng::choice(const std::vector<double>& weights) {
  AGENTR1_CHECK(!weights.empty(), "Rng::choice(weights) needs at least one weight");
  double total = 0.0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    AGENTR1_CHECK(std::isfinite(weights[i]) && weights[i] >= 0.0,
                  "Rng::choice(weights): weight " << i << " is " << weights[i]
                                                  << "; weights must be finite and >= 0");
    total += weights[i];
  }
  AGENTR1_CHECK(total > 0.0, "Rng::choice(weights): the weights sum to 0; at least one "
                             "must be positive");
  const double u = uniform() * total;
  double acc = 0.0;
  std::size_t last_positive = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0.0) continue;
    acc += weights[i];
    last_positive = i;
    if (u < acc) return i;
  }
  return last_positive;  // u landed on the rounding gap at the very top
}

std::vector<std::size_t> Rng::permutation(std::size_t n) {
  std::vector<std::size_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = i;
  shuffle(p.begin(), p.end());
  return p;
}

std::string Rng::save_state() const {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os << seed_ << ' ' << engine_;
  return os.str();
}

void Rng::load_state(const std::string& state) {
  std::istringstream is(state);
  is.imbue(std::locale::classic());
  std::uint64_t seed = 0;
  std::mt19937_64 engine;
  is >> seed >> engine;
  AGENTR1_CHECK(!is.fail(), "Rng::load_state: malformed state text (expected the output of "
                            "save_state: a seed and 312 engine words)");
  seed_ = seed;
  engine_ = engine;
}

}  // namespace agentr1
