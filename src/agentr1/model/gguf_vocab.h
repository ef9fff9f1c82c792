// agentr1/model/gguf_vocab.h — a HuggingFace byte-level BPE tokenizer as the vocabulary
// llama.cpp reads from a GGUF file (the tokenizer.ggml.* keys); export_gguf writes it.
//
//   GgufVocab v = read_gguf_vocab(model_dir, cfg.vocab_size, cfg.arch);
//   v.pre == "qwen2"; v.tokens.size() == cfg.vocab_size;
//
// From tokenizer.json, tokenizer_config.json (and config.json's <typ>_token_id), as
// llama.cpp's convert_hf_to_gguf.py writes gpt2-style BPE vocabularies:
//   tokens       id i's text for every i < vocab_size; ids the tokenizer lacks are "[PADi]"
//   token types  normal; control for added tokens marked special (or that look it:
//                <|...|>); user-defined for the other added tokens (U+2581 written as a
//                space); unused for the padding
//   merges       "a b" (pairs joined; a space inside a part written as U+0120)
//   special ids  bos/eos/unk/sep/pad/mask: tokenizer_config's "<typ>_token" found among
//                the added tokens, else config.json's "<typ>_token_id"
//   add_bos/eos  a TemplateProcessing post-processor that starts with the bos (ends with
//                the eos); tokenizer_config's add_<typ>_token overrides
//   template     tokenizer_config's chat_template (a string, or named templates), else
//                chat_template.jinja, else chat_template.json
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agentr1/model/config.h"

namespace agentr1::model {

struct GgufVocab {
  std::string pre;                                            // tokenizer.ggml.pre
  std::vector<std::string> tokens;                            // tokenizer.ggml.tokens
  std::vector<int32_t> types;                                 // tokenizer.ggml.token_type
  std::vector<std::string> merges;                            // tokenizer.ggml.merges
  std::vector<std::pair<std::string, int64_t>> special_ids;   // full GGUF key, id
  std::vector<std::pair<std::string, bool>> add_flags;        // full GGUF key, value
  std::optional<bool> add_space_prefix;                       // llama only, as the converter
  std::string chat_template;                                  // tokenizer.chat_template; "" = none
  std::vector<std::pair<std::string, std::string>> named_templates;  // tokenizer.chat_template.<name>
};

// Reads model_dir's tokenizer files. Throws Error naming the file and the fix: no
// tokenizer.json; not a byte-level BPE; a pre-tokenizer llama.cpp does not know by name
// (gguf_tokenizer_pre); a token id at or beyond vocab_size; no merges; a special token
// id outside the vocabulary.
GgufVocab read_gguf_vocab(const std::string& model_dir, int64_t vocab_size, Arch arch);

// tokenizer.ggml.pre for a parsed tokenizer.json (nlohmann::json, not the ordered
// agentr1::json, which parses a 150k-token vocabulary 30x slower): "qwen2"
// (Qwen2/2.5/3: single digits) or "llama-bpe" (Llama 3: digits in groups of up to 3).
// llama.cpp chooses its pre-tokenizer regex by this name. The converter finds the name
// from a hash of the ids of a fixed text; the name stands for the Split regex of the
// pre-tokenizer, which is what is matched here (so an added token or a resized
// vocabulary does not lose it). Throws Error quoting the pattern when it is neither.
std::string gguf_tokenizer_pre(const nlohmann::json& tokenizer_json);

}  // namespace agentr1::model
