#include "agentr1/text/tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/text/tokenizer/bpe_model.h"
#include "agentr1/text/tokenizer/byte_level.h"
#include "agentr1/text/tokenizer/decoder.h"
#include "agentr1/text/tokenizer/normalizer.h"
#include "agentr1/text/tokenizer/pretokenizer.h"
#include "agentr1/text/tokenizer/unicode.h"

namespace agentr1::text {

namespace fs = std::filesystem;

struct Tokenizer::Impl {
  // tokenizer.json
  Normalizer normalizer;
  Decoder decoder;
  json normalizer_src, post_processor_src, decoder_src, truncation_src, padding_src;
  std::string version = "1.0";
  PreTokenizer pre;
  BpeModel bpe;
  std::vector<AddedToken> added;
  std::unordered_map<std::string, TokenId> added_by_content;
  AddedTokenMatcher raw_all, raw_plain;    // unnormalized tokens; with / without specials
  AddedTokenMatcher norm_all, norm_plain;  // normalized tokens (matched after normalizing)
  TokenId vocab_size = 0;
  // Per id: what decode emits, and whether it is an added (and special) token.
  enum Kind : uint8_t { kNone = 0, kVocab = 1, kAdded = 2, kAddedSpecial = 3 };
  // id_bytes: the bytes for the ByteLevel decoder, the token text otherwise.
  std::vector<std::string> id_bytes;
  std::vector<uint8_t> id_kind;
  // tokenizer_config.json
  json config = json::object();
  std::string chat_template;
  std::string chat_template_file;  // non-empty when read from chat_template.jinja
  std::optional<std::string> bos, eos, pad;
  bool add_bos = false, add_eos = false;

  std::string normalize_text(std::string_view s) const { return normalizer.apply(s); }
  void encode_words(std::string_view s, bool at_text_start, TokenIds& out) const;
  void encode_plain(std::string_view s, bool allow_special, bool at_text_start,
                    TokenIds& out) const;
  // The decoder's raw bytes for `ids` (not the ByteLevel fast path); throws for unknown ids.
  std::string decode_general(const TokenIds& ids, bool skip_special, bool at_start) const;
  std::optional<TokenId> id_of(const std::optional<std::string>& tok) const {
    if (!tok) return std::nullopt;
    auto it = added_by_content.find(*tok);
    if (it != added_by_content.end()) return it->second;
    return bpe.token_to_id(*tok);
  }
};

namespace {

const char* const kSupportedPostProcessors =
    "ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing, Sequence (or null)";

// Small components are kept as agentr1::json with keys sorted, whatever the input type,
// so that save() writes the same bytes for a tokenizer from load() or from from_json().
template <class J>
json to_ordered(const J& j) {
  return json::parse(nlohmann::json::parse(j.dump()).dump());
}

void check_post_processor(const json& j, const std::string& where) {
  if (j.is_null()) return;
  AGENTR1_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
                where << " must be null or an object with a string \"type\", got " << j.dump());
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    AGENTR1_CHECK(j.contains("processors") && j["processors"].is_array(),
                  where << ": Sequence needs an array \"processors\"");
    size_t k = 0;
    for (const auto& sub : j["processors"]) {
      check_post_processor(sub, where + ".processors[" + std::to_string(k++) + "]");
    }
    return;
  }
  AGENTR1_CHECK(type == "ByteLevel" || type == "TemplateProcessing" ||
                    type == "RobertaProcessing" || type == "BertProcessing",
                where << ": unsupported post-processor type \"" << type
                      << "\"; supported: " << kSupportedPostProcessors);
}

// A token name in tokenizer_config.json: a string, {"content": ...}, or null.
std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  AGENTR1_CHECK(v.is_null(), "tokenizer_config.json \"" << key
                                 << "\" must be a string, {\"content\": ...} or null, got "
                                 << v.dump());
  return std::nullopt;
}

bool config_bool(const json& config, const char* key) {
  if (!config.contains(key) || config[key].is_null()) return false;
  AGENTR1_CHECK(config[key].is_boolean(), "tokenizer_config.json \"" << key
                                              << "\" must be true or false, got "
                                              << config[key].dump());
  return config[key].get<bool>();
}

