#include "agentr1/text/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "agentr1/core/error.h"
#include "agentr1/text/tokenizer/unicode.h"

namespace agentr1::text {

namespace {

// GPT-2's pattern, used by ByteLevel when use_regex is true.
const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const char* const kSupportedPreTokenizers = "Sequence, Split, Metaspace, ByteLevel (or null)";

// Per-thread PCRE2 match state: one ovector pair is all we read, a JIT stack that can
// grow for long inputs.
struct MatchState {
  pcre2_match_data* md = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* ctx = nullptr;
  MatchState() {
    md = pcre2_match_data_create(1, nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
    ctx = pcre2_match_context_create(nullptr);
    if (stack && ctx) pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~MatchState() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
  }
};

MatchState& match_state() {
  thread_local MatchState st;
  return st;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string oniguruma_to_pcre2(const std::string& p) {
  static const char* kWordClass = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc})";
  std::string out;
  out.reserve(p.size() + 16);
  int class_depth = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      bool in_class = class_depth > 0;
      std::string rep;
      switch (e) {
        case 's': rep = R"(\p{White_Space})"; break;
        case 'S': rep = R"(\P{White_Space})"; break;
        case 'w': rep = in_class ? kWordClass : std::string("[") + kWordClass + "]"; break;
        case 'W':
          AGENTR1_CHECK(!in_class, "regex /" << p << "/: \\W inside a character class is not "
                                             "supported; rewrite it without \\W");
          rep = std::string("[^") + kWordClass + "]";
          break;
        case 'h': rep = in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]"; break;
        case 'H':
          AGENTR1_CHECK(!in_class, "regex /" << p << "/: \\H inside a character class is not "
                                             "supported; rewrite it without \\H");
          rep = "[^0-9A-Fa-f]";
          break;
        default:
          rep = p.substr(i, 2);
      }
      out += rep;
      ++i;
      continue;
    }
    if (c == '[') {
      // "[:alpha:]" inside a class is a POSIX class, not a nested class.
      if (class_depth > 0 && i + 1 < p.size() && p[i + 1] == ':') {
        size_t close = p.find(":]", i + 2);
        if (close != std::string::npos) {
          out.append(p, i, close + 2 - i);
          i = close + 1;
          continue;
        }
      }
      ++class_depth;
      out += c;
      // A ']' right after '[' or '[^' is a literal in both dialects.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && class_depth > 0) --class_depth;
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  std::string translated = oniguruma_to_pcre2(pattern);
  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()),
                                   translated.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE,
                                   &err, &off, cctx);
  pcre2_compile_context_free(cctx);
  if (code == nullptr) {
    throw Error("regex /" + pattern + "/ does not compile (as PCRE2 /" + translated +
                "/): " + pcre2_message(err) + " at offset " + std::to_string(off));
  }
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view s, uint32_t base, std::vector<Span>& out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  MatchState& st = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  const size_t n = s.size();
  while (pos <= n) {
    int rc = jit_ ? pcre2_jit_match(code, subject, n, pos, 0, st.md, st.ctx)
                  : pcre2_match(code, subject, n, pos, PCRE2_NO_UTF_CHECK, st.md, st.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      throw Error("regex /" + pattern_ + "/ failed on a " + std::to_string(n) +
                  "-byte input: " + pcre2_message(rc));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.md);
    size_t b = ov[0], e = ov[1];
    out.push_back({static_cast<uint32_t>(base + b), static_cast<uint32_t>(base + e)});
    if (e > b) {
      pos = e;
    } else {
      if (b >= n) break;
      char32_t cp;
      pos = b + decode_utf8_unchecked(s, b, &cp);
    }
  }
}

namespace {

// A literal as a PCRE2 pattern (\Q...\E, with any \E inside escaped).
std::string quote_literal(const std::string& lit) {
  std::string quoted = "\\Q";
  for (size_t p = 0; p < lit.size(); ++p) {
    if (lit.compare(p, 2, "\\E") == 0) {
      quoted += "\\E\\\\E\\Q";
      ++p;
    } else {
      quoted += lit[p];
    }
  }
  quoted += "\\E";
  return quoted;
}

// An optional option of a component: absent or null gives the default; another type
// is an Error naming the component and the key (never json's own type_error).
bool flag_option(const json& j, const char* key, bool dflt, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  AGENTR1_CHECK(j[key].is_boolean(), where << ": \"" << key << "\" must be true or false, got " << j[key].dump());
  return j[key].get<bool>();
}

std::string text_option(const json& j, const char* key, const char* dflt, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  AGENTR1_CHECK(j[key].is_string(), where << ": \"" << key << "\" must be a string, got " << j[key].dump());
  return j[key].get<std::string>();
}

}  // namespace

