// agentr1/text/jinja/text_test_util.h — helpers shared by the text layer's reference-parity
// tests (chat templates, Jinja): reading fixture files and showing where two renders
// first differ.
#pragma once

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"

namespace agentr1::text::test_util {

// The whole file; throws Error naming the path when it cannot be read.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "first difference at byte N" with `before` bytes of context before it and `width`
// bytes of each side shown (JSON-quoted).
inline std::string first_diff(const std::string& ours, const std::string& ref, size_t before = 40,
                              size_t width = 100) {
  size_t i = 0;
  while (i < ours.size() && i < ref.size() && ours[i] == ref[i]) ++i;
  const size_t from = i > before ? i - before : 0;
  return "first difference at byte " + std::to_string(i) + "\n  ours: " + json(ours.substr(from, width)).dump() +
         "\n  ref:  " + json(ref.substr(from, width)).dump();
}

}  // namespace agentr1::text::test_util
