// "gpt_oss": OpenAI's harmony format (see tool_format.h). The facts come from the
// harmony spec (https://github.com/openai/harmony, docs/format.md: message structure,
// channels, recipients in the role or the channel part of the header, <|constrain|>,
// the tool-result message) and its header parser (src/encoding.rs); vLLM's openai tool
// parser turns messages whose recipient starts with "functions." into calls and takes
// the final channel as content.
#include <string_view>
#include <vector>

#include "agentr1/core/strings.h"
#include "agentr1/text/tool_format/tool_format.h"
#include "agentr1/text/tool_format/tool_format_util.h"

namespace agentr1::text {
namespace {

using detail::is_ws;
using detail::valid_utf8;

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kReturn = "<|return|>";
const char kExpected[] =
    "expected <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json"
    "<|message|>{...}<|call|>";

struct Header {
  std::string channel;
  std::string recipient;
  std::string content_type;
};

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_ws(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !is_ws(s[j])) ++j;
    if (j > i) parts.push_back(s.substr(i, j - i));
    i = j;
  }
  return parts;
}

// The header between <|start|> (or the start of the response) and <|message|>.
Header parse_header(std::string h, bool role_given) {
  Header out;
  const size_t c = h.find(kChannel);
  if (c != std::string::npos) {
    const size_t v = c + kChannel.size();
    size_t e = v;
    while (e < h.size() && !is_ws(h[e]) && h[e] != '<') ++e;
    out.channel = h.substr(v, e - v);
    h = h.substr(0, c) + " " + h.substr(e);
  }
  for (size_t p = h.find(kConstrain); p != std::string::npos; p = h.find(kConstrain, p + kConstrain.size() + 1))
    h.insert(p++, " ");
  std::vector<std::string> parts = split_ws(h);
  if (!parts.empty() && (role_given || parts[0] == "assistant")) parts.erase(parts.begin());
  if (parts.empty()) return out;
  std::string last = parts.back();
  parts.pop_back();
  if (last.rfind("to=", 0) == 0) {
    out.recipient = last.substr(3);
  } else if (parts.empty()) {
    out.recipient = last;
  } else {
    out.content_type = last;
    std::string r = parts.back();
    out.recipient = r.rfind("to=", 0) == 0 ? r.substr(3) : r;
  }
  return out;
}

bool has(const std::string& s, std::string_view what) { return s.find(what) != std::string::npos; }

}  // namespace

ParsedResponse GptOssToolFormat::parse(const std::string& text) const {
  ParsedResponse out;
  if (!has(text, kChannel) && !has(text, kMessage) && !has(text, kStart) && !has(text, kCall)) {
    out.content = trim(text);  // plain text, no harmony structure
    return out;
  }
  std::string content, reasoning;
  const auto append = [](std::string& to, const std::string& part) {
    if (!part.empty()) to += (to.empty() ? "" : "\n") + part;
  };
  size_t pos = 0;
  bool first = true;
  int index = 0;
  while (pos < text.size()) {
    const size_t msg_start = pos;
    bool role_given = false;
    if (text.compare(pos, kStart.size(), kStart) == 0) {
      pos += kStart.size();
      role_given = true;
    } else if (!first) {  // text between messages
      const size_t next = text.find(kStart, pos);
      const size_t stop = next == std::string::npos ? text.size() : next;
      append(content, trim(text.substr(pos, stop - pos)));
      pos = stop;
      continue;
    }
    first = false;
    const size_t header_end = text.find(kMessage, pos);
    const size_t next_start = text.find(kStart, pos);
    if (header_end == std::string::npos || (next_start != std::string::npos && next_start < header_end)) {
      const size_t stop = next_start == std::string::npos ? text.size() : next_start;
      const std::string header = text.substr(pos, stop - pos);
      if (has(header, "to=")) {
        ++index;
        out.errors.push_back({text.substr(msg_start, stop - msg_start),
                              valid_utf8("tool call " + std::to_string(index) + ": the header " +
                                         detail::quote(header) + " is not followed by <|message|> "
                                         "and the arguments (cut off?); " + kExpected)});
      }
      pos = stop;
      continue;
    }
    const Header h = parse_header(text.substr(pos, header_end - pos), role_given);
    const size_t body_begin = header_end + kMessage.size();
    size_t stop = text.size();
    std::string_view term;
    for (std::string_view t : {kEnd, kCall, kReturn, kStart}) {
      const size_t p = text.find(t, body_begin);
      if (p < stop) {
        stop = p;
        term = t;
      }
    }
    const std::string body = text.substr(body_begin, stop - body_begin);
    pos = (term.empty() || term == kStart) ? stop : stop + term.size();
    const std::string raw = text.substr(msg_start, pos - msg_start);
    if (h.recipient.empty()) {
      if (term == kCall) {
        ++index;
        out.errors.push_back({raw, "tool call " + std::to_string(index) +
                                       ": a message ends with <|call|> but names no recipient "
                                       "(to=functions.NAME); " + kExpected});
      }
      append(h.channel == "analysis" ? reasoning : content, body);
      continue;
    }
    ++index;
    const std::string head = "tool call " + std::to_string(index) + ": ";
    const std::string tail = std::string("; ") + kExpected;
    if (h.recipient.rfind("functions.", 0) != 0 || h.recipient.size() == 10) {
      out.errors.push_back({raw, valid_utf8(head + "the recipient " + detail::quote(h.recipient) +
                                            " is not a function (write to=functions.NAME)" + tail)});
      continue;
    }
    const std::string name = h.recipient.substr(10);
    if (valid_utf8(name) != name) {
      out.errors.push_back({raw, valid_utf8(head + "the function name " + detail::quote(name) +
                                            " is not valid UTF-8" + tail)});
      continue;
    }
    if (!h.content_type.empty() && !has(h.content_type, "json")) {
      out.errors.push_back({raw, valid_utf8(head + "the call to '" + name + "' has content type " +
                                            detail::quote(h.content_type) + "; arguments are JSON" + tail)});
      continue;
    }
    json args;
    std::string message;
    const std::string args_text = trim(body);
    if (args_text.empty()) {
      out.errors.push_back({raw, valid_utf8(head + "the call to '" + name + "' has no arguments (write {} for none)" + tail)});
    } else if (!detail::parse_json(args_text, head, args, message)) {
      out.errors.push_back({raw, valid_utf8(message + tail)});
    } else if (!args.is_object()) {
      out.errors.push_back({raw, valid_utf8(head + "the arguments of '" + name + "' must be a JSON object, got " +
                                     std::string(args.type_name()) + tail)});
    } else {
      ToolCall call;
      call.name = name;
      call.arguments = std::move(args);
      call.raw = raw;
      out.calls.push_back(std::move(call));
    }
  }
  out.content = trim(content);
  out.reasoning = trim(reasoning);
  return out;
}

std::string GptOssToolFormat::format_tool_responses(
    const std::vector<ToolResponse>& responses) const {
  std::string out;
  for (const auto& r : responses)
    out += "<|start|>functions." + r.name + " to=assistant<|channel|>commentary<|message|>" +
           r.content + "<|end|>";
  return out;
}

}  // namespace agentr1::text
