// agentr1/core/generator.h — the interface between agent flows and an inference
// engine: token ids in, token ids + log-probs out. No torch here.
//
//   GenRequest req;
//   req.prompt_ids = tok.encode(prompt);
//   req.sampling.temperature = 1.0f;
//   req.sampling.max_new_tokens = 128;
//   req.sampling.stop_token_ids = {im_end_id};
//   std::future<GenResult> f = generator.submit(std::move(req));   // thread-safe
//   GenResult r = f.get();        // r.token_ids, r.logprobs (one per token)
//
// Implementations: rollout::Engine (in-process, continuous batching) and
// rollout::RemoteGenerator (OpenAI-compatible servers, token ids in/out).
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <vector>

namespace agentr1 {

using TokenId = int32_t;
using TokenIds = std::vector<TokenId>;

struct SamplingParams {
  float temperature = 1.0f;          // 0 means greedy (argmax)
  float top_p = 1.0f;                // nucleus mass in (0, 1]; 1 disables
  int top_k = 0;                     // keep the k most likely tokens; 0 disables
  int max_new_tokens = 256;          // hard cap on generated tokens for this request
  uint64_t seed = 0;                 // per-request RNG seed (same seed, same output)
  TokenIds stop_token_ids;           // finish after sampling any of these (kept in output)
  std::vector<std::string> stop_strings;  // finish once the decoded text contains one
                                          // (output is cut after the stop string's last token)
  bool greedy() const { return temperature <= 0.0f; }
};

enum class FinishReason { kStopToken, kStopString, kLength, kContextFull, kAborted };
const char* finish_reason_name(FinishReason r);

struct GenRequest {
  TokenIds prompt_ids;               // exact ids the policy sees; never re-tokenised
  SamplingParams sampling;
  uint64_t affinity_key = 0;         // requests sharing a nonzero key share a prompt prefix
                                     // (a GRPO group, and its trajectories' later turns): a
                                     // generator with several servers sends them to one, whose
                                     // prefix cache then serves them all; 0 = none. Never
                                     // changes what is generated
  // Streaming: called with each sampled token (and its log-prob, as in GenResult), in
  // order, from the generator's own thread, before the future is fulfilled. Return false
  // to abort the request: it then finishes with kAborted, keeping the tokens so far (a
  // client that went away). Must be quick and must not call into the generator; an
  // exception it throws fails the request. A generator that cannot stream (a remote one)
  // calls it for every token once the whole response has arrived, so a consumer sees
  // every result token through it either way. Unset: no calls. Never changes what is
  // generated.
  std::function<bool(TokenId id, float logprob)> on_token;
};

struct GenResult {
  TokenIds token_ids;                // sampled ids, stop token included when it fired
  std::vector<float> logprobs;       // log pi(token | prefix), same length as token_ids:
                                     // log_softmax(logits / T) with T = temperature (T = 1
                                     // when greedy), before top-k/top-p truncation -- what
                                     // the learner recomputes (verl's convention)
  FinishReason finish = FinishReason::kLength;
  int64_t policy_version = 0;        // weights version that produced the tokens
};

class Generator {
 public:
  virtual ~Generator() = default;
  // Thread-safe. Queues the request; the future is fulfilled when it finishes.
  // Throws Error for an invalid request (empty prompt, prompt longer than the
  // engine's context window) before queueing.
  virtual std::future<GenResult> submit(GenRequest request) = 0;
  // Context window (prompt + generated tokens) this generator supports.
  virtual int max_context() const = 0;
  // Submits all and waits; results in request order.
  std::vector<GenResult> generate(std::vector<GenRequest> requests);
};

}  // namespace agentr1
