#include "agentr1/core/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agentr1/core/strings.h"

namespace agentr1 {
namespace {

// Offset of the first byte that does not start a valid UTF-8 sequence (overlong forms,
// surrogates and code points past U+10FFFF are invalid), or npos.
size_t invalid_utf8_at(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      const unsigned b = p[i + k];
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return i;
    }
    i += len;
  }
  return std::string::npos;
}

std::string byte_hex(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02X", b);
  return buf;
}


const char* kTagStr = "tag:yaml.org,2002:str";
const char* kTagInt = "tag:yaml.org,2002:int";
const char* kTagFloat = "tag:yaml.org,2002:float";
const char* kTagBool = "tag:yaml.org,2002:bool";
const char* kTagNull = "tag:yaml.org,2002:null";

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool all_of_range(const std::string& s, std::size_t from, bool (*pred)(char)) {
  if (from >= s.size()) return false;
  for (std::size_t i = from; i < s.size(); ++i) {
    if (!pred(s[i])) return false;
  }
  return true;
}

// [-+]?[0-9]+
bool is_core_decimal_int(const std::string& s) {
  const std::size_t from = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  return all_of_range(s, from, is_digit);
}

// [-+]? ( \.[0-9]+ | [0-9]+ ( \.[0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
bool is_core_float(const std::string& s) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  if (i < n && (s[i] == '-' || s[i] == '+')) ++i;
  std::size_t int_digits = 0;
  while (i < n && is_digit(s[i])) ++i, ++int_digits;
  std::size_t frac_digits = 0;
  if (i < n && s[i] == '.') {
    ++i;
    while (i < n && is_digit(s[i])) ++i, ++frac_digits;
  } else if (int_digits == 0) {
    return false;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '-' || s[i] == '+')) ++i;
    std::size_t exp_digits = 0;
    while (i < n && is_digit(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == n;
}

bool parse_double(const std::string& s, double& out) {
  const char* b = s.data();
  const char* e = b + s.size();
  if (b != e && *b == '+') ++b;  // from_chars does not take a leading '+'
  auto r = std::from_chars(b, e, out);
  // ERANGE: overflow -> inf, underflow -> denormal/0 (YAML says it is still a float).
  if (r.ec == std::errc::result_out_of_range) {
    const bool neg = !s.empty() && s[0] == '-';
    // Decide overflow vs underflow from the exponent sign.
    const auto epos = s.find_first_of("eE");
    const bool underflow = epos != std::string::npos && s.find('-', epos) != std::string::npos;
    out = underflow ? (neg ? -0.0 : 0.0)
                    : (neg ? -std::numeric_limits<double>::infinity()
                           : std::numeric_limits<double>::infinity());
    return true;
  }
  return r.ec == std::errc() && r.ptr == e;
}

// Integer text (already checked against the grammar) -> int64, uint64 or double.
json integer_value(const std::string& digits_with_sign, int base) {
  const bool neg = !digits_with_sign.empty() && digits_with_sign[0] == '-';
  std::size_t start = (!digits_with_sign.empty() &&
                       (digits_with_sign[0] == '-' || digits_with_sign[0] == '+'))
                          ? 1
                          : 0;
  const char* b = digits_with_sign.data() + start;
  const char* e = digits_with_sign.data() + digits_with_sign.size();
  std::uint64_t u = 0;
  auto r = std::from_chars(b, e, u, base);
  if (r.ec == std::errc() && r.ptr == e) {
    if (!neg) {
      if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return static_cast<std::int64_t>(u);
      }
      return u;
    }
    if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + 1) {
      return static_cast<std::int64_t>(0 - u);
    }
  }
  // Too large for 64 bits: keep the magnitude as a float rather than wrap.
  double d = 0;
  for (const char* p = b; p != e; ++p) {
    const char c = *p;
    const int digit = is_digit(c) ? c - '0' : (c >= 'a' ? c - 'a' + 10 : c - 'A' + 10);
    d = d * base + digit;
  }
  return neg ? -d : d;
}

