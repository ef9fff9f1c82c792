#include "agentr1/env/observation.h"

#include <gtest/gtest.h>

#include "agentr1/core/error.h"

namespace agentr1::env {
namespace {

TEST(Observation, HoldsExactlyOneKind) {
  Observation t = Observation::from_text("hi");
  EXPECT_EQ(t.kind(), Observation::Kind::kText);
  EXPECT_EQ(t.text(), "hi");
  EXPECT_THROW(t.tokens(), Error);
  EXPECT_THROW(t.messages(), Error);

  Observation m = Observation::from_messages(json::parse(R"([{"role":"user","content":"x"}])"));
  EXPECT_EQ(m.kind(), Observation::Kind::kMessages);
  EXPECT_EQ(m.messages()[0]["content"], "x");
  EXPECT_THROW(m.text(), Error);

  Observation k = Observation::from_tokens({1, 2, 3});
  EXPECT_EQ(k.kind(), Observation::Kind::kTokens);
  EXPECT_EQ(k.tokens(), (TokenIds{1, 2, 3}));
  EXPECT_THROW(k.text(), Error);
}

TEST(Observation, MessagesMustBeAnArray) {
  try {
    Observation::from_messages(json::object());
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("JSON array"), std::string::npos) << e.what();
  }
}

TEST(Observation, WrongKindErrorNamesTheKinds) {
  try {
    Observation::from_tokens({1}).text();
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokens"), std::string::npos) << e.what();
  }
  EXPECT_STREQ(observation_kind_name(Observation::Kind::kMessages), "messages");
}

}  // namespace
}  // namespace agentr1::env
