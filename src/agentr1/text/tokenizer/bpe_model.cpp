#include "agentr1/text/tokenizer/bpe_model.h"

#include <algorithm>
#include <climits>
#include <mutex>
#include <queue>

#include "agentr1/core/error.h"
#include "agentr1/text/tokenizer/byte_level.h"
#include "agentr1/text/tokenizer/unicode.h"

namespace agentr1::text {

namespace {

constexpr size_t kMaxCachedWordBytes = 256;   // longer words are not cached
constexpr size_t kCacheCapacity = 1 << 16;    // entries; the cache is cleared when full
constexpr size_t kShortWordSymbols = 128;     // above this the heap merge loop is used

std::string quote(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

struct BpeModel::Cache {
  std::mutex mu;
  std::unordered_map<std::string, TokenIds> map;
};

BpeModel::BpeModel() : cache_(std::make_unique<Cache>()) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  std::fill(std::begin(fallback_ids_), std::end(fallback_ids_), -1);
}
BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

template <class J>
BpeModel BpeModel::build(const J& m, bool byte_level) {
  AGENTR1_CHECK(m.is_object(), "tokenizer.json \"model\" must be an object, got "
                                   << (m.is_null() ? std::string("null") : m.type_name()));
  std::string type = "BPE";
  if (m.contains("type")) type = m["type"].template get<std::string>();
  AGENTR1_CHECK(type == "BPE", "tokenizer.json model type \"" << type
                                   << "\" is not supported; supported: BPE");
  auto str_or_empty = [&m](const char* key) -> std::string {
    if (!m.contains(key) || m[key].is_null()) return "";
    return m[key].template get<std::string>();
  };
  if (m.contains("dropout") && !m["dropout"].is_null()) {
    double d = m["dropout"].template get<double>();
    AGENTR1_CHECK(d == 0.0, "BPE dropout " << d
                                << " is not supported (encoding must be deterministic); set "
                                   "\"dropout\": null");
  }
  AGENTR1_CHECK(str_or_empty("continuing_subword_prefix").empty(),
                "BPE continuing_subword_prefix \"" << str_or_empty("continuing_subword_prefix")
                                                   << "\" is not supported; it must be null or \"\"");
  AGENTR1_CHECK(str_or_empty("end_of_word_suffix").empty(),
                "BPE end_of_word_suffix \"" << str_or_empty("end_of_word_suffix")
                                            << "\" is not supported; it must be null or \"\"");
  AGENTR1_CHECK(m.contains("vocab") && m["vocab"].is_object(),
                "tokenizer.json model.vocab must be an object {token: id}");
  AGENTR1_CHECK(m.contains("merges") && m["merges"].is_array(),
                "tokenizer.json model.merges must be an array of \"a b\" strings or [a, b] pairs");

  BpeModel bpe;
  bpe.byte_level_ = byte_level;
  bpe.ignore_merges_ = m.contains("ignore_merges") && m["ignore_merges"].is_boolean() &&
                       m["ignore_merges"].template get<bool>();
  bpe.fuse_unk_ = m.contains("fuse_unk") && m["fuse_unk"].is_boolean() &&
                  m["fuse_unk"].template get<bool>();
  bpe.byte_fallback_ = m.contains("byte_fallback") && m["byte_fallback"].is_boolean() &&
                       m["byte_fallback"].template get<bool>();

  const auto& vocab = m["vocab"];
  bpe.vocab_.reserve(vocab.size() * 2);
  TokenId max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    AGENTR1_CHECK(it.value().is_number_integer(),
                  "vocab entry " << quote(it.key()) << " must map to an integer id, got "
                                 << it.value().dump());
    int64_t id = it.value().template get<int64_t>();
    AGENTR1_CHECK(id >= 0 && id < kMaxTokenId,
                  "vocab entry " << quote(it.key()) << " has id " << id << "; ids must be in [0, "
                                 << kMaxTokenId << ") (the largest vocabulary agentr1 loads)");
    bpe.vocab_.emplace(it.key(), static_cast<TokenId>(id));
    max_id = std::max(max_id, static_cast<TokenId>(id));
  }
  bpe.id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  bpe.has_id_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [tok, id] : bpe.vocab_) {
    AGENTR1_CHECK(!bpe.has_id_[id], "vocab id " << id << " is used twice (" << quote(tok)
                                                << " and " << quote(bpe.id_to_token_[id])
                                                << "); every id must be unique");
    bpe.has_id_[id] = true;
    bpe.id_to_token_[id] = tok;
  }

  if (byte_level) {
    const auto& alpha = byte_level_alphabet();
    for (int b = 0; b < 256; ++b) {
      auto it = bpe.vocab_.find(alpha[b]);
      bpe.byte_ids_[b] = it == bpe.vocab_.end() ? -1 : it->second;
    }
  }