std::string mark_text(const YAML::Mark& m) {
  if (m.is_null()) return "";
  return "line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1);
}

// An escape such as "\ud800" can make yaml-cpp produce text that is not UTF-8.
void check_scalar_utf8(const std::string& text, const YAML::Mark& m) {
  const size_t bad = invalid_utf8_at(text);
  AGENTR1_CHECK(bad == std::string::npos,
                "YAML " << mark_text(m) << ": the value is not valid UTF-8 (byte "
                        << byte_hex(static_cast<unsigned char>(text[bad])) << " at offset " << bad
                        << "; an escape such as \\ud800 names no character); HINT: write the text as UTF-8");
}

json scalar_with_tag(const std::string& text, const std::string& tag, const YAML::Mark& mark) {
  if (tag == "?" || tag.empty()) return resolve_yaml_scalar(text);
  if (tag == "!" || tag == kTagStr) return text;
  const std::string where = mark_text(mark);
  if (tag == kTagNull) return nullptr;
  if (tag == kTagBool || tag == kTagInt || tag == kTagFloat) {
    json v = resolve_yaml_scalar(text);
    const bool ok = (tag == kTagBool && v.is_boolean()) ||
                    (tag == kTagInt && v.is_number_integer()) ||
                    (tag == kTagFloat && v.is_number());
    AGENTR1_CHECK(ok, "YAML " << where << ": '" << text << "' is not a valid " << tag);
    if (tag == kTagFloat) return v.get<double>();
    return v;
  }
  throw Error("YAML " + where + ": unsupported tag '" + tag +
              "'; only !!str, !!int, !!float, !!bool and !!null are understood");
}

// Limits of a config tree: aliases make YAML a graph, and a self-referencing one
// (`a: &x [*x]`) or an alias bomb would otherwise recurse without end or explode.
constexpr int kMaxYamlDepth = 64;
constexpr int64_t kMaxYamlNodes = 1000000;

json node_to_json(const YAML::Node& n, int depth, int64_t& nodes) {
  AGENTR1_CHECK(depth <= kMaxYamlDepth,
                "YAML " << mark_text(n.Mark()) << ": nested deeper than " << kMaxYamlDepth
                        << " levels; HINT: an alias that refers to itself (e.g. `a: &x [*x]`) cannot be "
                           "expanded, write the value out instead");
  AGENTR1_CHECK(++nodes <= kMaxYamlNodes, "YAML " << mark_text(n.Mark()) << ": more than " << kMaxYamlNodes
                                                   << " values (aliases expanded); a config is far smaller: "
                                                      "HINT: check for aliases that repeat each other");
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Scalar:
      check_scalar_utf8(n.Scalar(), n.Mark());
      return scalar_with_tag(n.Scalar(), n.Tag(), n.Mark());
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : n) a.push_back(node_to_json(item, depth + 1, nodes));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) {
        const YAML::Node& k = kv.first;
        AGENTR1_CHECK(k.IsScalar() || k.IsNull(),
                      "YAML " << mark_text(k.Mark())
                              << ": map keys must be plain scalars (strings), got a "
                              << (k.IsMap() ? "map" : "list"));
        const std::string key = k.IsNull() ? std::string("null") : k.Scalar();
        check_scalar_utf8(key, k.Mark());
        AGENTR1_CHECK(!o.contains(key), "YAML " << mark_text(k.Mark()) << ": duplicate key '"
                                                 << key << "'; each key may appear once per map");
        o[key] = node_to_json(kv.second, depth + 1, nodes);
      }
      return o;
    }
  }
  return nullptr;
}

json node_to_json(const YAML::Node& n) {
  int64_t nodes = 0;
  return node_to_json(n, 0, nodes);
}

// ---------- emitter ----------

