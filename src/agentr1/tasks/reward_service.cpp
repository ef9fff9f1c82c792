#include "agentr1/tasks/reward_service.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/http_client.h"
#include "agentr1/core/strings.h"
#include "agentr1/tasks/reward.h"

namespace agentr1::tasks {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kPath = "/v1/completions";
constexpr const char* kPeer = "reward service";

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// True when s[i..] starts with `word` (any case) not followed by a letter or digit.
bool starts_with_word(const std::string& s, size_t i, const std::string& word) {
  if (s.size() - i < word.size()) return false;
  for (size_t k = 0; k < word.size(); ++k)
    if (std::tolower(static_cast<unsigned char>(s[i + k])) != word[k]) return false;
  return i + word.size() == s.size() || !is_word_char(s[i + word.size()]);
}

size_t skip_space(const std::string& s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

bool is_digit(const std::string& s, size_t i) {
  return i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) != 0;
}

// The first decimal number at or after i ([+-]?digits[.digits] or [+-]?.digits), or nullopt.
std::optional<double> first_number(const std::string& s, size_t i) {
  for (; i < s.size(); ++i) {
    size_t j = i;
    if (s[j] == '+' || s[j] == '-') ++j;
    const size_t digits = j;
    while (is_digit(s, j)) ++j;
    const bool int_part = j > digits;
    if (j < s.size() && s[j] == '.' && is_digit(s, j + 1)) {
      ++j;
      while (is_digit(s, j)) ++j;
    } else if (!int_part) {
      continue;
    }
    return std::strtod(s.substr(i, j - i).c_str(), nullptr);
  }
  return std::nullopt;
}

std::string number_text(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

}  // namespace

const char* const kDefaultJudgeTemplate =
    "You are grading an answer against a reference.\n"
    "Reference answer: {ground_truth}\n"
    "Answer to grade: {response}\n"
    "Does the answer agree with the reference? Reply with yes or no.\n"
    "Reply:";

// --- options ---------------------------------------------------------------------

JudgeParser parse_judge_parser(const std::string& name) {
  if (name == "yes_no") return JudgeParser::kYesNo;
  if (name == "score") return JudgeParser::kScore;
  throw Error("unknown judge parser '" + name + "' (known: yes_no, score)");
}

void RewardServiceOptions::validate() const {
  AGENTR1_CHECK(!url.empty(), "url is required: the judge server's base URL, e.g. url=http://127.0.0.1:8000 "
                              "(agentr1 serve, vLLM, SGLang)");
  http::check_base_url(url, "url", kPath);
  with_context("prompt_template", [&] { return PromptTemplate(prompt_template, {"*"}); });
  with_context("parser", [&] { return parse_judge_parser(parser); });
  AGENTR1_CHECK(std::isfinite(min_score) && std::isfinite(max_score) && min_score < max_score,
                "min_score must be < max_score (both finite), got min_score=" << min_score
                                                                              << " max_score=" << max_score);
  AGENTR1_CHECK(max_tokens >= 1, "max_tokens must be >= 1, got " << max_tokens);
  AGENTR1_CHECK(temperature >= 0 && std::isfinite(temperature), "temperature must be >= 0, got " << temperature);
  AGENTR1_CHECK(max_batch >= 1, "max_batch must be >= 1, got " << max_batch);
  AGENTR1_CHECK(batch_wait_ms >= 0 && std::isfinite(batch_wait_ms),
                "batch_wait_ms must be >= 0 milliseconds, got " << batch_wait_ms);
  http::check_retry_options(timeout_s, retries, backoff_s, "");
  AGENTR1_CHECK(api_key_env.find_first_of("= \t\n") == std::string::npos && api_key_env.size() <= 256,
                "api_key_env must be the NAME of an environment variable holding the key (never the key "
                "itself), got a value with '=' or spaces");
}

RewardServiceOptions RewardServiceOptions::from_json(const json& kwargs, const std::string& prefix) {
  // The prefix is a dotted path ("env_kwargs.selector"): nest the kwargs under it.
  json tree = kwargs.is_null() ? json::object() : kwargs;
  for (size_t end = prefix.size(); end != std::string::npos && end > 0;) {
    const size_t dot = prefix.rfind('.', end - 1);
    const size_t from = dot == std::string::npos ? 0 : dot + 1;
    tree = json{{prefix.substr(from, end - from), std::move(tree)}};
    end = dot;
  }
  RewardServiceOptions o;
  bind_into(o, tree, prefix);  // unknown keys, types, then validate()
  return o;
}

// --- answers ---------------------------------------------------------------------

std::optional<float> parse_judge_answer(const std::string& answer, JudgeParser parser, double min_score,
                                        double max_score, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<float> {
    if (why != nullptr) *why = w;
    return std::nullopt;
  };
  size_t i = skip_space(answer, 0);
  if (answer.compare(i, 7, "<think>") == 0) {
    const size_t end = answer.find("</think>", i);
    if (end == std::string::npos) return fail("a <think> block without </think> (cut by max_tokens?)");
    i = skip_space(answer, end + 8);
  }
  if (parser == JudgeParser::kYesNo) {
    if (starts_with_word(answer, i, "yes")) return 1.0f;
    if (starts_with_word(answer, i, "no")) return 0.0f;
    return fail("it does not start with yes or no");
  }
  const std::optional<double> x = first_number(answer, i);
  if (!x) return fail("it holds no number");
  if (!(*x >= min_score && *x <= max_score))
    return fail("its number " + number_text(*x) + " lies outside [min_score, max_score] = [" +
                number_text(min_score) + ", " + number_text(max_score) + "]");
  return static_cast<float>(*x);
}

// --- templates -------------------------------------------------------------------

PromptTemplate::PromptTemplate(const std::string& text, const std::vector<std::string>& names) {
  const bool any = names.size() == 1 && names[0] == "*";  // syntax only (validate())
  auto allowed = [&](const std::string& name, const std::string& object) {
    if (any) return true;
    for (const auto& n : names)
      if (n == name || (!object.empty() && n == object + ".*")) return true;
    return false;
  };
  std::string lit;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '}') {
      AGENTR1_CHECK(i + 1 < text.size() && text[i + 1] == '}',
                    "a lone '}' at offset " << i << " of the template; write }} for a literal brace");
      lit += '}';
      ++i;
      continue;
    }
    if (c != '{') {
      lit += c;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '{') {
      lit += '{';
      ++i;
      continue;
    }
    const size_t end = text.find_first_of("{}", i + 1);
    AGENTR1_CHECK(end != std::string::npos && text[end] == '}',
                  "an unclosed '{' at offset " << i << " of the template; write {{ for a literal brace");
    const std::string name = text.substr(i + 1, end - i - 1);
    const size_t dot = name.find('.');
    const std::string object = dot == std::string::npos ? "" : name.substr(0, dot);
    if (!allowed(name, object) || (!any && dot != std::string::npos && dot + 1 == name.size())) {
      std::vector<std::string> shown;
      for (const auto& n : names) shown.push_back("{" + (n.size() > 2 && n.compare(n.size() - 2, 2, ".*") == 0
                                                              ? n.substr(0, n.size() - 1) + "KEY"
                                                              : n) + "}");
      throw Error("unknown placeholder {" + name + "} at offset " + std::to_string(i) + " of the template (known: " +
                  join(shown, ", ") + "); write {{ and }} for literal braces");
    }
    if (!lit.empty()) parts_.push_back({std::move(lit), "", true});
    lit.clear();
    if (dot == std::string::npos)
      parts_.push_back({name, "", false});
    else
      parts_.push_back({object, name.substr(dot + 1), false});
    i = end;
  }
  if (!lit.empty()) parts_.push_back({std::move(lit), "", true});
}