void PreTokenizer::add_component(const json& j, std::vector<Step>& steps,
                                 const std::string& where) {
  AGENTR1_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
                where << " must be an object with a string \"type\", got " << j.dump());
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    AGENTR1_CHECK(j.contains("pretokenizers") && j["pretokenizers"].is_array(),
                  where << ": Sequence needs an array \"pretokenizers\"");
    size_t k = 0;
    for (const auto& sub : j["pretokenizers"]) {
      add_component(sub, steps, where + ".pretokenizers[" + std::to_string(k++) + "]");
    }
    return;
  }
  AGENTR1_CHECK(steps.empty() || !steps.back().is_byte_level,
                where << ": a " << type << " step after ByteLevel is not supported "
                      << "(ByteLevel must be the last pre-tokenizer step)");
  Step step;
  if (type == "Split") {
    AGENTR1_CHECK(j.contains("pattern") && j["pattern"].is_object(),
                  where << ": Split needs \"pattern\": {\"Regex\": ...} or {\"String\": ...}");
    const json& pat = j["pattern"];
    if (pat.contains("Regex")) {
      step.regex = std::make_shared<Regex>(pat["Regex"].get<std::string>());
    } else if (pat.contains("String")) {
      step.regex = std::make_shared<Regex>(quote_literal(pat["String"].get<std::string>()));
    } else {
      throw Error(where + ": Split pattern must have \"Regex\" or \"String\", got " +
                  pat.dump());
    }
    const std::string behavior = text_option(j, "behavior", "Isolated", where);
    if (behavior == "Removed") step.behavior = SplitBehavior::kRemoved;
    else if (behavior == "Isolated") step.behavior = SplitBehavior::kIsolated;
    else if (behavior == "MergedWithPrevious") step.behavior = SplitBehavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") step.behavior = SplitBehavior::kMergedWithNext;
    else if (behavior == "Contiguous") step.behavior = SplitBehavior::kContiguous;
    else
      throw Error(where + ": unknown Split behavior \"" + behavior +
                  "\"; supported: Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                  "Contiguous");
    step.invert = flag_option(j, "invert", false, where);
  } else if (type == "Metaspace") {
    step.is_metaspace = true;
    step.replacement = text_option(j, "replacement", "\xE2\x96\x81", where);
    char32_t cp;
    AGENTR1_CHECK(!step.replacement.empty() &&
                      valid_utf8_char(step.replacement, 0, &cp) == step.replacement.size(),
                  where << ": Metaspace \"replacement\" must be one character, got \""
                        << step.replacement << "\"");
    std::string scheme = "always";
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      scheme = text_option(j, "prepend_scheme", "always", where);
    } else if (j.contains("add_prefix_space") && !j["add_prefix_space"].is_null()) {
      scheme = flag_option(j, "add_prefix_space", true, where) ? "always" : "never";  // older files
    }
    if (scheme == "never") step.prepend = 0;
    else if (scheme == "first") step.prepend = 1;
    else if (scheme == "always") step.prepend = 2;
    else
      throw Error(where + ": Metaspace prepend_scheme \"" + scheme +
                  "\" is unknown; supported: always, first, never");
    if (flag_option(j, "split", true, where)) {
      step.regex = std::make_shared<Regex>(quote_literal(step.replacement));
      step.behavior = SplitBehavior::kMergedWithNext;
    }
  } else if (type == "ByteLevel") {
    step.is_byte_level = true;
    step.add_prefix_space = flag_option(j, "add_prefix_space", true, where);
    if (flag_option(j, "use_regex", true, where)) step.regex = std::make_shared<Regex>(kGpt2Pattern);
    step.behavior = SplitBehavior::kIsolated;
  } else {
    throw Error(where + ": unsupported pre-tokenizer type \"" + type + "\"; supported: " +
                kSupportedPreTokenizers);
  }
  steps.push_back(std::move(step));
}

PreTokenizer PreTokenizer::from_json(const json& j) {
  PreTokenizer pre;
  pre.source_ = j;
  if (!j.is_null()) add_component(j, pre.steps_, "pre_tokenizer");
  pre.byte_level_ = !pre.steps_.empty() && pre.steps_.back().is_byte_level;
  return pre;
}

