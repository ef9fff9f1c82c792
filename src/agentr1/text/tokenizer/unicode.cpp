#include "agentr1/text/tokenizer/unicode.h"

#include <cstdlib>
#include <cstring>
#include <memory>

#include <utf8proc.h>

#include "agentr1/core/error.h"

namespace agentr1::text {

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// How many bytes after position i (including the lead) form the longest prefix of a
// valid sequence, per the Unicode table of well-formed UTF-8 byte sequences (Table 3-7).
// Returns {prefix_len, full_len}; prefix_len == full_len means a complete valid char;
// prefix_len == 0 means the lead byte itself is invalid.
struct Probe {
  size_t prefix;
  size_t full;
};

Probe probe_utf8(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  unsigned char b0 = p[i];
  if (b0 < 0x80) return {1, 1};
  size_t full;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    full = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    full = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    full = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {0, 1};
  }
  size_t k = 1;
  if (i + k >= n) return {k, full};
  if (p[i + k] < lo || p[i + k] > hi) return {k, full};
  ++k;
  while (k < full) {
    if (i + k >= n) return {k, full};
    if (p[i + k] < 0x80 || p[i + k] > 0xBF) return {k, full};
    ++k;
  }
  return {full, full};
}

}  // namespace

size_t valid_utf8_char(std::string_view s, size_t i, char32_t* cp) {
  Probe pr = probe_utf8(s, i);
  if (pr.prefix != pr.full || pr.prefix == 0) return 0;
  if (cp) decode_utf8_unchecked(s, i, cp);
  return pr.full;
}

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    // Fast path over ASCII, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t len = valid_utf8_char(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    Probe pr = probe_utf8(s, i);
    if (pr.prefix == pr.full && pr.prefix > 0) {
      out.append(s.data() + i, pr.full);
      i += pr.full;
    } else {
      // A maximal subpart (a valid prefix that was cut short, or one bad byte).
      out.append(kReplacementChar);
      i += pr.prefix == 0 ? 1 : pr.prefix;
    }
  }
  return out;
}

size_t incomplete_utf8_tail(std::string_view s) {
  // Look at the last up-to-3 bytes for the start of a sequence that is cut off.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t i = n - back;
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) return 0;
    if (b >= 0xC0) {  // a lead byte
      Probe pr = probe_utf8(s, i);
      return (pr.prefix == back && pr.prefix < pr.full) ? back : 0;
    }
  }
  return 0;
}

std::string normalize(std::string_view s, NormalForm form) {
  bool ascii = true;
  for (unsigned char c : s) {
    if (c >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return std::string(s);
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* dst = nullptr;
  utf8proc_ssize_t len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                      static_cast<utf8proc_ssize_t>(s.size()), &dst,
                                      static_cast<utf8proc_option_t>(options));
  if (len < 0) {
    throw Error(std::string("unicode normalization failed: ") + utf8proc_errmsg(len) +
                " (input must be valid UTF-8; sanitize it with sanitize_utf8 first)");
  }
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> hold(dst, &std::free);
  return std::string(reinterpret_cast<const char*>(dst), static_cast<size_t>(len));
}

bool is_white_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F:
    case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '_';
  }
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

}  // namespace agentr1::text