  if (bpe.byte_fallback_) {
    static const char* const kHex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const char name[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
      auto it = bpe.vocab_.find(name);
      bpe.fallback_ids_[b] = it == bpe.vocab_.end() ? -1 : it->second;
    }
  }

  if (m.contains("unk_token") && !m["unk_token"].is_null()) {
    std::string unk = m["unk_token"].template get<std::string>();
    auto it = bpe.vocab_.find(unk);
    AGENTR1_CHECK(it != bpe.vocab_.end(),
                  "BPE unk_token " << quote(unk) << " is not in the vocab; add it or set null");
    bpe.unk_token_ = unk;
    bpe.unk_id_ = it->second;
  }

  const auto& merges = m["merges"];
  bpe.merges_.reserve(merges.size() * 2);
  bpe.merge_list_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& mj : merges) {
    std::string a, b;
    if (mj.is_string()) {
      const std::string s = mj.template get<std::string>();
      size_t sp = s.find(' ');
      AGENTR1_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
                    "merge #" << rank << " " << quote(s)
                              << " must be two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {
      a = mj[0].template get<std::string>();
      b = mj[1].template get<std::string>();
    } else {
      throw Error("merge #" + std::to_string(rank) + " " + mj.dump() +
                  " must be a string \"a b\" or a pair [\"a\", \"b\"]");
    }
    auto ia = bpe.vocab_.find(a), ib = bpe.vocab_.find(b), im = bpe.vocab_.find(a + b);
    const std::string* missing = ia == bpe.vocab_.end() ? &a
                                 : ib == bpe.vocab_.end() ? &b
                                 : nullptr;
    std::string merged = a + b;
    if (!missing && im == bpe.vocab_.end()) missing = &merged;
    AGENTR1_CHECK(missing == nullptr, "merge #" << rank << " (" << quote(a) << ", " << quote(b)
                                                << ") names token " << quote(*missing)
                                                << " which is not in the vocab; every merge's "
                                                   "parts and result must be vocab entries");
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ia->second)) << 32) |
                   static_cast<uint32_t>(ib->second);
    bpe.merges_[key] = MergeInfo{rank, im->second};  // a repeated pair keeps the later rank
    bpe.merge_list_.emplace_back(ia->second, ib->second);
    ++rank;
  }
  return bpe;
}

BpeModel BpeModel::from_json(const json& model, bool byte_level) {
  return build(model, byte_level);
}
BpeModel BpeModel::from_json(const nlohmann::json& model, bool byte_level) {
  return build(model, byte_level);
}

