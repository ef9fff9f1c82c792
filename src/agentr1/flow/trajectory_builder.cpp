#include "agentr1/flow/trajectory_builder.h"

#include <algorithm>
#include <atomic>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/rng.h"
#include "agentr1/tasks/reward.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::flow {
namespace {

constexpr uint64_t kSeedTurn = 0x7475726eULL;  // "turn": separates turn seeds

const char* const kInfoCounters[] = {"tool_calls", "tool_errors", "tool_timeouts",
                                     "malformed_calls", "unknown_tools", "context_omitted_turns",
                                     "invalid_format", "infra_failures"};
const FinishReason kFinishReasons[] = {FinishReason::kStopToken, FinishReason::kStopString,
                                       FinishReason::kLength, FinishReason::kContextFull,
                                       FinishReason::kAborted};

}  // namespace

TokenIds observation_to_prompt_ids(const env::Observation& obs, const text::Tokenizer& tokenizer,
                                   const text::ChatTemplate& chat_template,
                                   const text::RenderOptions& render_options) {
  switch (obs.kind()) {
    case env::Observation::Kind::kTokens:
      return obs.tokens();
    case env::Observation::Kind::kText:
      return tokenizer.encode(obs.text(), /*allow_special=*/true);
    case env::Observation::Kind::kMessages:
      return tokenizer.encode(chat_template.render(obs.messages(), /*tools=*/json(),
                                                   /*add_generation_prompt=*/true,
                                                   render_options),
                              /*allow_special=*/true);
  }
  throw Error("unknown observation kind");
}

uint64_t turn_seed(uint64_t trajectory_seed, int turn) {
  return derive_seed(trajectory_seed, {kSeedTurn, static_cast<uint64_t>(turn)});
}

TrajectoryBuilder::TrajectoryBuilder(const FlowContext& ctx, const FlowOptions& opts,
                                     uint64_t seed)
    : ctx_(ctx), opts_(opts), seed_(seed) {
  ctx_.validate();
  opts_.validate();
  render_options_.enable_thinking = opts_.enable_thinking;
  stop_ids_ = opts_.sampling.stop_token_ids;
  for (TokenId id : ctx_.stop_token_ids)
    if (std::find(stop_ids_.begin(), stop_ids_.end(), id) == stop_ids_.end())
      stop_ids_.push_back(id);
}

TokenIds TrajectoryBuilder::prompt_ids(const env::Observation& obs) const {
  return observation_to_prompt_ids(obs, *ctx_.tokenizer, *ctx_.chat_template, render_options_);
}

void TrajectoryBuilder::end_truncated(const char* reason) {
  if (steps_.empty()) return;
  Step& last = steps_.back();
  last.truncated = true;
  last.done = false;
  last.info["truncated_by"] = reason;
}

