// agentr1/rollout/remote_scorer.h — prompt log-probs from an OpenAI-compatible server
// (vLLM, `agentr1 serve`): the log-prob of every token of a sequence under the served
// model, and optionally the top-k at each position. No torch. A remote distillation
// teacher (train/distill.h, algorithm.distill.teachers.<name>.url) scores through it.
//
//   rollout::RemoteScorerOptions o;
//   o.url = "http://10.0.0.7:8000";
//   rollout::RemoteScorer scorer(o);                    // GET /v1/models: Error naming the URL
//   std::vector<rollout::PromptScores> s = scorer.score(seqs, /*temperature=*/0.7, /*topk=*/8);
//   s[i].logprob[t]            log p(seqs[i][t] | seqs[i][<t]) at the temperature; [0] = 0
//   s[i].topk_ids[t * 8 + j]   the j-th most likely id at position t (t >= 1; t = 0: id 0,
//   s[i].topk_logprob[...]     log-prob 0), most likely first
//
// Wire format (vLLM's prompt log-probs): POST /v1/completions {"model", "prompt": [[ids],
// ...] (several sequences per request), "max_tokens": 1 (one generated token, ignored),
// "temperature", "prompt_logprobs": k (0 = the actual token only), "n": 1, "seed": 0}
// -> choices[i].prompt_logprobs (choice i = prompt i, by "index"): one entry per prompt
// token, the first null, each other {"<token id>": {"logprob", "rank", "decoded_token"}}
// holding the actual token and the top k (k or k + 1 entries).
//
// Temperature: agentr1 serve computes log_softmax(logits / temperature) (temperature 0
// counts as 1), the distribution a student sampling at that temperature is judged by.
// vLLM reports the raw model's log-probs (temperature 1) whatever the request says: with
// a vLLM teacher, log-probs match a local teacher's only at temperature 1.
//
// Requests: sequences go in chunks of at most max_prompts_per_request sequences and
// max_tokens_per_request tokens (a longer sequence goes alone), max_inflight chunks at
// once. Failures: as RemoteGenerator's (core/http_client.h): connection failures, timeouts
// and 5xx are retried, then an Error naming the URL and the request; a 4xx is an Error
// with the server's message; a malformed response (no prompt_logprobs, a wrong length,
// the actual token absent from an entry, fewer than k entries) an Error naming the field.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"

namespace agentr1::rollout {

struct RemoteScorerOptions {
  std::string url;                        // the server's base URL, scheme://host:port, no path
  std::string model;                      // "model" of the requests; "" = the first id of GET /v1/models
  double timeout_s = 300;                 // seconds one HTTP attempt may wait for its response; > 0
  int retries = 3;                        // retries after a connection failure, timeout or 5xx; 0..10
  double backoff_s = 0.5;                 // wait before the first retry, doubled each next one; >= 0
  std::string api_key;                    // sent as "Authorization: Bearer <key>"; "" = none
  int max_prompts_per_request = 16;       // sequences per request; >= 1
  int64_t max_tokens_per_request = 16384; // tokens per request (a longer sequence goes alone); >= 1
  int max_inflight = 4;                   // requests in flight at once; >= 1
  // Throws Error naming the key (prefix + field), the rule and the value.
  void validate(const std::string& prefix) const;
};

struct PromptScores {
  std::vector<float> logprob;        // [len] log p(ids[t] | ids[<t]); [0] = 0
  std::vector<int32_t> topk_ids;     // [len * k] (k > 0) the k most likely ids per position
  std::vector<float> topk_logprob;   // [len * k] their log-probs, descending; row 0: zeros
};

class RemoteScorer {
 public:
  // Validates the options (errors name `keys` + field, e.g. "algorithm.distill.teachers.
  // t."), asks GET /v1/models and learns or checks the model name. Throws Error naming
  // the URL when the server does not answer or does not serve options.model.
  explicit RemoteScorer(RemoteScorerOptions options, std::string keys = "");
  ~RemoteScorer();
  RemoteScorer(const RemoteScorer&) = delete;
  RemoteScorer& operator=(const RemoteScorer&) = delete;

  // The scores of each sequence (see the top of this file); temperature > 0, topk >= 0.
  // Every sequence needs >= 1 token. Thread-safe. Throws Error naming the URL.
  std::vector<PromptScores> score(const std::vector<TokenIds>& seqs, double temperature, int topk) const;

  const std::string& url() const;
  const std::string& model_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One choice's prompt_logprobs (a list with one entry per id of `ids`) as PromptScores
// with top `topk` (exposed for tests). `path` names the field in errors. Throws Error
// "malformed response: field '<path>[t]' ...".
PromptScores parse_prompt_logprobs(const json& entries, const TokenIds& ids, int topk, const std::string& path);

}  // namespace agentr1::rollout
