#include "agentr1/text/tool_format/tool_format.h"

#include <mutex>
#include <set>
#include <string_view>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/registry.h"
#include "agentr1/core/strings.h"
#include "agentr1/text/tool_format/tool_format_util.h"

namespace agentr1::text {
namespace {

using detail::valid_utf8;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
const char kExpected[] =
    "expected {\"name\": <tool-name>, \"arguments\": {...}} inside <tool_call></tool_call>";

// Parses the JSON inside one block. Returns true and fills `call`, or false and fills
// `message`.
bool parse_call_body(int index, const std::string& body, ToolCall& call, std::string& message) {
  const std::string head = "tool call " + std::to_string(index) + ": ";
  const std::string text = trim(body);
  if (text.empty()) {
    message = head + "empty <tool_call> block; " + kExpected;
    return false;
  }
  json j;
  if (!detail::parse_json(text, head, j, message)) {
    message += std::string("; ") + kExpected;
    return false;
  }
  return detail::call_from_object(j, head, kExpected, /*accept_parameters=*/false, call, message);
}

using ToolFormatRegistry = Registry<ToolFormat>;

ToolFormatRegistry& registry() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = ToolFormatRegistry::instance();
    r.add("hermes", [] { return std::unique_ptr<ToolFormat>(new HermesToolFormat()); }, "tool format");
    r.add("llama3_json", [] { return std::unique_ptr<ToolFormat>(new Llama3JsonToolFormat()); },
          "tool format");
    r.add("deepseek_v3", [] { return std::unique_ptr<ToolFormat>(new DeepSeekV3ToolFormat()); },
          "tool format");
    r.add("mistral", [] { return std::unique_ptr<ToolFormat>(new MistralToolFormat()); },
          "tool format");
    r.add("gpt_oss", [] { return std::unique_ptr<ToolFormat>(new GptOssToolFormat()); },
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
  out.content = trim(content);
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

std::string default_tool_format(const std::string& template_text) {
  const auto has = [&](const char* marker) { return template_text.find(marker) != std::string::npos; };
  if (has("[TOOL_CALLS]")) return "mistral";
  if (has("<｜tool▁calls▁begin｜>")) return "deepseek_v3";
  if (has("<|channel|>") || has("<|start|>assistant")) return "gpt_oss";
  if (has("<|python_tag|>") || has("ipython")) return "llama3_json";
  if (has("<tool_call>")) return "hermes";
  // Noted once per template text (environments are made per episode).
  static std::mutex mu;
  static std::set<size_t> noted;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    first = noted.insert(std::hash<std::string>()(template_text)).second;
  }
  if (!template_text.empty() && first) {
    std::string names;
    for (const auto& n : tool_format_names()) names += (names.empty() ? "" : ", ") + n;
    AGENTR1_LOG(INFO) << "the chat template shows none of the tool-call markers agentr1 knows "
                         "([TOOL_CALLS], <｜tool▁calls▁begin｜>, <|channel|>, <|python_tag|> or "
                         "ipython, <tool_call>); using tool format 'hermes'. Set "
                         "env_kwargs.tool_format (one of "
                      << names << ") to choose another";
  }
  return "hermes";
}

std::unique_ptr<ToolFormat> make_tool_format(const std::string& name) {
  return registry().create(name, "tool format");
}

void register_tool_format(const std::string& name,
                          std::function<std::unique_ptr<ToolFormat>()> factory) {
  registry().add(name, std::move(factory), "tool format");
}

std::vector<std::string> tool_format_names() { return registry().names(); }

size_t HermesToolFormat::stream_safe_prefix(const std::string& partial) const {
  return detail::before_markers(partial, {kOpen, kClose});
}

}  // namespace agentr1::text