bool is_yaml11_bool_word(const std::string& s) {
  std::string l;
  for (char c : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // y/n are YAML 1.1 bools on paper, but PyYAML and ruamel read them as strings, and
  // quoting a key like rollout.n would only hurt readability.
  return l == "yes" || l == "no" || l == "on" || l == "off" || l == "true" || l == "false";
}

// True when the string can be written without quotes and reads back as the same
// string (conservative: anything doubtful gets quoted).
bool plain_safe(const std::string& s) {
  if (s.empty()) return false;
  if (!resolve_yaml_scalar(s).is_string()) return false;
  if (is_yaml11_bool_word(s)) return false;  // other YAML readers (PyYAML) see bools
  const char first = s[0];
  if (std::string("-?:,[]{}#&*!|>'\"%@`+.~ ").find(first) != std::string::npos) return false;
  if (is_digit(first)) return false;  // 1_000, 1:30, 0b1 read as numbers in YAML 1.1
  if (s.back() == ' ' || s.back() == ':') return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c == ',' || c == '[' || c == ']' || c == '{' || c == '}') return false;
    if (c == ':' && i + 1 < s.size() && s[i + 1] == ' ') return false;
    if (c == '#' && i > 0 && s[i - 1] == ' ') return false;
    if (c >= 0x80) {
      // U+0085, U+2028, U+2029 (line breaks in YAML 1.1), U+FEFF (BOM): quote.
      if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85)
        return false;
      if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
          (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
           static_cast<unsigned char>(s[i + 2]) == 0xA9))
        return false;
      if (c == 0xEF && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0xBB &&
          static_cast<unsigned char>(s[i + 2]) == 0xBF)
        return false;
    }
  }
  return true;
}

std::string double_quoted(const std::string& s) {
  std::string out = "\"";
  char buf[8];
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\t': out += "\\t"; continue;
      case '\r': out += "\\r"; continue;
      default: break;
    }
    if (c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    } else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) {
      out += "\\u0085";  // not \N: yaml-cpp 0.7 decodes \N to a bare 0x85 byte
      i += 1;
    } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
                static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      out += static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029";
      i += 2;
    } else if (c == 0xEF && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0xBB &&
               static_cast<unsigned char>(s[i + 2]) == 0xBF) {
      out += "\\uFEFF";
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "\"";
  return out;
}

std::string scalar_to_yaml(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
      return std::to_string(v.get<std::int64_t>());
    case json::value_t::number_unsigned:
      return std::to_string(v.get<std::uint64_t>());
    case json::value_t::number_float: {
      const double d = v.get<double>();
      if (std::isnan(d)) return ".nan";
      if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
      return v.dump();  // shortest round-trip form; always has '.' or 'e'
    }
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      return plain_safe(s) ? s : double_quoted(s);
    }
    case json::value_t::binary:
      throw Error("to_yaml: binary JSON values cannot be written as YAML");
    default:
      break;
  }
  if (v.is_array() && v.empty()) return "[]";
  if (v.is_object() && v.empty()) return "{}";
  throw Error("to_yaml: internal error, not a scalar");
}

std::string key_to_yaml(const std::string& k) { return plain_safe(k) ? k : double_quoted(k); }

bool is_block(const json& v) { return (v.is_object() || v.is_array()) && !v.empty(); }

void emit(const json& v, int indent, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      out += pad + key_to_yaml(it.key()) + ":";
      if (is_block(it.value())) {
        out += "\n";
        emit(it.value(), indent + 2, out);
      } else {
        out += " " + scalar_to_yaml(it.value()) + "\n";
      }
    }
  } else {
    for (const auto& item : v) {
      if (is_block(item)) {
        // Render the item two deeper, then put "- " where its first indent was.
        std::string sub;
        emit(item, indent + 2, sub);
        out += pad + "- " + sub.substr(static_cast<std::size_t>(indent) + 2);
      } else {
        out += pad + "- " + scalar_to_yaml(item) + "\n";
      }
    }
  }
}

// ---------- overrides ----------

