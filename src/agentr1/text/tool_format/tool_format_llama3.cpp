// "llama3_json": Llama 3.1/3.2 JSON tool calls (see tool_format.h). What is accepted
// follows vLLM's llama3_json parser: an optional <|python_tag|>, then JSON objects with
// "name" and "parameters" (or "arguments"), separated by ";".
#include <algorithm>
#include <string_view>

#include "agentr1/core/strings.h"
#include "agentr1/text/tool_format/tool_format.h"
#include "agentr1/text/tool_format/tool_format_util.h"

namespace agentr1::text {
namespace {

using detail::is_ws;
using detail::valid_utf8;

constexpr std::string_view kPythonTag = "<|python_tag|>";
const char kExpected[] =
    "expected {\"name\": <tool-name>, \"parameters\": {...}} (several calls separated by \"; \")";

size_t skip_ws(const std::string& s, size_t i) {
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

// Where a call list starts without the tag: at the start of the response when it opens
// with '{', else at the first '{' followed by optional whitespace and "name" (a call
// written after some text). npos: no call.
size_t untagged_start(const std::string& text) {
  const size_t first = skip_ws(text, 0);
  if (first < text.size() && text[first] == '{') return first;
  for (size_t p = text.find('{'); p != std::string::npos; p = text.find('{', p + 1)) {
    const size_t q = skip_ws(text, p + 1);
    if (text.compare(q, 6, "\"name\"") == 0) return p;
  }
  return std::string::npos;
}

}  // namespace

ParsedResponse Llama3JsonToolFormat::parse(const std::string& text) const {
  ParsedResponse out;
  size_t start;
  const size_t tag = text.find(kPythonTag);
  std::string content;
  if (tag != std::string::npos) {
    content = text.substr(0, tag);
    start = tag + kPythonTag.size();
  } else {
    start = untagged_start(text);
    if (start == std::string::npos) {
      out.content = trim(text);
      return out;
    }
    content = text.substr(0, start);
  }
  // One or more objects separated by ';' (stray tags between them are skipped).
  int index = 0;
  size_t pos = start;
  while (true) {
    pos = skip_ws(text, pos);
    while (text.compare(pos, kPythonTag.size(), kPythonTag) == 0)
      pos = skip_ws(text, pos + kPythonTag.size());
    if (pos >= text.size()) {
      if (index == 0)
        out.errors.push_back({text.substr(tag == std::string::npos ? start : tag),
                              std::string("tool call 1: no JSON after <|python_tag|>; ") + kExpected});
      break;
    }
    ++index;
    const std::string head = "tool call " + std::to_string(index) + ": ";
    if (text[pos] != '{') {  // after the tag or after a ';'
      out.errors.push_back({text.substr(pos), valid_utf8(head + "expected a JSON object, found " +
                                                         detail::quote(text.substr(pos)) + "; " +
                                                         kExpected)});
      break;
    }
    const size_t end = detail::json_value_end(text, pos);
    if (end == std::string::npos) {
      out.errors.push_back({text.substr(pos),
                            head + "the JSON object is not closed (cut off?); " + kExpected});
      break;
    }
    const std::string raw = text.substr(pos, end - pos);
    json j;
    ToolCall call;
    std::string message;
    if (!detail::parse_json(raw, head, j, message)) {
      out.errors.push_back({raw, valid_utf8(message + "; " + kExpected)});
    } else if (!detail::call_from_object(j, head, kExpected, /*accept_parameters=*/true, call,
                                         message)) {
      out.errors.push_back({raw, valid_utf8(message)});
    } else {
      call.raw = raw;
      out.calls.push_back(std::move(call));
    }
    pos = skip_ws(text, end);
    if (pos < text.size() && text[pos] == ';') {
      ++pos;
      continue;
    }
    if (pos < text.size() && text.compare(pos, kPythonTag.size(), kPythonTag) != 0) {
      content += (content.empty() ? "" : "\n") + text.substr(pos);  // text after the calls
      break;
    }
    if (pos >= text.size()) break;
  }
  out.content = trim(content);
  return out;
}

std::string Llama3JsonToolFormat::format_tool_responses(
    const std::vector<ToolResponse>& responses) const {
  std::string out;
  for (const auto& r : responses)
    out += "<|start_header_id|>ipython<|end_header_id|>\n\n" + detail::json_string(r.content) +
           "<|eot_id|>";
  return out;
}

ToolMessageRules Llama3JsonToolFormat::message_rules() const {
  ToolMessageRules rules;
  rules.max_calls_per_message = 1;  // "This model only supports single tool-calls at once!"
  return rules;
}

// A response that opens with '{' may be all calls: nothing is certain. Otherwise text
// before <|python_tag|> or a '{' that may still become {"name" is.
size_t Llama3JsonToolFormat::stream_safe_prefix(const std::string& partial) const {
  const size_t first = skip_ws(partial, 0);
  if (first == partial.size() || partial[first] == '{') return 0;
  size_t best = detail::before_markers(partial, {kPythonTag});
  static constexpr std::string_view kName = "\"name\"";
  for (size_t p = partial.find('{'); p != std::string::npos && p < best; p = partial.find('{', p + 1)) {
    const size_t q = skip_ws(partial, p + 1);
    const size_t n = std::min(kName.size(), partial.size() - q);
    if (kName.compare(0, n, partial, q, n) == 0) best = p;  // "name" or a prefix of it, or nothing yet
  }
  return best;
}

}  // namespace agentr1::text
