// agentr1/text/tokenizer/unicode.h — the small set of UTF-8 and Unicode helpers the tokenizer needs.
//
//   std::string clean = sanitize_utf8(raw);          // invalid bytes -> U+FFFD
//   std::string nfc = normalize(clean, NormalForm::kNFC);
//   size_t hold = incomplete_utf8_tail(buf);         // bytes a stream must hold back
//
// Invalid UTF-8 is replaced with U+FFFD one replacement per "maximal subpart" (the
// Unicode recommended practice, also what Rust's String::from_utf8_lossy and the WHATWG
// TextDecoder do), so decoding a byte stream in pieces and at once give the same text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace agentr1::text {

// The replacement character U+FFFD, UTF-8 encoded.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Appends the UTF-8 encoding of `cp` (must be a Unicode scalar value) to `out`.
void append_utf8(std::string& out, char32_t cp);

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not a
// complete valid sequence (invalid, or truncated by the end of `s`). Writes the code point
// to *cp when non-null and valid.
size_t valid_utf8_char(std::string_view s, size_t i, char32_t* cp = nullptr);

// Decodes the code point at s[i] of a string known to be valid UTF-8; returns its length.
inline size_t decode_utf8_unchecked(std::string_view s, size_t i, char32_t* cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  if (p[0] < 0x80) {
    *cp = p[0];
    return 1;
  }
  if (p[0] < 0xE0) {
    *cp = (char32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    return 2;
  }
  if (p[0] < 0xF0) {
    *cp = (char32_t(p[0] & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    return 3;
  }
  *cp = (char32_t(p[0] & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
        (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  return 4;
}

// True when every byte sequence in `s` is valid UTF-8 (no overlongs, no surrogates).
bool is_valid_utf8(std::string_view s);

// Copy of `s` with every maximal invalid subpart replaced by U+FFFD. Valid input is
// returned unchanged.
std::string sanitize_utf8(std::string_view s);

// Number of trailing bytes of `s` that form a valid but incomplete UTF-8 sequence
// (0..3): the bytes a streaming decoder must hold back until more arrive.
size_t incomplete_utf8_tail(std::string_view s);

// Unicode normalization forms (UAX #15).
enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };

// Returns `s` (valid UTF-8) in the normal form `form`. ASCII input is returned as is.
// Throws Error if `s` is not valid UTF-8.
std::string normalize(std::string_view s, NormalForm form);

// The Unicode White_Space property (what Oniguruma's and Rust's \s match).
bool is_white_space(char32_t c);

// Word characters as Rust's regex \w defines them (Alphabetic, marks, decimal digits,
// connector punctuation, join controls); approximated from the general category.
bool is_word_char(char32_t c);

}  // namespace agentr1::text
