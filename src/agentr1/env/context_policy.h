// agentr1/env/context_policy.h — how an environment turns (prompt, response, feedback)
// into the next prompt: a registry of named policies any environment can use.
//
//   ContextPolicyContext pc{&tokenizer, &chat_template, render_opts};
//   auto policy = make_context_policy(json{{"type", "sliding_window"}, {"keep_last", 2}}, pc);
//   ContextTurn turn{prompt_ids, action, messages, assistant_index, tools, head_size};
//   Observation next = policy->next(turn);
//   register_context_policy("mine", [](const ContextPolicyContext& c, const json& kw) { ... });
//
// A policy spec is a name ("append_only") or an object {"type": name, ...options}: the
// type picks the policy, the other keys are bound into its options struct below
// (core/config.h's bind_into, under the key env_kwargs.context: unknown keys, types and
// ranges fail naming the key and the policy's valid keys). Unknown names throw listing
// the registered ones.
//
// The episode's structure, as every policy sees it (ContextTurn): messages[0, head_size)
// are the head (system prompt and task, i.e. the sample's prompt messages); after it
// come turns, each an assistant message followed by its feedback messages (tool
// results, observations) up to the next assistant message.
//
// Policies:
//   append_only (default)  s_{t+1} = s_t + a_t + feedback, token-exact: the previous
//                          prompt ids and the sampled response ids are kept verbatim;
//                          only the feedback text (tool turns, next generation prompt)
//                          is encoded. Returns Observation::from_tokens.
//   rerender               renders the whole conversation again from its text messages
//                          (tools block and generation prompt included) and returns it
//                          as text for the flow to encode. NOT token-exact: the
//                          response's ids are re-derived from its text, which may
//                          tokenise differently from what was sampled, and the template
//                          may rewrite earlier turns (Qwen3 drops empty think blocks).
//                          Each Step still stores the prompt it saw, so the data stays
//                          valid RL data; it just cannot be packed append-only.
//   sliding_window         {"keep_last": 2} (SlidingWindowOptions): the head, then a marker message
//                          {"role": "user", "content": "[N earlier turns omitted]"} when N > 0
//                          turns were left out, then the last keep_last turns, rendered
//                          from their text through the chat template (generation prompt
//                          included). Not token-exact.
//   summarize              {"keep_last": 2, "max_summary_tokens": 128, "train_summary":
//                          false} (SummarizeOptions): like sliding_window, with a summary the model writes
//                          in place of the marker (SummarizePolicy below). Not token-exact.
//   token_budget           {"max_prompt_tokens": 1024} (TokenBudgetOptions): the head and the most recent turns
//                          whose rendering (with the marker, as sliding_window) fits
//                          max_prompt_tokens tokens, cut on turn boundaries only; the
//                          latest turn is always kept (if it alone does not fit, the flow's
//                          prompt budget ends the episode). Not token-exact.
//
// The append-only suffix rule (AppendOnlyPolicy::next):
//   1. A = messages[0 .. assistant_index) + {assistant placeholder P}; B = A + the
//      feedback messages after assistant_index. P stands in for this turn's assistant
//      message (content = a unique marker, reasoning_content = "-"): the sampled ids
//      already spell the assistant turn, so only what the template puts AFTER it
//      matters, and a placeholder with reasoning keeps the Qwen3 template from
//      rendering the turn differently when it is last (think block) and not last
//      after tool feedback.
//   2. t0 = render(messages[0 .. assistant_index), tools, add_generation_prompt=false);
//      ta = render(A, tools, add_generation_prompt=false);
//      tb = render(B, tools, add_generation_prompt=true).
//      t0 must be a prefix of ta and of tb, else Error (the template rewrites earlier
//      turns, so no append-only context exists for it; use "rerender"). P itself may
//      render differently in ta and tb: after user feedback (text games) Qwen3 drops
//      the think block of an assistant turn that is no longer the last; the sampled ids
//      replace P's rendering either way.
//   3. closing = ta after the marker (Qwen: "<|im_end|>\n");
//      suffix  = tb after the marker (closing + feedback turns + generation prompt);
//      suffix must start with closing, else Error.
//   4. Drop from the front of the suffix the part of the closing that the response
//      already produced: the longest run of TRAILING SPECIAL tokens of the response
//      whose decoded text is a prefix of the closing. Ordinary tokens never count, so a
//      response cut by length that happens to end in "<" keeps the full closing.
//   5. next ids = prompt_ids + action.ids + encode(suffix, allow_special=true).
//   Example (Qwen3, hermes tools), response ids ending with <|im_end|>:
//     suffix  = "<|im_end|>\n<|im_start|>user\n<tool_response>\n4\n</tool_response>"
//               "<|im_end|>\n<|im_start|>assistant\n"
//     dropped = "<|im_end|>"  (the response's last token)
//     encoded = "\n<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n"
//               "<|im_start|>assistant\n"
//   The same response cut by length (no <|im_end|>) keeps the whole suffix, so the
//   context stays well-formed: "...partial answer<|im_end|>\n<|im_start|>user\n...".
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/env/observation.h"
#include "agentr1/text/jinja/chat_template.h"

