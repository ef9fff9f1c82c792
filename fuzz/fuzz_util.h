// fuzz/fuzz_util.h — what every fuzz target shares.
//
// The contract under test: bad input is rejected with agentr1::Error (one message for
// the user), never with a crash, a hang, another exception type or a sanitizer report.
// guarded() treats Error as the expected outcome; anything else that escapes is
// printed and aborts, which libFuzzer reports as a crash and saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

namespace fuzz {

template <class Fn>
bool guarded(Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const agentr1::Error&) {
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "escaped exception (not agentr1::Error) %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
}

// Silences the library's warnings (a lenient reader logs every skipped row).
inline void quiet() {
  static bool done = [] {
    agentr1::set_log_level(agentr1::LogLevel::kError);
    return true;
  }();
  (void)done;
}

}  // namespace fuzz

// A property of accepted input; a violation is a bug like a crash.
#define FUZZ_REQUIRE(cond)                                                                 \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "property violated: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)
