// agentr1/core/strings.h — small string helpers shared across layers.
//
//   trim("  yes\n")                    // "yes"
//   join({"grpo", "ppo"}, ", ")        // "grpo, ppo"
//   "known: " + join(names, ", ")      // names: a std::vector<std::string>
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace agentr1 {

// s without leading and trailing spaces, tabs, CR and LF (no other characters: '\f' and
// '\v' stay). "" when s is all whitespace.
std::string trim(std::string_view s);

// The parts with `sep` between each neighbouring pair: join({"a", "", "b"}, ",") is
// "a,,b", join({}, ",") is "". Empty parts are kept, each with its separators.
std::string join(const std::vector<std::string>& parts, std::string_view sep);

}  // namespace agentr1
