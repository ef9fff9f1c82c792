// "deepseek_v3": DeepSeek-V3's tool-call tokens (see tool_format.h). What is accepted
// follows vLLM's deepseekv3 parser and what the DeepSeek-V3 chat template renders.
#include <string_view>

#include "agentr1/core/strings.h"
#include "agentr1/text/tool_format/tool_format.h"
#include "agentr1/text/tool_format/tool_format_util.h"

namespace agentr1::text {
namespace {

using detail::is_ws;
using detail::valid_utf8;

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";
const char kExpected[] =
    "expected <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n"
    "{...}\\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";

size_t find(const std::string& s, std::string_view what, size_t from = 0) { return s.find(what, from); }

// Reads one call body: "function<｜tool▁sep｜>NAME\n```json\n{...}\n```".
bool parse_body(int index, const std::string& body, ToolCall& call, std::string& message) {
  const std::string head = "tool call " + std::to_string(index) + ": ";
  const std::string tail = std::string("; ") + kExpected;
  const size_t sep = find(body, kSep);
  if (sep == std::string::npos) {
    message = head + "missing <｜tool▁sep｜> between the type and the name" + tail;
    return false;
  }
  const std::string type = trim(body.substr(0, sep));
  if (type != "function") {
    message = head + "the call type must be 'function', got " + detail::quote(type) + tail;
    return false;
  }
  const size_t name_begin = sep + kSep.size();
  const size_t nl = body.find('\n', name_begin);
  const std::string name = trim(body.substr(name_begin, nl == std::string::npos ? std::string::npos : nl - name_begin));
  if (name.empty() || valid_utf8(name) != name) {
    message = head + "the tool name after <｜tool▁sep｜> is " +
              (name.empty() ? std::string("empty") : "not valid UTF-8") + tail;
    return false;
  }
  std::string args = nl == std::string::npos ? "" : trim(body.substr(nl + 1));
  if (args.rfind("```json", 0) != 0 || args.size() < 10 || args.compare(args.size() - 3, 3, "```") != 0) {
    message = head + "the arguments of '" + name + "' must be a ```json code block" + tail;
    return false;
  }
  args = trim(args.substr(7, args.size() - 10));
  json j;
  if (!detail::parse_json(args, head, j, message)) {
    message += tail;
    return false;
  }
  if (!j.is_object()) {
    message = head + "the arguments of '" + name + "' must be a JSON object, got " +
              std::string(j.type_name()) + tail;
    return false;
  }
  call.name = name;
  call.arguments = std::move(j);
  return true;
}

}  // namespace

ParsedResponse DeepSeekV3ToolFormat::parse(const std::string& text) const {
  ParsedResponse out;
  // The markup starts at <｜tool▁calls▁begin｜> (or at a first call without it).
  size_t begin = find(text, kCallsBegin);
  size_t pos;
  if (begin != std::string::npos) {
    pos = begin + kCallsBegin.size();
  } else {
    begin = find(text, kCallBegin);
    pos = begin;
  }
  std::string content = text.substr(0, begin);
  if (begin == std::string::npos) {
    // No calls; stray closing tags are still markup the model got wrong.
    for (std::string_view tag : {kCallEnd, kCallsEnd, kSep}) {
      if (find(text, tag) != std::string::npos) {
        out.errors.push_back({std::string(tag), "stray " + std::string(tag) +
                                                    " without a tool call before it; " + kExpected});
      }
    }
    out.content = trim(text);
    return out;
  }
  int index = 0;
  while (true) {
    while (pos < text.size() && is_ws(text[pos])) ++pos;
    if (pos >= text.size()) break;  // <｜tool▁calls▁end｜> may be missing at the end
    if (text.compare(pos, kCallsEnd.size(), kCallsEnd) == 0) {
      content += (content.empty() ? "" : "\n") + text.substr(pos + kCallsEnd.size());
      break;
    }
    ++index;
    const std::string head = "tool call " + std::to_string(index) + ": ";
    if (text.compare(pos, kCallBegin.size(), kCallBegin) != 0) {
      const size_t next = find(text, kCallBegin, pos);
      const size_t stop = next == std::string::npos ? text.size() : next;
      out.errors.push_back({text.substr(pos, stop - pos),
                            valid_utf8(head + "expected <｜tool▁call▁begin｜> or "
                                              "<｜tool▁calls▁end｜>, found " +
                                       detail::quote(text.substr(pos, stop - pos)) + "; " +
                                       kExpected)});
      pos = stop;
      continue;
    }
    const size_t body = pos + kCallBegin.size();
    const size_t end = find(text, kCallEnd, body);
    const size_t next = find(text, kCallBegin, body);
    if (end == std::string::npos || (next != std::string::npos && next < end)) {
      const size_t stop = next == std::string::npos ? text.size() : next;
      out.errors.push_back({text.substr(pos, stop - pos),
                            head + "<｜tool▁call▁begin｜> is not closed with <｜tool▁call▁end｜>; " +
                                kExpected});
      pos = stop;
      continue;
    }
    const std::string raw = text.substr(pos, end + kCallEnd.size() - pos);
    ToolCall call;
    std::string message;
    if (parse_body(index, text.substr(body, end - body), call, message)) {
      call.raw = raw;
      out.calls.push_back(std::move(call));
    } else {
      out.errors.push_back({raw, valid_utf8(message)});
    }
    pos = end + kCallEnd.size();
  }
  out.content = trim(content);
  return out;
}

std::string DeepSeekV3ToolFormat::format_tool_responses(
    const std::vector<ToolResponse>& responses) const {
  if (responses.empty()) return "";
  std::string out = "<｜tool▁outputs▁begin｜>";
  for (size_t i = 0; i < responses.size(); ++i)
    out += (i > 0 ? "\n" : "") + std::string("<｜tool▁output▁begin｜>") + responses[i].content +
           "<｜tool▁output▁end｜>";
  return out + "<｜tool▁outputs▁end｜>";
}

ToolMessageRules DeepSeekV3ToolFormat::message_rules() const {
  ToolMessageRules rules;
  rules.arguments_as_string = true;
  rules.content_null_with_calls = true;
  return rules;
}

size_t DeepSeekV3ToolFormat::stream_safe_prefix(const std::string& partial) const {
  return detail::before_markers(partial, {kCallsBegin, kCallBegin});
}

}  // namespace agentr1::text
