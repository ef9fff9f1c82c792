// agentr1/text/bpe_trainer/bpe_trainer.cpp — byte-level BPE training (see bpe_trainer.h).
//
// Data layout: every distinct pre-token ("word") is a run of symbol ids inside one flat
// array (offset, length), with its corpus count. pair_count holds the weighted count of
// every adjacent pair; where_ lists the words a pair was seen in (may hold stale
// entries, never misses one). A max-heap of (count, pair) candidates is validated
// lazily: a popped entry whose count is out of date is pushed back with the current
// count (HF's trainer does the same). Merging pair (a, b) -> c rewrites only the words
// listed for (a, b) and adjusts the counts of the neighbouring pairs.
#include "agentr1/text/bpe_trainer/bpe_trainer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

namespace agentr1::text {
namespace {

// The Split regex of Qwen2/Qwen3's tokenizer.json, verbatim.
const char* const kQwenPattern =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand
// for themselves; the other 68 bytes get U+0100, U+0101, ... in increasing byte order.
// Vocab ids 0..255 are the bytes in the order of their code points (HF's trainer sorts
// its initial alphabet by code point).
struct ByteAlphabet {
  std::array<std::string, 256> symbol;  // byte -> its byte-level character (UTF-8)
  std::array<int32_t, 256> id;          // byte -> vocab id

  ByteAlphabet() {
    std::array<uint32_t, 256> cp{};
    uint32_t extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      cp[b] = printable ? static_cast<uint32_t>(b) : 256 + extra++;
    }
    std::array<int, 256> order{};
    for (int b = 0; b < 256; ++b) order[b] = b;
    std::sort(order.begin(), order.end(), [&](int x, int y) { return cp[x] < cp[y]; });
    for (int rank = 0; rank < 256; ++rank) id[order[rank]] = rank;
    for (int b = 0; b < 256; ++b) append_utf8(symbol[b], cp[b]);
  }

  std::string map(const std::string& bytes) const {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char ch : bytes) out += symbol[ch];
    return out;
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;  // immutable after construction
  return alphabet;
}

bool is_valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t n = static_cast<utf8proc_ssize_t>(s.size());
  while (n > 0) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate(p, n, &cp);
    if (k <= 0) return false;
    p += k;
    n -= k;
  }
  return true;
}

// NFC of s[0, n). Throws naming the document on invalid UTF-8.
std::string nfc(const char* s, size_t n, size_t doc_index) {
  bool ascii = true;
  for (size_t i = 0; i < n && ascii; ++i) ascii = static_cast<unsigned char>(s[i]) < 0x80;
  if (ascii) return std::string(s, n);  // ASCII is NFC-invariant
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t r = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s),
                                    static_cast<utf8proc_ssize_t>(n), &out,
                                    static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (r < 0) {
    throw Error("train_bpe: corpus[" + std::to_string(doc_index) + "] is not valid UTF-8 (" +
                utf8proc_errmsg(r) + "); fix: pass UTF-8 text (decode or drop binary documents)");
  }
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(r));
  std::free(out);
  return result;
}

// A pre-tokenizer regex compiled with PCRE2 (UTF + Unicode properties, JIT when available).
class RegexSplitter {
 public:
  explicit RegexSplitter(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      throw Error(std::string("train_bpe: PCRE2 cannot compile the Qwen pre-tokenizer regex: ") +
                  reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    match_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~RegexSplitter() {
    pcre2_match_data_free(match_);
    pcre2_code_free(code_);
  }
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Calls emit(ptr, len) for every piece of s, in order: each regex match and each
  // stretch between matches ("Isolated" split). s must be valid UTF-8.
  template <typename Emit>
  void split(const std::string& s, Emit&& emit) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    size_t pos = 0;
    while (pos < s.size()) {
      int rc = pcre2_match(code_, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, match_, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) {
        emit(s.data() + pos, s.size() - pos);
        return;
      }
      if (rc < 0) throw Error("train_bpe: PCRE2 match failed with code " + std::to_string(rc));
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match_);
      size_t start = ov[0], end = ov[1];
      if (start > pos) emit(s.data() + pos, start - pos);
      if (end == start) {  // empty match (not produced by this pattern): take one character
        end = start + 1;
        while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) ++end;
      }
      emit(s.data() + start, end - start);
      pos = end;
    }
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* match_ = nullptr;
};

