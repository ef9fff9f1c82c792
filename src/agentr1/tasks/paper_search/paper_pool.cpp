#include "agentr1/tasks/paper_search/paper_pool.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "agentr1/core/error.h"
#include "agentr1/tasks/paper_search/paper_corpus.h"
#include "agentr1/text/jinja/chat_template.h"

namespace agentr1::tasks {

json PoolItem::to_json() const { return {{"id", id}, {"title", title}, {"text", text}, {"score", score}}; }

PoolItem PoolItem::from_json(const json& j, const std::string& what) {
  AGENTR1_CHECK(j.is_object() && j.contains("id") && j["id"].is_string(),
                what << ": a pool item needs a string 'id', got " << j.dump().substr(0, 120));
  PoolItem p;
  p.id = j["id"].get<std::string>();
  if (j.contains("title")) {
    AGENTR1_CHECK(j["title"].is_string(), what << ": pool item 'title' must be a string");
    p.title = j["title"].get<std::string>();
  }
  if (j.contains("text")) {
    AGENTR1_CHECK(j["text"].is_string(), what << ": pool item 'text' must be a string");
    p.text = j["text"].get<std::string>();
  }
  if (j.contains("score")) {
    AGENTR1_CHECK(j["score"].is_number(), what << ": pool item 'score' must be a number, got " << j["score"].dump());
    p.score = j["score"].get<double>();
  }
  return p;
}

void PaperPoolOptions::validate() const {
  AGENTR1_CHECK(max_pool >= 1, "'max_pool' must be >= 1 (items shown), got " << max_pool);
  AGENTR1_CHECK(max_words >= 0, "'max_words' must be >= 0 (0 = whole abstracts), got " << max_words);
}

std::vector<PoolItem> rank_pool(const std::vector<PoolItem>& items, int max_size) {
  std::vector<PoolItem> uniq;
  std::unordered_map<std::string, size_t> at;
  for (const PoolItem& it : items) {
    auto f = at.find(it.id);
    if (f == at.end()) {
      at.emplace(it.id, uniq.size());
      uniq.push_back(it);
    } else if (it.score > uniq[f->second].score) {
      uniq[f->second].score = it.score;
    }
  }
  std::stable_sort(uniq.begin(), uniq.end(), [](const PoolItem& a, const PoolItem& b) { return a.score > b.score; });
  if (max_size >= 0 && uniq.size() > static_cast<size_t>(max_size)) uniq.resize(static_cast<size_t>(max_size));
  return uniq;
}

std::string clip_line(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return text.substr(0, cut) + "...";
}

std::string call_text(const std::string& name, const json& arguments) {
  std::string s = name + "(";
  if (arguments.is_object()) {
    bool first = true;
    for (auto it = arguments.begin(); it != arguments.end(); ++it) {
      if (!first) s += ", ";
      first = false;
      s += it.key() + "=" + it.value().dump();
    }
  }
  return s + ")";
}

std::string pool_message(const std::vector<std::string>& actions, const std::vector<PoolItem>& pool,
                         const PaperPoolOptions& opts) {
  std::string s;
  if (opts.show_actions) {
    s += "Actions so far:";
    if (actions.empty()) s += " none";
    for (size_t i = 0; i < actions.size(); ++i) s += "\n" + std::to_string(i + 1) + ". " + actions[i];
    s += "\n\n";
  }
  s += "Paper pool (" + std::to_string(pool.size()) + " of at most " + std::to_string(opts.max_pool) +
       ", best first):";
  if (pool.empty()) s += " empty";
  for (size_t i = 0; i < pool.size(); ++i) {
    char score[32];
    std::snprintf(score, sizeof score, "%.2f", pool[i].score);
    s += "\n[" + std::to_string(i + 1) + "] " + pool[i].id + " | " + pool[i].title + " | score " + score;
    if (!pool[i].text.empty()) s += "\n" + cut_words(pool[i].text, opts.max_words);
  }
  return s;
}

PoolView read_pool_view(const json& msgs, size_t head_size) {
  PoolView v;
  for (size_t i = head_size; i < msgs.size(); ++i) {
    const json& m = msgs[i];
    const std::string role = m.value("role", "");
    if (role == "assistant") {
      ++v.turns;
      continue;
    }
    if (role != "tool") continue;
    // The action line: the call this tool message answers (its "action" key, written by
    // the env) or the message's first line.
    std::string line = m.contains("action") && m["action"].is_string() ? m["action"].get<std::string>() : "";
    std::string content = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
    const size_t nl = content.find('\n');
    if (nl != std::string::npos) content = content.substr(0, nl);
    content = clip_line(content, kMaxActionBytes);
    line = clip_line(line, kMaxActionBytes);
    v.actions.push_back(line.empty() ? content : line + " -> " + content);
    if (m.contains("items") && m["items"].is_array()) {
      for (const json& it : m["items"]) v.items.push_back(PoolItem::from_json(it, "paper_pool: tool message " + std::to_string(i)));
    }
  }
  return v;
}

PaperPoolPolicy::PaperPoolPolicy(const env::ContextPolicyContext& ctx, PaperPoolOptions options)
    : ctx_(ctx), options_(options) {
  options_.validate();
  AGENTR1_CHECK(ctx_.chat_template != nullptr, "context policy 'paper_pool' needs a chat template");
}

env::Observation PaperPoolPolicy::next(const env::ContextTurn& turn) const {
  const json& msgs = turn.messages;
  AGENTR1_CHECK(msgs.is_array() && turn.head_size <= msgs.size() && turn.assistant_index < msgs.size(),
                "paper_pool: head_size " << turn.head_size << " / assistant_index " << turn.assistant_index
                                         << " out of range for " << msgs.size() << " messages");
  const PoolView view = read_pool_view(msgs, turn.head_size);
  json out = json::array();
  for (size_t i = 0; i < turn.head_size; ++i) out.push_back(msgs[i]);
  out.push_back({{"role", "user"}, {"content", pool_message(view.actions, rank_pool(view.items, options_.max_pool), options_)}});
  if (turn.report != nullptr) turn.report->omitted_turns = view.turns;
  return env::Observation::from_text(
      ctx_.chat_template->render(out, turn.tools, /*add_generation_prompt=*/true, ctx_.render_options));
}

void register_paper_pool_policy() {
  static std::once_flag once;
  std::call_once(once, [] {
    env::register_context_policy("paper_pool", [](const env::ContextPolicyContext& ctx, const json& options) {
      return std::make_unique<PaperPoolPolicy>(ctx, env::bind_context_options<PaperPoolOptions>(options));
    });
  });
}

}  // namespace agentr1::tasks
