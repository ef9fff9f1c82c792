#include "agentr1/core/hash.h"

#include <gtest/gtest.h>

#include <string>

namespace agentr1 {
namespace {

// Reference values of 64-bit FNV-1a (the FNV authors' test vectors).
static_assert(fnv1a64("") == 0xcbf29ce484222325ULL);
static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
static_assert(fnv1a64("foobar") == 0x85944171f73967e8ULL);

TEST(HashTest, Fnv1a64MatchesTheReferenceAndHashesBytesUnsigned) {
  EXPECT_EQ(fnv1a64(std::string("a")), 0xaf63dc4c8601ec8cULL);
  // A byte >= 0x80 is xored as 0..255, not sign-extended: one step from the offset basis.
  EXPECT_EQ(fnv1a64("\xff"), (0xcbf29ce484222325ULL ^ 0xffULL) * 0x100000001b3ULL);
  // A seed continues the hash: hashing "ab" is hashing "b" from the hash of "a".
  EXPECT_EQ(fnv1a64("b", fnv1a64("a")), fnv1a64("ab"));
}

}  // namespace
}  // namespace agentr1