std::vector<std::string> split_dotted(const std::string& key, const std::string& what) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : key) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  for (const auto& p : parts) {
    AGENTR1_CHECK(!p.empty(), "override '" << what << "': key '" << key
                                           << "' has an empty part; write a.b.c=value");
  }
  return parts;
}

bool parse_index(const std::string& s, std::size_t& idx) {
  if (s.empty() || !all_of_range(s, 0, is_digit)) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), idx);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

void collect_paths(const json& v, const std::string& prefix, std::vector<std::string>& out) {
  if (!v.is_object()) return;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string k = config_detail::join_key(prefix, it.key());
    out.push_back(k);
    collect_paths(it.value(), k, out);
  }
}

bool ends_with_segment(const std::string& key, const std::string& tail) {
  if (key.size() <= tail.size()) return false;
  return key.compare(key.size() - tail.size(), tail.size(), tail) == 0 &&
         key[key.size() - tail.size() - 1] == '.';
}

std::string join_parts(const std::vector<std::string>& parts, std::size_t from, std::size_t to) {
  std::string s;
  for (std::size_t i = from; i < to; ++i) s += (s.empty() ? "" : ".") + parts[i];
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------

json resolve_yaml_scalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (is_core_decimal_int(s)) return integer_value(s, 10);
  if (s.size() > 2 && s[0] == '0' && s[1] == 'o' &&
      all_of_range(s, 2, [](char c) { return c >= '0' && c <= '7'; })) {
    return integer_value(s.substr(2), 8);
  }
  if (s.size() > 2 && s[0] == '0' && s[1] == 'x' && all_of_range(s, 2, is_hex)) {
    return integer_value(s.substr(2), 16);
  }
  if (is_core_float(s)) {
    double d = 0;
    if (parse_double(s, d)) return d;
  }
  {
    std::string body = s;
    bool neg = false;
    if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
      neg = body[0] == '-';
      body = body.substr(1);
    }
    if (body == ".inf" || body == ".Inf" || body == ".INF") {
      return neg ? -std::numeric_limits<double>::infinity()
                 : std::numeric_limits<double>::infinity();
    }
    if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  }
  return s;
}

namespace {

// Records where each document starts; ignores the rest of the event stream.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& m) override { starts.push_back(m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// The number of documents in the text, counted up to 2. yaml-cpp's LoadAll never
// returns on some malformed text (",: 1" yields an empty document that consumes
// nothing, forever), so a document that starts where the previous one started is a
// syntax error here. Throws YAML::Exception for ordinary syntax errors.
size_t count_documents(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts h;
  while (h.starts.size() < 2 && parser.HandleNextDocument(h)) {
    const size_t n = h.starts.size();
    if (n >= 2 && h.starts[n - 1].pos == h.starts[n - 2].pos) {
      const YAML::Mark& m = h.starts.back();
      const size_t pos = m.pos >= 0 ? static_cast<size_t>(m.pos) : 0;
      std::string what = pos < text.size() ? std::string("unexpected '") + text[pos] + "'"
                                           : std::string("unexpected end of text");
      throw Error("YAML syntax error at " + mark_text(m) + ": " + what +
                  " (the parser cannot continue from here)");
    }
  }
  return h.starts.size();
}

}  // namespace