template <class J>
std::shared_ptr<Tokenizer::Impl> build(const J& tj, const json& config) {
  AGENTR1_CHECK(tj.is_object(), "tokenizer.json must be a JSON object");
  AGENTR1_CHECK(tj.contains("model") && !tj["model"].is_null(),
                "tokenizer.json has no \"model\"; a BPE model with vocab and merges is required");
  auto impl = std::make_shared<Tokenizer::Impl>();
  Tokenizer::Impl& m = *impl;
  auto component = [&tj](const char* key) -> json {
    return tj.contains(key) ? to_ordered(tj[key]) : json(nullptr);
  };
  if (tj.contains("version") && tj["version"].is_string()) {
    m.version = tj["version"].template get<std::string>();
  }
  m.truncation_src = component("truncation");
  m.padding_src = component("padding");
  m.normalizer_src = component("normalizer");
  m.normalizer = Normalizer::from_json(m.normalizer_src, "normalizer");
  m.pre = PreTokenizer::from_json(component("pre_tokenizer"));
  m.post_processor_src = component("post_processor");
  check_post_processor(m.post_processor_src, "post_processor");
  m.decoder_src = component("decoder");
  m.decoder = Decoder::from_json(m.decoder_src, "decoder");
  m.bpe = with_context("model", [&] { return BpeModel::from_json(tj["model"], m.pre.byte_level()); });

  // Added tokens.
  if (tj.contains("added_tokens") && !tj["added_tokens"].is_null()) {
    const auto& arr = tj["added_tokens"];
    AGENTR1_CHECK(arr.is_array(), "tokenizer.json \"added_tokens\" must be an array");
    size_t k = 0;
    for (const auto& a : arr) {
      std::string where = "added_tokens[" + std::to_string(k++) + "]";
      AGENTR1_CHECK(a.is_object() && a.contains("id") && a["id"].is_number_integer() &&
                        a.contains("content") && a["content"].is_string(),
                    where << " must have an integer \"id\" and a string \"content\", got "
                          << a.dump());
      AddedToken t;
      int64_t id = a["id"].template get<int64_t>();
      AGENTR1_CHECK(id >= 0 && id < kMaxTokenId, where << " has id " << id << "; ids must be in [0, "
                                                      << kMaxTokenId << ") (the largest vocabulary agentr1 loads)");
      t.id = static_cast<TokenId>(id);
      t.content = a["content"].template get<std::string>();
      AGENTR1_CHECK(!t.content.empty() && is_valid_utf8(t.content),
                    where << " content must be non-empty valid UTF-8");
      auto flag = [&a](const char* key, bool dflt) {
        return a.contains(key) && a[key].is_boolean() ? a[key].template get<bool>() : dflt;
      };
      t.special = flag("special", false);
      t.single_word = flag("single_word", false);
      t.lstrip = flag("lstrip", false);
      t.rstrip = flag("rstrip", false);
      t.normalized = flag("normalized", !t.special);
      if (m.added_by_content.count(t.content)) {
        AGENTR1_LOG(WARN) << "tokenizer.json " << where << " repeats content \"" << t.content
                          << "\"; the first entry is used";
        continue;
      }
      m.added_by_content.emplace(t.content, t.id);
      m.added.push_back(std::move(t));
    }
  }
  for (size_t i = 0; i < m.added.size(); ++i) {
    const AddedToken& t = m.added[i];
    const int idx = static_cast<int>(i);
    if (t.normalized) {
      std::string pat = m.normalize_text(t.content);
      if (pat.empty()) continue;
      m.norm_all.add(pat, idx, t);
      if (!t.special) m.norm_plain.add(pat, idx, t);
    } else {
      m.raw_all.add(t.content, idx, t);
      if (!t.special) m.raw_plain.add(t.content, idx, t);
    }
  }

  // Decode tables.
  AGENTR1_CHECK(m.bpe.id_limit() > 0,
                "tokenizer.json: model.vocab is empty; a BPE tokenizer needs its vocabulary (HINT: the file is "
                "truncated or not a tokenizer.json)");
  m.vocab_size = m.bpe.id_limit();
  for (const AddedToken& t : m.added) m.vocab_size = std::max(m.vocab_size, t.id + 1);
  m.id_bytes.assign(static_cast<size_t>(m.vocab_size), std::string());
  m.id_kind.assign(static_cast<size_t>(m.vocab_size), Tokenizer::Impl::kNone);
  for (TokenId id = 0; id < m.bpe.id_limit(); ++id) {
    const std::string* tok = m.bpe.id_to_token(id);
    if (!tok) continue;
    m.id_kind[id] = Tokenizer::Impl::kVocab;
    // HF's ByteLevel decoder keeps a token's raw text when it is not byte-level spelled.
    if (!m.decoder.byte_level_only() || !byte_level_to_bytes(*tok, m.id_bytes[id])) {
      m.id_bytes[id] = *tok;
    }
  }
  for (const AddedToken& t : m.added) {
    m.id_kind[t.id] = t.special ? Tokenizer::Impl::kAddedSpecial : Tokenizer::Impl::kAdded;
    m.id_bytes[t.id] = t.content;
  }

  // tokenizer_config.json
  if (!config.is_null()) {
    AGENTR1_CHECK(config.is_object(), "tokenizer_config.json must be a JSON object");
    m.config = config;
    m.bos = config_token(config, "bos_token");
    m.eos = config_token(config, "eos_token");
    m.pad = config_token(config, "pad_token");
    m.add_bos = config_bool(config, "add_bos_token");
    m.add_eos = config_bool(config, "add_eos_token");
    if (config.contains("chat_template") && !config["chat_template"].is_null()) {
      const json& ct = config["chat_template"];
      if (ct.is_string()) {
        m.chat_template = ct.get<std::string>();
      } else {
        // A list of named templates: [{"name": ..., "template": ...}]; use "default".
        AGENTR1_CHECK(ct.is_array() && !ct.empty(),
                      "tokenizer_config.json chat_template must be a string or a list of "
                      "{\"name\", \"template\"}, got "
                          << ct.dump().substr(0, 200));
        const json* chosen = &ct[0];
        for (const auto& e : ct) {
          if (e.is_object() && e.contains("name") && e["name"].is_string() && e["name"].get<std::string>() == "default")
            chosen = &e;
        }
        AGENTR1_CHECK(chosen->is_object() && chosen->contains("template") &&
                          (*chosen)["template"].is_string(),
                      "tokenizer_config.json chat_template entries need a string \"template\"");
        m.chat_template = (*chosen)["template"].get<std::string>();
      }
    }
  }
  return impl;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  AGENTR1_CHECK(in, "cannot open " << p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  AGENTR1_CHECK(out, "cannot write " << p.string() << " (check that the directory is writable)");
  out << text;
  out.close();
  AGENTR1_CHECK(out, "writing " << p.string() << " failed (disk full?)");
}

}  // namespace