namespace agentr1::text {
class Tokenizer;
}

namespace agentr1::env {

// Options of the built-in policies: the keys of a spec besides "type". append_only and
// rerender take none (NoContextOptions). validate() throws Error naming the key, the
// rule and the value.
struct NoContextOptions {
  template <class V>
  void visit(V&) {}
};

struct SlidingWindowOptions {
  int keep_last = 2;  // the most recent turns kept after the head; >= 1

  template <class V>
  void visit(V& v) {
    v.field("keep_last", keep_last, "the most recent turns kept after the head; >= 1");
  }
  void validate() const;
};

struct TokenBudgetOptions {
  int max_prompt_tokens = 1024;  // the prompt's token budget (the latest turn is always kept); >= 1

  template <class V>
  void visit(V& v) {
    v.field("max_prompt_tokens", max_prompt_tokens,
            "the prompt's token budget, cut on turn boundaries (the latest turn is always kept); >= 1");
  }
  void validate() const;
};

struct SummarizeOptions {
  int keep_last = 2;             // the most recent turns kept verbatim after the summary; >= 1
  int max_summary_tokens = 128;  // the summary's generation cap; >= 1
  bool train_summary = false;    // the summary call is also a trained Step of the trajectory

  template <class V>
  void visit(V& v) {
    v.field("keep_last", keep_last, "the most recent turns kept verbatim after the summary; >= 1");
    v.field("max_summary_tokens", max_summary_tokens, "the summary's generation cap; >= 1");
    v.field("train_summary", train_summary, "train the summary call as a step of the trajectory");
  }
  void validate() const;
};

// What a policy reports about the prompt it built (ContextTurn::report).
struct ContextReport {
  size_t omitted_turns = 0;      // earlier turns the prompt leaves out (info "context_omitted_turns")
  std::vector<Step> side_steps;  // model calls to be trained (summarize with train_summary)
};

// One finished turn, as a context policy sees it. References, valid for the call.
struct ContextTurn {
  const TokenIds& prompt_ids;   // exact ids of the prompt the policy saw this turn
  const Action& action;         // the sampled response (ids verbatim) and its text
  const json& messages;         // the conversation AFTER the turn: ..., assistant, feedback...
  size_t assistant_index;       // index of this turn's assistant message in `messages`
  const json& tools;            // tool schemas for the template's tools block (null = none)
  size_t head_size = 0;         // messages[0, head_size): system prompt + task (never dropped)
  size_t turn_index = 0;        // 0 for the first turn (seeds model calls a policy makes)
  ContextReport* report = nullptr;  // filled by next() when not null (environments pass one)
};

// Where policies render and count: not owned, must outlive the policy.
struct ContextPolicyContext {
  const text::Tokenizer* tokenizer = nullptr;
  const text::ChatTemplate* chat_template = nullptr;
  text::RenderOptions render_options;
  Generator* generator = nullptr;  // for policies that call a model (summarize)
  SamplingParams sampling;         // the rollout's sampling for those calls
  uint64_t seed = 0;               // the trajectory's seed
};

class ContextPolicy {
 public:
  virtual ~ContextPolicy() = default;
  virtual std::string name() const = 0;
  // True when next() keeps earlier prompt and response ids verbatim.
  virtual bool token_exact() const = 0;
  // The full next prompt. Throws Error for programming/config errors (assistant_index
  // out of range, a template that cannot be appended to); never for model output.
  // Policies that leave turns out or call the model say so in turn.report (if given).
  virtual Observation next(const ContextTurn& turn) const = 0;
};

class AppendOnlyPolicy : public ContextPolicy {
 public:
  // tokenizer and chat_template must outlive the policy.
  AppendOnlyPolicy(const text::Tokenizer& tokenizer, const text::ChatTemplate& chat_template,
                   text::RenderOptions render_options);
  std::string name() const override { return "append_only"; }
  bool token_exact() const override { return true; }
  Observation next(const ContextTurn& turn) const override;

  // Steps 1-4 of the rule above: the text to encode after the response ids.
  std::string suffix_text(const ContextTurn& turn) const;

 private:
  const text::Tokenizer& tokenizer_;
  const text::ChatTemplate& chat_template_;
  text::RenderOptions render_options_;
};

class RerenderPolicy : public ContextPolicy {
 public:
  RerenderPolicy(const text::ChatTemplate& chat_template, text::RenderOptions render_options);
  std::string name() const override { return "rerender"; }
  bool token_exact() const override { return false; }
  // Observation::from_text(render(messages, tools, add_generation_prompt=true)).
  Observation next(const ContextTurn& turn) const override;

