#include "agentr1/env/context_policy.h"

#include "agentr1/env/agent_env.h"

#include <algorithm>
#include <mutex>

#include "agentr1/core/error.h"
#include "agentr1/core/registry.h"
#include "agentr1/core/rng.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::env {
namespace {

// Stands in for the assistant turn when measuring what the template appends after it.
// Control characters keep it from colliding with anything a prompt plausibly contains.
// Templates that trim the content (Llama 3.x: `content | trim`; Python's str.strip
// takes \x1f for whitespace) drop them, so the turn is located by its core.
const char kPlaceholder[] = "\x1f<agentr1:assistant-turn>\x1f";
const char kPlaceholderCore[] = "<agentr1:assistant-turn>";

// One past the placeholder as rendered in `text` (its core and a kept trailing \x1f),
// or npos when the template did not render it.
size_t after_placeholder(const std::string& text) {
  const size_t at = text.rfind(kPlaceholderCore);
  if (at == std::string::npos) return at;
  size_t end = at + sizeof(kPlaceholderCore) - 1;
  if (end < text.size() && text[end] == '\x1f') ++end;
  return end;
}

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

std::unique_ptr<ContextPolicy> make_env_context_policy(const json& spec, const EnvContext& ctx,
                                                       const text::RenderOptions& render_options,
                                                       const std::string& env_name) {
  return with_context(env_name + " env option 'context'", [&] {
    ContextPolicyContext pc;
    pc.tokenizer = ctx.tokenizer;
    pc.chat_template = ctx.chat_template;
    pc.render_options = render_options;
    pc.generator = ctx.generator;
    pc.sampling = ctx.sampling;
    pc.seed = ctx.seed;
    return make_context_policy(spec, pc);
  });
}

TokenIds next_prompt_ids(const Observation& next, const ContextPolicy& policy, const text::Tokenizer& tokenizer) {
  if (next.kind() == Observation::Kind::kTokens) return next.tokens();
  if (next.kind() == Observation::Kind::kText) return tokenizer.encode(next.text(), /*allow_special=*/true);
  throw Error("context policy '" + policy.name() + "' returned messages; environments expect tokens or text");
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

  // 2. Render both. Everything before this turn must render the same in both (the
  //    template does not rewrite earlier turns); the placeholder turn itself may differ
  //    (Qwen3 renders a think block only in the last assistant turn after the last user
  //    message): the sampled ids stand in for it either way.
  json before = json::array();
  for (size_t i = 0; i < turn.assistant_index; ++i) before.push_back(turn.messages[i]);
  const std::string t0 = before.empty() ? std::string()
                                        : chat_template_.render(before, turn.tools,
                                                                /*add_generation_prompt=*/false,
                                                                render_options_);
  const std::string ta = chat_template_.render(a, turn.tools, /*add_generation_prompt=*/false,
                                               render_options_);
  const std::string tb = chat_template_.render(b, turn.tools, /*add_generation_prompt=*/true,
                                               render_options_);
  AGENTR1_CHECK(starts_with(ta, t0) && starts_with(tb, t0),
                "append_only context: the chat template ("
                    << chat_template_.name()
                    << ") rewrites earlier turns when the feedback is appended, so the "
                       "rendered conversation is not an extension of the previous one. "
                       "HINT: set env_kwargs.context=rerender (or sliding_window) for this template");

  // 3. What follows the assistant content.
  const size_t at = after_placeholder(ta);
  const size_t bt = after_placeholder(tb);
  AGENTR1_CHECK(at != std::string::npos && bt != std::string::npos,
                "append_only context: the chat template did not render the assistant "
                "turn's content; cannot locate where the assistant turn ends");
  const std::string closing = ta.substr(at);
  std::string suffix = tb.substr(bt);
  AGENTR1_CHECK(starts_with(suffix, closing),
                "append_only context: the chat template ("
                    << chat_template_.name()
                    << ") closes the assistant turn differently when feedback follows; "
                       "HINT: set env_kwargs.context=rerender (or sliding_window) for this template");

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
WindowPolicy::WindowPolicy(const ContextPolicyContext& ctx) : ctx_(ctx) {
  AGENTR1_CHECK(ctx_.tokenizer != nullptr && ctx_.chat_template != nullptr,
                "context policy: needs a tokenizer and a chat template (got null)");
}

std::vector<size_t> WindowPolicy::turn_starts(const ContextTurn& turn) {
  check_turn(turn);
  AGENTR1_CHECK(turn.head_size <= turn.assistant_index,
                "context policy: head_size " << turn.head_size << " reaches past this turn's assistant message "
                                             << turn.assistant_index);
  std::vector<size_t> starts;
  for (size_t i = turn.head_size; i < turn.messages.size(); ++i)
    if (turn.messages[i].is_object() && turn.messages[i].value("role", "") == "assistant") starts.push_back(i);
  return starts;
}

std::string WindowPolicy::marker(size_t n) {
  return "[" + std::to_string(n) + " earlier turn" + (n == 1 ? "" : "s") + " omitted]";
}

json WindowPolicy::window(const ContextTurn& turn, size_t first_kept, size_t omitted) {
  json out = json::array();
  for (size_t i = 0; i < turn.head_size; ++i) out.push_back(turn.messages[i]);
  if (omitted > 0) out.push_back({{"role", "user"}, {"content", marker(omitted)}});
  for (size_t i = first_kept; i < turn.messages.size(); ++i) out.push_back(turn.messages[i]);
  return out;
}

std::string WindowPolicy::render(const ContextTurn& turn, const json& messages) const {
  return ctx_.chat_template->render(messages, turn.tools, /*add_generation_prompt=*/true, ctx_.render_options);
}

void SlidingWindowOptions::validate() const {
  AGENTR1_CHECK(keep_last >= 1, "'keep_last' must be >= 1 (the latest turn is always kept), got " << keep_last);
}

SlidingWindowPolicy::SlidingWindowPolicy(const ContextPolicyContext& ctx, SlidingWindowOptions options)
    : WindowPolicy(ctx), options_(options) {
  options_.validate();
}

Observation SlidingWindowPolicy::next(const ContextTurn& turn) const {
  const std::vector<size_t> starts = turn_starts(turn);
  const size_t omitted = starts.size() - std::min(starts.size(), static_cast<size_t>(options_.keep_last));
  if (turn.report != nullptr) turn.report->omitted_turns = omitted;
  const size_t first = starts.empty() ? turn.messages.size() : starts[omitted];
  return Observation::from_text(render(turn, window(turn, first, omitted)));
}

void TokenBudgetOptions::validate() const {
  AGENTR1_CHECK(max_prompt_tokens >= 1, "'max_prompt_tokens' must be >= 1, got " << max_prompt_tokens);
}

TokenBudgetPolicy::TokenBudgetPolicy(const ContextPolicyContext& ctx, TokenBudgetOptions options)
    : WindowPolicy(ctx), options_(options) {
  options_.validate();
}

Observation TokenBudgetPolicy::next(const ContextTurn& turn) const {
  const std::vector<size_t> starts = turn_starts(turn);
  if (starts.empty()) return Observation::from_text(render(turn, window(turn, turn.messages.size(), 0)));
  // Keep as many of the most recent turns as fit; at least the latest one.
  for (size_t omitted = 0;; ++omitted) {
    std::string text = render(turn, window(turn, starts[omitted], omitted));
    const size_t n = ctx_.tokenizer->encode(text, /*allow_special=*/true).size();
    if (n <= static_cast<size_t>(options_.max_prompt_tokens) || omitted + 1 == starts.size()) {
      if (turn.report != nullptr) turn.report->omitted_turns = omitted;
      return Observation::from_text(std::move(text));
    }
  }
}

const char* const kSummaryInstruction =
    "Summarize the earlier turns of this task below for yourself: the tool calls made, their "
    "results, and what is known so far. Be brief; write only the summary.";

void SummarizeOptions::validate() const {
  AGENTR1_CHECK(keep_last >= 1, "'keep_last' must be >= 1 (the latest turn is always kept), got " << keep_last);
  AGENTR1_CHECK(max_summary_tokens >= 1, "'max_summary_tokens' must be >= 1, got " << max_summary_tokens);
}

SummarizePolicy::SummarizePolicy(const ContextPolicyContext& ctx, SummarizeOptions options)
    : WindowPolicy(ctx), options_(options) {
  options_.validate();
  AGENTR1_CHECK(ctx_.generator != nullptr,
                "the summarize context policy needs a generator to write summaries (EnvContext.generator is "
                "null; HINT: run it inside an agent loop, which passes the rollout's generator)");
}

Observation SummarizePolicy::next(const ContextTurn& turn) const {
  const std::vector<size_t> starts = turn_starts(turn);
  const size_t omitted = starts.size() - std::min(starts.size(), static_cast<size_t>(options_.keep_last));
  if (turn.report != nullptr) turn.report->omitted_turns = omitted;
  if (omitted == 0) return Observation::from_text(render(turn, window(turn, turn.head_size, 0)));
  const size_t first = starts[omitted];
  // The transcript of the left-out turns, as plain lines.
  std::vector<std::string> lines;
  for (size_t i = turn.head_size; i < first; ++i) {
    const json& m = turn.messages[i];
    const std::string role = m.value("role", "?");
    std::string content = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
    if (m.contains("tool_calls") && m["tool_calls"].is_array())
      for (const auto& c : m["tool_calls"]) content += (content.empty() ? "" : " ") + std::string("call ") + c.dump();
    lines.push_back(role + ": " + content + "\n");
  }
  // The request must fit the generator's context with at least one token to write:
  // the oldest lines go first until it does (a long episode's transcript may not fit).
  const int context = ctx_.generator->max_context();
  GenRequest req;
  size_t dropped = 0;
  while (true) {
    std::string transcript;
    for (size_t i = dropped; i < lines.size(); ++i) transcript += lines[i];
    json request =
        json::array({json{{"role", "user"}, {"content", std::string(kSummaryInstruction) + "\n\n" + transcript}}});
    req.prompt_ids = ctx_.tokenizer->encode(
        ctx_.chat_template->render(request, json(), /*add_generation_prompt=*/true, ctx_.render_options),
        /*allow_special=*/true);
    if (static_cast<int>(req.prompt_ids.size()) < context || dropped == lines.size()) break;
    ++dropped;
  }
  if (static_cast<int>(req.prompt_ids.size()) >= context) {
    // Not even the instruction fits: the marker stands in for the summary.
    return Observation::from_text(render(turn, window(turn, first, omitted)));
  }
  req.sampling = ctx_.sampling;
  req.sampling.max_new_tokens = std::min(options_.max_summary_tokens, context - static_cast<int>(req.prompt_ids.size()));
  req.sampling.seed = derive_seed(ctx_.seed, {0x5a11, static_cast<uint64_t>(turn.turn_index)});
  Step step;
  step.prompt_ids = req.prompt_ids;
  GenResult r = ctx_.generator->submit(std::move(req)).get();
  // The summary's text without its trailing end-of-turn tokens.
  const std::string summary = action_text(*ctx_.tokenizer, r.token_ids);
  if (options_.train_summary && turn.report != nullptr && !r.token_ids.empty()) {
    step.response_ids = r.token_ids;
    step.response_logprobs = r.logprobs;
    step.policy_version = r.policy_version;
    step.kind = StepKind::kSummary;
    step.finish = r.finish;
    step.response_text = summary;
    step.info["summarized_turns"] = static_cast<int64_t>(omitted);
    step.info["transcript_lines_dropped"] = static_cast<int64_t>(dropped);
    turn.report->side_steps.push_back(std::move(step));
  }
  json out = json::array();
  for (size_t i = 0; i < turn.head_size; ++i) out.push_back(turn.messages[i]);
  out.push_back({{"role", "user"},
                 {"content", "Summary of the " + std::to_string(omitted) + " earlier turn" + (omitted == 1 ? "" : "s") +
                                 ": " + summary}});
  for (size_t i = first; i < turn.messages.size(); ++i) out.push_back(turn.messages[i]);
  return Observation::from_text(render(turn, out));
}

// ---------------------------------------------------------------------------------
namespace {

using ContextPolicyRegistry = Registry<ContextPolicy, const ContextPolicyContext&, const json&>;
constexpr const char* kWhat = "context policy";

void register_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = ContextPolicyRegistry::instance();
    r.add("append_only",
          [](const ContextPolicyContext& c, const json& o) -> std::unique_ptr<ContextPolicy> {
            bind_context_options<NoContextOptions>(o);
            AGENTR1_CHECK(c.tokenizer && c.chat_template, "append_only context: needs a tokenizer and a template");
            return std::make_unique<AppendOnlyPolicy>(*c.tokenizer, *c.chat_template, c.render_options);
          },
          kWhat);
    r.add("rerender",
          [](const ContextPolicyContext& c, const json& o) -> std::unique_ptr<ContextPolicy> {
            bind_context_options<NoContextOptions>(o);
            AGENTR1_CHECK(c.chat_template, "rerender context: needs a chat template");
            return std::make_unique<RerenderPolicy>(*c.chat_template, c.render_options);
          },
          kWhat);
    r.add("sliding_window",
          [](const ContextPolicyContext& c, const json& o) -> std::unique_ptr<ContextPolicy> {
            return std::make_unique<SlidingWindowPolicy>(c, bind_context_options<SlidingWindowOptions>(o));
          },
          kWhat);
    r.add("summarize",
          [](const ContextPolicyContext& c, const json& o) -> std::unique_ptr<ContextPolicy> {
            return std::make_unique<SummarizePolicy>(c, bind_context_options<SummarizeOptions>(o));
          },
          kWhat);
    r.add("token_budget",
          [](const ContextPolicyContext& c, const json& o) -> std::unique_ptr<ContextPolicy> {
            return std::make_unique<TokenBudgetPolicy>(c, bind_context_options<TokenBudgetOptions>(o));
          },
          kWhat);
  });
}

}  // namespace

