// agentr1/tasks/paper_search/paper_pool.h — the environment-owned context of paper search:
// a ranked pool of kept items and the list of past actions, rebuilt into the prompt at
// every step (context policy "paper_pool", usable by any environment or family).
//
//   std::vector<PoolItem> pool = rank_pool(items, /*max_size=*/20);   // best first
//   std::string msg = pool_message(actions, pool, opts);              // the rebuilt user turn
//   // as a context policy, in env_kwargs: "context": {"type": "paper_pool", "max_pool": 20}
//
// The policy reads everything from the conversation (ContextTurn::messages), so it keeps
// no state: after the head (system prompt and task), each assistant message with
// "tool_calls" is followed by its tool messages; a tool message may carry
//   "items": [{"id": "P10014", "title": "...", "text": "abstract ...", "score": 0.93}, ...]
// (the papers the call added to the pool, scored by the selector) and its "content" is
// the action's one-line result. The next prompt is the head, then ONE user message:
//   Actions so far:
//   1. search(query="...") -> 10 papers, 10 new, 2 kept in the pool
//   2. expand(paper_id="P10014") -> 12 papers, 5 new, 1 kept in the pool
//
//   Paper pool (3 of at most 20, best first):
//   [1] P10014 | Title (NeurIPS 2019) | score 1.00
//   First max_words words of the abstract ...
// rendered with the tools block and the generation prompt. Past responses are not in the
// prompt (the environment, not concatenation, decides what the model sees), so the
// policy is not token-exact; each Step keeps the prompt it saw.
// Pool ranking: by score (highest first), then by when the item was first kept; an id
// kept twice keeps its highest score and first position; at most max_pool items.
// ToolEnv tools take part by returning info "items" (ToolEnv copies them to the tool message).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/env/context_policy.h"

namespace agentr1::tasks {

struct PoolItem {
  std::string id;
  std::string title;  // as shown (the env may add venue and year)
  std::string text;   // the abstract
  double score = 0;   // the selector's score

  json to_json() const;
  // Throws Error naming `what` and the key when malformed.
  static PoolItem from_json(const json& j, const std::string& what);
};

struct PaperPoolOptions {
  int max_pool = 20;          // items shown, best first; >= 1
  int max_words = 400;        // words of each item's text (abstract); 0 = all
  bool show_actions = true;   // list the past actions above the pool

  template <class V>
  void visit(V& v) {
    v.field("max_pool", max_pool, "items in the pool shown to the model, best first (>= 1)");
    v.field("max_words", max_words, "words of each abstract shown; 0 = all");
    v.field("show_actions", show_actions, "list the past actions above the pool");
  }
  void validate() const;  // Error naming the key, the rule and the value
};

// Deduplicated and ranked (see the top), at most max_size.
std::vector<PoolItem> rank_pool(const std::vector<PoolItem>& items, int max_size);
// The user message text (see the top). actions: one line each, without numbers.
std::string pool_message(const std::vector<std::string>& actions, const std::vector<PoolItem>& pool,
                         const PaperPoolOptions& opts);
// What the conversation after the head says: the action lines (one per tool message:
// its "action" -> the first line of its content) and every kept item, in order. Throws
// Error for a malformed "items" entry.
struct PoolView {
  std::vector<std::string> actions;
  std::vector<PoolItem> items;
  size_t turns = 0;  // assistant messages after the head
};
PoolView read_pool_view(const json& messages, size_t head_size);
// "search(query=\"x\")": a call as an action line shows it.
// (Cut to kMaxActionBytes by callers: a model-written argument must not grow every later prompt.)
inline constexpr size_t kMaxActionBytes = 200;
// The first max_bytes bytes of text without splitting a UTF-8 sequence, "..." appended
// when cut.
std::string clip_line(const std::string& text, size_t max_bytes);
std::string call_text(const std::string& name, const json& arguments);

class PaperPoolPolicy : public env::ContextPolicy {
 public:
  PaperPoolPolicy(const env::ContextPolicyContext& ctx, PaperPoolOptions options);
  std::string name() const override { return "paper_pool"; }
  bool token_exact() const override { return false; }
  // Observation::from_text(render(head + [pool message], tools, generation prompt)).
  // turn.report->omitted_turns = every turn so far (none is shown verbatim).
  env::Observation next(const env::ContextTurn& turn) const override;

 private:
  env::ContextPolicyContext ctx_;
  PaperPoolOptions options_;
};

// Registers the context policy "paper_pool" (idempotent).
void register_paper_pool_policy();

}  // namespace agentr1::tasks
