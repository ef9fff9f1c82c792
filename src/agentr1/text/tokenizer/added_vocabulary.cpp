#include "agentr1/text/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "agentr1/core/error.h"
#include "agentr1/text/tokenizer/unicode.h"

namespace agentr1::text {

namespace {

// The code point ending at byte `end` of valid UTF-8 `s` (end > 0).
char32_t char_before(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  char32_t cp;
  decode_utf8_unchecked(s, i, &cp);
  return cp;
}

}  // namespace

int AddedTokenMatcher::child(int node, unsigned char b) const {
  const auto& ch = nodes_[node].children;
  auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, -1));
  return (it != ch.end() && it->first == b) ? it->second : -1;
}

void AddedTokenMatcher::add(const std::string& pattern, int index, const AddedToken& flags) {
  AGENTR1_CHECK(!pattern.empty(), "added token " << flags.id << " has empty content");
  int node = 0;
  for (unsigned char b : pattern) {
    int c = child(node, b);
    if (c < 0) {
      c = static_cast<int>(nodes_.size());
      nodes_.push_back(Node{});
      auto& ch = nodes_[node].children;
      ch.insert(std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, -1)),
                std::make_pair(b, c));
    }
    node = c;
  }
  if (nodes_[node].pattern >= 0) return;  // same text twice: the first token wins
  nodes_[node].pattern = static_cast<int>(patterns_.size());
  patterns_.push_back({index, pattern.size(), flags.single_word, flags.lstrip, flags.rstrip});
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  out.clear();
  const size_t n = text.size();
  size_t done = 0;  // text before this is already in `out`
  size_t pos = 0;
  while (pos < n) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    // Longest pattern starting at pos.
    int node = 0, best = -1;
    for (size_t j = pos; j < n; ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      if (nodes_[node].pattern >= 0) best = nodes_[node].pattern;
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const Pattern& p = patterns_[best];
    size_t start = pos, stop = pos + p.length;
    if (p.single_word) {
      bool word_before = start > 0 && is_word_char(char_before(text, start));
      char32_t next = 0;
      bool word_after = stop < n && valid_utf8_char(text, stop, &next) > 0 && is_word_char(next);
      if (word_before || word_after) {
        pos = stop;  // this occurrence is skipped as a whole, like HF's match iterator
        continue;
      }
    }
    if (p.lstrip) {
      while (start > done && is_white_space(char_before(text, start))) {
        size_t i = start - 1;
        while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
        start = i;
      }
    }
    if (p.rstrip) {
      char32_t cp;
      size_t len;
      while (stop < n && (len = valid_utf8_char(text, stop, &cp)) > 0 && is_white_space(cp)) {
        stop += len;
      }
    }
    if (start > done) out.push_back({done, start, -1});
    out.push_back({start, stop, p.token});
    done = pos = stop;
  }
  if (done < n) out.push_back({done, n, -1});
}

}  // namespace agentr1::text
