// agentr1/tasks/reward_service.h — rewards scored by a model behind an OpenAI-compatible
// endpoint (agentr1 serve, vLLM, SGLang): an LLM judge for any task family ("remote"
// reward function, reward_model.style=remote) and the scorer other families call (the
// paper_search selector). verl's GenRM, SkyRL's judge and ART's RULER do the same.
//
//   RewardServiceOptions o;                       // or bound from reward_kwargs.*
//   o.url = "http://127.0.0.1:8000";
//   o.parser = "yes_no";
//   std::shared_ptr<RewardService> svc = shared_reward_service(o);   // one per options
//   std::vector<float> s = svc->score({"Is 2+2=4? Answer yes or no.\n"});   // {1}
//   svc->stats();                                 // {"requests", "prompts", "retries", "failures"}
//
//   PromptTemplate t = judge_template("Reference: {ground_truth}\nAnswer: {response}\n"
//                                     "Topic: {extra_info.topic}. Correct? yes or no: ");
//   std::string p = t.render({{"response", text}, {"ground_truth", gt}, {"extra_info", extra}});
//
//   register_reward_service();                    // "remote" in tasks/reward.h's registry
//   RewardFn fn = make_reward_fn("remote", {{"url", "http://127.0.0.1:8000"}, {"parser", "yes_no"}});
//   float r = fn(response_text, sample.ground_truth, sample.extra_info);
//
// Batching: score() is thread-safe; the prompts of concurrent callers (the trajectories in
// flight, each scoring one prompt) are merged into requests POST /v1/completions
// {"model", "prompt": [p1, p2, ...], "max_tokens", "temperature"} of at most max_batch
// prompts, each sent when full or when its oldest prompt has waited batch_wait_ms. The
// choices of a response are matched to prompts by their "index". The waiting callers send
// the requests themselves (no thread of its own), several at once when several are due.
//
// Failures: a connection failure, a timeout or a 5xx is retried (timeout_s, retries,
// backoff_s: core/http_client.h); what is left after that, a 4xx, a malformed response, a
// missing choice or an answer the parser cannot read throws InfraError (core/error.h)
// naming the url, the cause and the answer: the judge failed, not the policy, so the flow
// marks the trajectory (Trajectory::infra_failure) and the trainer leaves it out of its
// group instead of scoring it 0. Only the callers whose prompts failed get the error.
//
// Prompts go to /v1/completions as they are: a chat model's template (e.g. Qwen's
// "<|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n") belongs in prompt_template.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::tasks {

// The default prompt_template: a yes/no judge of the response against the ground truth.
extern const char* const kDefaultJudgeTemplate;

struct RewardServiceOptions {
  std::string url;                // base URL of the judge server, scheme://host:port (the
                                  // client adds /v1/completions); required
  std::string model;              // "model" of the requests; "" = left out (the server's
                                  // only model: agentr1 serve, vLLM)
  std::string prompt_template = kDefaultJudgeTemplate;  // the judge prompt; placeholders in
                                  // braces (judge_template() lists them), {{ and }} are
                                  // literal braces; not used by RewardService itself
  std::string parser = "yes_no";  // how an answer becomes a score: "yes_no" (an answer
                                  // starting with yes -> 1, no -> 0) | "score" (the first
                                  // number, which must lie in [min_score, max_score])
  double min_score = 0;           // parser "score": the lowest score a judge may answer
  double max_score = 1;           // parser "score": the highest; > min_score
  int max_tokens = 16;            // tokens the judge may generate per prompt; >= 1
  double temperature = 0;         // the judge's sampling temperature (0 = greedy); >= 0
  int max_batch = 32;             // prompts per HTTP request at most; >= 1
  double batch_wait_ms = 5;       // how long a batch waits to fill before it is sent; >= 0
  double timeout_s = 30;          // seconds one HTTP attempt may wait for its response; > 0
  int retries = 3;                // extra attempts after a connection failure, timeout or 5xx
                                  // (never after a 4xx); 0..10
  double backoff_s = 0.5;         // wait before the first retry, doubled for each next one
  std::string api_key_env;        // name of the environment variable holding the bearer
                                  // key ("" = no key); never the key itself in a config