// Calls emit(ptr, len) for each stretch of doc outside the special tokens
// (leftmost-longest matching, as HF's added-token splitter does).
template <typename Emit>
void for_each_plain_segment(const std::string& doc, const std::vector<std::string>& specials,
                            Emit&& emit) {
  std::vector<size_t> next(specials.size());
  for (size_t k = 0; k < specials.size(); ++k) next[k] = doc.find(specials[k]);
  size_t pos = 0;
  while (true) {
    size_t best = std::string::npos, best_len = 0;
    for (size_t k = 0; k < specials.size(); ++k) {
      if (next[k] != std::string::npos && next[k] < pos) next[k] = doc.find(specials[k], pos);
      if (next[k] == std::string::npos) continue;
      if (next[k] < best || (next[k] == best && specials[k].size() > best_len)) {
        best = next[k];
        best_len = specials[k].size();
      }
    }
    if (best == std::string::npos) {
      if (pos < doc.size()) emit(doc.data() + pos, doc.size() - pos);
      return;
    }
    if (best > pos) emit(doc.data() + pos, best - pos);
    pos = best + best_len;
  }
}

void validate(const std::vector<std::string>& corpus, const BpeTrainerOptions& o) {
  const auto n_special = o.special_tokens.size();
  AGENTR1_CHECK(o.vocab_size >= 256 + static_cast<long>(n_special),
                "train_bpe: vocab_size must be >= 256 byte symbols + " << n_special
                    << " special tokens = " << 256 + n_special << ", got " << o.vocab_size
                    << "; fix: raise vocab_size or pass fewer special_tokens");
  AGENTR1_CHECK(o.digits_per_token >= 1 && o.digits_per_token <= 3,
                "train_bpe: digits_per_token must be 1, 2 or 3, got " << o.digits_per_token);
  AGENTR1_CHECK(o.min_frequency >= 0,
                "train_bpe: min_frequency must be >= 0, got " << o.min_frequency);
  AGENTR1_CHECK(o.max_token_bytes >= 0, "train_bpe: max_token_bytes must be >= 0 (0 = no limit), got "
                                            << o.max_token_bytes);
  AGENTR1_CHECK(!corpus.empty(),
                "train_bpe: corpus is empty; fix: pass at least one non-empty document");
  const ByteAlphabet& alphabet = byte_alphabet();
  std::unordered_set<std::string> seen;
  for (size_t k = 0; k < n_special; ++k) {
    const std::string& t = o.special_tokens[k];
    AGENTR1_CHECK(!t.empty(), "train_bpe: special_tokens[" << k << "] is empty; fix: remove it");
    AGENTR1_CHECK(is_valid_utf8(t), "train_bpe: special_tokens[" << k << "] is not valid UTF-8");
    AGENTR1_CHECK(seen.insert(t).second,
                  "train_bpe: special token '" << t << "' is listed twice; fix: list it once");
    for (int b = 0; b < 256; ++b) {
      AGENTR1_CHECK(t != alphabet.symbol[b],
                    "train_bpe: special token '" << t << "' equals the byte-level symbol of byte "
                                                 << b << "; fix: choose a longer special token");
    }
  }
}

struct Candidate {
  int64_t count;
  uint64_t pair;
};
// Max-heap order: higher count first; equal counts: smaller (left id, right id) first.
struct CandidateLess {
  bool operator()(const Candidate& x, const Candidate& y) const {
    if (x.count != y.count) return x.count < y.count;
    return x.pair > y.pair;
  }
};

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
inline int32_t pair_left(uint64_t p) { return static_cast<int32_t>(p >> 32); }
inline int32_t pair_right(uint64_t p) { return static_cast<int32_t>(p & 0xFFFFFFFFu); }

