// agentr1/text/tool_format/tool_format.h — how a model writes tool calls in its response text and
// how tool results are written back (registered by name).
//
//   std::unique_ptr<ToolFormat> fmt = make_tool_format("hermes");
//   ParsedResponse r = fmt->parse(response_text);   // never throws
//   for (const ToolCall& c : r.calls) run(c.name, c.arguments);
//   for (const ToolCallError& e : r.errors) tell_model(e.message);   // written for the model
//   std::string turn = fmt->format_tool_responses({{"calc", "4"}, {"calc", "9"}});
//   std::string name = default_tool_format(chat_template.source());  // "llama3_json", ...
//
// Formats (each parse accepts what vLLM's tool parser of that name accepts, and
// format_tool_responses is what the family's chat template renders for consecutive
// role=tool messages after an assistant tool-call turn; both checked against the real
// templates with python3-jinja2 in tool_format_test):
//
// "hermes" (Qwen2.5/Qwen3, NousResearch Hermes): each call is a block
//   <tool_call>
//   {"name": "<tool-name>", "arguments": {...}}
//   </tool_call>
// with any whitespace around the JSON; several blocks per response; "arguments" may
// also be a JSON string holding an object. Results go back as one user turn:
//   <|im_start|>user\n<tool_response>\n...\n</tool_response>\n<tool_response>\n...
//   \n</tool_response><|im_end|>\n
// exactly what the Qwen2.5 and Qwen3 chat templates render for consecutive role=tool
// messages.
//
// "llama3_json" (Llama 3.1/3.2 custom tools): the response is one or more JSON objects
//   {"name": "<tool-name>", "parameters": {...}}   ("arguments" is accepted too)
// separated by ";" (vLLM writes "; "), optionally after <|python_tag|>. Without the tag
// the JSON must start the response, or a {"name" object may follow some text (that text
// is content). Text after the last object is content. The Llama 3.2 template renders
// one call per assistant message (message_rules().max_calls_per_message = 1) and each
// result as "<|start_header_id|>ipython<|end_header_id|>\n\n" + tojson(content) +
// "<|eot_id|>" (the content as a JSON string: the template tojson's any iterable).
//
// "deepseek_v3": <｜tool▁calls▁begin｜> then per call
//   <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
// (calls separated by whitespace) then <｜tool▁calls▁end｜> (optional at the end of the
// response: the DeepSeek-V3 template omits it after a single call). Results:
//   <｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>A<｜tool▁output▁end｜>\n
//   <｜tool▁output▁begin｜>B<｜tool▁output▁end｜><｜tool▁outputs▁end｜>
// Its template needs the assistant message's content null and arguments as a JSON
// string to render the calls (message_rules()).
//
// "mistral" (Mistral 7B v0.3, Nemo): [TOOL_CALLS] followed by a JSON array
//   [{"name": "<tool-name>", "arguments": {...}, "id": "<9 alphanumerics>"}, ...]
// (a single object, or the v11 form NAME{...}, is accepted too). The template requires
// 9-character alphanumeric ids on every call and tool message (message_rules().call_ids;
// ToolCall::id holds the model's id, ToolResponse::call_id the answer's). Results:
//   [TOOL_RESULTS]{"content": CONTENT, "call_id": "ID"}[/TOOL_RESULTS]   (CONTENT raw)
//
// "gpt_oss" (OpenAI harmony, https://github.com/openai/harmony docs/format.md): the
// response, sampled after the prompt's "<|start|>assistant", is a sequence of messages
//   <|channel|>analysis<|message|>...<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
// The recipient may also sit before the channel ("<|start|>assistant to=functions.NAME
// <|channel|>commentary json<|message|>"); the stop token may be missing at the end.
// analysis text is ParsedResponse::reasoning, final (and commentary without recipient)
// text is content. Results: <|start|>functions.NAME to=assistant<|channel|>commentary
// <|message|>CONTENT<|end|> per result.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::text {

struct ToolCall {
  std::string name;  // the tool's name as the model wrote it
  json arguments;    // always a JSON object (a string-encoded object is decoded)
  std::string raw;   // the whole block as it appears in the response, tags included
  std::string id;    // the call id the model wrote ("mistral"), "" when it wrote none
};

struct ToolCallError {
  std::string raw;      // the offending text (the block, or the stray tag), tags included
  std::string message;  // written for the model to read: "tool call 2: invalid JSON ..."
};

struct ParsedResponse {
  // The response text outside tool-call blocks, with leading and trailing whitespace
  // removed (Qwen's templates put "\n" between content and a block).
  std::string content;
  // Reasoning the format keeps apart from content ("gpt_oss": the analysis channel);
  // "" for formats without one (hermes leaves <think> blocks in content).
  std::string reasoning;
  std::vector<ToolCall> calls;        // well-formed calls, in order of appearance
  std::vector<ToolCallError> errors;  // malformed blocks, in order of appearance
  // True when the response contains tool-call markup at all (calls or errors): an
  // environment ends the episode only when this is false.
  bool has_tool_call_markup() const { return !calls.empty() || !errors.empty(); }
};

// One tool result to write back to the model.
struct ToolResponse {
  std::string name;     // the tool that produced it (formats may ignore it)
  std::string content;  // its output text
  std::string call_id;  // the id of the call it answers ("mistral" needs it), else ""
};