std::optional<Step> TrajectoryBuilder::generate(TokenIds prompt_ids) {
  AGENTR1_CHECK(!prompt_ids.empty(), "turn " << steps_.size() << ": the prompt is empty");
  AGENTR1_CHECK(!aborted_, "TrajectoryBuilder::generate after the engine aborted a turn");
  const int turn = static_cast<int>(steps_.size());
  if (turn >= opts_.max_steps) {
    max_steps_reached_ = true;
    end_truncated("max_steps");
    return std::nullopt;
  }
  const int left = opts_.max_response_tokens - response_tokens_;
  if (left <= 0) {
    response_budget_exhausted_ = true;
    end_truncated("response_budget");
    return std::nullopt;
  }
  const int prompt_len = static_cast<int>(prompt_ids.size());
  const int max_context = ctx_.generator->max_context();
  if (prompt_len > opts_.max_prompt_tokens || prompt_len + 1 > max_context) {
    context_overflow_ = true;
    // The first few per process are logged; all are counted (env/context_overflow).
    static std::atomic<int> logged{0};
    const int n = logged.fetch_add(1);
    if (n < 5) {
      AGENTR1_LOG(WARN) << "turn " << turn << ": prompt of " << prompt_len
                        << " tokens does not fit (max_prompt_tokens " << opts_.max_prompt_tokens
                        << ", generator context " << max_context << "); the trajectory ends truncated (context_overflow)"
                        << (n == 4 ? "; further overflows are counted in env/context_overflow, not logged" : "");
    }
    end_truncated("context_overflow");
    return std::nullopt;
  }

  GenRequest req;
  req.sampling = opts_.sampling;
  req.sampling.stop_token_ids = stop_ids_;
  req.sampling.max_new_tokens =
      std::min({opts_.max_new_tokens, left, max_context - prompt_len});
  req.sampling.seed = turn_seed(seed_, turn);
  req.affinity_key = ctx_.affinity_key;
  const int cap = req.sampling.max_new_tokens;
  req.prompt_ids = std::move(prompt_ids);
  // The request is moved into the generator; keep the prompt for the Step.
  Step step;
  step.prompt_ids = req.prompt_ids;
  GenResult r = ctx_.generator->submit(std::move(req)).get();
  AGENTR1_CHECK(static_cast<int>(r.token_ids.size()) <= cap,
                "the generator returned " << r.token_ids.size() << " tokens for a request capped at "
                                          << cap << " (a Generator must honour max_new_tokens)");
  AGENTR1_CHECK(r.logprobs.size() == r.token_ids.size(),
                "the generator returned " << r.logprobs.size() << " logprobs for "
                                          << r.token_ids.size()
                                          << " tokens (a Generator returns one per token)");
  step.response_ids = std::move(r.token_ids);
  step.response_logprobs = std::move(r.logprobs);
  step.policy_version = r.policy_version;
  step.finish = r.finish;
  step.response_text = env::action_text(*ctx_.tokenizer, step.response_ids);
  step.info["turn"] = turn;
  step.info["max_new_tokens"] = cap;
  if (r.finish == FinishReason::kAborted) aborted_ = true;
  return step;
}

void TrajectoryBuilder::add(Step step) {
  response_tokens_ += static_cast<int>(step.response_ids.size());
  if (step.finish == FinishReason::kAborted) {
    aborted_ = true;
    step.truncated = true;
    step.done = false;
    step.info["truncated_by"] = "aborted";
  }
  steps_.push_back(std::move(step));
}

std::string TrajectoryBuilder::reward_text(const Step& step) const {
  const TokenIds& ids = step.response_ids;
  size_t n = ids.size();
  while (n > 0 && std::find(stop_ids_.begin(), stop_ids_.end(), ids[n - 1]) != stop_ids_.end()) --n;
  // response_text keeps ids[0, size - trailing specials); "" with ids left may be a step
  // nobody decoded.
  const bool decoded = !step.response_text.empty() || n == 0;
  if (decoded && n == ids.size() - env::trailing_special_count(*ctx_.tokenizer, ids)) return step.response_text;
  return ctx_.tokenizer->decode(TokenIds(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)));
}

std::string reward_fn_name_for(const Sample& sample, const FlowOptions& opts) {
  if (!opts.reward_fn.empty()) return opts.reward_fn;
  if (!sample.data_source.empty() && tasks::has_reward_fn(sample.data_source))
    return sample.data_source;
  if (!sample.reward_style.empty() && tasks::has_reward_fn(sample.reward_style))
    return sample.reward_style;
  if (sample.reward_style == kEnvReward) return kEnvReward;
  std::string known;
  for (const auto& n : tasks::reward_fn_names()) known += (known.empty() ? "" : ", ") + n;
  known += std::string(known.empty() ? "" : ", ") + kEnvReward + " (reward style: the environment's)";
  throw Error("no reward function for data_source '" + sample.data_source + "' or reward style '" +
              sample.reward_style + "'; known: " + (known.empty() ? "(none registered)" : known) +
              ". HINT: set the flow option reward_fn, or call tasks::register_builtin_tasks()");
}