class MergeLearner {
 public:
  MergeLearner(const std::unordered_map<std::string, int64_t>& word_counts, const BpeTrainerOptions& o)
      : opts_(o), special_(o.special_tokens.begin(), o.special_tokens.end()) {
    const ByteAlphabet& alphabet = byte_alphabet();
    tokens_.resize(256);
    for (int b = 0; b < 256; ++b) {
      tokens_[alphabet.id[b]] = std::string(1, static_cast<char>(b));
      token_id_[tokens_[alphabet.id[b]]] = alphabet.id[b];
    }
    // Words in a fixed order (the result does not depend on it; memory layout does).
    std::vector<std::pair<const std::string*, int64_t>> words;
    words.reserve(word_counts.size());
    size_t total_symbols = 0;
    for (const auto& [w, c] : word_counts) {
      words.emplace_back(&w, c);
      total_symbols += w.size();
    }
    std::sort(words.begin(), words.end(),
              [](const auto& x, const auto& y) { return *x.first < *y.first; });
    symbols_.reserve(total_symbols);
    for (const auto& [w, c] : words) {
      offset_.push_back(static_cast<uint32_t>(symbols_.size()));
      length_.push_back(static_cast<uint32_t>(w->size()));
      count_.push_back(c);
      for (unsigned char ch : *w) symbols_.push_back(alphabet.id[ch]);
    }
    pair_count_.reserve(1 << 16);
    where_.reserve(1 << 16);
    for (uint32_t w = 0; w < offset_.size(); ++w) {
      const int32_t* s = &symbols_[offset_[w]];
      for (uint32_t i = 0; i + 1 < length_[w]; ++i) add(pair_key(s[i], s[i + 1]), count_[w], w);
    }
    for (const auto& [p, c] : pair_count_) push(p, c);
    touched_.clear();
  }

  // Runs merges until the vocabulary (incl. specials) reaches vocab_size or no pair
  // qualifies. Returns why it stopped.
  std::string run() {
    const size_t target = static_cast<size_t>(opts_.vocab_size) - opts_.special_tokens.size();
    const int64_t min_count = std::max<int64_t>(1, opts_.min_frequency);
    while (tokens_.size() < target) {
      if (heap_.empty()) return "no adjacent pairs are left to merge";
      Candidate top = heap_.top();
      heap_.pop();
      auto it = pair_count_.find(top.pair);
      int64_t current = it == pair_count_.end() ? 0 : it->second;
      if (current != top.count) {  // stale entry
        push(top.pair, current);
        continue;
      }
      if (current < min_count) {
        return "the most frequent remaining pair occurs " + std::to_string(current) +
               " times, below min_frequency " + std::to_string(min_count);
      }
      const int32_t a = pair_left(top.pair), b = pair_right(top.pair);
      std::string merged = tokens_[a] + tokens_[b];
      if (!special_.empty() && special_.count(byte_alphabet().map(merged)) > 0) {
        forbidden_.insert(top.pair);  // would duplicate a special token's string
        continue;
      }
      int32_t c;
      auto found = token_id_.find(merged);
      if (found != token_id_.end()) {
        c = found->second;  // another merge already produced this string (HF reuses the id)
      } else {
        c = static_cast<int32_t>(tokens_.size());
        token_id_.emplace(merged, c);
        tokens_.push_back(std::move(merged));
      }
      merges_.emplace_back(a, b);
      apply(top.pair, a, b, c);
    }
    return "";
  }

  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

 private:
  void push(uint64_t p, int64_t count) {
    if (count <= 0 || forbidden_.count(p) > 0) return;
    if (opts_.max_token_bytes > 0 &&
        tokens_[pair_left(p)].size() + tokens_[pair_right(p)].size() >
            static_cast<size_t>(opts_.max_token_bytes)) {
      return;
    }
    heap_.push({count, p});
  }

