// agentr1/core/rng.h — seeds and random number generators. There is no global RNG:
// every object that draws randomness owns an Rng seeded from the run seed plus its
// own index path (envpool's `seed + env_id`, but mixed so neighbouring streams are
// unrelated).
//
//   Rng rng(derive_seed(cfg.seed, {kSeedRollout, worker_id, env_id}));
//   double u = rng.uniform();                 // [0, 1)
//   int64_t k = rng.uniform_int(1, 6);        // a die: 1..6 inclusive
//   double z = rng.normal(0.0, 1.0);
//   if (rng.bernoulli(0.1)) { ... }
//   size_t i = rng.choice(items.size());      // uniform index
//   size_t j = rng.choice(weights);           // weighted index
//   rng.shuffle(order.begin(), order.end());
//   Rng child = rng.fork(3);                  // independent stream for a sub-object
//
// Reproducibility: the engine is std::mt19937_64 (its output sequence is fixed by the
// C++ standard) and every transform is written out here rather than taken from
// <random>'s distributions (whose algorithms differ between standard libraries). So
// next_u64, uniform, uniform_int, bernoulli, choice and shuffle give bit-identical
// results on every platform. normal() uses std::log/std::cos/std::sqrt; glibc gives
// identical results everywhere, other libms may differ in the last bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace agentr1 {

// The splitmix64 output function (Steele, Lea, Flood 2014; Vigna's constants): a
// bijection on 64-bit integers with strong avalanche.
std::uint64_t mix64(std::uint64_t x);

// A seed for the stream at `path` below `base` (all arithmetic mod 2^64):
//   h = mix64(base + G)
//   for p in path: h = mix64(mix64(h ^ K) + (p + 1) * G)
// with G = 0x9E3779B97F4A7C15 (2^64 / golden ratio, splitmix64's increment) and
// K = 0xD1B54A32D192ED03. For a fixed base and prefix, distinct last elements give
// distinct seeds (each link is a bijection in p); base and path elements enter through
// different functions, so derive_seed(a, {b}) != derive_seed(b, {a}). Use a small
// constant as the first element to separate subsystems.
std::uint64_t derive_seed(std::uint64_t base, std::initializer_list<std::uint64_t> path);
std::uint64_t derive_seed(std::uint64_t base, const std::vector<std::uint64_t>& path);

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : seed_(seed), engine_(seed) {}

  // The seed this generator was constructed with.
  std::uint64_t seed() const { return seed_; }

  // The next raw 64-bit output of mt19937_64.
  std::uint64_t next_u64() { return engine_(); }

  // Uniform double in [0, 1): the top 53 bits of one output times 2^-53.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // Uniform double in [lo, hi). Throws Error unless lo <= hi and both are finite.
  double uniform(double lo, double hi);

  // Uniform integer in [lo, hi], both inclusive, without bias (Lemire 2019, "Fast
  // random integer generation in an interval"). Throws Error if lo > hi.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);

  // Uniform integer in [0, n). Throws Error if n == 0. (Lemire's method.)
  std::uint64_t below(std::uint64_t n);

  // Normal sample: Box-Muller with u1 = 1 - uniform() (never 0) and u2 = uniform();
  // returns mean + stddev * sqrt(-2 ln u1) * cos(2 pi u2). Two outputs per call, no
  // cached second value (so the state is only the engine). Throws Error if stddev < 0.
  double normal(double mean = 0.0, double stddev = 1.0);

  // True with probability p (uniform() < p). Throws Error unless 0 <= p <= 1.
  bool bernoulli(double p);

  // Uniform index in [0, n). Throws Error if n == 0.
  std::size_t choice(std::size_t n) { return static_cast<std::size_t>(below(n)); }

  // Index i with probability weights[i] / sum(weights) (one uniform() draw, linear
  // scan). Throws Error if weights are empty, negative, non-finite, or sum to 0.
  std::size_t choice(const std::vector<double>& weights);

  // Fisher-Yates, from the back: for i = n-1 .. 1, swap(a[i], a[below(i + 1)]).
  template <class RandomIt>
  void shuffle(RandomIt first, RandomIt last) {
    const auto n = static_cast<std::uint64_t>(std::distance(first, last));
    for (std::uint64_t i = n; i > 1; --i) {
      const std::uint64_t j = below(i);
      using std::swap;
      swap(first[static_cast<std::ptrdiff_t>(i - 1)], first[static_cast<std::ptrdiff_t>(j)]);
    }
  }

  // A 0..n-1 permutation drawn with shuffle().
  std::vector<std::size_t> permutation(std::size_t n);

  // An independent generator for a child object: Rng(derive_seed(seed(), {index})).
  // Does not advance this generator.
  Rng fork(std::uint64_t index) const { return Rng(derive_seed(seed_, {index})); }

  // Engine state as text (std's portable mt19937_64 format) for checkpoints, and back.
  // load_state throws Error on malformed text.
  std::string save_state() const;
  void load_state(const std::string& state);

  // For code that needs a UniformRandomBitGenerator; draws from the same stream.
  std::mt19937_64& engine() { return engine_; }

 private:
  std::uint64_t seed_;
  std::mt19937_64 engine_;
};

}  // namespace agentr1