json yaml_to_json(const std::string& yaml_text) {
  const size_t bad = invalid_utf8_at(yaml_text);
  if (bad != std::string::npos) {
    const size_t line = 1 + static_cast<size_t>(std::count(yaml_text.begin(), yaml_text.begin() + bad, '\n'));
    const size_t nl = bad == 0 ? std::string::npos : yaml_text.rfind('\n', bad - 1);
    const size_t column = nl == std::string::npos ? bad + 1 : bad - nl;
    throw Error("YAML text is not valid UTF-8: byte " + byte_hex(static_cast<unsigned char>(yaml_text[bad])) +
                " at line " + std::to_string(line) + ", column " + std::to_string(column) +
                "; HINT: save the file as UTF-8");
  }
  // YAML allows no C0 control character but tab, LF and CR; yaml-cpp would take
  // leading NULs for a UTF-16/32 byte order and decode garbage.
  for (size_t i = 0; i < yaml_text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(yaml_text[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
      const size_t line = 1 + static_cast<size_t>(std::count(yaml_text.begin(), yaml_text.begin() + i, '\n'));
      const size_t nl = i == 0 ? std::string::npos : yaml_text.rfind('\n', i - 1);
      const size_t column = nl == std::string::npos ? i + 1 : i - nl;
      throw Error("YAML text holds the control character " + byte_hex(c) + " at line " + std::to_string(line) +
                  ", column " + std::to_string(column) + " (YAML allows tab, newline and carriage return only)" +
                  (c == 0 ? "; HINT: a UTF-16 or UTF-32 file must be saved as UTF-8" : ""));
    }
  }
  YAML::Node doc;
  size_t n_docs = 0;
  try {
    n_docs = count_documents(yaml_text);
    AGENTR1_CHECK(n_docs <= 1, "YAML text holds more than one document (separated by ---); a "
                               "config must be exactly one");
    if (n_docs == 1) doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw Error("YAML syntax error at " + mark_text(e.mark) + ": " + e.msg);
  }
  if (n_docs == 0) return nullptr;
  return node_to_json(doc);
}

json load_yaml_file(const std::string& path) {
  AGENTR1_CHECK(!std::filesystem::is_directory(path),
                "config file '" << path << "' is a directory; HINT: name a YAML file (--config FILE)");
  std::ifstream in(path, std::ios::binary);
  AGENTR1_CHECK(in, "cannot open config file '" << path << "'; check the path (--config FILE)");
  std::ostringstream ss;
  ss << in.rdbuf();
  json tree = with_context("config file '" + path + "'", [&] { return yaml_to_json(ss.str()); });
  if (tree.is_null()) return json::object();
  return tree;
}

std::string to_yaml(const json& tree) {
  if (!is_block(tree)) return scalar_to_yaml(tree) + "\n";
  std::string out;
  emit(tree, 0, out);
  return out;
}

json parse_override_value(const std::string& raw) {
  const std::string text = trim(raw);
  if (text.empty()) return "";
  const char c = text[0];
  if (c == '[' || c == '{' || c == '\'' || c == '"') {
    json v;
    try {
      v = yaml_to_json(text);
    } catch (const Error& e) {
      throw Error("override value '" + text + "' is not a valid YAML " +
                  (c == '[' ? "list" : c == '{' ? "map" : "quoted string") + ": " + e.what());
    }
    const bool ok = (c == '[' && v.is_array()) || (c == '{' && v.is_object()) ||
                    ((c == '\'' || c == '"') && v.is_string());
    AGENTR1_CHECK(ok, "override value '" << text << "' is not a single YAML "
                                         << (c == '[' ? "list" : c == '{' ? "map" : "string")
                                         << "; check brackets and quotes");
    return v;
  }
  return resolve_yaml_scalar(text);
}

void merge_json(json& base, const json& overlay) {
  // A map with a "type" is a registry spec (a context policy, a reward, ...): its other
  // keys are that type's options, so a spec of another type replaces it whole.
  const bool other_type = base.is_object() && overlay.is_object() && base.contains("type") &&
                          overlay.contains("type") && base["type"] != overlay["type"];
  if (base.is_object() && overlay.is_object() && !other_type) {
    for (auto it = overlay.begin(); it != overlay.end(); ++it) {
      if (base.contains(it.key())) {
        merge_json(base[it.key()], it.value());
      } else {
        base[it.key()] = it.value();
      }
    }
  } else {
    base = overlay;
  }
}

namespace {
void apply_override_impl(json& tree, const std::string& assignment);
}  // namespace

void apply_override(json& tree, const std::string& assignment) {
  const size_t bad = invalid_utf8_at(assignment);
  AGENTR1_CHECK(bad == std::string::npos,
                "override is not valid UTF-8: byte " << byte_hex(static_cast<unsigned char>(assignment[bad]))
                                                      << " at offset " << bad
                                                      << "; HINT: pass keys and values as UTF-8 text");
  const bool was_null = tree.is_null();
  try {
    apply_override_impl(tree, assignment);
  } catch (...) {
    if (was_null) tree = nullptr;  // failed overrides leave the tree as it was
    throw;
  }
}

namespace {
void apply_override_impl(json& tree, const std::string& assignment) {
  std::string s = trim(assignment);
  enum class Mode { kSet, kAdd, kUpsert, kDelete } mode = Mode::kSet;
  if (s.rfind("++", 0) == 0) {
    mode = Mode::kUpsert;
    s = s.substr(2);
  } else if (s.rfind("+", 0) == 0) {
    mode = Mode::kAdd;
    s = s.substr(1);
  } else if (s.rfind("~", 0) == 0) {
    mode = Mode::kDelete;
    s = s.substr(1);
  }
  const auto eq = s.find('=');
  std::string key;
  json value;
  if (mode == Mode::kDelete) {
    AGENTR1_CHECK(eq == std::string::npos,
                  "override '" << assignment << "': a deletion takes no value; write ~" <<
                  trim(s.substr(0, eq)));
    key = trim(s);
  } else {
    AGENTR1_CHECK(eq != std::string::npos,
                  "override '" << assignment
                               << "' has no '='; write key=value, e.g. trainer.total_epochs=3");
    key = trim(s.substr(0, eq));
    value = with_context("override '" + assignment + "'",
                         [&] { return parse_override_value(s.substr(eq + 1)); });
  }
  AGENTR1_CHECK(!key.empty(), "override '" << assignment << "' has an empty key");
  const std::vector<std::string> parts = split_dotted(key, assignment);

  if (tree.is_null()) tree = json::object();
  json* node = &tree;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& seg = parts[i];
    const bool last = i + 1 == parts.size();
    const std::string here = join_parts(parts, 0, i + 1);
    const std::string parent = join_parts(parts, 0, i);
    if (node->is_array()) {
      std::size_t idx = 0;
      AGENTR1_CHECK(parse_index(seg, idx),
                    "override '" << assignment << "': '" << parent
                                 << "' is a list; index it with a number, got '" << seg << "'");
      AGENTR1_CHECK(idx < node->size(), "override '" << assignment << "': index " << idx
                                                     << " is out of range for '" << parent
                                                     << "' (a list of " << node->size()
                                                     << " items)");
      if (last) {
        AGENTR1_CHECK(mode != Mode::kAdd, "override '" << assignment << "': '" << here
                                                       << "' already exists; drop the '+'");
        if (mode == Mode::kDelete) {
          node->erase(idx);
        } else {
          merge_json((*node)[idx], value);
        }
        return;
      }
      node = &(*node)[idx];
      continue;
    }
    AGENTR1_CHECK(node->is_object(),
                  "override '" << assignment << "': '" << parent << "' is "
                               << describe_value(*node) << ", not a map, so it has no key '"
                               << seg << "'");
    if (node->contains(seg)) {
      if (last) {
        if (mode == Mode::kAdd) {
          throw Error("override '" + assignment + "': '" + here + "' already exists (" +
                      describe_value((*node)[seg]) + "); drop the '+' to change it");
        }
        if (mode == Mode::kDelete) {
          node->erase(seg);
        } else {
          merge_json((*node)[seg], value);
        }
        return;
      }
      node = &(*node)[seg];
      continue;
    }
    // Missing key.
    if (mode == Mode::kAdd || mode == Mode::kUpsert) {
      json built = value;
      for (std::size_t j = parts.size(); j-- > i + 1;) {
        json wrap = json::object();
        wrap[parts[j]] = std::move(built);
        built = std::move(wrap);
      }
      (*node)[seg] = std::move(built);
      return;
    }
    std::vector<std::string> siblings;
    for (auto it = node->begin(); it != node->end(); ++it) siblings.push_back(it.key());
    const std::vector<std::string> rest(parts.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                        parts.end());
    std::string msg = "override '" + assignment + "': " +
                      unknown_key_message(parent, seg, rest, siblings, json_key_paths(tree));
    if (mode == Mode::kSet) msg += " To add a new key, write +" + key + "=...";
    throw Error(msg);
  }
}
}  // namespace