// What a family's chat template expects of the assistant and tool messages an
// environment writes into the conversation (OpenAI-style messages).
struct ToolMessageRules {
  // > 0: the template renders at most this many tool_calls per assistant message
  // (Llama 3.1/3.2 raise on more); calls beyond it must not go into the message.
  int max_calls_per_message = 0;
  // tool_calls[].function.arguments must be a JSON string (DeepSeek-V3 concatenates it).
  bool arguments_as_string = false;
  // An assistant message with tool_calls must have content null (DeepSeek-V3 renders
  // one with string content as plain text).
  bool content_null_with_calls = false;
  // Every tool call needs an "id" and every tool message the matching "tool_call_id",
  // 9 ASCII alphanumerics (Mistral). An assistant turn whose calls were all malformed
  // still carries "tool_calls": [] (the template's user/assistant alternation check
  // counts assistant messages without that key).
  bool call_ids = false;
};

class ToolFormat {
 public:
  virtual ~ToolFormat() = default;
  // The registry name, e.g. "hermes".
  virtual std::string name() const = 0;
  // Splits a response (decoded without its stop token) into content, calls and errors.
  // Never throws: malformed calls become ToolCallErrors for the model to read.
  virtual ParsedResponse parse(const std::string& response_text) const = 0;
  // The text of the turn that carries these results back to the model (what the chat
  // template renders for them; the environment appends it after the assistant turn).
  // An empty list gives "".
  virtual std::string format_tool_responses(const std::vector<ToolResponse>& responses) const = 0;
  // What the family's template expects of messages carrying calls and results.
  virtual ToolMessageRules message_rules() const { return {}; }
  // For streaming: how many leading bytes of `partial` (a response still being
  // generated) lie before any tool-call markup however the response goes on, i.e. are
  // the start of parse(full).content whenever the full response has calls (up to the
  // leading and trailing whitespace parse trims). A server may send them as content
  // before the response ends. The default, 0, sends nothing early (gpt_oss: the
  // channel structure decides what is content).
  virtual size_t stream_safe_prefix(const std::string& partial) const {
    (void)partial;
    return 0;
  }
};

class HermesToolFormat : public ToolFormat {
 public:
  std::string name() const override { return "hermes"; }
  ParsedResponse parse(const std::string& response_text) const override;
  size_t stream_safe_prefix(const std::string& partial) const override;
  // "<|im_start|>user" + for each: "\n<tool_response>\n" + content + "\n</tool_response>"
  // + "<|im_end|>\n" (the Qwen templates' rendering of consecutive tool messages).
  std::string format_tool_responses(const std::vector<ToolResponse>& responses) const override;
  // The plain text form without the chat turn around it: the <tool_response> blocks
  // joined by "\n" ("<tool_response>\nA\n</tool_response>\n<tool_response>\nB\n...").
  static std::string tool_response_text(const std::vector<ToolResponse>& responses);
};

class Llama3JsonToolFormat : public ToolFormat {
 public:
  std::string name() const override { return "llama3_json"; }
  ParsedResponse parse(const std::string& response_text) const override;
  size_t stream_safe_prefix(const std::string& partial) const override;
  // Per result: "<|start_header_id|>ipython<|end_header_id|>\n\n" + content as a JSON
  // string + "<|eot_id|>".
  std::string format_tool_responses(const std::vector<ToolResponse>& responses) const override;
  ToolMessageRules message_rules() const override;
};

class DeepSeekV3ToolFormat : public ToolFormat {
 public:
  std::string name() const override { return "deepseek_v3"; }
  ParsedResponse parse(const std::string& response_text) const override;
  size_t stream_safe_prefix(const std::string& partial) const override;
  std::string format_tool_responses(const std::vector<ToolResponse>& responses) const override;
  ToolMessageRules message_rules() const override;
};

class MistralToolFormat : public ToolFormat {
 public:
  std::string name() const override { return "mistral"; }
  ParsedResponse parse(const std::string& response_text) const override;
  size_t stream_safe_prefix(const std::string& partial) const override;
  // Throws Error if a response has no valid call_id (the template would raise too).
  std::string format_tool_responses(const std::vector<ToolResponse>& responses) const override;
  ToolMessageRules message_rules() const override;
  // True for exactly 9 ASCII letters and digits (mistral_common's rule for call ids).
  static bool is_valid_call_id(const std::string& id);
  // A valid call id drawn deterministically from `seed` (equal seeds, equal ids).
  static std::string make_call_id(std::uint64_t seed);
};

class GptOssToolFormat : public ToolFormat {
 public:
  std::string name() const override { return "gpt_oss"; }
  ParsedResponse parse(const std::string& response_text) const override;
  // Per result: "<|start|>functions." + name + " to=assistant<|channel|>commentary
  // <|message|>" + content + "<|end|>" (the harmony spec's tool message).
  std::string format_tool_responses(const std::vector<ToolResponse>& responses) const override;
};

// The tool format a chat template's family writes, from markers in its text:
// "[TOOL_CALLS]" -> mistral, "<｜tool▁calls▁begin｜>" -> deepseek_v3, "<|channel|>" or
// "<|start|>assistant" (harmony) -> gpt_oss, "<|python_tag|>" or "ipython" ->
// llama3_json, "<tool_call>" -> hermes. A template with none of them (or "") gives
// hermes; a non-empty one logs an INFO note saying so and how to choose another (once
// per template text and process).
std::string default_tool_format(const std::string& template_text);

// Makes a registered tool format. Throws Error "unknown tool format 'x'; known:
// deepseek_v3, gpt_oss, hermes, llama3_json, mistral" for an unknown name.
std::unique_ptr<ToolFormat> make_tool_format(const std::string& name);
// Registers another format. Throws Error if the name is taken or empty.
void register_tool_format(const std::string& name,
                          std::function<std::unique_ptr<ToolFormat>()> factory);
// The registered names, sorted.
std::vector<std::string> tool_format_names();

}  // namespace agentr1::text
