// agentr1/text/chat_template.h — chat messages -> prompt text, rendered natively per
// template family (no general Jinja engine), byte-identical to HF transformers.
//
//   auto tmpl = ChatTemplate::from_template_text(tokenizer.chat_template());
//   json messages = json::parse(R"([{"role": "user", "content": "2+2?"}])");
//   std::string prompt = tmpl.render(messages, /*tools=*/json(), /*add_generation_prompt=*/true);
//   // Qwen3 without thinking:
//   RenderOptions opts;
//   opts.enable_thinking = false;
//   prompt = tmpl.render(messages, json(), true, opts);
//
// Supported families (detected from the template text):
//   qwen2.5  Qwen2.5-Instruct: default system prompt "You are Qwen, created by Alibaba
//            Cloud...", <tools> block, tool-call arguments always rendered with tojson
//            (an OpenAI-style JSON *string* is therefore double-encoded, exactly as
//            transformers does; pass arguments as an object).
//   qwen3    Qwen3: <think> blocks, reasoning_content, multi-step tool logic; tool-call
//            arguments given as a string are emitted as-is, objects with tojson;
//            enable_thinking=false appends "<think>\n\n</think>\n\n" to the generation
//            prompt.
//
// Messages are OpenAI-style JSON (agentr1::json keeps key order, which tojson output
// preserves):
//   {"role": "system"|"user"|"assistant"|"tool", "content": "<string>",
//    "tool_calls": [{"type": "function", "function": {"name": "...", "arguments": {...}}}],
//    "reasoning_content": "<string>"}                       // assistant only, optional
// An assistant message with non-empty tool_calls may omit content or set it to null
// (rendered as ""); every other message needs a string content. Other keys
// (tool_call_id, name, id) are accepted and ignored, as the templates ignore them.
//
// Append-only contexts (multi-turn RL): see ChatTemplate::render_suffix for when
// render(prefix + new) starts with render(prefix) and when it does not.
#pragma once

#include <string>
#include <utility>

#include "agentr1/core/json.h"

namespace agentr1::text {

enum class ChatFamily { kQwen25, kQwen3 };

// "qwen2.5" or "qwen3".
std::string chat_family_name(ChatFamily family);

// Detects the family from markers in the template text. Throws Error naming the
// supported families (with a hint) when the text matches none of them.
ChatFamily detect_chat_family(const std::string& template_text);

// Jinja's `tojson` as HF transformers overrides it: Python json.dumps(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False), i.e. ", " and ": "
// separators, key order kept, non-ASCII raw, floats as Python repr (1.0, 1e-07).
// Throws Error if a string holds invalid UTF-8.
std::string python_tojson(const json& value);

struct RenderOptions {
  // Qwen3 only: false passes enable_thinking=false to the template, which appends an
  // empty "<think>\n\n</think>\n\n" after the generation prompt. Ignored by qwen2.5.
  bool enable_thinking = true;
};

class ChatTemplate {
 public:
  // Detects the family (throws like detect_chat_family). If the text is not one of the
  // exact template texts agentr1 has verified for that family, logs a warning once per
  // call and sets verified() to false: the native renderer may then differ from it.
  static ChatTemplate from_template_text(const std::string& template_text);
  // A template of a known family without text (verified() is true).
  static ChatTemplate for_family(ChatFamily family);

  // Renders messages (a non-empty JSON array, see the top of this file) and optional
  // tools (null or an array of OpenAI function schemas, each rendered with tojson).
  // add_generation_prompt appends "<|im_start|>assistant\n" (plus the empty think block
  // for qwen3 with enable_thinking=false). Throws Error naming the message index and
  // the rule for malformed messages (unknown role, missing or non-string content, bad
  // tool_calls) or tools. Pure; thread-safe.
  std::string render(const json& messages, const json& tools = json(),
                     bool add_generation_prompt = false, const RenderOptions& options = {}) const;

  // The text to append to render(prefix) (without generation prompt) to get
  // render(prefix + appended, tools, add_generation_prompt): what an append-only
  // context adds after a turn. Holds (returns the suffix) for both families when
  // `appended` starts a new turn, e.g. tool results after an assistant message, or a
  // user message; throws Error explaining why when the template rewrites the prefix:
  //   - prefix ends with a tool message and appended starts with one (the template
  //     groups consecutive tool messages into one user turn, so the prefix's closing
  //     "<|im_end|>\n" moves);
  //   - qwen3: an assistant turn after the last user query is rendered with a
  //     "<think>\n...\n</think>\n\n" block only while it is the last message or has
  //     reasoning; appending after an assistant turn without reasoning_content drops
  //     its empty think block, and appending a new user query strips the reasoning of
  //     all earlier assistant turns.
  // Note that render(prefix) ends an assistant turn with "<|im_end|>\n"; a sampled
  // response stops at the <|im_end|> token, so an environment appending to sampled
  // tokens supplies that "\n" itself.
  std::string render_suffix(const json& prefix, const json& appended, const json& tools = json(),
                            bool add_generation_prompt = true,
                            const RenderOptions& options = {}) const;

  ChatFamily family() const { return family_; }
  // True when the template text is one agentr1's parity tests cover byte for byte.
  bool verified() const { return verified_; }
  // The Jinja text this template was made from ("" for for_family): what tool-format
  // selection and error messages look at.
  const std::string& source() const { return source_; }

 private:
  ChatTemplate(ChatFamily family, bool verified, std::string source = {})
      : family_(family), verified_(verified), source_(std::move(source)) {}
  ChatFamily family_;
  bool verified_;
  std::string source_;
};

}  // namespace agentr1::text