void apply_overrides(json& tree, const std::vector<std::string>& assignments) {
  for (const auto& a : assignments) apply_override(tree, a);
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::vector<std::string> json_key_paths(const json& tree) {
  std::vector<std::string> out;
  collect_paths(tree, "", out);
  return out;
}

std::string describe_value(const json& v) {
  std::string s;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isnan(d)) return ".nan";
    if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
  }
  try {
    s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::exception&) {
    s = "<unprintable>";
  }
  if (v.is_object()) s = "a map " + s;
  if (v.is_array()) s = "a list " + s;
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

std::string unknown_key_message(const std::string& parent, const std::string& key,
                                const std::vector<std::string>& rest,
                                const std::vector<std::string>& siblings,
                                const std::vector<std::string>& all_keys) {
  const std::string full = config_detail::join_key(parent, key);
  std::string rest_suffix;
  for (const auto& r : rest) rest_suffix += "." + r;
  std::string msg = "unknown config key '" + full + rest_suffix + "'";
  if (!rest.empty() || !parent.empty()) {
    msg += " (" + (parent.empty() ? std::string("the top level") : "'" + parent + "'") +
           " has no key '" + key + "')";
  }

  // 1. The same key (with what the user wrote below it) in another section.
  std::vector<std::string> found;
  auto search = [&](const std::string& tail, const std::string& suffix) {
    for (const auto& k : all_keys) {
      if (k != full && (k == tail || ends_with_segment(k, tail))) {
        const std::string cand = k + suffix;
        if (std::find(found.begin(), found.end(), cand) == found.end()) found.push_back(cand);
      }
    }
  };
  search(key + rest_suffix, "");
  if (found.empty() && !rest.empty()) search(key, rest_suffix);
  std::stable_sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    return a.size() < b.size();
  });

  if (!found.empty()) {
    msg += "; did you mean ";
    const std::size_t shown = std::min<std::size_t>(found.size(), 3);
    for (std::size_t i = 0; i < shown; ++i) {
      if (i > 0) msg += (i + 1 == shown) ? " or " : ", ";
      msg += "'" + found[i] + "'";
    }
    msg += "?";
  } else if (!siblings.empty()) {
    // 2. The nearest sibling by edit distance, if it is close enough to be a typo
    //    (otherwise the list of valid keys below is the better help).
    std::size_t best = 0, best_d = std::string::npos;
    for (std::size_t i = 0; i < siblings.size(); ++i) {
      const std::size_t d = edit_distance(key, siblings[i]);
      if (d < best_d) best_d = d, best = i;
    }
    if (best_d <= std::max<std::size_t>(2, key.size() / 2)) {
      const std::string near = config_detail::join_key(parent, siblings[best]);
      // Keep what the user wrote below the key only if that makes a valid key.
      const bool rest_valid =
          all_keys.empty() ||
          std::find(all_keys.begin(), all_keys.end(), near + rest_suffix) != all_keys.end();
      msg += "; did you mean '" + (rest_valid ? near + rest_suffix : near) + "'?";
    }
  }
  if (key.find('.') != std::string::npos) {
    msg += " (YAML keys are not split at dots; nest them: a: {b: ...})";
  }
  if (!siblings.empty()) {
    msg += " Valid keys " +
           (parent.empty() ? std::string("at the top level") : "under '" + parent + "'") + ": ";
    const std::size_t shown = std::min<std::size_t>(siblings.size(), 30);
    for (std::size_t i = 0; i < shown; ++i) msg += (i ? ", " : "") + siblings[i];
    if (shown < siblings.size()) msg += ", ...";
    msg += ".";
  }
  return msg;
}