  void add(uint64_t p, int64_t c, uint32_t w) {
    pair_count_[p] += c;
    auto& ws = where_[p];
    if (ws.empty() || ws.back() != w) ws.push_back(w);
    touched_.push_back(p);
  }
  void remove(uint64_t p, int64_t c) { pair_count_[p] -= c; }

  // Replaces every (a, b) by c in the words that contain it, left to right.
  void apply(uint64_t p, int32_t a, int32_t b, int32_t c) {
    std::vector<uint32_t> ws = std::move(where_[p]);
    where_.erase(p);
    std::sort(ws.begin(), ws.end());
    ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
    touched_.clear();
    for (uint32_t w : ws) {
      int32_t* s = &symbols_[offset_[w]];
      const uint32_t n = length_[w];
      const int64_t cnt = count_[w];
      uint32_t r = 0, out = 0;
      while (r < n) {
        if (r + 1 < n && s[r] == a && s[r + 1] == b) {
          if (out > 0) {
            remove(pair_key(s[out - 1], a), cnt);
            add(pair_key(s[out - 1], c), cnt, w);
          }
          if (r + 2 < n) {
            remove(pair_key(b, s[r + 2]), cnt);
            add(pair_key(c, s[r + 2]), cnt, w);
          }
          s[out++] = c;
          r += 2;
        } else {
          s[out++] = s[r++];
        }
      }
      length_[w] = out;
    }
    pair_count_[p] = 0;  // every occurrence is gone
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (uint64_t q : touched_) push(q, pair_count_[q]);
  }

  const BpeTrainerOptions& opts_;
  std::unordered_set<std::string> special_;
  std::vector<std::string> tokens_;  // id -> raw bytes
  std::unordered_map<std::string, int32_t> token_id_;
  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::vector<int32_t> symbols_;
  std::vector<uint32_t> offset_, length_;
  std::vector<int64_t> count_;
  std::unordered_map<uint64_t, int64_t> pair_count_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where_;
  std::unordered_set<uint64_t> forbidden_;
  std::vector<uint64_t> touched_;
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateLess> heap_;
};

json byte_level_component() {
  json j = json::object();
  j["type"] = "ByteLevel";
  j["add_prefix_space"] = false;
  j["trim_offsets"] = false;
  j["use_regex"] = false;
  return j;
}

}  // namespace

const std::string& qwen_pretokenizer_pattern() {
  static const std::string pattern = kQwenPattern;
  return pattern;
}

std::string pretokenizer_pattern(int digits_per_token) {
  AGENTR1_CHECK(digits_per_token >= 1 && digits_per_token <= 3,
                "digits_per_token must be 1 (Qwen: one digit per token), 2 or 3 (Llama 3 style), got "
                    << digits_per_token);
  std::string p = kQwenPattern;
  if (digits_per_token == 1) return p;
  const std::string one = "|\\p{N}|";
  const size_t at = p.find(one);
  AGENTR1_CHECK(at != std::string::npos, "pretokenizer_pattern: the Qwen pattern has no single-digit branch");
  p.replace(at, one.size(), "|\\p{N}{1," + std::to_string(digits_per_token) + "}|");
  return p;
}

