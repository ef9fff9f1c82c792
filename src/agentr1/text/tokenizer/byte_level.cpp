#include "agentr1/text/tokenizer/byte_level.h"

#include "agentr1/text/tokenizer/unicode.h"

namespace agentr1::text {

namespace {

bool is_printable_latin1(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> spelled;
  std::array<int, 0x144> to_byte{};  // every mapped char is < U+0144
  Tables() {
    to_byte.fill(-1);
    unsigned next = 0;
    for (unsigned b = 0; b < 256; ++b) {
      char32_t c = is_printable_latin1(b) ? b : 0x100 + next++;
      to_char[b] = c;
      append_utf8(spelled[b], c);
      to_byte[c] = static_cast<int>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(unsigned char b) { return tables().to_char[b]; }

const std::array<std::string, 256>& byte_level_alphabet() { return tables().spelled; }

int char_to_byte(char32_t c) { return c < 0x144 ? tables().to_byte[c] : -1; }

std::string bytes_to_byte_level(std::string_view bytes) {
  const auto& sp = tables().spelled;
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += sp[b];
  return out;
}

bool byte_level_to_bytes(std::string_view token, std::string& out) {
  const auto& to_byte = tables().to_byte;
  size_t start = out.size();
  size_t i = 0;
  while (i < token.size()) {
    char32_t c;
    size_t len = valid_utf8_char(token, i, &c);
    if (len == 0 || c >= 0x144 || to_byte[c] < 0) {
      out.resize(start);
      return false;
    }
    out.push_back(static_cast<char>(to_byte[c]));
    i += len;
  }
  return true;
}

}  // namespace agentr1::text