namespace config_detail {

std::string type_error(const std::string& key, const char* expected, const json& found) {
  std::string msg = key + ": expected " + expected + ", got " + describe_value(found);
  if (found.is_string()) {
    const json inner = resolve_yaml_scalar(found.get<std::string>());
    if (!inner.is_string() && !inner.is_null()) {
      msg += " (a quoted string; remove the quotes to pass " +
             std::string(inner.is_boolean() ? "a bool" : "a number") + ")";
    }
  } else if (std::string(expected) == "a string" && !found.is_structured() && !found.is_null()) {
    msg += " (quote it to pass a string: '" + describe_value(found) + "')";
  } else if (std::string(expected).rfind("a bool", 0) == 0 && found.is_number()) {
    msg += " (write true or false)";
  } else if (std::string(expected).rfind("an integer", 0) == 0 && found.is_number_float()) {
    // Integer text past 64 bits is read as a float (possibly inf): say so.
    const double d = found.get<double>();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18)
      msg += " (a number beyond the 64-bit integer range)";
    else if (d != std::floor(d))
      msg += " (not a whole number)";
  }
  return msg;
}

json float_to_json(float f) {
  if (!std::isfinite(f)) return static_cast<double>(f);
  char buf[64];
  for (int prec = 6; prec <= 9; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, static_cast<double>(f));
    float back = 0;
    auto r = std::from_chars(buf, buf + std::char_traits<char>::length(buf), back);
    if (r.ec == std::errc() && back == f) break;
  }
  double d = 0;
  std::from_chars(buf, buf + std::char_traits<char>::length(buf), d);
  return d;
}

