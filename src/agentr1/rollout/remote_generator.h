// agentr1/rollout/remote_generator.h — a Generator on OpenAI-compatible inference
// servers (vLLM, SGLang, `agentr1 serve`): token ids in, token ids + log-probs out. No
// torch here.
//
//   rollout::RemoteOptions o;
//   o.urls = {"http://10.0.0.5:8000", "http://10.0.0.6:8000"};
//   rollout::RemoteGenerator gen(o);           // checks every server (Error naming the URL)
//   gen.update_weights("/shared/weights/v3", 3);  // every server loads them, or Error
//   gen.set_policy_version(3);                 // stamped where a server does not say
//   std::future<GenResult> f = gen.submit(req);   // thread-safe
//
// Wire formats (request -> response fields read):
//   api openai (vLLM, agentr1 serve): POST /v1/completions {"model", "prompt": [ids],
//     "max_tokens", "temperature", "top_p", "top_k" (only when set), "seed" (the 64 bits
//     as a signed integer, as vLLM requires), "n": 1, "stop_token_ids", "stop",
//     "logprobs": 1, "return_token_ids": true, "skip_special_tokens": false,
//     "include_stop_str_in_output": true, "ignore_eos": true}
//     -> choices[0].token_ids, choices[0].logprobs.token_logprobs, choices[0].finish_reason
//     ("stop" | "length" | "abort"), choices[0].stop_reason (int: a stop token, string: a
//     stop string), choices[0].policy_version (agentr1's extension; optional).
//   api sglang: POST /generate {"input_ids", "sampling_params": {"max_new_tokens",
//     "temperature", "top_p", "top_k" (only when set), "sampling_seed", "stop_token_ids",
//     "stop", "skip_special_tokens": false, "no_stop_trim": true, "ignore_eos": false},
//     (SGLang's ignore_eos disables every stop token, stop_token_ids included, so it stays
//     false: the server then also stops on the model's own eos ids)
//     "return_logprob": true} -> meta_info.output_token_logprobs ([[logprob, id, text],
//     ...]), meta_info.finish_reason ({"type": "stop", "matched": id | string} |
//     {"type": "length"} | {"type": "abort"}), meta_info.policy_version (optional).
//   both: POST /update_weights_from_disk {"model_path", "policy_version"} ->
//     {"success", "message"}; GET /v1/models (openai: the model name, when
//     RemoteOptions.model is empty) or GET /health (sglang) at construction.
//
// Log-probs: GenResult's are log_softmax(logits / T). agentr1 serve and SGLang return
// those; vLLM's V1 engine returns the raw model's (T = 1) unless started with
// --logprobs-mode processed_logprobs, so with vLLM at a temperature other than 1 start it
// so (rollout/logprob_max_diff shows a mismatch).
//
// A stop token the server left out (vLLM may end with finish_reason "stop" and an int
// stop_reason without returning that id): the id is appended, as the in-process engine
// keeps it, and its log-prob is unknown: it is set to 0 (log 1) and counted in
// stats().unknown_logprobs, so rollout/logprob_max_diff shows it when the learner
// compares (the learner's own log-prob of that token is then the difference).
//
// Load balancing: a request with a nonzero GenRequest.affinity_key goes to the server
// that key was first sent to (a GRPO group's samples, and the later turns of its
// trajectories, share a prompt prefix that server has cached); a new key, or a request
// without one, goes to the server with the fewest requests queued or in flight. Each
// server gets at most max_inflight requests at once; each in-flight request uses a
// worker thread with its own HTTP client (httplib clients are not shared), which opens a
// connection per request (no idle keep-alive connections holding server threads).
//
// Failures: connection failures, timeouts and 5xx answers are retried up to `retries`
// times with exponential backoff (backoff_s, 2 backoff_s, ...), 4xx never. What still
// fails is an Error naming the server URL, the request (e.g. "POST /v1/completions"),
// the attempts made and the last cause; a response that does not parse or lacks a field
// is an Error naming the field. The future of submit() carries these errors.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"