void register_context_policy(const std::string& name, ContextPolicyFactory factory) {
  register_builtins();
  AGENTR1_CHECK(static_cast<bool>(factory), "register_context_policy('" << name << "'): empty factory");
  ContextPolicyRegistry::instance().add(name, std::move(factory), kWhat);
}

std::vector<std::string> context_policy_names() {
  register_builtins();
  return ContextPolicyRegistry::instance().names();
}

std::unique_ptr<ContextPolicy> make_context_policy(const json& spec, const ContextPolicyContext& ctx) {
  register_builtins();
  std::string name;
  json options = json::object();
  if (spec.is_string()) {
    name = spec.get<std::string>();
  } else {
    AGENTR1_CHECK(spec.is_object() && spec.contains("type") && spec["type"].is_string(),
                  "a context policy is a name or {\"type\": name, ...options}, got " << spec.dump()
                      << " (HINT: e.g. {\"type\": \"sliding_window\", \"keep_last\": 2})");
    name = spec["type"].get<std::string>();
    options = spec;
    options.erase("type");
  }
  const auto& registry = ContextPolicyRegistry::instance();
  if (!registry.contains(name)) return registry.create(name, ctx, options, kWhat);  // throws listing the known
  return with_context("context policy '" + name + "'", [&] { return registry.create(name, ctx, options, kWhat); });
}

std::unique_ptr<ContextPolicy> make_context_policy(const std::string& name, const text::Tokenizer& tokenizer,
                                                   const text::ChatTemplate& chat_template,
                                                   const text::RenderOptions& render_options) {
  ContextPolicyContext c;
  c.tokenizer = &tokenizer;
  c.chat_template = &chat_template;
  c.render_options = render_options;
  return make_context_policy(json(name), c);
}

}  // namespace agentr1::env
