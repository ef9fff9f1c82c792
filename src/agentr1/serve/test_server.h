// agentr1/serve/test_server.h — tests only: `agentr1 serve` in-process, as cmd_serve
// wires it (engine, OpenAI server, the engine's prompt scorer), on a free local port.
//
//   serve::testing::InProcessServer s(model_dir);   // serving, s.url() = http://127.0.0.1:PORT
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/serve/openai_server.h"
#include "agentr1/serve/prompt_scoring.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::serve::testing {

class InProcessServer {
 public:
  explicit InProcessServer(const std::string& model_dir, const std::string& name = "teacher")
      : model_(model::load_pretrained(model_dir, at::kFloat, at::Device(at::kCPU))) {
    const text::Tokenizer tok = text::Tokenizer::load(model_dir);
    ServedModel served{name, 256, model_->config().vocab_size, 0, tok, std::nullopt, "hermes", {}};
    rollout::EngineOptions eo;
    eo.max_batch = 4;
    eo.max_context = served.max_context;
    eo.detokenize = [tok](const TokenIds& ids) { return tok.decode(ids); };
    engine_ = std::make_unique<rollout::Engine>(model_, eo);
    ServerOptions so;
    so.port = 0;
    so.threads = 4;
    server_ = std::make_unique<OpenAIServer>(*engine_, served, so, WeightUpdater{}, engine_prompt_scorer(*engine_));
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
  }
  ~InProcessServer() {
    server_->stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  model::Transformer& model() { return model_; }

 private:
  model::Transformer model_;
  std::unique_ptr<rollout::Engine> engine_;
  std::unique_ptr<OpenAIServer> server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace agentr1::serve::testing
