// agentr1/serve/openai_server.h — the HTTP side of `agentr1 serve`: an OpenAI-compatible
// server (cpp-httplib) over any Generator (the in-process engine in production, a
// scripted one in tests).
//
//   serve::ServerOptions so;
//   so.port = 0;                                  // any free port
//   serve::OpenAIServer server(engine, served_model, so, reload_weights);
//   int port = server.bind();                     // throws Error if the address is taken
//   std::thread t([&] { server.serve(); });       // blocks until stop()
//   ...; server.stop(); t.join();
//
// Routes (bodies: openai_api.h):
//   GET  /health                      200 {"status": "ok"}
//   GET  /v1/models                   the served model
//   POST /v1/completions              text or token-id prompts; stream: true -> SSE;
//                                     prompt_logprobs: k -> a scoring forward (PromptScorer)
//   POST /v1/chat/completions         messages through the chat template; stream: true -> SSE
//   POST /update_weights_from_disk    {"model_path": DIR, "policy_version": V?} -> the
//                                     WeightUpdater; {"success": true, "message"}, or 400
//                                     {"success": false, "message", "error": {...}}
// Every failure is an OpenAI error object {"error": {"message", "type", "param", "code"}}:
// 400 bad JSON or values, 401 missing/wrong "Authorization: Bearer <api_key>" (when an
// api key is set; /health stays open), 404 unknown route, 405 known route with another
// method, 500 the generator failed. A handler never lets an exception escape. Each
// request is logged at info level: method, path, status, tokens, milliseconds.
//
// Concurrency: each connection is served by one of `threads` HTTP threads, which
// submits its engine requests and waits for them; the engine batches the requests of
// all connections together (continuous batching). Weight updates are serialised.
// Streaming: the engine calls each request's on_token as it samples; the chunks
// (openai_api.h Streamer) queue up and the connection's thread writes them as they come,
// so the first tokens reach the client while the rest are being generated. A client
// that disconnects makes on_token return false: the engine aborts its requests.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"
#include "agentr1/serve/openai_api.h"

namespace agentr1::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";  // address to bind; 0.0.0.0 exposes the server to the network
  int port = 8000;                 // 0 = a free port chosen by the system (see bind())
  std::string api_key;             // non-empty: /v1/* and /update_weights_from_disk need "Bearer <key>"
  int threads = 8;                 // HTTP worker threads (concurrent connections served), >= 1
  size_t max_body_bytes = 64u << 20;  // larger request bodies get 413
};

// Loads the weights a /update_weights_from_disk body names and returns a message for
// the client. Throws ApiError (its status is answered) or another exception (400 with
// its message): the server keeps serving the old weights then.
using WeightUpdater = std::function<std::string(const json& body)>;

// Scores prompts for /v1/completions `prompt_logprobs` (openai_api.h): one PromptLogprobs
// per prompt, log_softmax(logits / temperature) of a forward over the prompt, with the
// top `k` ids at each position. serve/prompt_scoring.h makes one over the engine's model.
// The server calls it under the lock weight updates hold, one call at a time, so a
// reload never races a scoring forward. Throws on failure (answered 500).
using PromptScorer =
    std::function<std::vector<PromptLogprobs>(const std::vector<TokenIds>& prompts, double temperature, int k)>;

class OpenAIServer {
 public:
  // `generator` must outlive the server. Without an updater, /update_weights_from_disk
  // answers 400 "not supported"; without a scorer, prompt_logprobs answers 400.
  OpenAIServer(Generator& generator, ServedModel model, ServerOptions options, WeightUpdater update = {},
               PromptScorer score = {});
  ~OpenAIServer();
  OpenAIServer(const OpenAIServer&) = delete;
  OpenAIServer& operator=(const OpenAIServer&) = delete;

  // Binds host:port and returns the bound port (the chosen one for port 0). Throws
  // Error naming the address when it cannot bind.
  int bind();
  // Serves until stop(); requests in flight are answered first. Call after bind().
  void serve();
  // Thread-safe; may be called before serve() starts or while it runs.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agentr1::serve
