// "mistral": [TOOL_CALLS] followed by a JSON array of calls (see tool_format.h). What is
// accepted follows vLLM's mistral parser (the array form of Mistral 7B v0.3 and Nemo,
// and the NAME{...} form of v11 tokenizers).
#include <string_view>

#include "agentr1/core/error.h"
#include "agentr1/core/strings.h"
#include "agentr1/text/tool_format/tool_format.h"
#include "agentr1/text/tool_format/tool_format_util.h"

namespace agentr1::text {
namespace {

using detail::is_ws;
using detail::valid_utf8;

constexpr std::string_view kTag = "[TOOL_CALLS]";
const char kExpected[] =
    "expected [TOOL_CALLS][{\"name\": <tool-name>, \"arguments\": {...}}, ...]";

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// One call object; keeps the model's "id" when it is a string.
void add_call(const json& j, const std::string& raw, int index, ParsedResponse& out) {
  const std::string head = "tool call " + std::to_string(index) + ": ";
  ToolCall call;
  std::string message;
  if (!detail::call_from_object(j, head, kExpected, /*accept_parameters=*/false, call, message)) {
    out.errors.push_back({raw, valid_utf8(message)});
    return;
  }
  if (j.contains("id") && j["id"].is_string()) call.id = j["id"].get<std::string>();
  call.raw = raw;
  out.calls.push_back(std::move(call));
}

}  // namespace

ParsedResponse MistralToolFormat::parse(const std::string& text) const {
  ParsedResponse out;
  size_t tag = text.find(kTag);
  if (tag == std::string::npos) {
    out.content = trim(text);
    return out;
  }
  std::string content = text.substr(0, tag);
  int index = 0;
  while (tag != std::string::npos) {
    size_t pos = tag + kTag.size();
    const size_t next_tag = text.find(kTag, pos);
    const size_t seg_end = next_tag == std::string::npos ? text.size() : next_tag;
    while (pos < seg_end && is_ws(text[pos])) ++pos;
    // Calls in this segment: "[...]", "{...}", or NAME{...} repeated.
    int values = 0;  // JSON values read in this segment
    while (pos < seg_end) {
      const char c = text[pos];
      size_t json_begin = pos;
      std::string name;  // the v11 form
      if (c != '[' && c != '{') {
        size_t p = pos;
        while (p < seg_end && is_name_char(text[p])) ++p;
        if (p == pos || p >= seg_end || text[p] != '{') {
          if (values > 0) {  // text after the calls is content
            content += (content.empty() ? "" : "\n") + text.substr(pos, seg_end - pos);
          } else {
            ++index;
            out.errors.push_back({text.substr(tag, seg_end - tag),
                                  valid_utf8("tool call " + std::to_string(index) +
                                             ": expected a JSON array of calls after [TOOL_CALLS], "
                                             "found " + detail::quote(text.substr(pos, seg_end - pos)) +
                                             "; " + kExpected)});
          }
          break;
        }
        name = text.substr(pos, p - pos);
        json_begin = p;
      }
      const size_t end = detail::json_value_end(text, json_begin);
      if (end == std::string::npos || end > seg_end) {
        ++index;
        out.errors.push_back({text.substr(pos, seg_end - pos),
                              "tool call " + std::to_string(index) +
                                  ": the JSON after [TOOL_CALLS] is not closed (cut off?); " +
                                  kExpected});
        break;
      }
      ++values;
      const std::string raw = text.substr(pos, end - pos);
      const std::string body = text.substr(json_begin, end - json_begin);
      json j;
      std::string message;
      if (!detail::parse_json(body, "tool call " + std::to_string(index + 1) + ": ", j, message)) {
        ++index;
        out.errors.push_back({raw, valid_utf8(message + "; " + kExpected)});
      } else if (!name.empty()) {
        add_call(json{{"name", name}, {"arguments", j}}, raw, ++index, out);
      } else if (j.is_array()) {
        if (j.empty()) {
          ++index;
          out.errors.push_back({raw, "tool call " + std::to_string(index) +
                                         ": [TOOL_CALLS] with an empty list; " + kExpected});
        }
        for (const json& e : j) add_call(e, raw, ++index, out);
      } else {
        add_call(j, raw, ++index, out);
      }
      pos = end;
      while (pos < seg_end && (is_ws(text[pos]) || text[pos] == ',')) ++pos;
    }
    if (values == 0 && pos >= seg_end) {  // nothing after the tag (cut off?)
      ++index;
      out.errors.push_back({text.substr(tag, seg_end - tag),
                            "tool call " + std::to_string(index) +
                                ": expected a JSON array of calls after [TOOL_CALLS], found nothing; " +
                                kExpected});
    }
    tag = next_tag;
  }
  out.content = trim(content);
  return out;
}

std::string MistralToolFormat::format_tool_responses(
    const std::vector<ToolResponse>& responses) const {
  std::string out;
  for (const auto& r : responses) {
    AGENTR1_CHECK(is_valid_call_id(r.call_id),
                  "mistral tool response for '" << r.name << "' needs a call_id of 9 letters and "
                  "digits (the template requires it), got '" << r.call_id
                  << "'. HINT: copy the id of the call it answers (ToolEnv assigns them)");
    out += "[TOOL_RESULTS]{\"content\": " + r.content + ", \"call_id\": \"" + r.call_id +
           "\"}[/TOOL_RESULTS]";
  }
  return out;
}

ToolMessageRules MistralToolFormat::message_rules() const {
  ToolMessageRules rules;
  rules.call_ids = true;
  return rules;
}

bool MistralToolFormat::is_valid_call_id(const std::string& id) {
  if (id.size() != 9) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

std::string MistralToolFormat::make_call_id(std::uint64_t seed) {
  static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  // splitmix64: every seed bit reaches every character.
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  std::string id(9, 'a');
  for (char& c : id) {
    c = kAlphabet[z % 62];
    z /= 62;
  }
  return id;
}

size_t MistralToolFormat::stream_safe_prefix(const std::string& partial) const {
  return detail::before_markers(partial, {kTag});
}

}  // namespace agentr1::text