Trajectory TrajectoryBuilder::finish(const Sample& sample) {
  Trajectory t;
  const std::string fn_name = reward_fn_name_for(sample, opts_);
  // The policy's last turn (steps an env added itself, e.g. a trained summary, are not
  // answers).
  const Step* last_turn = nullptr;
  int turns = 0, summaries = 0;
  for (const auto& s : steps_) {
    if (s.kind == StepKind::kSummary) {
      ++summaries;
      continue;
    }
    last_turn = &s;
    ++turns;
  }
  if (fn_name == kEnvReward) {
    // The environment scored the episode (text games): the sum of its game rewards.
    double sum = 0;
    for (const auto& s : steps_)
      if (s.game_reward) sum += static_cast<double>(*s.game_reward);
    t.outcome_reward = static_cast<float>(sum);
  } else if (last_turn != nullptr) {
    tasks::RewardFn fn = tasks::make_reward_fn(fn_name, opts_.reward_kwargs);
    t.outcome_reward = with_context("reward function '" + fn_name + "'", [&] {
      try {
        return fn(reward_text(*last_turn), sample.ground_truth, sample.extra_info);
      } catch (const InfraError& e) {
        // A reward service that failed: no score, and not the model's fault.
        t.infra_failure = "reward function '" + fn_name + "': " + e.what();
        return 0.0f;
      }
    });
  }
  // A tool call that failed for the infrastructure's reasons (ToolEnv's info
  // "infra_error") marks the trajectory; the first one says why.
  for (const auto& s : steps_) {
    if (!t.infra_failure.empty()) break;
    auto it = s.info.find("infra_error");
    if (it != s.info.end() && it->is_string()) t.infra_failure = it->get<std::string>();
  }

  json m = json::object();
  m["num_turns"] = turns;
  m["summary_steps"] = summaries;
  m["response_length"] = response_tokens_;
  m["prompt_length"] = steps_.empty() ? 0 : static_cast<int>(steps_.front().prompt_ids.size());
  // What the context policy made the prompts cost: mean and max prompt tokens per step.
  double prompt_sum = 0;
  int64_t prompt_max = 0;
  for (const auto& s : steps_) {
    prompt_sum += static_cast<double>(s.prompt_ids.size());
    prompt_max = std::max<int64_t>(prompt_max, static_cast<int64_t>(s.prompt_ids.size()));
  }
  m["prompt_tokens_mean"] = steps_.empty() ? 0.0 : prompt_sum / static_cast<double>(steps_.size());
  m["prompt_tokens_max"] = prompt_max;
  for (const char* key : kInfoCounters) {
    int64_t sum = 0;
    for (const auto& s : steps_) {
      auto it = s.info.find(key);
      if (it != s.info.end() && it->is_number_integer()) sum += it->get<int64_t>();
    }
    m[key] = sum;
  }
  // An environment's own episode metrics (info "episode_metrics", as of its step): the
  // last step's numbers, under their own names (paper_search: "paper/recall", ...).
  for (auto s = steps_.rbegin(); s != steps_.rend(); ++s) {
    auto it = s->info.find("episode_metrics");
    if (it == s->info.end() || !it->is_object()) continue;
    for (auto kv = it->begin(); kv != it->end(); ++kv)
      if (kv.value().is_number() && !m.contains(kv.key())) m[kv.key()] = kv.value();
    break;
  }
  const bool truncated = !steps_.empty() ? steps_.back().truncated : true;
  m["truncated"] = truncated ? 1 : 0;
  m["context_overflow"] = context_overflow_ ? 1 : 0;
  m["max_steps_reached"] = max_steps_reached_ ? 1 : 0;
  m["response_budget_exhausted"] = response_budget_exhausted_ ? 1 : 0;
  m["aborted"] = aborted_ ? 1 : 0;
  m["outcome_reward"] = t.outcome_reward;
  m["success"] = (last_turn != nullptr && t.outcome_reward >= opts_.success_threshold) ? 1 : 0;
  for (FinishReason f : kFinishReasons) {
    int count = 0;
    for (const auto& s : steps_)
      if (s.finish == f) ++count;
    m[std::string("finish/") + finish_reason_name(f)] = count;
  }
  t.metrics = std::move(m);
  t.steps = std::move(steps_);
  steps_.clear();
  return t;
}

}  // namespace agentr1::flow