namespace agentr1::rollout {

enum class RemoteApi { kOpenAI, kSGLang };
// "openai" | "sglang"; throws Error naming the known ones.
RemoteApi remote_api_from_string(const std::string& name);
const char* remote_api_name(RemoteApi api);

struct RemoteOptions {
  std::vector<std::string> urls;  // base URLs of the servers, scheme://host:port, no path
                                  // (the client adds /v1/completions ...); >= 1
  std::string api = "openai";     // wire format: openai (vLLM /v1/completions with token
                                  // ids, agentr1 serve) | sglang (SGLang's native /generate)
  std::string model;              // "model" of openai requests; "" = the first id the
                                  // server lists at GET /v1/models
  double timeout_s = 300;         // seconds one HTTP attempt may wait for a response (the
                                  // connection itself: at most 10 s); > 0
  int retries = 3;                // extra attempts after a connection failure, timeout or
                                  // 5xx answer (never after a 4xx); 0..10
  double backoff_s = 0.5;         // wait before the first retry, doubled for each next one
                                  // (capped at 30 s); >= 0
  std::string api_key;            // sent as "Authorization: Bearer <key>"; "" = none
  int max_inflight = 64;          // requests in flight per server (one connection each); >= 1
  int max_context = 2048;         // prompt + generated tokens a request may span (what
                                  // max_context() reports; the trainer sets it from
                                  // rollout.max_prompt_tokens + rollout.max_new_tokens)
  template <class V>
  void visit(V& v) {
    v.field("urls", urls, "server base URLs (scheme://host:port), one or more; requests are load-balanced");
    v.field("api", api, "openai (/v1/completions with token ids: vLLM, agentr1 serve) | sglang (/generate)");
    v.field("model", model, "model name sent to openai servers; empty = the first of GET /v1/models");
    v.field("timeout_s", timeout_s, "seconds one HTTP attempt may wait for its response");
    v.field("retries", retries, "retries of a request after a connection failure, timeout or 5xx (0..10)");
    v.field("backoff_s", backoff_s, "wait before the first retry in seconds, doubled for each next one");
    v.field("api_key", api_key, "bearer token sent to the servers; empty = none");
    v.field("max_inflight", max_inflight, "requests in flight per server");
  }
  // Throws Error naming the key (prefix + field), the rule and the value.
  void validate(const std::string& prefix = "rollout.remote.") const;
};

class RemoteGenerator : public Generator {
 public:
  struct Stats {
    int64_t requests = 0;          // generation requests answered
    int64_t retries = 0;           // attempts repeated (all request kinds)
    int64_t generated_tokens = 0;  // tokens of answered generation requests
    int64_t unknown_logprobs = 0;  // appended stop tokens whose log-prob is unknown (see top)
    std::vector<int64_t> per_server;  // generation requests answered, per URL
  };

  // Validates the options and checks each server (GET /v1/models or /health), learning
  // the model name where needed. Throws Error naming the URL of one that does not answer.
  explicit RemoteGenerator(RemoteOptions opts);
  ~RemoteGenerator() override;
  RemoteGenerator(const RemoteGenerator&) = delete;
  RemoteGenerator& operator=(const RemoteGenerator&) = delete;

  // Thread-safe. Throws Error for an empty prompt or one with no room left in
  // max_context; otherwise queues the request for a server (see the top of this file).
  std::future<GenResult> submit(GenRequest request) override;
  int max_context() const override;

  // Asks every server, in parallel, to load the HF model directory `model_path` and
  // waits for all. Throws Error naming each server that refused or failed, with its
  // message. Call it while no generation is in flight.
  void update_weights(const std::string& model_path, int64_t policy_version);
  // Stamped on results whose response carries no policy_version (vLLM, SGLang).
  void set_policy_version(int64_t version) { version_.store(version); }
  int64_t policy_version() const { return version_.load(); }

  const RemoteOptions& options() const;
  // The model name sent with openai requests ("" for sglang).
  const std::string& model_name() const;
  Stats stats() const;
  void reset_stats();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::atomic<int64_t> version_{0};
};

// Parsing one response body into a GenResult (exposed for tests). `url` and `what` name
// the server and request in errors; `stop_token_ids` are the request's; the result's
// policy_version is the response's or `fallback_version`; *unknown_logprob is set when
// a stop token had to be appended (see the top of this file).
GenResult parse_openai_completion(const json& body, const TokenIds& stop_token_ids, int64_t fallback_version,
                                  bool* unknown_logprob);
GenResult parse_sglang_generate(const json& body, const TokenIds& stop_token_ids, int64_t fallback_version,
                                bool* unknown_logprob);

}  // namespace agentr1::rollout
