#include "agentr1/text/tokenizer/decoder.h"

#include "agentr1/core/error.h"
#include "agentr1/text/tokenizer/byte_level.h"
#include "agentr1/text/tokenizer/normalizer.h"
#include "agentr1/text/tokenizer/unicode.h"

namespace agentr1::text {

namespace {

const char* const kSupportedDecoders =
    "ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence";

// The byte of a "<0xNN>" token, or -1.
int fallback_byte(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

size_t count_option(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return 0;
  AGENTR1_CHECK(j[key].is_number_integer() && j[key].get<int64_t>() >= 0,
                where << ": \"" << key << "\" must be a non-negative integer, got " << j[key].dump());
  return static_cast<size_t>(j[key].get<int64_t>());
}

// One UTF-8 character (valid) -> true.
bool single_char(const std::string& s) {
  char32_t cp;
  return !s.empty() && valid_utf8_char(s, 0, &cp) == s.size();
}

}  // namespace

void Decoder::add(const json& j, std::vector<Step>& steps, const std::string& where) {
  AGENTR1_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
                where << " must be an object with a string \"type\", got " << j.dump()
                      << " (supported decoder types: " << kSupportedDecoders << ")");
  const std::string type = j["type"].get<std::string>();
  Step step;
  if (type == "Sequence") {
    AGENTR1_CHECK(j.contains("decoders") && j["decoders"].is_array(),
                  where << ": Sequence needs an array \"decoders\"");
    size_t k = 0;
    for (const auto& sub : j["decoders"]) {
      add(sub, steps, where + ".decoders[" + std::to_string(k++) + "]");
    }
    return;
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    AGENTR1_CHECK(j.contains("pattern"), where << ": Replace needs a \"pattern\"");
    step.pattern = std::make_shared<Pattern>(Pattern::from_json(j["pattern"], where + ".pattern"));
    AGENTR1_CHECK(j.contains("content") && j["content"].is_string(),
                  where << ": Replace needs a string \"content\", got " << j.dump());
    step.content = j["content"].get<std::string>();
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    AGENTR1_CHECK(j.contains("content") && j["content"].is_string() &&
                      single_char(j["content"].get<std::string>()),
                  where << ": Strip needs \"content\" of exactly one character, got " << j.dump());
    step.content = j["content"].get<std::string>();
    step.start = count_option(j, "start", where);
    step.stop = count_option(j, "stop", where);
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    step.content = "\xE2\x96\x81";  // U+2581
    if (j.contains("replacement") && !j["replacement"].is_null()) {
      AGENTR1_CHECK(j["replacement"].is_string() && single_char(j["replacement"].get<std::string>()),
                    where << ": Metaspace \"replacement\" must be one character, got "
                          << j["replacement"].dump());
      step.content = j["replacement"].get<std::string>();
    }
    std::string scheme = "always";
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      scheme = j["prepend_scheme"].get<std::string>();
    } else if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean()) {
      scheme = j["add_prefix_space"].get<bool>() ? "always" : "never";  // older files
    }
    AGENTR1_CHECK(scheme == "always" || scheme == "first" || scheme == "never",
                  where << ": Metaspace prepend_scheme \"" << scheme
                        << "\" is unknown; use always, first or never");
    step.strip_first = scheme != "never";
  } else {
    throw Error(where + ": unsupported decoder type \"" + type + "\"; supported: " +
                kSupportedDecoders);
  }
  steps.push_back(std::move(step));
}

Decoder Decoder::from_json(const json& j, const std::string& where) {
  AGENTR1_CHECK(!j.is_null(), where << ": null decoder is not supported; supported types: "
                                    << kSupportedDecoders);
  Decoder d;
  add(j, d.steps_, where);
  AGENTR1_CHECK(!d.steps_.empty(), where << ": an empty decoder Sequence is not supported");
  d.byte_level_only_ = d.steps_.size() == 1 && d.steps_[0].kind == Kind::kByteLevel;
  // See incremental() in the header.
  bool fused = false, after_fallback = false;
  for (const Step& s : d.steps_) {
    switch (s.kind) {
      case Kind::kByteLevel:
      case Kind::kFuse:
        fused = true;
        break;
      case Kind::kByteFallback:
        if (fused) d.incremental_ = false;
        after_fallback = true;
        break;
      case Kind::kReplace:
        if ((!fused && after_fallback) ||
            (fused && (s.pattern->is_regex() || !single_char(s.pattern->literal()))))
          d.incremental_ = false;
        break;
      case Kind::kStrip:
        if ((!fused && after_fallback) || (fused && s.stop > 0)) d.incremental_ = false;
        break;
      case Kind::kMetaspace:
        if (!fused && after_fallback) d.incremental_ = false;
        break;
    }
  }
  return d;
}

std::string Decoder::decode_raw(std::vector<std::string> tokens, bool at_start) const {
  bool fused = false;
  std::vector<std::string> next;
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Kind::kByteLevel: {
        std::string out;
        for (const std::string& t : tokens) {
          if (!byte_level_to_bytes(t, out)) out += t;
        }
        tokens.assign(1, std::move(out));
        fused = true;
        break;
      }
      case Kind::kFuse: {
        std::string out;
        for (const std::string& t : tokens) out += t;
        tokens.assign(1, std::move(out));
        fused = true;
        break;
      }
      case Kind::kReplace:
        for (std::string& t : tokens) t = s.pattern->replace_all(t, s.content);
        break;
      case Kind::kByteFallback: {
        next.clear();
        std::string run;
        bool in_run = false;
        for (std::string& t : tokens) {
          int b = fallback_byte(t);
          if (b >= 0) {
            run.push_back(static_cast<char>(b));
            in_run = true;
            continue;
          }
          if (in_run) {
            next.push_back(std::move(run));
            run.clear();
            in_run = false;
          }
          next.push_back(std::move(t));
        }
        if (in_run) next.push_back(std::move(run));
        tokens.swap(next);
        break;
      }
      case Kind::kStrip: {
        const std::string& c = s.content;
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string& t = tokens[i];
          size_t begin = 0, end = t.size();
          // After Fuse the one token is the whole text: its start is the text's start
          // only when at_start.
          const size_t start = fused && !at_start ? 0 : s.start;
          for (size_t k = 0; k < start && t.compare(begin, c.size(), c) == 0; ++k) {
            begin += c.size();
          }
          for (size_t k = 0; k < s.stop && end >= begin + c.size() &&
                             t.compare(end - c.size(), c.size(), c) == 0;
               ++k) {
            end -= c.size();
          }
          t = begin < end ? t.substr(begin, end - begin) : std::string();
        }
        break;
      }
      case Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string& t = tokens[i];
          size_t pos = 0;
          while ((pos = t.find(s.content, pos)) != std::string::npos) {
            t.replace(pos, s.content.size(), " ");
            pos += 1;
          }
          if (i == 0 && at_start && s.strip_first && !t.empty() && t[0] == ' ') t.erase(0, 1);
        }
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace agentr1::text
