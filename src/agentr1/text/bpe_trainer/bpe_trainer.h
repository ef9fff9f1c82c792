// agentr1/text/bpe_trainer/bpe_trainer.h — train a byte-level BPE tokenizer (Qwen2/Qwen3 layout).
//
//   BpeTrainerOptions opts;
//   opts.vocab_size = 2048;                          // bytes + merges + special tokens
//   json tok = train_bpe(documents, opts);           // a complete HF tokenizer.json
//   json cfg = make_tokenizer_config(chat_template, "<|im_end|>", "<|endoftext|>");
//   write_trained_tokenizer("out/tokenizer", tok, cfg);
//
// The result has the structure of Qwen's tokenizer.json: NFC normalizer; pre-tokenizer
// Sequence[Split(Qwen regex, Isolated), ByteLevel(use_regex=false)]; a BPE model whose
// vocab starts with the 256 byte-level symbols (sorted by code point, as HF's trainer
// seeds them from ByteLevel::alphabet()), followed by the learned tokens in merge
// order; ByteLevel decoder and post-processor; the special tokens as added tokens with
// ids after the BPE vocab.
//
// Algorithm (that of HF tokenizers' BpeTrainer): special tokens are cut out of each
// document (leftmost-longest), the rest is NFC-normalised and split by the Qwen regex;
// distinct pieces ("words") are counted. Then, repeatedly, the adjacent symbol pair
// with the highest count (summed over word occurrences, overlapping windows counted,
// as HF does) is merged into a new symbol. Ties go to the pair with the smaller
// (left id, right id), again as HF does. Training stops when the vocabulary (including
// the special tokens) reaches vocab_size or the best count is below min_frequency.
// Single-threaded and deterministic: the same corpus and options give the same file.
#pragma once

#include <string>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::text {

struct BpeTrainerOptions {
  // Total vocabulary size: 256 byte symbols + learned merges + special_tokens.
  // Must be >= 256 + special_tokens.size(). Training may stop earlier (min_frequency).
  int vocab_size = 2048;
  // A pair is merged only if it occurs at least this often in the corpus (>= 0; 0 and 1
  // both mean "any pair that occurs").
  int min_frequency = 2;
  // Added tokens (special=true, normalized=false), ids after the BPE vocab in this
  // order. They are removed from the corpus text before counting, so no merge learns
  // their pieces. Must be non-empty, distinct, valid UTF-8, and not a single byte symbol.
  std::vector<std::string> special_tokens = {
      "<|endoftext|>", "<|im_start|>",    "<|im_end|>",       "<tool_call>", "</tool_call>",
      "<tool_response>", "</tool_response>", "<think>", "</think>"};
  // Added tokens written with special=false, as Qwen's tokenizer.json flags them: they
  // are matched as single tokens in text but are content, not control tokens (decode
  // with skip_special keeps them; environments do not strip them as end-of-turn).
  std::vector<std::string> non_special_tokens = {"<tool_call>", "</tool_call>", "<tool_response>",
                                                 "</tool_response>", "<think>", "</think>"};
  // Longest learned token in bytes; merges that would produce a longer token are never
  // made. 0 = no limit (HF's default).
  int max_token_bytes = 0;
  // Digits per pre-token: 1 = Qwen's pattern (every digit its own token); 2 or 3 =
  // Llama 3 / GPT-4 style (\p{N}{1,k}: "6718" -> "671" "8") AND every digit string of
  // up to k digits is made a token first (1,110 merges for k = 3), so numbers split
  // into whole chunks. Small models copy a number from the prompt far more easily as
  // one or two tokens than as four.
  int digits_per_token = 1;
  // Write merges as ["a", "b"] arrays (tokenizers >= 0.20, as in Qwen3's file) instead of
  // the classic "a b" strings. Both load in HF tokenizers and tokenizers.js.
  bool merges_as_pairs = false;
};

// The Qwen2/Qwen3 pre-tokenizer regex (Split pattern of Qwen's tokenizer.json).
const std::string& qwen_pretokenizer_pattern();
// The Qwen regex with its single-digit branch widened to \p{N}{1,k}; k = 1 gives the
// Qwen regex itself. Throws Error unless 1 <= k <= 3.
std::string pretokenizer_pattern(int digits_per_token);

// Trains a byte-level BPE tokenizer on `corpus` (each element one document, UTF-8).
// Returns a complete tokenizer.json object (see the top of this file).
// Throws Error if the options are invalid (vocab_size < 256 + specials, negative
// min_frequency or max_token_bytes, empty/duplicate/byte-symbol special tokens), if a
// document is not valid UTF-8 (names its index), or if the corpus has no text left
// after removing special tokens. Logs a warning if training stops before vocab_size.
json train_bpe(const std::vector<std::string>& corpus, const BpeTrainerOptions& opts);

// A tokenizer_config.json in the style of Qwen's: no BOS, the given EOS and PAD,
// the chat template text, clean_up_tokenization_spaces=false, tokenizer_class
// "Qwen2Tokenizer". The chat template is passed in (it is data, not built in).
json make_tokenizer_config(const std::string& chat_template, const std::string& eos_token,
                           const std::string& pad_token);

// Writes <dir>/tokenizer.json and <dir>/tokenizer_config.json (creating dir). When the
// config has no "added_tokens_decoder", one is filled in from tokenizer_json's
// added_tokens (as HF's save_pretrained writes it). Throws Error if a bos/eos/pad/unk
// token named in the config is not a token of tokenizer_json, or if writing fails.
void write_trained_tokenizer(const std::string& dir, const json& tokenizer_json,
                             const json& tokenizer_config);

}  // namespace agentr1::text
