#include "agentr1/text/tool_format.h"

#include <mutex>
#include <string_view>

#include "agentr1/core/error.h"
#include "agentr1/core/registry.h"

namespace agentr1::text {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
const char kExpected[] =
    "expected {\"name\": <tool-name>, \"arguments\": {...}} inside <tool_call></tool_call>";

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string trim_ws(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_ws(s[b])) ++b;
  while (e > b && is_ws(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// A short, single-line quote of model text for error messages.
std::string quote(const std::string& s, size_t max_len = 60) {
  std::string q = s.size() > max_len ? s.substr(0, max_len) + "..." : s;
  for (char& c : q)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return "'" + q + "'";
}

// Replaces invalid UTF-8 (model text quoted in a message, or a quote cut mid-character)
// with U+FFFD so messages can go into JSON and the tokenizer.
std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size() && !(len == 2 && c < 0xC2) && !(c > 0xF4);
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && len == 3) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);  // overlong, surrogate
    }
    if (ok && len == 4) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// nlohmann's parse_error text without its "[json.exception...] parse error at line 1,
// column 17: " prefix.
std::string parse_error_detail(const std::string& what) {
  size_t p = what.find("column ");
  if (p != std::string::npos) p = what.find(": ", p);
  if (p != std::string::npos) return what.substr(p + 2);
  p = what.find("] ");
  return p == std::string::npos ? what : what.substr(p + 2);
}

// Parses the JSON inside one block. Returns true and fills `call`, or false and fills
// `message`.
bool parse_call_body(int index, const std::string& body, ToolCall& call, std::string& message) {
  const std::string head = "tool call " + std::to_string(index) + ": ";
  const std::string text = trim_ws(body);
  if (text.empty()) {
    message = head + "empty <tool_call> block; " + kExpected;
    return false;
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    message = head + "invalid JSON at byte " + std::to_string(e.byte) + ": " +
              parse_error_detail(e.what()) + "; " + kExpected;
    return false;
  } catch (const json::exception& e) {  // e.g. a number out of range
    message = head + "invalid JSON: " + parse_error_detail(e.what()) + "; " + kExpected;
    return false;
  }
  if (!j.is_object()) {
    message = head + "expected a JSON object, got " + std::string(j.type_name()) + "; " + kExpected;
    return false;
  }
  auto name_it = j.find("name");
  if (name_it == j.end()) {
    message = head + "missing \"name\"; " + kExpected;
    return false;
  }
  if (!name_it->is_string()) {
    message = head + "\"name\" must be a string, got " + std::string(name_it->type_name()) +
              "; " + kExpected;
    return false;
  }
  if (name_it->get_ref<const std::string&>().empty()) {
    message = head + "\"name\" is empty; " + kExpected;
    return false;
  }
  const std::string name = name_it->get<std::string>();
  auto args_it = j.find("arguments");
  if (args_it == j.end()) {
    message = head + "missing \"arguments\" for '" + name + "'" +
              (j.contains("parameters") ? " (found \"parameters\"; name it \"arguments\")" : "") +
              "; " + kExpected;
    return false;
  }
  json args = *args_it;
  if (args.is_string()) {
    const std::string s = args.get<std::string>();
    try {
      args = json::parse(s);
    } catch (const json::exception& e) {
      message = head + "\"arguments\" for '" + name + "' is a string that is not valid JSON (" +
                parse_error_detail(e.what()) + "): " + quote(s) + "; " + kExpected;
      return false;
    }
    if (!args.is_object()) {
      message = head + "\"arguments\" for '" + name + "' is a string holding " +
                std::string(args.type_name()) + ", not a JSON object; " + kExpected;
      return false;
    }
  }
  if (!args.is_object()) {
    message = head + "\"arguments\" for '" + name + "' must be a JSON object, got " +
              std::string(args.type_name()) + "; " + kExpected;
    return false;
  }
  call.name = name;
  call.arguments = std::move(args);
  return true;
}

using ToolFormatRegistry = Registry<ToolFormat>;

ToolFormatRegistry& registry() {
  static std::once_flag once;
  std::call_once(once, [] {
    ToolFormatRegistry::instance().add(
        "hermes", [] { return std::unique_ptr<ToolFormat>(new HermesToolFormat()); },
        "tool format");
  });
  return ToolFormatRegistry::instance();
}

}  // namespace

ParsedResponse HermesToolFormat::parse(const std::string& text) const {
  ParsedResponse out;
  std::string content;
  size_t pos = 0;
  int index = 0;  // 1-based number of the <tool_call> block, for messages
  while (pos <= text.size()) {
    const size_t open = text.find(kOpen, pos);
    const size_t close = text.find(kClose, pos);
    if (open == std::string::npos && close == std::string::npos) {
      content += text.substr(pos);
      break;
    }
    if (close != std::string::npos && (open == std::string::npos || close < open)) {
      content += text.substr(pos, close - pos);
      out.errors.push_back({std::string(kClose),
                            "stray </tool_call> without a matching <tool_call> (after " +
                                std::to_string(index) + " tool call(s)); " + kExpected});
      pos = close + kClose.size();
      continue;
    }
    content += text.substr(pos, open - pos);
    ++index;
    const size_t body = open + kOpen.size();
    const size_t end = text.find(kClose, body);
    const size_t next_open = text.find(kOpen, body);
    if (end == std::string::npos || (next_open != std::string::npos && next_open < end)) {
      const size_t stop = next_open == std::string::npos ? text.size() : next_open;
      out.errors.push_back({text.substr(open, stop - open),
                            "tool call " + std::to_string(index) +
                                ": <tool_call> is not closed with </tool_call>; " + kExpected});
      pos = stop;
      continue;
    }
    const std::string raw = text.substr(open, end + kClose.size() - open);
    ToolCall call;
    std::string message;
    if (parse_call_body(index, text.substr(body, end - body), call, message)) {
      call.raw = raw;
      out.calls.push_back(std::move(call));
    } else {
      out.errors.push_back({raw, valid_utf8(message)});
    }
    pos = end + kClose.size();
  }
  out.content = trim_ws(content);
  return out;
}

std::string HermesToolFormat::tool_response_text(const std::vector<ToolResponse>& responses) {
  std::string out;
  for (size_t i = 0; i < responses.size(); ++i) {
    if (i > 0) out += "\n";
    out += "<tool_response>\n" + responses[i].content + "\n</tool_response>";
  }
  return out;
}

std::string HermesToolFormat::format_tool_responses(
    const std::vector<ToolResponse>& responses) const {
  if (responses.empty()) return "";
  return "<|im_start|>user\n" + tool_response_text(responses) + "<|im_end|>\n";
}

std::unique_ptr<ToolFormat> make_tool_format(const std::string& name) {
  return registry().create(name, "tool format");
}

void register_tool_format(const std::string& name,
                          std::function<std::unique_ptr<ToolFormat>()> factory) {
  registry().add(name, std::move(factory), "tool format");
}

std::vector<std::string> tool_format_names() { return registry().names(); }

}  // namespace agentr1::text
