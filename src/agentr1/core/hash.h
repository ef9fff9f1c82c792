// agentr1/core/hash.h — FNV-1a 64-bit hash of a string: the same bits on every run,
// platform and compiler, for seeds and train/test splits derived from text.
//
//   const bool test_side = (mix64(fnv1a64(asin)) & 1) != 0;      // a fixed split by id
//   Rng rng(derive_seed(fnv1a64(asin), {kSeedFilePrice}));      // a seed per product
//   const uint64_t a = fnv1a64(key), b = fnv1a64(key, a);      // chained: a second hash
//
// Data splits and seeds in use depend on these exact bits: never change them.
#pragma once

#include <cstdint>
#include <string_view>

namespace agentr1 {

inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ULL;  // the FNV offset basis
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ULL;         // the 64-bit FNV prime

// FNV-1a over the bytes of s (each as unsigned char), starting from `seed` (the standard
// offset basis by default; pass an earlier hash to chain).
constexpr uint64_t fnv1a64(std::string_view s, uint64_t seed = kFnv1a64Offset) {
  uint64_t h = seed;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnv1a64Prime;
  }
  return h;
}

}  // namespace agentr1
