// agentr1/text/tokenizer/byte_level.h — GPT-2's reversible byte <-> printable-character mapping.
//
// Byte-level BPE vocabularies (GPT-2, Qwen2/3, Llama 3) spell every byte as one
// printable Unicode character: the printable Latin-1 bytes map to themselves, the other
// 68 bytes to U+0100..U+0143 (space 0x20 -> 'Ġ' U+0120, newline 0x0A -> 'Ċ' U+010A).
//
//   std::string t = bytes_to_byte_level("hi there");   // "hiĠthere"
//   std::string raw;
//   bool ok = byte_level_to_bytes(t, raw);             // raw == "hi there"
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace agentr1::text {

// The code point that byte `b` maps to.
char32_t byte_to_char(unsigned char b);

// The UTF-8 spelling of the character for each byte (index = byte value).
const std::array<std::string, 256>& byte_level_alphabet();

// The byte a mapped character stands for, or -1 if `c` is not one of the 256 characters.
int char_to_byte(char32_t c);

// Maps every byte of `bytes` to its character; returns the UTF-8 string.
std::string bytes_to_byte_level(std::string_view bytes);

// Inverse of bytes_to_byte_level: appends the bytes of `token` (valid UTF-8) to `out`.
// Returns false, leaving `out` unchanged, if some character of `token` is not in the
// byte-level alphabet (e.g. an added token such as "<|im_end|>" is fine, "é" is not).
bool byte_level_to_bytes(std::string_view token, std::string& out);

}  // namespace agentr1::text