  template <class V>
  void visit(V& v) {
    v.field("url", url, "judge server base URL, e.g. http://127.0.0.1:8000 (agentr1 serve, vLLM, SGLang); required");
    v.field("model", model, "model name sent in requests; empty = not sent (the server's only model)");
    v.field("prompt_template", prompt_template,
            "judge prompt with {response}, {ground_truth}, {extra_info.KEY}; {{ and }} are literal braces");
    v.field("parser", parser, "yes_no (answer starts with yes -> 1, no -> 0) | score (first number, in [min, max])");
    v.field("min_score", min_score, "parser score: the lowest score the judge may answer");
    v.field("max_score", max_score, "parser score: the highest score the judge may answer");
    v.field("max_tokens", max_tokens, "tokens the judge may generate per answer");
    v.field("temperature", temperature, "the judge's sampling temperature (0 = greedy)");
    v.field("max_batch", max_batch, "prompts per HTTP request at most");
    v.field("batch_wait_ms", batch_wait_ms, "milliseconds a batch waits to fill before it is sent");
    v.field("timeout_s", timeout_s, "seconds one HTTP attempt may wait for its response");
    v.field("retries", retries, "retries of a request after a connection failure, timeout or 5xx (0..10)");
    v.field("backoff_s", backoff_s, "wait before the first retry in seconds, doubled for each next one");
    v.field("api_key_env", api_key_env, "environment variable holding the bearer key; empty = none");
  }
  // Throws Error naming the key, the rule and the value (the template's syntax is checked
  // here, its placeholder names by whoever renders it: judge_template()).
  void validate() const;
  // The options from reward kwargs (null = defaults), keys named "<prefix>.<key>": an
  // unknown key fails with the nearest and the valid keys, a wrong type or value with the
  // key, the rule and the value.
  static RewardServiceOptions from_json(const json& kwargs, const std::string& prefix = "reward_kwargs");
};

enum class JudgeParser { kYesNo, kScore };
// "yes_no" | "score"; anything else throws Error naming both.
JudgeParser parse_judge_parser(const std::string& name);

// The score in an answer, or nullopt (and *why, when given, says what is wrong). Leading
// whitespace and one leading <think>...</think> block are skipped first. kYesNo: "yes" ->
// 1, "no" -> 0 (any case, not followed by a letter or digit: " Yes." and "no" read,
// "Nope" does not). kScore: the first decimal number ("Score: 3" -> 3), which must lie in
// [min_score, max_score].
std::optional<float> parse_judge_answer(const std::string& answer, JudgeParser parser, double min_score = 0,
                                        double max_score = 1, std::string* why = nullptr);

// A prompt template compiled once: literal text and {name} placeholders; {{ and }} stand
// for literal braces. `names` are the placeholders allowed; a name "x.*" allows {x.KEY}
// for any KEY (a top-level key of the object given as x).
class PromptTemplate {
 public:
  // Throws Error on an unknown placeholder (listing the allowed ones), an unclosed '{' or
  // a lone '}' (naming the offset and the fix: {{ or }}).
  PromptTemplate(const std::string& text, const std::vector<std::string>& names);
  // The text with each placeholder replaced by values[name] (values[x][KEY] for {x.KEY}):
  // a string as it is, anything else as JSON. Throws Error when a value is missing,
  // naming the placeholder and the keys present.
  std::string render(const json& values) const;
  // The placeholder names used, in order of first use ("extra_info.topic", ...).
  std::vector<std::string> placeholders() const;

 private:
  struct Part {
    std::string text;  // literal text, or the placeholder's object name
    std::string key;   // {x.KEY}: KEY; else ""
    bool literal = true;
  };
  std::vector<Part> parts_;
};

// The judge's template: placeholders {response}, {ground_truth}, {extra_info.KEY}.
PromptTemplate judge_template(const std::string& text);
// judge_template(tmpl).render({response, ground_truth, extra_info}). Throws as both.
std::string render_judge_prompt(const std::string& tmpl, const std::string& response, const json& ground_truth,
                                const json& extra_info);

class RewardService {
 public:
  // Counters since construction (atomics: read them while others score).
  struct Counters {
    std::atomic<int64_t> requests{0};  // HTTP requests sent (retries not counted)
    std::atomic<int64_t> prompts{0};   // prompts sent
    std::atomic<int64_t> retries{0};   // HTTP attempts repeated
    std::atomic<int64_t> failures{0};  // prompts that ended in InfraError
  };

  // Validates `o` (Error naming the key) and reads api_key_env (Error when the variable
  // is not set). `keys` is the config prefix errors name ("reward_kwargs." -> HINT:
  // raise reward_kwargs.timeout_s). Connects to nothing yet.
  explicit RewardService(RewardServiceOptions o, std::string keys = "reward_kwargs.");
  ~RewardService();
  RewardService(const RewardService&) = delete;
  RewardService& operator=(const RewardService&) = delete;

  // One score per prompt, in order, each from the parser (see the top). Blocks until all
  // are scored; thread-safe, and concurrent callers' prompts share requests. Throws
  // InfraError (url, cause, answer, HINT) when any of them could not be scored.
  std::vector<float> score(const std::vector<std::string>& prompts);

  const RewardServiceOptions& options() const;
  const Counters& counters() const;
  // {"requests", "prompts", "retries", "failures"}: the counters now.
  json stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One RewardService per distinct options (their JSON without prompt_template, plus
// `keys`) for the whole process, so reward functions built per trajectory share one
// batcher. Kept until the process ends. Throws as RewardService's constructor.
std::shared_ptr<RewardService> shared_reward_service(const RewardServiceOptions& o,
                                                     const std::string& keys = "reward_kwargs.");

// Registers reward function "remote" (tasks/reward.h): kwargs are RewardServiceOptions
// (reward_kwargs.*); the function renders prompt_template (judge_template) with the
// response, the ground truth and extra_info and returns the shared service's score.
// Idempotent. Called by register_builtin_tasks().
void register_reward_service();

}  // namespace agentr1::tasks