Tokenizer Tokenizer::from_json(const json& tokenizer_json, const json& config) {
  return Tokenizer(build(tokenizer_json, config));
}

Tokenizer Tokenizer::load(const std::string& dir) {
  fs::path d(dir);
  fs::path tj_path = d / "tokenizer.json";
  AGENTR1_CHECK(fs::exists(tj_path), "tokenizer directory " << dir << " has no tokenizer.json "
                                                            << "(expected " << tj_path.string()
                                                            << ")");
  // The big file is parsed into the unordered json type: ordered_json inserts are linear.
  nlohmann::json tj;
  try {
    tj = nlohmann::json::parse(read_file(tj_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error("loading " + tj_path.string() + ": invalid JSON: " + e.what());
  }
  json config = json::object();
  fs::path cfg_path = d / "tokenizer_config.json";
  if (fs::exists(cfg_path)) {
    try {
      config = json::parse(read_file(cfg_path));
    } catch (const nlohmann::json::exception& e) {
      throw Error("loading " + cfg_path.string() + ": invalid JSON: " + e.what());
    }
  }
  auto impl = with_context("loading " + tj_path.string(), [&] { return build(tj, config); });
  fs::path jinja = d / "chat_template.jinja";
  if (impl->chat_template.empty() && fs::exists(jinja)) {
    impl->chat_template = read_file(jinja);
    impl->chat_template_file = impl->chat_template;
  }
  return Tokenizer(std::move(impl));
}

void Tokenizer::Impl::encode_words(std::string_view s, bool at_text_start, TokenIds& out) const {
  thread_local std::string buf;
  thread_local std::vector<Span> pieces;
  pre.split(s, buf, pieces, at_text_start);
  for (const Span& p : pieces) {
    bpe.encode_word(std::string_view(buf).substr(p.begin, p.end - p.begin), out);
  }
}

void Tokenizer::Impl::encode_plain(std::string_view s, bool allow_special, bool at_text_start,
                                   TokenIds& out) const {
  std::string norm;
  if (!normalizer.empty()) {
    norm = normalize_text(s);
    s = norm;
  }
  const AddedTokenMatcher& matcher = allow_special ? norm_all : norm_plain;
  if (matcher.empty()) {
    encode_words(s, at_text_start, out);
    return;
  }
  std::vector<AddedTokenMatcher::Segment> segs;
  matcher.split(s, segs);
  for (const auto& seg : segs) {
    if (seg.token >= 0) {
      out.push_back(added[seg.token].id);
    } else {
      encode_words(s.substr(seg.begin, seg.end - seg.begin), at_text_start && seg.begin == 0, out);
    }
  }
}

TokenIds Tokenizer::encode(std::string_view text, bool allow_special) const {
  const Impl& m = *impl_;
  std::string clean;
  if (!is_valid_utf8(text)) {
    clean = sanitize_utf8(text);
    text = clean;
  }
  TokenIds out;
  out.reserve(text.size() / 3 + 4);
  const AddedTokenMatcher& matcher = allow_special ? m.raw_all : m.raw_plain;
  if (matcher.empty()) {
    m.encode_plain(text, allow_special, /*at_text_start=*/true, out);
    return out;
  }
  std::vector<AddedTokenMatcher::Segment> segs;
  matcher.split(text, segs);
  for (const auto& seg : segs) {
    if (seg.token >= 0) {
      out.push_back(m.added[seg.token].id);
    } else {
      m.encode_plain(text.substr(seg.begin, seg.end - seg.begin), allow_special, seg.begin == 0,
                     out);
    }
  }
  return out;
}

std::string Tokenizer::Impl::decode_general(const TokenIds& ids, bool skip_special,
                                            bool at_start) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    AGENTR1_CHECK(id >= 0 && id < vocab_size && id_kind[id] != kNone,
                  "decode: token id " << id << " is not in the vocabulary (vocab_size "
                                      << vocab_size << ")");
    if (id_kind[id] == kAddedSpecial && skip_special) continue;
    tokens.push_back(id_bytes[id]);
  }
  return decoder.decode_raw(std::move(tokens), at_start);
}