std::string PromptTemplate::render(const json& values) const {
  auto as_text = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  std::string out;
  for (const Part& p : parts_) {
    if (p.literal) {
      out += p.text;
      continue;
    }
    AGENTR1_CHECK(values.is_object() && values.contains(p.text),
                  "the template's {" << p.text << (p.key.empty() ? "" : "." + p.key) << "} has no value");
    const json& v = values[p.text];
    if (p.key.empty()) {
      out += as_text(v);
      continue;
    }
    if (!v.is_object() || !v.contains(p.key)) {
      std::vector<std::string> keys;
      if (v.is_object())
        for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
      throw Error("the template's {" + p.text + "." + p.key + "}: " + p.text + " has no key '" + p.key + "' (" +
                  (v.is_object() ? "its keys: " + (keys.empty() ? std::string("none") : join(keys, ", "))
                                 : "it is " + std::string(v.type_name()) + ", not an object") +
                  "); HINT: add '" + p.key + "' to every sample's " + p.text + ", or change the template");
    }
    out += as_text(v[p.key]);
  }
  return out;
}

std::vector<std::string> PromptTemplate::placeholders() const {
  std::vector<std::string> out;
  for (const Part& p : parts_) {
    if (p.literal) continue;
    const std::string n = p.key.empty() ? p.text : p.text + "." + p.key;
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

PromptTemplate judge_template(const std::string& text) {
  return PromptTemplate(text, {"response", "ground_truth", "extra_info.*"});
}

std::string render_judge_prompt(const std::string& tmpl, const std::string& response, const json& ground_truth,
                                const json& extra_info) {
  return judge_template(tmpl).render({{"response", response}, {"ground_truth", ground_truth}, {"extra_info", extra_info}});
}

// --- the service -----------------------------------------------------------------

struct RewardService::Impl {
  // One caller of score(): its scores, how many are still to come, the first error.
  struct Waiter {
    std::vector<float> scores;
    size_t left = 0;
    std::string error;
  };
  // One prompt waiting for a request.
  struct Item {
    const std::string* prompt;
    Waiter* waiter;
    size_t slot;
    Clock::time_point queued;
  };
  // What a request gave one prompt: a score, or the error (non-empty).
  struct Outcome {
    float score = 0;
    std::string error;
  };

  RewardServiceOptions opts;
  JudgeParser parser = JudgeParser::kYesNo;
  http::HttpPolicy policy;
  Counters counters;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> pending;

  std::string where() const { return std::string(kPeer) + " " + opts.url + ": POST " + kPath; }

  // The outcomes of one request for `prompts` (never throws).
  std::vector<Outcome> send(const std::vector<std::string>& prompts) {
    const size_t n = prompts.size();
    std::vector<Outcome> out(n);
    auto fail_all = [&](const std::string& e) {
      for (Outcome& o : out) o.error = e;
      return out;
    };
    json body = json::object();
    if (!opts.model.empty()) body["model"] = opts.model;
    body["prompt"] = prompts;
    body["max_tokens"] = opts.max_tokens;
    body["temperature"] = opts.temperature;
    counters.requests.fetch_add(1);
    counters.prompts.fetch_add(static_cast<int64_t>(n));
    http::Reply rep;
    try {
      auto cli = http::make_client(opts.url, policy);
      rep = http::http_call(*cli, opts.url, policy, "POST", kPath, body.dump(), counters.retries);
    } catch (const std::exception& e) {
      return fail_all(e.what());  // names the reward service, the url and a HINT
    }
    if (rep.status >= 400)
      return fail_all(where() + " was refused with HTTP " + std::to_string(rep.status) +
                      " (not retried): " + http::body_message(rep.body) + ". HINT: check " + policy.keys +
                      "model ('" + opts.model + "'; empty = not sent) and " + policy.keys + "api_key_env");
    std::vector<const json*> by_index(n, nullptr);
    json j;
    try {
      j = http::parse_body(rep, opts.url, std::string("POST ") + kPath, kPeer);
      const json& choices = http::field_of(j, "choices", "choices");
      if (!choices.is_array()) http::malformed("choices", "must be a list of choices", choices);
      for (size_t c = 0; c < choices.size(); ++c) {
        const std::string path = "choices[" + std::to_string(c) + "]";
        const json& ix = http::field_of(choices[c], "index", path + ".index");
        if (!ix.is_number_integer() || ix.get<int64_t>() < 0 || ix.get<int64_t>() >= static_cast<int64_t>(n))
          http::malformed(path + ".index", "must be a prompt index in 0.." + std::to_string(n - 1), ix);
        const size_t k = ix.get<size_t>();
        if (by_index[k] != nullptr) http::malformed(path + ".index", "repeats another choice's index", ix);
        const json& text = http::field_of(choices[c], "text", path + ".text");
        if (!text.is_string()) http::malformed(path + ".text", "must be a string", text);
        by_index[k] = &text;
      }
    } catch (const std::exception& e) {
      const std::string what = e.what();
      return fail_all(what.compare(0, std::string(kPeer).size(), kPeer) == 0 ? what : where() + ": " + what);
    }
    for (size_t k = 0; k < n; ++k) {
      if (by_index[k] == nullptr) {
        out[k].error = where() + ": the response has no choice with index " + std::to_string(k) + " (of " +
                       std::to_string(n) + " prompts): " + http::snippet(rep.body, 200) +
                       ". HINT: the server must answer a list of prompts with one choice per prompt (OpenAI "
                       "completions: agentr1 serve, vLLM, SGLang)";
        continue;
      }
      const std::string answer = by_index[k]->get<std::string>();
      std::string why;
      const std::optional<float> s = parse_judge_answer(answer, parser, opts.min_score, opts.max_score, &why);
      if (s) {
        out[k].score = *s;
        continue;
      }
      out[k].error = std::string(kPeer) + " " + opts.url + ": the judge's answer cannot be read by parser '" +
                     opts.parser + "' (" + why + "): answer '" + http::snippet(answer, 200) + "' to prompt '" +
                     http::snippet(prompts[k], 120) + "'. HINT: make " + policy.keys +
                     "prompt_template ask for " +
                     (parser == JudgeParser::kYesNo ? std::string("an answer that starts with yes or no")
                                                    : "a number in [" + number_text(opts.min_score) + ", " +
                                                          number_text(opts.max_score) + "]") +
                     ", or raise " + policy.keys + "max_tokens (" + std::to_string(opts.max_tokens) +
                     ") if the answer was cut";
    }
    return out;
  }
};

RewardService::RewardService(RewardServiceOptions o, std::string keys) : impl_(std::make_unique<Impl>()) {
  with_context(keys.empty() ? std::string("reward service") : keys.substr(0, keys.size() - 1), [&] {
    o.validate();
    return 0;
  });
  impl_->opts = std::move(o);
  const RewardServiceOptions& opts = impl_->opts;
  impl_->parser = parse_judge_parser(opts.parser);
  http::HttpPolicy& p = impl_->policy;
  p.timeout_s = opts.timeout_s;
  p.retries = opts.retries;
  p.backoff_s = opts.backoff_s;
  p.peer = kPeer;
  p.keys = std::move(keys);
  if (!opts.api_key_env.empty()) {
    const char* key = std::getenv(opts.api_key_env.c_str());
    AGENTR1_CHECK(key != nullptr && *key != '\0',
                  p.keys << "api_key_env=" << opts.api_key_env << " names an environment variable that is "
                         << (key == nullptr ? "not set" : "empty") << "; HINT: export " << opts.api_key_env
                         << "=<the judge server's key>, or set " << p.keys << "api_key_env to \"\" for none");
    p.api_key = key;
  }
}

RewardService::~RewardService() = default;

std::vector<float> RewardService::score(const std::vector<std::string>& prompts) {
  Impl& s = *impl_;
  Impl::Waiter w;
  w.scores.assign(prompts.size(), 0.0f);
  w.left = prompts.size();
  if (prompts.empty()) return {};
  const auto wait = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(s.opts.batch_wait_ms));
  const size_t max_batch = static_cast<size_t>(s.opts.max_batch);

  std::unique_lock<std::mutex> lk(s.mu);
  const Clock::time_point now = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) s.pending.push_back({&prompts[i], &w, i, now});
  s.cv.notify_all();
  // Until every prompt of ours is scored: send a batch that is due (full, or its oldest
  // prompt waited batch_wait_ms), whoever's prompts it holds; else wait for one to be.
  while (w.left > 0) {
    if (s.pending.empty()) {
      s.cv.wait(lk);
      continue;
    }
    const Clock::time_point due = s.pending.front().queued + wait;
    if (s.pending.size() < max_batch && Clock::now() < due) {
      s.cv.wait_until(lk, due);
      continue;
    }
    const size_t n = std::min(max_batch, s.pending.size());
    std::vector<Impl::Item> batch(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(n));
    s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(n));
    lk.unlock();
    // The prompts' owners wait for these items, so the strings stay alive.
    std::vector<std::string> texts;
    texts.reserve(n);
    for (const Impl::Item& it : batch) texts.push_back(*it.prompt);
    const std::vector<Impl::Outcome> out = s.send(texts);
    lk.lock();
    for (size_t k = 0; k < n; ++k) {
      Impl::Waiter& owner = *batch[k].waiter;
      if (out[k].error.empty()) {
        owner.scores[batch[k].slot] = out[k].score;
      } else {
        s.counters.failures.fetch_add(1);
        if (owner.error.empty()) owner.error = out[k].error;
      }
      --owner.left;
    }
    s.cv.notify_all();
  }
  lk.unlock();
  if (!w.error.empty()) throw InfraError(w.error);
  return w.scores;
}

