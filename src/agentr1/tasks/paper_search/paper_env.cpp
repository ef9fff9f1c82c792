#include "agentr1/tasks/paper_search/paper_env.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

#include "agentr1/core/error.h"
#include "agentr1/tasks/paper_search/paper_generator.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/text/tool_format/tool_format.h"

namespace agentr1::tasks {

void PaperSearchEnvOptions::validate() const {
  AGENTR1_CHECK(corpus.is_object() && (corpus.contains("generated") || corpus.contains("file")) && corpus.size() == 1,
                "paper_search env option 'corpus' must be {\"generated\": {...}} or {\"file\": \"papers.jsonl\"}, got "
                    << corpus.dump().substr(0, 120));
  AGENTR1_CHECK(top_k >= 1 && top_k <= 50, "paper_search env option 'top_k' must be in 1..50, got " << top_k);
  AGENTR1_CHECK(expand_limit >= 1 && expand_limit <= 100,
                "paper_search env option 'expand_limit' must be in 1..100, got " << expand_limit);
  AGENTR1_CHECK(max_calls_per_step >= 1 && max_calls_per_step <= 16,
                "paper_search env option 'max_calls_per_step' must be in 1..16, got " << max_calls_per_step);
  AGENTR1_CHECK(call_cost >= 0 && repeat_cost >= 0 && recall_weight >= 0,
                "paper_search env options 'call_cost', 'repeat_cost' and 'recall_weight' must be >= 0, got "
                    << call_cost << ", " << repeat_cost << ", " << recall_weight);
  AGENTR1_CHECK(reward_top >= 1, "paper_search env option 'reward_top' must be >= 1, got " << reward_top);
  AGENTR1_CHECK(std::isfinite(keep_threshold) && std::isfinite(call_cost) && std::isfinite(repeat_cost) &&
                    std::isfinite(recall_weight),
                "paper_search env options 'keep_threshold', 'call_cost', 'repeat_cost' and 'recall_weight' must be "
                "finite numbers");
  AGENTR1_CHECK(context.is_string() ? context == "paper_pool"
                                    : context.is_object() && context.value("type", json()) == "paper_pool",
                "paper_search env option 'context' must be paper_pool or {type: paper_pool, max_pool, max_words, "
                "show_actions}, got "
                    << context.dump().substr(0, 120)
                    << ": the environment owns the context (its messages are written for the pool, not for a "
                       "chat template's rendering of past turns)");
}

PaperSearchEnvOptions PaperSearchEnvOptions::from_json(const json& kwargs) {
  json tree = json::object();
  tree["env_kwargs"] = kwargs.is_null() ? json::object() : kwargs;
  PaperSearchEnvOptions o;
  bind_into(o, tree, "env_kwargs");
  return o;
}

std::shared_ptr<const PaperCorpus> paper_corpus_for(const json& spec) {
  AGENTR1_CHECK(spec.is_object() && spec.size() == 1,
                "paper_search env option 'corpus' must be {\"generated\": {...}} or {\"file\": \"papers.jsonl\"}, got "
                    << spec.dump().substr(0, 120));
  if (spec.contains("file")) {
    AGENTR1_CHECK(spec["file"].is_string(), "paper_search env option 'corpus.file' must be a path string, got "
                                                << spec["file"].dump());
    return load_paper_corpus_file(spec["file"].get<std::string>());
  }
  AGENTR1_CHECK(spec.contains("generated"), "paper_search env option 'corpus' must hold 'generated' or 'file', got "
                                                << spec.dump().substr(0, 120));
  PaperWorldOptions o;
  json tree = json::object();
  tree["env_kwargs"]["corpus"]["generated"] = spec["generated"];
  bind_into(o, tree, "env_kwargs.corpus.generated");
  std::shared_ptr<const PaperWorld> w = generated_paper_world(o);
  return std::shared_ptr<const PaperCorpus>(w, &w->corpus);
}

json paper_tools_schema(int top_k, int expand_limit) {
  json search = {
      {"type", "function"},
      {"function",
       {{"name", "search"},
        {"description", "Searches the paper index (titles and abstracts) and returns the best " +
                            std::to_string(top_k) + " matches."},
        {"parameters",
         {{"type", "object"},
          {"properties", {{"query", {{"type", "string"}, {"description", "keywords to search for"}}}}},
          {"required", json::array({"query"})}}}}}};
  json expand = {
      {"type", "function"},
      {"function",
       {{"name", "expand"},
        {"description", "Lists the papers citing a paper, then the papers it cites (at most " +
                            std::to_string(expand_limit) + ")."},
        {"parameters",
         {{"type", "object"},
          {"properties", {{"paper_id", {{"type", "string"}, {"description", "a paper id from the pool, e.g. P10014"}}}}},
          {"required", json::array({"paper_id"})}}}}}};
  return json::array({search, expand});
}

std::string normalize_query(const std::string& q) {
  std::string out;
  bool space = false;
  for (char c : q) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

PaperPoolOptions context_pool_options(const json& context) {
  if (!context.is_object()) return PaperPoolOptions{};
  json o = context;
  o.erase("type");
  return env::bind_context_options<PaperPoolOptions>(o);
}

std::string paper_question(const Sample& sample) {
  if (sample.extra_info.is_object() && sample.extra_info.contains("question") && sample.extra_info["question"].is_string())
    return sample.extra_info["question"].get<std::string>();
  if (sample.prompt.is_array())
    for (auto it = sample.prompt.rbegin(); it != sample.prompt.rend(); ++it)
      if (it->value("role", "") == "user" && it->contains("content") && (*it)["content"].is_string())
        return (*it)["content"].get<std::string>();
  return "";
}

std::unordered_set<std::string> paper_gold(const Sample& sample) {
  std::unordered_set<std::string> gold;
  if (sample.ground_truth.is_null()) return gold;
  AGENTR1_CHECK(sample.ground_truth.is_array(), "paper_search: ground_truth must be a list of paper ids, got "
                                                    << sample.ground_truth.dump().substr(0, 120));
  for (const json& g : sample.ground_truth) {
    AGENTR1_CHECK(g.is_string(), "paper_search: ground_truth must be a list of paper ids, got "
                                     << sample.ground_truth.dump().substr(0, 120));
    gold.insert(g.get<std::string>());
  }
  return gold;
}

PaperSearchSession::PaperSearchSession(const PaperCorpus& corpus, PaperSelector& selector,
                                       const PaperSearchEnvOptions& options, int max_pool, std::string question,
                                       std::unordered_set<std::string> gold)
    : corpus_(corpus),
      selector_(selector),
      options_(options),
      max_pool_(max_pool),
      question_(std::move(question)),
      gold_(std::move(gold)) {}

PaperSearchSession::Outcome PaperSearchSession::run(const std::vector<text::ToolCall>& calls,
                                                    const std::vector<text::ToolCallError>& errors) {
  int n_calls = 0, n_errors = 0, n_malformed = 0, n_unknown = 0, n_infra = 0, repeats = 0, runs = 0;
  std::string infra_error;
  const std::string cost = [&] {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", options_.repeat_cost);
    return std::string(b);
  }();
  // One tool message per call (and per malformed block): "action" is the call, "content"
  // its one-line result, "items" the papers it added to the pool.
  struct Pending {
    std::string action, result;
    std::vector<size_t> found;  // corpus indices returned
    bool ran = false;
  };
  std::vector<Pending> pending;
  for (const text::ToolCallError& e : errors) {
    ++n_calls, ++n_malformed, ++n_errors;
    pending.push_back({"malformed tool call", "Error: " + e.message, {}, false});
  }
  for (size_t c = 0; c < calls.size(); ++c) {
    const text::ToolCall& call = calls[c];
    ++n_calls;
    Pending p{clip_line(call_text(call.name, call.arguments), kMaxActionBytes), "", {}, false};
    if (static_cast<int>(c) >= options_.max_calls_per_step) {
      ++n_errors;
      p.result = "Error: not run; at most " + std::to_string(options_.max_calls_per_step) + " calls per step";
    } else if (call.name == "search") {
      const json q = call.arguments.is_object() ? call.arguments.value("query", json()) : json();
      if (!q.is_string() || normalize_query(q.get<std::string>()).empty()) {
        ++n_errors;
        p.result = "Error: search needs a non-empty string 'query'";
      } else if (!queries_.insert(normalize_query(q.get<std::string>())).second) {
        ++repeats;
        p.result = "repeated query, not run (cost " + cost + ")";
      } else {
        ++runs, ++searches_;
        p.found = corpus_.search(q.get<std::string>(), static_cast<size_t>(options_.top_k));
        p.ran = true;
      }
    } else if (call.name == "expand") {
      const json id = call.arguments.is_object() ? call.arguments.value("paper_id", json()) : json();
      std::optional<size_t> idx;
      if (id.is_string()) idx = corpus_.find(id.get<std::string>());
      if (!id.is_string()) {
        ++n_errors;
        p.result = "Error: expand needs a string 'paper_id'";
      } else if (!idx) {
        ++n_errors;
        p.result = "Error: no paper with id '" + clip_line(id.get<std::string>(), 40) + "'; use an id from the pool";
      } else if (!seen_.count(id.get<std::string>())) {
        ++n_errors;
        p.result = "Error: paper '" + id.get<std::string>() +
                   "' was not returned by an earlier search or expand; expand papers from the pool";
      } else if (!expanded_.insert(id.get<std::string>()).second) {
        ++repeats;
        p.result = "already expanded, not run (cost " + cost + ")";
      } else {
        ++runs, ++expands_;
        p.found = corpus_.expand(*idx, static_cast<size_t>(options_.expand_limit));
        p.ran = true;
      }
    } else {
      ++n_errors, ++n_unknown;
      p.result = "Error: unknown tool '" + call.name + "'; available tools: search, expand";
    }
    pending.push_back(std::move(p));
  }
  repeats_ += repeats;
  errors_ += n_errors;

  // The papers seen for the first time, scored together (one selector batch per step).
  std::vector<std::vector<size_t>> fresh(pending.size());
  std::vector<const Paper*> to_score;
  for (size_t k = 0; k < pending.size(); ++k)
    for (size_t i : pending[k].found)
      if (seen_.insert(corpus_.paper(i).id).second) {
        fresh[k].push_back(i);
        to_score.push_back(&corpus_.paper(i));
      }
  std::vector<double> scores;
  if (!to_score.empty()) {
    try {
      scores = selector_.score(question_, to_score, gold_);
      AGENTR1_CHECK(scores.size() == to_score.size(), "paper selector '" << selector_.name() << "' returned "
                                                                         << scores.size() << " scores for "
                                                                         << to_score.size() << " papers");
      for (double x : scores)
        if (!std::isfinite(x)) throw InfraError("a score is not a finite number (" + std::to_string(x) + ")");
    } catch (const InfraError& e) {
      ++n_infra;
      infra_error = "paper selector '" + selector_.name() + "': " + e.what();
      scores.assign(to_score.size(), 0.0);
      // Not seen after all: a later step may return and score them again.
      for (const Paper* p : to_score) seen_.erase(p->id);
    }
  }
  Outcome out;
  std::vector<double> new_kept;
  size_t s = 0;
  for (size_t k = 0; k < pending.size(); ++k) {
    Pending& p = pending[k];
    json items = json::array();
    for (size_t i : fresh[k]) {
      const double sc = scores[s++];
      if (!infra_error.empty() || sc < options_.keep_threshold) continue;
      const Paper& paper = corpus_.paper(i);
      PoolItem item{paper.id, paper_display_title(paper), paper.abstract, sc};
      kept_.push_back(item);
      new_kept.push_back(sc);
      items.push_back(item.to_json());
    }
    if (p.ran) {
      p.result = std::to_string(p.found.size()) + " papers, " + std::to_string(fresh[k].size()) + " new, " +
                 std::to_string(items.size()) + " kept in the pool";
      if (!infra_error.empty()) p.result += " (the selector failed; nothing kept)";
    }
    json msg = {{"role", "tool"}, {"content", p.result}, {"action", p.action}};
    if (!items.empty()) msg["items"] = std::move(items);
    out.tool_messages.push_back(std::move(msg));
  }

  // The reward: the top new scores, minus costs.
  std::sort(new_kept.begin(), new_kept.end(), std::greater<double>());
  double reward = 0;
  for (size_t k = 0; k < new_kept.size() && static_cast<int>(k) < options_.reward_top; ++k) reward += new_kept[k];
  reward -= options_.call_cost * runs + options_.repeat_cost * repeats;

  const std::vector<PoolItem> shown = pool();
  size_t hits = 0;
  for (const PoolItem& it : shown) hits += gold_.count(it.id);
  const double recall = gold_.empty() ? 0.0 : static_cast<double>(hits) / static_cast<double>(gold_.size());
  size_t kept_gold = 0;
  for (const PoolItem& it : kept_) kept_gold += gold_.count(it.id);
  const double precision = kept_.empty() ? 0.0 : static_cast<double>(kept_gold) / static_cast<double>(kept_.size());

  json& info = out.info;
  info["tool_calls"] = n_calls;
  info["tool_errors"] = n_errors;
  info["malformed_calls"] = n_malformed;
  info["unknown_tools"] = n_unknown;
  info["infra_failures"] = n_infra;
  if (!infra_error.empty()) info["infra_error"] = infra_error;
  info["episode_metrics"] = {{"paper/recall", recall},
                             {"paper/precision", precision},
                             {"paper/pool_size", static_cast<int64_t>(shown.size())},
                             {"paper/kept", static_cast<int64_t>(kept_.size())},
                             {"paper/searches", searches_},
                             {"paper/expands", expands_},
                             {"paper/repeats", repeats_},
                             {"paper/errors", errors_}};
  out.reward = static_cast<float>(reward);
  out.recall_gain = static_cast<float>(recall - recall_);
  recall_ = recall;
  return out;
}

std::string PaperSearchSession::state_key() const {
  std::vector<std::string> q(queries_.begin(), queries_.end()), x(expanded_.begin(), expanded_.end());
  std::sort(q.begin(), q.end());
  std::sort(x.begin(), x.end());
  std::string k = "pool:";
  for (const PoolItem& it : pool()) k += it.id + " ";
  k += "|q:";
  for (const auto& s : q) k += s + "\x1f";
  k += "|x:";
  for (const auto& s : x) k += s + " ";
  return k;
}

PaperSearchEnv::PaperSearchEnv(const env::EnvContext& ctx, PaperSearchEnvOptions options)
    : ctx_(ctx), options_(std::move(options)) {
  AGENTR1_CHECK(ctx_.tokenizer != nullptr && ctx_.chat_template != nullptr,
                "paper_search env needs EnvContext.tokenizer and chat_template (got null)");
  with_context("paper_search env options", [&] { options_.validate(); });
  if (ctx_.render_options != nullptr) render_options_ = *ctx_.render_options;
  corpus_ = with_context("paper_search env option 'corpus'", [&] { return paper_corpus_for(options_.corpus); });
  selector_ = with_context("paper_search env option 'selector'", [&] { return make_paper_selector(options_.selector); });
  const std::string fmt = options_.tool_format == "auto" ? text::default_tool_format(ctx_.chat_template->source())
                                                         : options_.tool_format;
  format_ = with_context("paper_search env option 'tool_format'", [&] { return text::make_tool_format(fmt); });
  register_paper_pool_policy();
  policy_ = env::make_env_context_policy(options_.context, ctx_, render_options_, "paper_search");
  pool_options_ = context_pool_options(options_.context);
  if (options_.tools_in_prompt) tools_ = paper_tools_schema(options_.top_k, options_.expand_limit);  // else null
}

PaperSearchEnv::~PaperSearchEnv() = default;

env::Observation PaperSearchEnv::reset(const Sample& sample) {
  AGENTR1_CHECK(sample.prompt.is_array() && !sample.prompt.empty(),
                "paper_search env: the sample's prompt must be a non-empty list of chat messages");
  messages_ = sample.prompt;
  head_size_ = messages_.size();
  session_ = std::make_unique<PaperSearchSession>(*corpus_, *selector_, options_, pool_options_.max_pool,
                                                  paper_question(sample), paper_gold(sample));
  turn_index_ = 0;
  emitted_ = 0;
  const std::string text = ctx_.chat_template->render(messages_, tools_, /*add_generation_prompt=*/true, render_options_);
  prompt_ids_ = ctx_.tokenizer->encode(text, /*allow_special=*/true);
  started_ = true;
  finished_ = false;
  return env::Observation::from_tokens(prompt_ids_);
}

std::vector<PoolItem> PaperSearchEnv::pool() const { return session_ ? session_->pool() : std::vector<PoolItem>{}; }

double PaperSearchEnv::recall() const { return session_ ? session_->recall() : 0.0; }

env::StepResult PaperSearchEnv::step(const env::Action& action) {
  AGENTR1_CHECK(started_, "paper_search env: step called before reset()");
  AGENTR1_CHECK(!finished_, "paper_search env: step called after the episode ended; call reset() first");
  const text::ParsedResponse parsed = format_->parse(action.text);
  env::StepResult result;
  // GiGPO's anchor: the state the action was taken in ("<start>" first).
  result.anchor = turn_index_ == 0 ? "<start>" : session_->state_key();
  PaperSearchSession::Outcome o = session_->run(parsed.calls, parsed.errors);
  result.reward = o.reward;
  // The recall this step added, such that the emitted rewards sum to w x recall exactly
  // as floats (full recall reaches success_threshold 1.0 whatever the gold size).
  const float g = static_cast<float>(options_.recall_weight * session_->recall() - emitted_);
  emitted_ += static_cast<double>(g);
  result.game_reward = g;
  result.info = std::move(o.info);
  if (!parsed.has_tool_call_markup()) {
    messages_.push_back({{"role", "assistant"}, {"content", action.text}});
    finished_ = true;
    result.done = true;
    return result;
  }
  const size_t assistant_index = messages_.size();
  json calls = json::array();
  for (const text::ToolCall& c : parsed.calls)
    calls.push_back({{"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  messages_.push_back({{"role", "assistant"}, {"content", parsed.content}, {"tool_calls", calls}});
  for (json& m : o.tool_messages) messages_.push_back(std::move(m));

  env::ContextReport report;
  const env::ContextTurn turn{prompt_ids_, action, messages_, assistant_index, tools_, head_size_, turn_index_, &report};
  ++turn_index_;
  env::Observation next = policy_->next(turn);
  result.info["context_omitted_turns"] = static_cast<int64_t>(report.omitted_turns);
  result.side_steps = std::move(report.side_steps);
  prompt_ids_ = env::next_prompt_ids(next, *policy_, *ctx_.tokenizer);
  result.observation = std::move(next);
  result.done = false;
  return result;
}

}  // namespace agentr1::tasks