json train_bpe(const std::vector<std::string>& corpus, const BpeTrainerOptions& opts) {
  validate(corpus, opts);
  const auto t0 = std::chrono::steady_clock::now();

  // 1. Count pre-tokens.
  const std::string pattern = pretokenizer_pattern(opts.digits_per_token);
  RegexSplitter splitter(pattern);
  std::unordered_map<std::string, int64_t> word_counts;
  word_counts.reserve(1 << 16);
  size_t total_bytes = 0;
  for (size_t d = 0; d < corpus.size(); ++d) {
    total_bytes += corpus[d].size();
    for_each_plain_segment(corpus[d], opts.special_tokens, [&](const char* p, size_t n) {
      std::string text = nfc(p, n, d);
      splitter.split(text, [&](const char* q, size_t m) { ++word_counts[std::string(q, m)]; });
    });
  }
  AGENTR1_CHECK(!word_counts.empty(),
                "train_bpe: the corpus (" << corpus.size()
                                          << " documents) has no text outside special tokens; "
                                             "fix: pass documents with text");
  if (opts.digits_per_token > 1) {
    // Every digit string of 2..digits_per_token digits becomes a token, merged before
    // anything else (their count outranks any corpus count), so that numbers split
    // into whole chunks whatever the corpus held.
    const int64_t first = int64_t{1} << 40;  // > any corpus count; sums cannot overflow
    std::vector<std::string> level = {""};
    for (int len = 1; len <= opts.digits_per_token; ++len) {
      std::vector<std::string> next;
      for (const auto& s : level)
        for (char c = '0'; c <= '9'; ++c) next.push_back(s + c);
      if (len >= 2)
        for (const auto& w : next) word_counts[w] += first;
      level = std::move(next);
    }
  }
  const auto t1 = std::chrono::steady_clock::now();

  // 2. Learn merges.
  MergeLearner learner(word_counts, opts);
  const std::string stop_reason = learner.run();
  const auto t2 = std::chrono::steady_clock::now();

  const auto& tokens = learner.tokens();
  const size_t final_size = tokens.size() + opts.special_tokens.size();
  if (!stop_reason.empty()) {
    AGENTR1_LOG(WARN) << "train_bpe: vocabulary has " << final_size << " tokens, fewer than vocab_size "
                      << opts.vocab_size << ": " << stop_reason;
  }
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  AGENTR1_LOG(INFO) << "train_bpe: " << total_bytes << " bytes, " << corpus.size() << " documents, "
                    << word_counts.size() << " distinct words, " << learner.merges().size()
                    << " merges, vocabulary " << final_size << " (count " << secs(t0, t1)
                    << " s, merge " << secs(t1, t2) << " s)";

  // 3. Assemble tokenizer.json in Qwen's layout.
  const ByteAlphabet& alphabet = byte_alphabet();
  json out = json::object();
  out["version"] = "1.0";
  out["truncation"] = nullptr;
  out["padding"] = nullptr;
  json added = json::array();
  for (size_t k = 0; k < opts.special_tokens.size(); ++k) {
    json t = json::object();
    t["id"] = static_cast<int64_t>(tokens.size() + k);
    t["content"] = opts.special_tokens[k];
    t["single_word"] = false;
    t["lstrip"] = false;
    t["rstrip"] = false;
    t["normalized"] = false;
    t["special"] = std::find(opts.non_special_tokens.begin(), opts.non_special_tokens.end(),
                             opts.special_tokens[k]) == opts.non_special_tokens.end();
    added.push_back(std::move(t));
  }
  out["added_tokens"] = std::move(added);
  out["normalizer"] = json{{"type", "NFC"}};
  json split = json::object();
  split["type"] = "Split";
  split["pattern"] = json{{"Regex", pattern}};
  split["behavior"] = "Isolated";
  split["invert"] = false;
  json pre = json::object();
  pre["type"] = "Sequence";
  pre["pretokenizers"] = json::array({split, byte_level_component()});
  out["pre_tokenizer"] = std::move(pre);
  out["post_processor"] = byte_level_component();
  out["decoder"] = byte_level_component();

  json model = json::object();
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;
  model["continuing_subword_prefix"] = "";
  model["end_of_word_suffix"] = "";
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  std::vector<std::string> mapped(tokens.size());
  json vocab = json::object();
  for (size_t id = 0; id < tokens.size(); ++id) {
    mapped[id] = alphabet.map(tokens[id]);
    vocab[mapped[id]] = static_cast<int64_t>(id);
  }
  model["vocab"] = std::move(vocab);
  json merges = json::array();
  for (const auto& [a, b] : learner.merges()) {
    if (opts.merges_as_pairs) {
      merges.push_back(json::array({mapped[a], mapped[b]}));
    } else {
      merges.push_back(mapped[a] + " " + mapped[b]);
    }
  }
  model["merges"] = std::move(merges);
  out["model"] = std::move(model);
  return out;
}