std::string Tokenizer::decode(const TokenIds& ids, bool skip_special) const {
  const Impl& m = *impl_;
  if (!m.decoder.byte_level_only()) {
    return sanitize_utf8(m.decode_general(ids, skip_special, /*at_start=*/true));
  }
  std::string out, chunk;
  for (TokenId id : ids) {
    AGENTR1_CHECK(id >= 0 && id < m.vocab_size && m.id_kind[id] != Impl::kNone,
                  "decode: token id " << id << " is not in the vocabulary (vocab_size "
                                      << m.vocab_size << ")");
    uint8_t kind = m.id_kind[id];
    if (kind == Impl::kAddedSpecial && skip_special) continue;
    if (kind == Impl::kVocab) {
      chunk += m.id_bytes[id];
    } else {
      out += sanitize_utf8(chunk);
      chunk.clear();
      out += m.id_bytes[id];
    }
  }
  out += sanitize_utf8(chunk);
  return out;
}

void Tokenizer::save(const std::string& dir) const {
  const Impl& m = *impl_;
  fs::path d(dir);
  std::error_code ec;
  fs::create_directories(d, ec);
  AGENTR1_CHECK(!ec, "cannot create directory " << dir << ": " << ec.message());
  std::string out = "{\n  \"version\": " + json(m.version).dump() + ",\n";
  out += "  \"truncation\": " + m.truncation_src.dump() + ",\n";
  out += "  \"padding\": " + m.padding_src.dump() + ",\n";
  out += "  \"added_tokens\": [";
  for (size_t i = 0; i < m.added.size(); ++i) {
    const AddedToken& t = m.added[i];
    json a = json::object();
    a["id"] = t.id;
    a["content"] = t.content;
    a["single_word"] = t.single_word;
    a["lstrip"] = t.lstrip;
    a["rstrip"] = t.rstrip;
    a["normalized"] = t.normalized;
    a["special"] = t.special;
    out += (i ? ",\n    " : "\n    ") + a.dump();
  }
  out += m.added.empty() ? "],\n" : "\n  ],\n";
  out += "  \"normalizer\": " + m.normalizer_src.dump() + ",\n";
  out += "  \"pre_tokenizer\": " + m.pre.to_json().dump() + ",\n";
  out += "  \"post_processor\": " + m.post_processor_src.dump() + ",\n";
  out += "  \"decoder\": " + m.decoder_src.dump() + ",\n";
  out += "  \"model\": " + m.bpe.to_json_text() + "\n}\n";
  write_file(d / "tokenizer.json", out);
  write_file(d / "tokenizer_config.json", m.config.dump(2) + "\n");
  if (!m.chat_template_file.empty()) write_file(d / "chat_template.jinja", m.chat_template_file);
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->added_by_content.find(std::string(token));
  if (it != impl_->added_by_content.end()) return it->second;
  return impl_->bpe.token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(TokenId id) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= m.vocab_size) return std::nullopt;
  if (m.id_kind[id] == Impl::kAdded || m.id_kind[id] == Impl::kAddedSpecial) {
    return m.id_bytes[id];
  }
  const std::string* t = m.bpe.id_to_token(id);
  if (!t) return std::nullopt;
  return *t;
}