namespace {

struct Piece {
  Span span;
  bool is_match;
};

// Applies one Split step to one piece, HF semantics (find matches, invert, behavior).
void split_piece(const Regex& re, SplitBehavior behavior, bool invert, std::string_view buf,
                 Span piece, std::vector<Span>& scratch, std::vector<Piece>& parts,
                 std::vector<Span>& out) {
  scratch.clear();
  re.find_all(buf.substr(piece.begin, piece.end - piece.begin), piece.begin, scratch);
  parts.clear();
  uint32_t prev = piece.begin;
  for (const Span& m : scratch) {
    if (m.begin != prev) parts.push_back({{prev, m.begin}, invert});
    parts.push_back({m, !invert});
    prev = m.end;
  }
  if (prev != piece.end) parts.push_back({{prev, piece.end}, invert});

  auto emit = [&out](Span s) {
    if (s.end > s.begin) out.push_back(s);
  };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Piece& p : parts) emit(p.span);
      break;
    case SplitBehavior::kRemoved:
      for (const Piece& p : parts)
        if (!p.is_match) emit(p.span);
      break;
    case SplitBehavior::kContiguous: {
      std::vector<Piece> acc;
      bool prev_match = false;
      for (const Piece& p : parts) {
        if (p.is_match && prev_match && !acc.empty()) {
          acc.back().span.end = p.span.end;
        } else {
          acc.push_back(p);
        }
        prev_match = p.is_match;
      }
      for (const Piece& p : acc) emit(p.span);
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      std::vector<Piece> acc;
      bool prev_match = false;
      for (const Piece& p : parts) {
        if (p.is_match && !prev_match && !acc.empty()) {
          acc.back().span.end = p.span.end;
        } else {
          acc.push_back(p);
        }
        prev_match = p.is_match;
      }
      for (const Piece& p : acc) emit(p.span);
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      std::vector<Piece> acc;
      bool prev_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !prev_match && !acc.empty()) {
          acc.back().span.begin = it->span.begin;
        } else {
          acc.push_back(*it);
        }
        prev_match = it->is_match;
      }
      for (auto it = acc.rbegin(); it != acc.rend(); ++it) emit(it->span);
      break;
    }
  }
}

}  // namespace

void PreTokenizer::split(std::string_view text, std::string& buf, std::vector<Span>& pieces,
                         bool at_text_start) const {
  AGENTR1_CHECK(text.size() < (1ull << 31),
                "pre-tokenizer input of " << text.size() << " bytes is too long (limit 2 GiB)");
  buf.assign(text.data(), text.size());
  pieces.clear();
  if (!text.empty()) pieces.push_back({0, static_cast<uint32_t>(text.size())});
  std::vector<Span> next, scratch;
  std::vector<Piece> parts;
  for (const Step& step : steps_) {
    if (step.is_byte_level && step.add_prefix_space) {
      std::string nb;
      nb.reserve(buf.size() + pieces.size());
      for (Span& p : pieces) {
        uint32_t b = static_cast<uint32_t>(nb.size());
        if (buf[p.begin] != ' ') nb.push_back(' ');
        nb.append(buf, p.begin, p.end - p.begin);
        p = {b, static_cast<uint32_t>(nb.size())};
      }
      buf.swap(nb);
    }
    if (step.is_metaspace) {
      const std::string& rep = step.replacement;
      std::string nb;
      nb.reserve(buf.size() + pieces.size() * rep.size() + 8);
      for (Span& p : pieces) {
        uint32_t b = static_cast<uint32_t>(nb.size());
        std::string_view piece(buf.data() + p.begin, p.end - p.begin);
        const bool prepend = step.prepend == 2 || (step.prepend == 1 && at_text_start && p.begin == 0);
        if (prepend && piece.compare(0, rep.size(), rep) != 0 && piece[0] != ' ') nb += rep;
        for (char c : piece) {
          if (c == ' ') nb += rep;
          else nb.push_back(c);
        }
        p = {b, static_cast<uint32_t>(nb.size())};
      }
      buf.swap(nb);
    }
    if (!step.regex) continue;
    next.clear();
    for (const Span& p : pieces) {
      split_piece(*step.regex, step.behavior, step.invert, buf, p, scratch, parts, next);
    }
    pieces.swap(next);
  }
}

}  // namespace agentr1::text
