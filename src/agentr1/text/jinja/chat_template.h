// agentr1/text/jinja/chat_template.h — chat messages -> prompt text through the model's own
// Jinja chat template (text/jinja/jinja.h), byte-identical to HF transformers'
// apply_chat_template(tokenize=False) for any template.
//
//   auto tmpl = ChatTemplate::from_tokenizer(tokenizer);   // template + special tokens
//   json messages = json::parse(R"([{"role": "user", "content": "2+2?"}])");
//   std::string prompt = tmpl.render(messages, /*tools=*/json(), /*add_generation_prompt=*/true);
//   // Qwen3 without thinking, or any other template kwarg:
//   RenderOptions opts;
//   opts.enable_thinking = false;
//   opts.kwargs = {{"tools_in_user_message", false}};
//   prompt = tmpl.render(messages, json(), true, opts);
//
// The template sees what transformers passes: messages, tools (None when not given),
// documents (None), add_generation_prompt, the tokenizer's special tokens (bos_token,
// eos_token, unk_token, sep_token, pad_token, cls_token, mask_token — only those set,
// AddedToken objects as their content — and additional_special_tokens), then the extra
// kwargs. The template is parsed once; render is pure and thread-safe.
//
// Messages are OpenAI-style JSON (agentr1::json keeps key order, which tojson output
// preserves); what a template accepts beyond that is up to the template:
//   {"role": "...", "content": "<string>" | null | [parts],
//    "tool_calls": [{"type": "function", "function": {"name": "...", "arguments": {...} | "<json>"}}],
//    "reasoning_content": "<string>", "tool_call_id": "...", ...}
//
// Append-only contexts (multi-turn RL): see ChatTemplate::render_suffix for when
// render(prefix + new) starts with render(prefix) and when it does not.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "agentr1/core/json.h"

namespace agentr1::text {

class Tokenizer;
namespace jinja {
class Template;
}

// The two templates agentr1 ships (for tests and tools that need a template without a
// tokenizer directory).
enum class ChatFamily { kQwen25, kQwen3 };

// "qwen2.5" or "qwen3".
std::string chat_family_name(ChatFamily family);

// Jinja's `tojson` as HF transformers overrides it: Python json.dumps(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False), i.e. ", " and ": "
// separators, key order kept, non-ASCII raw, floats as Python repr (1.0, 1e-07).
// Throws Error if a string holds invalid UTF-8.
std::string python_tojson(const json& value);

struct RenderOptions {
  // false passes enable_thinking=false to the template (Qwen3 then appends an empty
  // "<think>\n\n</think>\n\n" to the generation prompt); true passes nothing, as
  // transformers does when the caller does not set it.
  bool enable_thinking = true;
  // Extra template variables (a JSON object), as apply_chat_template(**kwargs) passes
  // them: e.g. {"tools_in_user_message": false}, {"date_string": "26 Jul 2024"}. They
  // override special tokens and enable_thinking; messages, tools, documents and
  // add_generation_prompt cannot be set here.
  json kwargs = json::object();
};

class ChatTemplate {
 public:
  // Parses a template (throws Error naming line, column and construct on a syntax
  // error). special_tokens: {"bos_token": "<s>" | {"content": "<s>", ...}, ...}, the
  // fields of tokenizer_config.json; null or unset ones are not passed.
  static ChatTemplate from_template_text(const std::string& template_text,
                                         const json& special_tokens = json::object());
  // The tokenizer's chat template with its special tokens (tokenizer_config.json).
  // Throws Error when the tokenizer has no chat template.
  static ChatTemplate from_tokenizer(const Tokenizer& tokenizer);
  // The exact Qwen2.5-Instruct or Qwen3 template with Qwen's special tokens.
  static ChatTemplate for_family(ChatFamily family);

  // Renders messages (a non-empty JSON array of objects with a string "role") and
  // optional tools (null or an array of OpenAI function schemas). Throws Error naming
  // the message index for malformed messages, the template's own message when it calls
  // raise_exception (e.g. "Conversation roles must alternate ..."), and the template
  // position for other render errors. Pure; thread-safe.
  std::string render(const json& messages, const json& tools = json(),
                     bool add_generation_prompt = false, const RenderOptions& options = {}) const;

  // The text to append to render(prefix) (without generation prompt) to get
  // render(prefix + appended, tools, add_generation_prompt): what an append-only
  // context adds after a turn. Throws Error naming the template and the first
  // differing byte when the template rewrites the prefix, e.g.
  //   - ChatML templates (Qwen) group consecutive tool messages into one user turn, so
  //     appending a tool message after a tool message moves the prefix's "<|im_end|>\n";
  //   - qwen3 renders an assistant turn after the last user query with a
  //     "<think>\n...\n</think>\n\n" block only while it is the last message or has
  //     reasoning, and strips the reasoning of earlier turns when a new query follows;
  //   - templates that close the last assistant turn differently from earlier ones.
  // Note that render(prefix) ends an assistant turn with the template's end-of-turn
  // text (e.g. "<|im_end|>\n"); a sampled response stops at the end-of-turn token, so an
  // environment appending to sampled tokens supplies the rest itself.
  std::string render_suffix(const json& prefix, const json& appended, const json& tools = json(),
                            bool add_generation_prompt = true,
                            const RenderOptions& options = {}) const;

  // A short name for messages: "qwen3", "qwen2.5", "chatml", "llama3", "llama2",
  // "mistral", "gemma", "deepseek_v3", "gpt_oss", or "custom" (from markers in the text).
  const std::string& name() const { return name_; }
  // The Jinja text this template was made from: what tool-format selection looks at.
  const std::string& source() const { return source_; }
  // The special-token variables passed to the template ({"eos_token": "...", ...}).
  const json& special_tokens() const { return special_tokens_; }

 private:
  ChatTemplate() = default;
  std::shared_ptr<const jinja::Template> template_;
  std::string name_;
  std::string source_;
  json special_tokens_ = json::object();
};

// The name ChatTemplate::name() gives a template text.
std::string chat_template_name(const std::string& template_text);

}  // namespace agentr1::text
