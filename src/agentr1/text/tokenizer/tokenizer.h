// agentr1/text/tokenizer/tokenizer.h — HuggingFace-compatible BPE tokenizer (tokenizer.json +
// tokenizer_config.json): byte-level families (Qwen2/Qwen3, GPT-2, Llama 3, DeepSeek-V3,
// gpt-oss, Mistral Nemo) and SentencePiece-converted ones (Llama 2, Mistral, Gemma:
// byte_fallback BPE with "▁" for spaces).
//
//   Tokenizer tok = Tokenizer::load("models/qwen3");   // dir with tokenizer.json
//   TokenIds ids = tok.encode("<|im_start|>user\nhi<|im_end|>");
//   std::string text = tok.decode(ids);                 // == the input
//   StreamDecoder sd(tok);
//   for (TokenId id : ids) std::cout << sd.push(id);   // never half a UTF-8 character
//   std::cout << sd.flush();
//
// encode = HF `tokenizer.encode(text, add_special_tokens=False)`: added tokens are found
// in the raw text first (leftmost-longest), the rest is normalized, pre-tokenized and
// BPE-merged. The post-processor is never applied (chat templates write BOS themselves;
// use bos_token()/add_bos_token() if a caller needs it). Input that is not valid UTF-8
// has each invalid byte sequence replaced by U+FFFD before encoding (HF only accepts
// valid strings, so this never changes the ids of valid input).
//
// Supported tokenizer.json components (anything else fails at load naming it):
//   normalizer      null, NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence (normalizer.h)
//   pre_tokenizer   null, Split, Metaspace, ByteLevel, Sequence (pretokenizer.h)
//   model           BPE (dropout null; byte_fallback, fuse_unk, unk_token, ignore_merges)
//   decoder         ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence
//                   (decoder.h)
//   post_processor  null, ByteLevel, TemplateProcessing, RobertaProcessing,
//                   BertProcessing, Sequence of those (kept for save; not applied)
//
// decode is the decoder's output as HF tokenizers gives it; transformers'
// clean_up_tokenization_spaces is never applied (it would break decode(encode(s)) == s).
// SentencePiece-style families do not round-trip every string: Llama 2 prepends "▁" to
// each text segment and its Strip decoder removes only the first, so a segment after an
// added token comes back with an extra leading space.
//
// A Tokenizer is an immutable value with shared state: copies are cheap, every const
// method is thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"
#include "agentr1/text/tokenizer/added_vocabulary.h"

namespace agentr1::text {

class Tokenizer {
 public:
  // Reads dir/tokenizer.json and, if present, dir/tokenizer_config.json (and
  // dir/chat_template.jinja when the config has no chat_template). Throws Error naming
  // the file and the problem.
  static Tokenizer load(const std::string& dir);

  // Builds from the parsed files; `config` is tokenizer_config.json (may be empty).
  // Throws Error on unsupported or malformed components.
  static Tokenizer from_json(const json& tokenizer_json, const json& config = json::object());

  // Text -> ids. allow_special=false leaves special added tokens (special: true, e.g.
  // "<|im_end|>") unmatched, so they are tokenized as plain text (for untrusted text such
  // as tool output); non-special added tokens (e.g. "<tool_call>") still match, as in HF.
  TokenIds encode(std::string_view text, bool allow_special = true) const;

  // Ids -> text. Added tokens decode to their content, the rest through the byte-level
  // decoder; invalid UTF-8 from byte tokens becomes U+FFFD. skip_special drops special
  // tokens. Throws Error for an id that is not in the vocabulary.
  std::string decode(const TokenIds& ids, bool skip_special = false) const;

  // Writes dir/tokenizer.json and dir/tokenizer_config.json (creating dir). Loading the
  // result gives a tokenizer with identical behaviour. Throws Error on I/O failure.
  void save(const std::string& dir) const;

  std::optional<TokenId> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(TokenId id) const;
  // Largest id (vocab and added tokens) plus one.
  TokenId vocab_size() const;
  bool is_special(TokenId id) const;
  const std::vector<AddedToken>& added_tokens() const;

  // From tokenizer_config.json (empty / nullopt / false when absent).
  const std::string& chat_template() const;
  const std::optional<std::string>& bos_token() const;
  const std::optional<std::string>& eos_token() const;
  const std::optional<std::string>& pad_token() const;
  std::optional<TokenId> bos_token_id() const;
  std::optional<TokenId> eos_token_id() const;
  std::optional<TokenId> pad_token_id() const;
  bool add_bos_token() const;
  bool add_eos_token() const;
  const json& config() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  friend class StreamDecoder;
  std::shared_ptr<const Impl> impl_;
};

// Whether ids mean the same tokens under `a` and `b` (a distillation teacher must score the
// student's ids as the same tokens): nullopt when they agree, else the first difference in
// words, naming what differs with both values: the vocabulary size, the token string of
// an id, or whether an id is special. Which tokens a config names bos/eos/pad (a base and
// an instruct checkpoint of one family differ there), merges, normalisers and chat
// templates are not compared: they change no id's meaning, and ids are never re-tokenised.
std::optional<std::string> vocabulary_difference(const Tokenizer& a, const Tokenizer& b);

// Incremental decode of a growing id sequence: push(id) returns the text that became
// complete. Bytes of an unfinished UTF-8 character are held back until the next push;
// the concatenation of every push() and a final flush() equals tok.decode(all ids).
// Leading-space rules of the decoder (Llama 2's Strip, Metaspace) apply only at the very
// start of the stream. A decoder whose output can change retroactively (see
// Decoder::incremental) is decoded at flush().
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false);
  // Throws Error for an id that is not in the vocabulary (nothing is consumed then).
  std::string push(TokenId id);
  // Emits what is held back (an unfinished character becomes U+FFFD) and resets.
  std::string flush();
  // Number of bytes currently held back (0..3 for byte-level decoders; for others the
  // bytes decoded but not yet returned).
  size_t pending() const;

 private:
  Tokenizer tok_;
  bool skip_special_;
  std::string pending_;  // byte-level: bytes of an unfinished character
  // Other decoders: the ids since the last point where the text so far was final, and
  // how many bytes of their decoded text were returned.
  TokenIds window_;
  size_t emitted_ = 0;
  bool at_start_ = true;
};

}  // namespace agentr1::text