const RewardServiceOptions& RewardService::options() const { return impl_->opts; }

const RewardService::Counters& RewardService::counters() const { return impl_->counters; }

json RewardService::stats() const {
  const Counters& c = impl_->counters;
  return json{{"requests", c.requests.load()},
              {"prompts", c.prompts.load()},
              {"retries", c.retries.load()},
              {"failures", c.failures.load()}};
}

std::shared_ptr<RewardService> shared_reward_service(const RewardServiceOptions& o, const std::string& keys) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<RewardService>> services;
  json id = config_to_json(o);
  id.erase("prompt_template");  // the service never reads it: judges of one server share
  id["keys"] = keys;
  const std::string key = id.dump();
  std::lock_guard<std::mutex> g(mu);
  auto it = services.find(key);
  if (it != services.end()) return it->second;
  auto svc = std::make_shared<RewardService>(o, keys);
  services.emplace(key, svc);
  return svc;
}

void register_reward_service() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_reward_fn("remote", [](const json& kwargs) -> RewardFn {
      const RewardServiceOptions o = RewardServiceOptions::from_json(kwargs, "reward_kwargs");
      const PromptTemplate tmpl = with_context("reward_kwargs.prompt_template", [&] {
        return judge_template(o.prompt_template);
      });
      std::shared_ptr<RewardService> svc = shared_reward_service(o, "reward_kwargs.");
      return [svc, tmpl](const std::string& response, const json& ground_truth, const json& extra) {
        const std::string prompt =
            tmpl.render({{"response", response}, {"ground_truth", ground_truth}, {"extra_info", extra}});
        return svc->score({prompt}).front();
      };
    });
  });
}

}  // namespace agentr1::tasks
