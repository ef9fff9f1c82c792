// agentr1/core/testing.h — helpers for the *_test.cpp files only (header-only, no
// gtest dependency). Library code must not include it.
//
//   using agentr1::testing::error_of;
//   EXPECT_NE(error_of([&] { parse(bad); }).find("must be >= 1"), std::string::npos);
//   EXPECT_EQ(error_of([&] { parse(good); }), "");
//   error_of([&] { parse(good); }, "(no error)")     // a clearer failure message
#pragma once

#include <string>
#include <utility>

#include "agentr1/core/error.h"

namespace agentr1::testing {

// Calls fn() and returns the message of the agentr1::Error it throws, or `if_none`
// ("" unless given) when it throws nothing. Any other exception propagates, so the test
// fails on it.
template <class Fn>
std::string error_of(Fn&& fn, const std::string& if_none = "") {
  try {
    std::forward<Fn>(fn)();
  } catch (const Error& e) {
    return e.what();
  }
  return if_none;
}

}  // namespace agentr1::testing
