// agentr1/text/tokenizer/bpe_model.h — the BPE model of tokenizer.json ("model": {"type": "BPE"}):
// vocabulary, ranked merges, and the merge loop that turns one pre-token into ids.
//
//   BpeModel bpe = BpeModel::from_json(tokenizer_json["model"], /*byte_level=*/true);
//   TokenIds ids;
//   bpe.encode_word(" world", ids);     // Qwen3: {1879} ("Ġworld")
//
// A word starts as one symbol per character (per byte when byte_level: each byte is
// spelled by its GPT-2 character, see byte_level.h); then the adjacent pair with the
// lowest merge rank is merged, leftmost first on ties, until no pair has a rank. This
// is HF tokenizers' algorithm (dropout must be null; continuing_subword_prefix /
// end_of_word_suffix empty). A character missing from the vocab becomes, with
// byte_fallback, the tokens "<0xNN>" of its UTF-8 bytes (when all exist), else unk_token
// (consecutive ones fused into one with fuse_unk), else it is dropped. Results for words
// shorter than 256 bytes are cached (bounded, thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"

namespace agentr1::text {

// Token ids (vocab and added tokens) must be below this: 2^24 = 16,777,216, some 60x
// the largest real vocabulary and the model loader's vocab_size limit. Without a bound
// one absurd id in a tokenizer.json would allocate gigabytes of id tables.
constexpr int64_t kMaxTokenId = int64_t{1} << 24;

class BpeModel {
 public:
  // Builds from the "model" object. Throws Error when the type is not BPE, an option is
  // unsupported, an id repeats, or a merge names a token missing from the vocab.
  // `byte_level`: words are raw bytes to be spelled with the byte-level alphabet.
  static BpeModel from_json(const json& model, bool byte_level);
  // Same from an unordered nlohmann::json (what Tokenizer::load parses big files into:
  // ordered_json inserts are linear in the object size).
  static BpeModel from_json(const nlohmann::json& model, bool byte_level);

  BpeModel();
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

  // Appends the ids of one pre-token `word` to `out`. Characters missing from the vocab
  // become unk_token when the model has one, otherwise they are dropped (as HF does).
  // Thread-safe.
  void encode_word(std::string_view word, TokenIds& out) const;

  // The merge loop on a sequence of symbol ids, in place. `force_heap` selects the
  // O(n log n) priority-queue loop that long words use (tests compare both loops).
  void merge(TokenIds& symbols, bool force_heap = false) const;

  // The id of a vocabulary entry (byte-level spelled for byte-level vocabularies).
  std::optional<TokenId> token_to_id(std::string_view token) const;
  // The vocabulary entry of an id, or nullptr if the id is not in the vocab.
  const std::string* id_to_token(TokenId id) const;
  // Largest id in the vocab plus one.
  TokenId id_limit() const { return static_cast<TokenId>(id_to_token_.size()); }
  bool byte_level() const { return byte_level_; }
  bool byte_fallback() const { return byte_fallback_; }

  // The "model" object for tokenizer.json as JSON text (vocab in id order, merges as
  // [a, b] pairs), written directly: ordered_json would be quadratic in the vocab size.
  std::string to_json_text() const;

 private:
  struct MergeInfo {
    int32_t rank;
    TokenId merged;
  };
  struct Cache;
  template <class J>
  static BpeModel build(const J& model, bool byte_level);
  void initial_symbols(std::string_view word, TokenIds& out) const;
  void merge_short(TokenIds& symbols) const;
  void merge_heap(TokenIds& symbols) const;
  const MergeInfo* find_merge(TokenId a, TokenId b) const {
    auto it = merges_.find((static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) |
                           static_cast<uint32_t>(b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  std::unordered_map<std::string, TokenId> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::unordered_map<uint64_t, MergeInfo> merges_;
  std::vector<std::pair<TokenId, TokenId>> merge_list_;  // in rank order, for to_json
  TokenId byte_ids_[256];                                // byte -> id of its character
  TokenId fallback_ids_[256];                            // byte -> id of "<0xNN>", or -1
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  std::optional<std::string> unk_token_;
  TokenId unk_id_ = -1;
  std::unique_ptr<Cache> cache_;
};

}  // namespace agentr1::text