std::optional<TokenId> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(TokenId id) const {
  if (id < 0 || id >= id_limit() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::initial_symbols(std::string_view word, TokenIds& out) const {
  out.clear();
  bool last_unk = false;
  auto push_unknown = [&]() {
    if (unk_id_ < 0) return;  // no unk token: the character is dropped
    if (fuse_unk_ && last_unk) return;
    out.push_back(unk_id_);
    last_unk = true;
  };
  if (byte_level_) {
    for (unsigned char b : word) {
      TokenId id = byte_ids_[b];
      if (id < 0) {
        push_unknown();
      } else {
        out.push_back(id);
        last_unk = false;
      }
    }
    return;
  }
  std::string ch;
  size_t i = 0;
  while (i < word.size()) {
    char32_t cp;
    size_t len = valid_utf8_char(word, i, &cp);
    if (len == 0) len = 1;
    ch.assign(word.data() + i, len);
    auto it = vocab_.find(ch);
    if (it == vocab_.end()) {
      bool all = byte_fallback_;
      for (size_t k = 0; all && k < len; ++k) {
        all = fallback_ids_[static_cast<unsigned char>(word[i + k])] >= 0;
      }
      if (all) {
        for (size_t k = 0; k < len; ++k) {
          out.push_back(fallback_ids_[static_cast<unsigned char>(word[i + k])]);
        }
        last_unk = false;
      } else {
        push_unknown();
      }
    } else {
      out.push_back(it->second);
      last_unk = false;
    }
    i += len;
  }
}

void BpeModel::merge_short(TokenIds& sym) const {
  const size_t n0 = sym.size();
  if (n0 < 2) return;
  // rank[i] / merged[i]: the merge of the pair (sym[i], sym[i+1]); INT32_MAX if none.
  int32_t rank_buf[kShortWordSymbols];
  TokenId merged_buf[kShortWordSymbols];
  size_t n = n0;
  auto lookup = [&](size_t i) {
    const MergeInfo* mi = find_merge(sym[i], sym[i + 1]);
    rank_buf[i] = mi ? mi->rank : INT32_MAX;
    merged_buf[i] = mi ? mi->merged : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) lookup(i);
  while (n > 1) {
    size_t best = 0;
    int32_t best_rank = rank_buf[0];
    for (size_t i = 1; i + 1 < n; ++i) {
      if (rank_buf[i] < best_rank) {
        best_rank = rank_buf[i];
        best = i;
      }
    }
    if (best_rank == INT32_MAX) break;
    sym[best] = merged_buf[best];
    // Remove symbol best+1 and the pair entry starting there.
    for (size_t i = best + 1; i + 1 < n; ++i) sym[i] = sym[i + 1];
    for (size_t i = best + 1; i + 2 < n; ++i) {
      rank_buf[i] = rank_buf[i + 1];
      merged_buf[i] = merged_buf[i + 1];
    }
    --n;
    if (best > 0) lookup(best - 1);
    if (best + 1 < n) lookup(best);
  }
  sym.resize(n);
}

void BpeModel::merge_heap(TokenIds& sym) const {
  const int n = static_cast<int>(sym.size());
  if (n < 2) return;
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Entry {
    int32_t rank;
    int pos;
    TokenId a, b, merged;
    bool operator>(const Entry& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  auto consider = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    const MergeInfo* mi = find_merge(sym[i], sym[next[i]]);
    if (mi) queue.push({mi->rank, i, sym[i], sym[next[i]], mi->merged});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  std::vector<bool> alive(n, true);
  while (!queue.empty()) {
    Entry e = queue.top();
    queue.pop();
    int r = next[e.pos];
    if (!alive[e.pos] || r < 0 || sym[e.pos] != e.a || sym[r] != e.b) continue;  // stale
    sym[e.pos] = e.merged;
    alive[r] = false;
    next[e.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = e.pos;
    consider(prev[e.pos]);
    consider(e.pos);
  }
  size_t k = 0;
  for (int i = 0; i >= 0 && i < n; i = next[i]) sym[k++] = sym[i];
  sym.resize(k);
}

void BpeModel::merge(TokenIds& symbols, bool force_heap) const {
  if (force_heap || symbols.size() > kShortWordSymbols) {
    merge_heap(symbols);
  } else {
    merge_short(symbols);
  }
}

void BpeModel::encode_word(std::string_view word, TokenIds& out) const {
  if (word.empty()) return;
  if (byte_level_ && word.size() == 1) {
    TokenId id = byte_ids_[static_cast<unsigned char>(word[0])];
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() < kMaxCachedWordBytes;
  std::string key;
  if (cacheable) {
    key.assign(word.data(), word.size());
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto it = cache_->map.find(key);
    if (it != cache_->map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  TokenIds ids;
  bool done = false;
  if (ignore_merges_) {
    auto it = vocab_.find(byte_level_ ? bytes_to_byte_level(word) : std::string(word));
    if (it != vocab_.end()) {
      ids.push_back(it->second);
      done = true;
    }
  }
  if (!done) {
    initial_symbols(word, ids);
    merge(ids);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (cache_->map.size() >= kCacheCapacity) cache_->map.clear();
    cache_->map.emplace(std::move(key), std::move(ids));
  }
}

std::string BpeModel::to_json_text() const {
  std::string out;
  out.reserve(id_to_token_.size() * 24 + merge_list_.size() * 24);
  auto null_or = [](const std::optional<std::string>& s) {
    return s ? quote(*s) : std::string("null");
  };
  out += "{\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": ";
  out += null_or(unk_token_);
  out += ",\n    \"continuing_subword_prefix\": \"\",\n    \"end_of_word_suffix\": \"\",\n";
  out += std::string("    \"fuse_unk\": ") + (fuse_unk_ ? "true" : "false") + ",\n";
  out += std::string("    \"byte_fallback\": ") + (byte_fallback_ ? "true" : "false") + ",\n";
  out += std::string("    \"ignore_merges\": ") + (ignore_merges_ ? "true" : "false") + ",\n";
  out += "    \"vocab\": {";
  bool first = true;
  for (size_t id = 0; id < id_to_token_.size(); ++id) {
    if (!has_id_[id]) continue;
    out += first ? "\n      " : ",\n      ";
    first = false;
    out += quote(id_to_token_[id]);
    out += ": ";
    out += std::to_string(id);
  }
  out += "\n    },\n    \"merges\": [";
  first = true;
  for (const auto& [a, b] : merge_list_) {
    out += first ? "\n      [" : ",\n      [";
    first = false;
    out += quote(id_to_token_[a]);
    out += ", ";
    out += quote(id_to_token_[b]);
    out += "]";
  }
  out += "\n    ]\n  }";
  return out;
}

}  // namespace agentr1::text