TokenId Tokenizer::vocab_size() const { return impl_->vocab_size; }
bool Tokenizer::is_special(TokenId id) const {
  return id >= 0 && id < impl_->vocab_size && impl_->id_kind[id] == Impl::kAddedSpecial;
}
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
const std::optional<std::string>& Tokenizer::bos_token() const { return impl_->bos; }
const std::optional<std::string>& Tokenizer::eos_token() const { return impl_->eos; }
const std::optional<std::string>& Tokenizer::pad_token() const { return impl_->pad; }
std::optional<TokenId> Tokenizer::bos_token_id() const { return impl_->id_of(impl_->bos); }
std::optional<TokenId> Tokenizer::eos_token_id() const { return impl_->id_of(impl_->eos); }
std::optional<TokenId> Tokenizer::pad_token_id() const { return impl_->id_of(impl_->pad); }
bool Tokenizer::add_bos_token() const { return impl_->add_bos; }
bool Tokenizer::add_eos_token() const { return impl_->add_eos; }
const json& Tokenizer::config() const { return impl_->config; }

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special)
    : tok_(tok), skip_special_(skip_special) {}

std::string StreamDecoder::push(TokenId id) {
  const Tokenizer::Impl& m = *tok_.impl_;
  AGENTR1_CHECK(id >= 0 && id < m.vocab_size && m.id_kind[id] != Tokenizer::Impl::kNone,
                "StreamDecoder: token id " << id << " is not in the vocabulary (vocab_size "
                                           << m.vocab_size << ")");
  uint8_t kind = m.id_kind[id];
  if (kind == Tokenizer::Impl::kAddedSpecial && skip_special_) return std::string();
  if (!m.decoder.byte_level_only()) {
    window_.push_back(id);
    if (!m.decoder.incremental()) return std::string();
    // Decode the ids since the last final point; return what is new, holding back an
    // unfinished character. The window is dropped once its text is final: no partial
    // character and, at the stream start, some text returned (a leading-space rule may
    // still be consuming the first characters until then).
    std::string raw = m.decode_general(window_, false, at_start_);
    size_t hold = incomplete_utf8_tail(raw);
    std::string out;
    if (raw.size() >= emitted_ + hold) {
      out = sanitize_utf8(std::string_view(raw).substr(emitted_, raw.size() - hold - emitted_));
      emitted_ = raw.size() - hold;
    }
    if (hold == 0 && (!at_start_ || emitted_ > 0)) {
      window_.clear();
      emitted_ = 0;
      at_start_ = false;
    }
    return out;
  }
  if (kind != Tokenizer::Impl::kVocab) {
    std::string out = sanitize_utf8(pending_);
    pending_.clear();
    out += m.id_bytes[id];
    return out;
  }
  pending_ += m.id_bytes[id];
  size_t hold = incomplete_utf8_tail(pending_);
  std::string out = sanitize_utf8(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamDecoder::flush() {
  const Tokenizer::Impl& m = *tok_.impl_;
  std::string out;
  if (!m.decoder.byte_level_only()) {
    if (!window_.empty()) {
      std::string raw = m.decode_general(window_, false, at_start_);
      if (raw.size() > emitted_) out = sanitize_utf8(std::string_view(raw).substr(emitted_));
    }
    window_.clear();
    emitted_ = 0;
    at_start_ = true;
    return out;
  }
  out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

size_t StreamDecoder::pending() const {
  if (tok_.impl_->decoder.byte_level_only()) return pending_.size();
  if (window_.empty()) return 0;
  return tok_.impl_->decode_general(window_, false, at_start_).size() - emitted_;
}

std::optional<std::string> vocabulary_difference(const Tokenizer& a, const Tokenizer& b) {
  auto quoted = [](const std::optional<std::string>& t) { return t ? "'" + *t + "'" : std::string("none"); };
  if (a.vocab_size() != b.vocab_size())
    return "vocabulary size " + std::to_string(a.vocab_size()) + " vs " + std::to_string(b.vocab_size());
  for (TokenId id = 0; id < a.vocab_size(); ++id) {
    const std::optional<std::string> ta = a.id_to_token(id), tb = b.id_to_token(id);
    if (ta != tb) return "token id " + std::to_string(id) + " is " + quoted(ta) + " vs " + quoted(tb);
    if (a.is_special(id) != b.is_special(id))
      return "token id " + std::to_string(id) + " (" + quoted(ta) + ") is special in " +
             (a.is_special(id) ? "the first" : "the second") + " tokenizer only";
  }
  return std::nullopt;
}

}  // namespace agentr1::text
