// agentr1/text/tokenizer/pretokenizer.h — splitting normalized text into pre-tokens ("words")
// before BPE, as tokenizer.json's "pre_tokenizer" section describes.
//
//   PreTokenizer pre = PreTokenizer::from_json(tokenizer_json["pre_tokenizer"]);
//   std::string buf;
//   std::vector<Span> pieces;
//   pre.split("Hello world", buf, pieces);   // pieces: "Hello", " world" (spans of buf)
//
// Supported components: null (the whole text is one piece), Sequence, Split (Regex or
// String pattern; behaviors Removed, Isolated, MergedWithPrevious, MergedWithNext,
// Contiguous; invert), Metaspace (replacement, prepend_scheme always / first / never,
// split) and ByteLevel (add_prefix_space, use_regex, trim_offsets, which does not affect
// ids). ByteLevel, when present, must be the last step; the byte -> character mapping
// itself is applied by the BPE model (see byte_level()).
//
// Metaspace follows HF tokenizers (Rust): spaces become the replacement ("▁"), which is
// prepended to a piece not starting with it (always; or for "first" only to the piece at
// the very start of the input text), and split=true cuts before every replacement. One
// known divergence from tokenizers.js: it ignores split (never cuts).
//
// Regexes are written for Oniguruma (what HF tokenizers uses) and run here with PCRE2
// (UTF + UCP, JIT-compiled once, thread-safe matching). Differences are bridged by a
// rewrite: \s \S -> \p{White_Space} \P{White_Space}, \w \W -> Alphabetic|M|Nd|Pc, \h \H
// -> hex digits; ^ and $ are line anchors (Oniguruma's default). One known divergence
// from tokenizers.js (not from Rust HF): case-insensitive groups use Unicode simple case
// folding here, so (?i:'s) also matches "'ſ" (U+017F), as Oniguruma does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::text {

// A byte range [begin, end) of some buffer.
struct Span {
  uint32_t begin = 0;
  uint32_t end = 0;
};

// A regex compiled once (PCRE2, UTF + UCP, JIT when available) from Oniguruma syntax.
class Regex {
 public:
  // Throws Error naming the pattern, PCRE2's message and the offset.
  explicit Regex(const std::string& oniguruma_pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the byte ranges of all non-overlapping leftmost matches in `s` (valid UTF-8),
  // offset by `base`. After an empty match the search resumes one character later.
  // Thread-safe.
  void find_all(std::string_view s, uint32_t base, std::vector<Span>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// What Split does with the matched delimiters (HF SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // Builds from the tokenizer.json "pre_tokenizer" value (null allowed). Throws Error
  // naming the unsupported component type and listing the supported ones.
  static PreTokenizer from_json(const json& j);

  // Splits `text` (valid UTF-8). `buf` receives the text the pieces point into (a copy of
  // `text`, with a space prepended to pieces when ByteLevel.add_prefix_space says so);
  // `pieces` receives the non-empty pre-tokens, in order. Both are overwritten.
  // `at_text_start`: `text` begins at offset 0 of the input (Metaspace prepend "first").
  void split(std::string_view text, std::string& buf, std::vector<Span>& pieces,
             bool at_text_start = true) const;

  // True when the last step is ByteLevel: pieces must be mapped byte -> character before
  // the vocabulary lookup.
  bool byte_level() const { return byte_level_; }

  // The configuration this was built from (written back by Tokenizer::save).
  const json& to_json() const { return source_; }

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null for ByteLevel without regex
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel only
    bool is_byte_level = false;
    bool is_metaspace = false;
    std::string replacement;     // Metaspace: the character spaces become
    int prepend = 0;             // Metaspace: 0 never, 1 first, 2 always
  };
  static void add_component(const json& j, std::vector<Step>& steps, const std::string& where);
  std::vector<Step> steps_;
  bool byte_level_ = false;
  json source_;
};

// Rewrites an Oniguruma pattern into PCRE2 syntax with the same meaning for the
// constructs listed above. Exposed for tests.
std::string oniguruma_to_pcre2(const std::string& pattern);

}  // namespace agentr1::text
