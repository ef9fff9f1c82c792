#include "agentr1/env/context_policy.h"

#include "agentr1/core/error.h"
#include "agentr1/text/tokenizer.h"

namespace agentr1::env {
namespace {

// Stands in for the assistant turn when measuring what the template appends after it.
// Control characters keep it from colliding with anything a prompt plausibly contains.
const char kPlaceholder[] = "\x1f<agentr1:assistant-turn>\x1f";

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

void check_turn(const ContextTurn& turn) {
  AGENTR1_CHECK(turn.messages.is_array(),
                "context policy: messages must be a JSON array, got " << turn.messages.type_name());
  AGENTR1_CHECK(turn.assistant_index < turn.messages.size(),
                "context policy: assistant_index " << turn.assistant_index
                    << " is out of range for " << turn.messages.size() << " messages");
  const json& m = turn.messages[turn.assistant_index];
  AGENTR1_CHECK(m.is_object() && m.value("role", "") == "assistant",
                "context policy: messages[" << turn.assistant_index
                    << "] must be this turn's assistant message, got " << m.dump().substr(0, 80));
}

}  // namespace

size_t trailing_special_count(const text::Tokenizer& tokenizer, const TokenIds& ids) {
  size_t n = 0;
  while (n < ids.size() && tokenizer.is_special(ids[ids.size() - 1 - n])) ++n;
  return n;
}

// ---------------------------------------------------------------------------------
AppendOnlyPolicy::AppendOnlyPolicy(const text::Tokenizer& tokenizer,
                                   const text::ChatTemplate& chat_template,
                                   text::RenderOptions render_options)
    : tokenizer_(tokenizer), chat_template_(chat_template), render_options_(render_options) {}

std::string AppendOnlyPolicy::suffix_text(const ContextTurn& turn) const {
  check_turn(turn);
  // 1. The conversation up to this turn with a placeholder assistant turn, and the same
  //    followed by the feedback.
  json placeholder = json::object();
  placeholder["role"] = "assistant";
  placeholder["content"] = kPlaceholder;
  placeholder["reasoning_content"] = "-";
  json a = json::array();
  for (size_t i = 0; i < turn.assistant_index; ++i) a.push_back(turn.messages[i]);
  a.push_back(placeholder);
  json b = a;
  for (size_t i = turn.assistant_index + 1; i < turn.messages.size(); ++i)
    b.push_back(turn.messages[i]);

  // 2. Render both; the first must be a prefix of the second.
  const std::string ta = chat_template_.render(a, turn.tools, /*add_generation_prompt=*/false,
                                               render_options_);
  const std::string tb = chat_template_.render(b, turn.tools, /*add_generation_prompt=*/true,
                                               render_options_);
  AGENTR1_CHECK(starts_with(tb, ta),
                "append_only context: the chat template ("
                    << text::chat_family_name(chat_template_.family())
                    << ") rewrites earlier turns when the feedback is appended, so the "
                       "rendered conversation is not an extension of the previous one. "
                       "HINT: set env_kwargs.context_policy=rerender for this template");

  // 3. What follows the assistant content.
  const size_t at = ta.rfind(kPlaceholder);
  AGENTR1_CHECK(at != std::string::npos,
                "append_only context: the chat template did not render the assistant "
                "turn's content; cannot locate where the assistant turn ends");
  const size_t after = at + sizeof(kPlaceholder) - 1;
  const std::string closing = ta.substr(after);
  std::string suffix = tb.substr(after);

  // 4. Drop what the response's trailing special tokens already spelled.
  const TokenIds& ids = turn.action.ids;
  const size_t n_special = trailing_special_count(tokenizer_, ids);
  for (size_t k = n_special; k >= 1; --k) {
    const TokenIds tail(ids.end() - static_cast<std::ptrdiff_t>(k), ids.end());
    const std::string text = tokenizer_.decode(tail);
    if (!text.empty() && starts_with(closing, text)) {
      suffix.erase(0, text.size());
      break;
    }
  }
  return suffix;
}

Observation AppendOnlyPolicy::next(const ContextTurn& turn) const {
  const std::string suffix = suffix_text(turn);
  TokenIds ids;
  const TokenIds tail = tokenizer_.encode(suffix, /*allow_special=*/true);
  ids.reserve(turn.prompt_ids.size() + turn.action.ids.size() + tail.size());
  ids.insert(ids.end(), turn.prompt_ids.begin(), turn.prompt_ids.end());
  ids.insert(ids.end(), turn.action.ids.begin(), turn.action.ids.end());
  ids.insert(ids.end(), tail.begin(), tail.end());
  return Observation::from_tokens(std::move(ids));
}

// ---------------------------------------------------------------------------------
RerenderPolicy::RerenderPolicy(const text::ChatTemplate& chat_template,
                               text::RenderOptions render_options)
    : chat_template_(chat_template), render_options_(render_options) {}

Observation RerenderPolicy::next(const ContextTurn& turn) const {
  check_turn(turn);
  return Observation::from_text(chat_template_.render(
      turn.messages, turn.tools, /*add_generation_prompt=*/true, render_options_));
}

// ---------------------------------------------------------------------------------
std::vector<std::string> context_policy_names() { return {"append_only", "rerender"}; }

std::unique_ptr<ContextPolicy> make_context_policy(const std::string& name,
                                                   const text::Tokenizer& tokenizer,
                                                   const text::ChatTemplate& chat_template,
                                                   const text::RenderOptions& render_options) {
  if (name == "append_only")
    return std::make_unique<AppendOnlyPolicy>(tokenizer, chat_template, render_options);
  if (name == "rerender") return std::make_unique<RerenderPolicy>(chat_template, render_options);
  throw Error("unknown context policy '" + name + "'; known: append_only, rerender");
}

}  // namespace agentr1::env
