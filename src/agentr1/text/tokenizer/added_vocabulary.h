// agentr1/text/tokenizer/added_vocabulary.h — tokenizer.json "added_tokens": tokens matched in the
// text before any normalization or BPE (<|im_start|>, <tool_call>, ...).
//
//   AddedTokenMatcher m;
//   m.add("<|im_end|>", 0, token);    // pattern, index of the token, its flags
//   std::vector<AddedTokenMatcher::Segment> segs;
//   m.split("hi<|im_end|>", segs);     // {"hi", -1}, {"<|im_end|>", index of the token}
//
// Matching follows HF's AddedVocabulary: scanning left to right, the leftmost match
// wins, the longest at that position; a single_word token only matches with no word
// character (\w) right before and after it (else that occurrence is skipped); lstrip /
// rstrip make the match swallow the whitespace (\s) on its left / right.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agentr1/core/generator.h"

namespace agentr1::text {

// One entry of tokenizer.json "added_tokens".
struct AddedToken {
  TokenId id = -1;            // the id (may coincide with a vocab entry of equal content)
  std::string content;        // the literal text
  bool single_word = false;   // match only as a whole word
  bool lstrip = false;        // also consume whitespace on the left
  bool rstrip = false;        // also consume whitespace on the right
  bool normalized = true;     // match against normalized text (HF default: !special)
  bool special = false;       // special: skipped by decode(skip_special), not matched when
                              // encode(allow_special=false)
};

class AddedTokenMatcher {
 public:
  // A piece of the input: plain text (token < 0) or a match of tokens[token].
  struct Segment {
    size_t begin = 0;
    size_t end = 0;
    int token = -1;
  };

  // Registers `pattern` (the text to find) for the token at `index` with its flags.
  void add(const std::string& pattern, int index, const AddedToken& flags);
  bool empty() const { return patterns_.empty(); }

  // Splits `text` into segments covering it in order (none is empty). Thread-safe.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
    int pattern = -1;                                     // index into patterns_
  };
  struct Pattern {
    int token;
    size_t length;
    bool single_word, lstrip, rstrip;
  };
  int child(int node, unsigned char b) const;
  std::vector<Node> nodes_{Node{}};
  std::vector<Pattern> patterns_;
  bool first_byte_[256] = {};
};

}  // namespace agentr1::text
