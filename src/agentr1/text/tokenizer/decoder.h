// agentr1/text/tokenizer/decoder.h — tokenizer.json's "decoder": how a list of token strings
// (vocabulary entries and added-token contents) becomes text.
//
//   Decoder d = Decoder::from_json(tokenizer_json["decoder"]);
//   std::string raw = d.decode_raw({"▁Hello", "▁world", "<0x21>"}, /*at_start=*/true);
//   // Llama 2's chain: "Hello world!" (may hold invalid UTF-8 from byte tokens;
//   // sanitize_utf8 it)
//
// Supported types (anything else fails naming it, and where it sits in the file):
//   ByteLevel               GPT-2 byte spelling back to bytes, all tokens fused into one
//   Replace {pattern, content}  per token (String or Regex pattern)
//   ByteFallback            runs of "<0xNN>" tokens become their bytes
//   Fuse                    all tokens joined into one
//   Strip {content, start, stop}  per token: drop up to `start` leading and `stop`
//                           trailing `content` characters
//   Metaspace {replacement, prepend_scheme}  per token: replacement -> " "; the leading
//                           space of the first token is dropped (not for prepend_scheme
//                           "never")
//   Sequence {decoders}     the steps in order
// The result is the remaining tokens joined. This is HF tokenizers' decode_chain, with
// one deliberate choice: an invalid byte run decodes with one U+FFFD per maximal invalid
// subpart (as tokenizers.js and the ByteLevel decoder do; Rust's ByteFallback writes one
// per byte). Encoded text never produces invalid runs, so ids from encode() decode alike.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::text {

class Pattern;

class Decoder {
 public:
  // Builds from the "decoder" value. Throws Error naming the unsupported type (null is
  // not supported: HF then joins tokens with spaces, which no supported model wants).
  static Decoder from_json(const json& j, const std::string& where = "decoder");

  // The decoded bytes of `tokens`. `at_start`: tokens[0] is the first token of the text,
  // so the leading-space rules (Strip after Fuse, Metaspace) apply to it.
  std::string decode_raw(std::vector<std::string> tokens, bool at_start = true) const;

  // True when the decoder is exactly one ByteLevel step (the tokenizer's fast path).
  bool byte_level_only() const { return byte_level_only_; }

  // True when decoding a text piecewise gives the same bytes as decoding it at once:
  // decode_raw(a + b, s) == decode_raw(a, s) + decode_raw(b, false) whenever the bytes of
  // `a` end on a character boundary and are non-empty (or s is false). StreamDecoder
  // streams such decoders; others (a Strip with stop > 0 after Fuse, a multi-character
  // Replace after Fuse, a per-token step after ByteFallback) are decoded at flush.
  bool incremental() const { return incremental_; }

 private:
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  struct Step {
    Kind kind = Kind::kFuse;
    std::shared_ptr<const Pattern> pattern;  // kReplace
    std::string content;                     // kReplace: replacement; kStrip: the char;
                                             // kMetaspace: the replacement char
    size_t start = 0, stop = 0;              // kStrip
    bool strip_first = true;                 // kMetaspace: prepend_scheme != never
  };
  static void add(const json& j, std::vector<Step>& steps, const std::string& where);
  std::vector<Step> steps_;
  bool byte_level_only_ = false;
  bool incremental_ = true;
};

}  // namespace agentr1::text
