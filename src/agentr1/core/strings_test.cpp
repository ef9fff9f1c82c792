#include "agentr1/core/strings.h"

#include <gtest/gtest.h>

namespace agentr1 {
namespace {

TEST(StringsTest, TrimStripsSpacesTabsCrLfOnly) {
  EXPECT_EQ(trim("  yes\n"), "yes");
  EXPECT_EQ(trim("\t\r\n a b \r\n\t"), "a b");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim(" \t\r\n"), "");
  EXPECT_EQ(trim("x"), "x");
  EXPECT_EQ(trim("\fx\v"), "\fx\v");  // form feed and vertical tab are kept
}

TEST(StringsTest, JoinPutsTheSeparatorBetweenEveryPair) {
  EXPECT_EQ(join({}, ", "), "");
  EXPECT_EQ(join({"a"}, ", "), "a");
  EXPECT_EQ(join({"grpo", "ppo", "rloo"}, ", "), "grpo, ppo, rloo");
  EXPECT_EQ(join({"a", "b"}, ""), "ab");
  EXPECT_EQ(join({"", "a", "", "b"}, ","), ",a,,b");  // empty parts keep their separators
}

}  // namespace
}  // namespace agentr1