json make_tokenizer_config(const std::string& chat_template, const std::string& eos_token,
                           const std::string& pad_token) {
  json c = json::object();
  c["add_bos_token"] = false;
  c["add_prefix_space"] = false;
  c["bos_token"] = nullptr;
  c["chat_template"] = chat_template;
  c["clean_up_tokenization_spaces"] = false;
  c["eos_token"] = eos_token;
  c["errors"] = "replace";
  c["pad_token"] = pad_token;
  c["split_special_tokens"] = false;
  c["tokenizer_class"] = "Qwen2Tokenizer";
  c["unk_token"] = nullptr;
  return c;
}

void write_trained_tokenizer(const std::string& dir, const json& tokenizer_json,
                             const json& tokenizer_config) {
  AGENTR1_CHECK(tokenizer_json.is_object() && tokenizer_json.contains("model") &&
                    tokenizer_json["model"].contains("vocab"),
                "write_trained_tokenizer: tokenizer_json has no model.vocab; fix: pass the "
                "result of train_bpe");
  AGENTR1_CHECK(tokenizer_config.is_object(), "write_trained_tokenizer: tokenizer_config must be a "
                                              "JSON object, got "
                                                  << tokenizer_config.type_name());
  const json& vocab = tokenizer_json["model"]["vocab"];
  const json added = tokenizer_json.value("added_tokens", json::array());
  auto known = [&](const std::string& t) {
    if (vocab.contains(t)) return true;
    for (const auto& a : added) {
      if (a.value("content", "") == t) return true;
    }
    return false;
  };
  for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    if (!tokenizer_config.contains(key)) continue;
    const json& v = tokenizer_config[key];
    std::string t;
    if (v.is_string()) {
      t = v.get<std::string>();
    } else if (v.is_object() && v.contains("content")) {
      t = v["content"].get<std::string>();
    } else {
      continue;  // null: not set
    }
    AGENTR1_CHECK(known(t), "write_trained_tokenizer: tokenizer_config." << key << " is '" << t
                                << "', which is not a token of the tokenizer; fix: name one of "
                                   "its special tokens");
  }

  json config = tokenizer_config;
  if (!config.contains("added_tokens_decoder")) {
    json decoder = json::object();
    for (const auto& a : added) {
      json e = json::object();
      e["content"] = a.value("content", "");
      e["lstrip"] = a.value("lstrip", false);
      e["normalized"] = a.value("normalized", false);
      e["rstrip"] = a.value("rstrip", false);
      e["single_word"] = a.value("single_word", false);
      e["special"] = a.value("special", true);
      decoder[std::to_string(a.value("id", 0))] = std::move(e);
    }
    // Place it where HF writes it: before bos_token (keys are sorted there).
    json ordered = json::object();
    bool placed = false;
    for (auto it = config.begin(); it != config.end(); ++it) {
      if (!placed && it.key() > std::string("added_tokens_decoder")) {
        ordered["added_tokens_decoder"] = decoder;
        placed = true;
      }
      ordered[it.key()] = it.value();
    }
    if (!placed) ordered["added_tokens_decoder"] = decoder;
    config = std::move(ordered);
  }

  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  AGENTR1_CHECK(!ec, "write_trained_tokenizer: cannot create directory '" << dir << "': " << ec.message());
  auto write = [&](const std::string& name, const json& j) {
    const std::string path = (fs::path(dir) / name).string();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    AGENTR1_CHECK(f.good(), "write_trained_tokenizer: cannot open '" << path << "' for writing");
    f << j.dump(2, ' ', /*ensure_ascii=*/false) << "\n";
    f.close();
    AGENTR1_CHECK(!f.fail(), "write_trained_tokenizer: writing '" << path << "' failed");
  };
  write("tokenizer.json", tokenizer_json);
  write("tokenizer_config.json", config);
}

}  // namespace agentr1::text
