// agentr1/text/tokenizer/normalizer.h — tokenizer.json's "normalizer": the text rewrite applied to
// every plain (non-added-token) segment before pre-tokenization.
//
//   Normalizer n = Normalizer::from_json(tokenizer_json["normalizer"]);
//   std::string s = n.apply("Hello world");   // Llama 2: "▁Hello▁world"
//
// Supported types (anything else fails naming it, and where it sits in the file):
//   NFC, NFD, NFKC, NFKD   Unicode normal forms
//   Prepend {prepend}      puts `prepend` in front of a non-empty segment (SentencePiece's
//                          dummy prefix, "▁")
//   Replace {pattern: {String} | {Regex}, content}
//                          replaces every non-overlapping leftmost match; Regex patterns
//                          use Oniguruma syntax (run with PCRE2, see pretokenizer.h)
//   Sequence {normalizers} the steps in order
// null means no normalization. A Normalizer is immutable; apply() is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/text/tokenizer/unicode.h"

namespace agentr1::text {

class Regex;

// A String or Regex pattern of tokenizer.json (Replace normalizer / decoder, Split).
class Pattern {
 public:
  // Builds from {"String": "..."} or {"Regex": "..."}. Throws Error naming `where` for
  // anything else, an empty String, or a regex that does not compile.
  static Pattern from_json(const json& j, const std::string& where);
  // Copy of `s` with every non-overlapping leftmost match replaced by `content`.
  std::string replace_all(std::string_view s, std::string_view content) const;
  bool is_regex() const { return regex_ != nullptr; }
  const std::string& literal() const { return literal_; }

 private:
  std::string literal_;                 // String pattern
  std::shared_ptr<const Regex> regex_;  // Regex pattern
};

class Normalizer {
 public:
  // Builds from the "normalizer" value (null allowed). `where` prefixes errors.
  static Normalizer from_json(const json& j, const std::string& where = "normalizer");

  // The normalized text of one segment (valid UTF-8 in, valid UTF-8 out).
  std::string apply(std::string_view s) const;
  // True when apply() is the identity.
  bool empty() const { return steps_.empty(); }

 private:
  enum class Kind { kUnicode, kPrepend, kReplace };
  struct Step {
    Kind kind = Kind::kUnicode;
    NormalForm form = NormalForm::kNFC;  // kUnicode
    std::string text;                    // kPrepend: the prefix; kReplace: the content
    std::shared_ptr<const Pattern> pattern;  // kReplace
  };
  static void add(const json& j, std::vector<Step>& steps, const std::string& where);
  std::vector<Step> steps_;
};

}  // namespace agentr1::text