const json& subtree_at(const json& tree, const std::string& dotted_prefix) {
  static const json kNull = nullptr;
  if (dotted_prefix.empty()) return tree;
  const json* node = &tree;
  std::size_t start = 0;
  while (start <= dotted_prefix.size()) {
    const auto dot = dotted_prefix.find('.', start);
    const std::string seg = dotted_prefix.substr(
        start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object()) return kNull;
    auto it = node->find(seg);
    if (it == node->end()) return kNull;
    node = &*it;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return *node;
}

void throw_if_errors(const std::vector<std::string>& errors) {
  if (errors.empty()) return;
  if (errors.size() == 1) throw Error("invalid config: " + errors[0]);
  std::string msg = "invalid config (" + std::to_string(errors.size()) + " problems):";
  for (const auto& e : errors) msg += "\n  - " + e;
  throw Error(msg);
}

std::string format_entries(const std::vector<Entry>& entries) {
  std::size_t kw = 3, tw = 4, dw = 7;
  std::vector<std::string> defaults;
  for (const auto& e : entries) {
    std::string d = e.is_section ? "" : describe_value(e.default_value);
    if (e.default_value.is_array() || e.default_value.is_object()) {
      d = e.default_value.dump(-1, ' ', false, json::error_handler_t::replace);
      if (d.size() > 40) d = d.substr(0, 37) + "...";
    }
    defaults.push_back(d);
    kw = std::max(kw, e.key.size());
    tw = std::max(tw, e.type.size());
    dw = std::max(dw, d.size());
  }
  kw = std::min<std::size_t>(kw, 48);
  dw = std::min<std::size_t>(dw, 40);
  auto pad = [](const std::string& s, std::size_t w) {
    return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
  };
  std::string out = pad("key", kw) + "  " + pad("type", tw) + "  " + pad("default", dw) + "  doc\n";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::string line = pad(e.key, kw) + "  " + pad(e.type, tw) + "  " + pad(defaults[i], dw);
    if (!e.doc.empty()) line += "  " + e.doc;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace config_detail
}  // namespace agentr1
