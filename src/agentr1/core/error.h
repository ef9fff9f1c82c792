// agentr1/core/error.h — the one exception type and the check macro.
//
//   AGENTR1_CHECK(n >= 1, "rollout.n must be >= 1, got " << n);
//   throw agentr1::Error("loading " + path + ": " + why);
//
// Errors name the value, the rule, and (where a user can fix it) how. Add context
// when rethrowing across a layer with `rethrow_with_context`.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace agentr1 {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A failure of the infrastructure around an episode, not of the model's output: a tool
// server that died, a sandbox that could not start, a reward service that did not
// answer. The flow marks the trajectory (Trajectory::infra_failure) and the trainer
// leaves it out of its group's advantage instead of scoring it as a wrong answer.
class InfraError : public Error {
 public:
  explicit InfraError(const std::string& what) : Error(what) {}
};

// Calls fn(); if it throws, rethrows agentr1::Error("<context>: <original message>").
template <typename Fn>
auto with_context(const std::string& context, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    throw Error(context + ": " + e.what());
  }
}

}  // namespace agentr1

#define AGENTR1_CHECK(cond, msg)                  \
  do {                                            \
    if (!(cond)) {                                \
      std::ostringstream agentr1_check_os_;       \
      agentr1_check_os_ << msg;                   \
      throw ::agentr1::Error(agentr1_check_os_.str()); \
    }                                             \
  } while (0)