 private:
  const text::ChatTemplate& chat_template_;
  text::RenderOptions render_options_;
};

// Renders a window of the conversation: the head, the marker when `omitted` > 0 turns
// were left out, then messages from `first_kept` on (a turn boundary).
class WindowPolicy : public ContextPolicy {
 public:
  explicit WindowPolicy(const ContextPolicyContext& ctx);
  bool token_exact() const override { return false; }
  // Indices into turn.messages where each turn (assistant message) starts, after the head.
  static std::vector<size_t> turn_starts(const ContextTurn& turn);
  // The window's messages: head + marker (if omitted > 0) + messages[first_kept, end).
  static json window(const ContextTurn& turn, size_t first_kept, size_t omitted);
  // The marker text for n omitted turns: "[n earlier turn(s) omitted]".
  static std::string marker(size_t n);

 protected:
  std::string render(const ContextTurn& turn, const json& messages) const;
  ContextPolicyContext ctx_;
};

class SlidingWindowPolicy : public WindowPolicy {
 public:
  // Throws Error when options.validate() does.
  SlidingWindowPolicy(const ContextPolicyContext& ctx, SlidingWindowOptions options);
  std::string name() const override { return "sliding_window"; }
  Observation next(const ContextTurn& turn) const override;

 private:
  SlidingWindowOptions options_;
};

class TokenBudgetPolicy : public WindowPolicy {
 public:
  // Throws Error when options.validate() does.
  TokenBudgetPolicy(const ContextPolicyContext& ctx, TokenBudgetOptions options);
  std::string name() const override { return "token_budget"; }
  Observation next(const ContextTurn& turn) const override;

 private:
  TokenBudgetOptions options_;
};

// Turns older than the last keep_last are replaced by a summary the model writes: one
// Generator call per turn that leaves turns out, prompted with kSummaryInstruction and a
// transcript of the left-out turns ("assistant: ...", "tool: ..." lines), sampled with
// the rollout's sampling and at most max_summary_tokens tokens, seeded from the
// trajectory seed and the turn. A request longer than the generator's context loses its
// oldest transcript lines until it fits (at least one token left to write; the summary
// is cut to what is left); if not even the instruction fits, the marker of
// sliding_window stands in for the summary. The window is the head, then {"role": "user", "content":
// "Summary of the N earlier turns: <summary>"}, then the kept turns. With train_summary
// the call is also a Step of the trajectory (its own prompt, response ids and behaviour
// log-probs; ContextReport::side_steps), trained with the trajectory's advantage like any
// step; without, it is context only.
extern const char* const kSummaryInstruction;
class SummarizePolicy : public WindowPolicy {
 public:
  // Throws Error when options.validate() does or ctx has no generator.
  SummarizePolicy(const ContextPolicyContext& ctx, SummarizeOptions options);
  std::string name() const override { return "summarize"; }
  Observation next(const ContextTurn& turn) const override;

 private:
  SummarizeOptions options_;
};

using ContextPolicyFactory =
    std::function<std::unique_ptr<ContextPolicy>(const ContextPolicyContext& ctx, const json& options)>;
// Throws Error for an empty name or one registered twice (built-ins included). The
// factory gets the spec without "type" (an empty object for a bare name); bind it with
// bind_context_options.
void register_context_policy(const std::string& name, ContextPolicyFactory factory);
// spec: a name or {"type": name, ...options}. Throws Error for an unknown name (listing
// the registered ones), a malformed spec, or bad options (prefixed "context policy
// '<name>'").
std::unique_ptr<ContextPolicy> make_context_policy(const json& spec, const ContextPolicyContext& ctx);
// The same by name without options (the built-ins' defaults).
std::unique_ptr<ContextPolicy> make_context_policy(const std::string& name,
                                                   const text::Tokenizer& tokenizer,
                                                   const text::ChatTemplate& chat_template,
                                                   const text::RenderOptions& render_options);
std::vector<std::string> context_policy_names();  // sorted

// A policy's options struct bound from a spec's options (the spec without "type"), with
// errors named as the keys under env_kwargs.context ("env_kwargs.context.keep_last:
// expected an integer ..."). Throws Error listing every problem.
template <class T>
T bind_context_options(const json& options) {
  json tree = json::object();
  tree["env_kwargs"]["context"] = options;
  T out{};
  bind_into(out, tree, "env_kwargs.context");
  return out;
}

struct EnvContext;  // agent_env.h

// What an environment does with its 'context' option: the policy built with the env's
// tokenizer, template, render options, generator, sampling and seed. Errors are prefixed
// "<env_name> env option 'context'".
std::unique_ptr<ContextPolicy> make_env_context_policy(const json& spec, const EnvContext& ctx,
                                                       const text::RenderOptions& render_options,
                                                       const std::string& env_name);
// The ids of a policy's next prompt: tokens verbatim, text encoded (special tokens
// allowed). Throws Error for messages (environments expect tokens or text).
TokenIds next_prompt_ids(const Observation& next, const ContextPolicy& policy, const text::Tokenizer& tokenizer);

}  // namespace agentr1::env
