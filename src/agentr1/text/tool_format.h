// agentr1/text/tool_format.h — how a model writes tool calls in its response text and
// how tool results are written back (registered by name).
//
//   std::unique_ptr<ToolFormat> fmt = make_tool_format("hermes");
//   ParsedResponse r = fmt->parse(response_text);   // never throws
//   for (const ToolCall& c : r.calls) run(c.name, c.arguments);
//   for (const ToolCallError& e : r.errors) tell_model(e.message);   // written for the model
//   std::string turn = fmt->format_tool_responses({{"calc", "4"}, {"calc", "9"}});
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
#pragma once

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
};

struct ToolCallError {
  std::string raw;      // the offending text (the block, or the stray tag), tags included
  std::string message;  // written for the model to read: "tool call 2: invalid JSON ..."
};

struct ParsedResponse {
  // The response text outside tool-call blocks, with leading and trailing whitespace
  // removed (Qwen's templates put "\n" between content and a block).
  std::string content;
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
};

class HermesToolFormat : public ToolFormat {
 public:
  std::string name() const override { return "hermes"; }
  ParsedResponse parse(const std::string& response_text) const override;
  // "<|im_start|>user" + for each: "\n<tool_response>\n" + content + "\n</tool_response>"
  // + "<|im_end|>\n" (the Qwen templates' rendering of consecutive tool messages).
  std::string format_tool_responses(const std::vector<ToolResponse>& responses) const override;
  // The plain text form without the chat turn around it: the <tool_response> blocks
  // joined by "\n" ("<tool_response>\nA\n</tool_response>\n<tool_response>\nB\n...").
  static std::string tool_response_text(const std::vector<ToolResponse>& responses);
};

// Makes a registered tool format. Throws Error "unknown tool format 'x'; known: hermes"
// for an unknown name.
std::unique_ptr<ToolFormat> make_tool_format(const std::string& name);
// Registers another format. Throws Error if the name is taken or empty.
void register_tool_format(const std::string& name,
                          std::function<std::unique_ptr<ToolFormat>()> factory);
// The registered names, sorted.
std::vector<std::string> tool_format_names();

}  // namespace agentr1::text
