#include "agentr1/core/strings.h"

namespace agentr1 {

std::string trim(std::string_view s) {
  constexpr std::string_view kWhitespace = " \t\r\n";
  const size_t b = s.find_first_not_of(kWhitespace);
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(kWhitespace);
  return std::string(s.substr(b, e - b + 1));
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

}  // namespace agentr1
