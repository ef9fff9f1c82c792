// agentr1 serve — the policy behind the OpenAI API (vLLM-compatible, token ids in and out).
//
//   agentr1 serve --model models/qwen3 --port 8000
//   agentr1 serve --model run/checkpoints/step_000100 --port 0 --api-key secret   # any free port
//   curl http://127.0.0.1:8000/v1/completions -d '{"prompt": [1, 2, 3], "max_tokens": 8, "seed": 0}'
//
// Once bound it writes one line, on stderr and on stdout (flushed), that scripts wait for:
//   agentr1 serve: listening on http://HOST:PORT
// then one log line per request (stderr). SIGINT or SIGTERM stops it: no new
// connections, requests in flight are answered, exit code 0; a second signal ends the
// process at once. Routes, request fields and their semantics: openai_server.h and
// openai_api.h.
//
// /v1/completions with "prompt_logprobs": k scores the prompt with one forward of the
// served model (serve/prompt_scoring.h), paused between engine iterations and never
// during a weight reload (openai_api.h: the shape, the temperature).
//
// /update_weights_from_disk {"model_path": DIR, "policy_version": V} loads DIR's
// config.json + model.safetensors into the running engine: the checkpoint is read and
// checked first (every tensor's shape against the served model, then the architecture
// keys of config.json: model_type, rope_theta, rms_norm_eps, qk_norm, attention_bias,
// tie_word_embeddings); a mismatch is a 400 naming the tensor or key and both values,
// and the old weights keep serving. Then the engine stops admitting requests, lets the
// admitted ones finish with the old weights (no response straddles two versions),
// copies the weights (cast to --dtype), forgets its prefix cache, stamps V (if given) as
// the policy version, and admits the waiting requests with the new weights.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>

#include <ATen/ATen.h>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/core/log.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/text/tool_format/tool_format.h"
#include "command.h"
#include "agentr1/serve/openai_server.h"
#include "agentr1/serve/prompt_scoring.h"

namespace {

namespace fs = std::filesystem;
using agentr1::Error;
using agentr1::json;

struct ServeOpts {
  std::string model_dir;          // HF layout: config.json + model.safetensors
  std::string tokenizer_dir;      // tokenizer.json (+ tokenizer_config.json); empty = model_dir
  std::string lora;               // PEFT adapter directory served on the model; "" = none
  std::string host = "127.0.0.1"; // bind address
  int port = 8000;                // 0 = any free port (printed)
  int max_batch = 16;             // sequences the engine decodes together
  int max_context = 0;            // prompt + generated tokens per sequence; 0 = min(model's, 2048)
  int kv_blocks = 0;              // KV-cache blocks of 16 positions; 0 = the engine's default
  int threads = 0;                // torch threads, 0 = all cores
  int http_threads = 0;           // HTTP worker threads; 0 = max(16, 2 * max_batch): an idle
                                  // keep-alive connection holds its thread for a few seconds
  std::string served_model_name;  // model id clients send; empty = the model directory's name
  std::string api_key;            // empty = no authentication
  std::string dtype = "fp32";     // weights / KV-cache dtype
  std::string tool_format;        // chat tool-call format; empty = the template's own (default_tool_format)
  bool batch_invariant = true;    // a request's tokens and log-probs do not depend on what it is batched with
  bool huge_pages = true;         // the weights in transparent huge pages (rollout::EngineOptions::huge_pages)
  bool packed_decode = true;      // one-sequence steps read the decode layout (rollout::EngineOptions::packed_decode)
};

std::atomic<int> g_signal{0};

extern "C" void on_serve_signal(int sig) {
  g_signal.store(sig);
  const char* msg = "\nagentr1 serve: stopping (requests in flight are answered first); signal again to quit now\n";
  ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
  (void)ignored;
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

json read_json_if_exists(const fs::path& p) {
  if (!fs::exists(p)) return json();
  std::ifstream in(p);
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    throw Error(p.string() + ": invalid JSON: " + e.what());
  }
}

std::string shape_str(at::IntArrayRef s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// /update_weights_from_disk on a server started with --lora: `dir` is an adapter
// directory of the same rank and targets. It is read into the live adapters while the
// engine is drained; on any error the previous adapter is put back and keeps serving.
std::string reload_adapter(agentr1::rollout::Engine& engine, agentr1::model::Transformer serving,
                           const std::string& dir, const json& body) {
  using namespace agentr1;
  if (serving->lora() == nullptr)
    throw serve::ApiError(400, "model_path '" + dir + "' holds a LoRA adapter but this server was started without "
                                   "--lora; start it with --lora DIR to serve adapters",
                          "model_path");
  if (!fs::exists(fs::path(dir) / "adapter_config.json"))
    throw serve::ApiError(400, "model_path '" + dir + "' has no adapter_config.json; this server serves a LoRA "
                                   "adapter (--lora) and reloads adapter directories only",
                          "model_path");
  const bool has_version = body.contains("policy_version") && body["policy_version"].is_number_integer();
  const int64_t version = has_version ? body["policy_version"].get<int64_t>() : 0;
  std::string error;
  engine.with_model_drained([&](model::Transformer& m) {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> before;
    for (auto& [name, t] : m->lora_parameters()) before.push_back(t.clone());
    try {
      model::load_lora_adapter(m, dir);
    } catch (const std::exception& e) {
      size_t i = 0;
      for (auto& [name, t] : m->lora_parameters()) t.copy_(before[i++]);
      error = e.what();
      return;
    }
    engine.clear_prefix_cache();
    if (has_version) engine.set_policy_version(version);
  });
  if (!error.empty()) throw serve::ApiError(400, error + " (the old adapter keeps serving)", "model_path");
  std::string msg = "loaded the LoRA adapter from " + dir;
  msg += has_version ? "; policy version " + std::to_string(version) : "";
  AGENTR1_LOG(INFO) << "serve: " << msg;
  return msg;
}

// The server's /update_weights_from_disk: see the top of this file.
std::string reload_weights(agentr1::rollout::Engine& engine, agentr1::model::Transformer serving,
                           at::ScalarType dtype, const json& body) {
  using namespace agentr1;
  const std::string dir = body["model_path"].get<std::string>();
  if (!fs::is_directory(dir))
    throw serve::ApiError(400, "model_path '" + dir + "' is not a directory (want config.json + model.safetensors)",
                          "model_path");
  if (serving->lora() != nullptr || fs::exists(fs::path(dir) / "adapter_config.json"))
    return reload_adapter(engine, serving, dir, body);
  model::Transformer fresh = with_context("loading " + dir, [&] {
    return model::load_pretrained(dir, dtype, serving->parameters().front().device());
  });
  auto have = serving->named_parameters();
  auto got = fresh->named_parameters();
  for (const auto& p : have) {
    const at::Tensor* t = got.find(p.key());
    if (t == nullptr)
      throw serve::ApiError(400, dir + ": tensor '" + p.key() + "' is missing (the served model has it, shape " +
                                     shape_str(p.value().sizes()) + "); the old weights keep serving",
                            "model_path");
    if (t->sizes() != p.value().sizes())
      throw serve::ApiError(400, dir + ": tensor '" + p.key() + "' has shape " + shape_str(t->sizes()) +
                                     " but the served model's is " + shape_str(p.value().sizes()) +
                                     "; a checkpoint of another model size cannot be loaded into a running "
                                     "server (the old weights keep serving)",
                            "model_path");
  }
  if (got.size() != have.size())
    throw serve::ApiError(400, dir + ": the checkpoint has " + std::to_string(got.size()) +
                                   " tensors, the served model " + std::to_string(have.size()),
                          "model_path");
  const json want = serving->config().to_json(), found = fresh->config().to_json();
  for (const char* key : {"model_type", "rope_theta", "rms_norm_eps", "qk_norm", "attention_bias",
                          "tie_word_embeddings"}) {
    const json a = want.contains(key) ? want[key] : json(), b = found.contains(key) ? found[key] : json();
    if (a != b)
      throw serve::ApiError(400, dir + "/config.json: '" + key + "' is " + b.dump() + " but the served model's is " +
                                     a.dump() + "; the old weights keep serving",
                            "model_path");
  }
  const bool has_version = body.contains("policy_version") && body["policy_version"].is_number_integer();
  const int64_t version = has_version ? body["policy_version"].get<int64_t>() : 0;
  engine.with_model_drained([&](model::Transformer& m) {
    at::NoGradGuard no_grad;
    for (auto& p : m->named_parameters()) p.value().copy_(*got.find(p.key()));
    engine.clear_prefix_cache();
    if (has_version) engine.set_policy_version(version);
  });
  std::string msg = "loaded " + std::to_string(have.size()) + " tensors from " + dir;
  msg += has_version ? "; policy version " + std::to_string(version) : "; policy version unchanged (" +
                                                                           std::to_string(engine.policy_version()) + ")";
  AGENTR1_LOG(INFO) << "serve: " << msg;
  return msg;
}

int run_serve(const ServeOpts& o) {
  using namespace agentr1;
  cli::set_threads(o.threads);
  AGENTR1_CHECK(o.max_batch >= 1, "--max-batch must be >= 1, got " << o.max_batch);
  const std::string tok_dir = o.tokenizer_dir.empty() ? o.model_dir : o.tokenizer_dir;
  text::Tokenizer tok = with_context("loading tokenizer from " + tok_dir,
                                     [&] { return text::Tokenizer::load(tok_dir); });
  const at::ScalarType dtype = model::parse_dtype(o.dtype);
  model::Transformer m = model::load_pretrained(o.model_dir, dtype, at::Device(at::kCPU));
  if (!o.lora.empty()) model::load_lora_adapter(m, o.lora);  // applied beside the base, not merged
  const model::ModelConfig& cfg = m->config();
  AGENTR1_CHECK(tok.vocab_size() <= cfg.vocab_size,
                "tokenizer in " << tok_dir << " has " << tok.vocab_size() << " ids but the model's vocab_size is "
                                << cfg.vocab_size << "; use the tokenizer that belongs to the model");

  serve::ServedModel served{
      o.served_model_name.empty() ? fs::path(o.model_dir).lexically_normal().filename().string()
                                  : o.served_model_name,
      0, cfg.vocab_size, 0, tok, std::nullopt, "hermes", {}};
  if (served.name.empty() || served.name == ".") served.name = fs::absolute(o.model_dir).lexically_normal().parent_path().filename().string();
  const int64_t max_pos = cfg.max_position_embeddings;
  served.max_context = static_cast<int>(o.max_context > 0 ? o.max_context : std::min<int64_t>(max_pos, 2048));
  AGENTR1_CHECK(served.max_context >= 2 && served.max_context <= max_pos,
                "--max-context must be in 2.." << max_pos << " (the model's max_position_embeddings), got "
                                               << served.max_context);
  served.created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  served.eos_ids = serve::default_eos_ids(tok, read_json_if_exists(fs::path(o.model_dir) / "config.json"),
                                          read_json_if_exists(fs::path(o.model_dir) / "generation_config.json"),
                                          cfg.vocab_size);
  if (!tok.chat_template().empty()) {
    try {
      served.chat_template = text::ChatTemplate::from_tokenizer(tok);
    } catch (const std::exception& e) {
      AGENTR1_LOG(WARN) << "serve: the chat template of " << tok_dir << " cannot be used (" << e.what()
                        << "); /v1/chat/completions will answer 400";
    }
  }
  if (!o.tool_format.empty()) {
    text::make_tool_format(o.tool_format);  // throws, listing the known names
    served.tool_format = o.tool_format;
  } else {
    served.tool_format = text::default_tool_format(tok.chat_template());
  }

  rollout::EngineOptions eo;
  eo.max_batch = o.max_batch;
  eo.max_context = served.max_context;
  eo.n_blocks = o.kv_blocks;
  eo.batch_invariant = o.batch_invariant;
  eo.huge_pages = o.huge_pages;
  eo.packed_decode = o.packed_decode;
  eo.detokenize = [tok](const TokenIds& ids) { return tok.decode(ids); };
  rollout::Engine engine(m, eo);
  const rollout::EngineStats st = engine.stats();

  serve::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.api_key = o.api_key;
  so.threads = o.http_threads > 0 ? o.http_threads : std::max(16, 2 * o.max_batch);
  serve::OpenAIServer server(
      engine, served, so, [&engine, m, dtype](const json& body) { return reload_weights(engine, m, dtype, body); },
      serve::engine_prompt_scorer(engine));
  const int port = server.bind();
  std::signal(SIGINT, on_serve_signal);
  std::signal(SIGTERM, on_serve_signal);
  AGENTR1_LOG(INFO) << "serve: model '" << served.name << "' from " << o.model_dir << " (" << arch_name(cfg.arch)
                    << ", " << cfg.num_parameters() << " parameters, " << o.dtype << "), max_batch " << o.max_batch
                    << ", max_context " << served.max_context << ", KV cache " << st.kv_blocks << " blocks ("
                    << (st.kv_blocks * st.kv_block_bytes >> 20) << " MiB), chat template "
                    << (served.chat_template ? "yes" : "none") << ", tool format " << served.tool_format
                    << ", stop ids " << json(served.eos_ids).dump() << ", " << so.threads << " HTTP threads"
                    << (o.api_key.empty() ? "" : ", API key required");
  const std::string line = "agentr1 serve: listening on http://" + o.host + ":" + std::to_string(port) + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);

  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      if (g_signal.load() != 0) {
        server.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  server.serve();
  done = true;
  watcher.join();
  AGENTR1_LOG(INFO) << "serve: stopped";
  return 0;
}

agentr1::cli::Registrar reg("serve", "Serve a model over the OpenAI API (completions, chat, weight reload)",
                            [](CLI::App& app) {
  auto o = std::make_shared<ServeOpts>();
  app.add_option("--model", o->model_dir, "Model directory (config.json + model.safetensors)")->required();
  app.add_option("--tokenizer", o->tokenizer_dir, "Tokenizer directory (default: the model directory)");
  app.add_option("--lora", o->lora,
                 "LoRA adapter directory (PEFT format) served on top of --model; /update_weights_from_disk then "
                 "takes adapter directories");
  app.add_option("--host", o->host, "Address to bind (0.0.0.0 = every interface)")->capture_default_str();
  app.add_option("--port", o->port, "Port, 0 = any free port (the bound one is printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--max-batch", o->max_batch, "Sequences decoded together")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--max-context", o->max_context,
                 "Prompt + generated tokens per sequence, 0 = min(max_position_embeddings, 2048)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("--kv-blocks", o->kv_blocks, "KV-cache blocks of 16 positions, 0 = enough for --max-batch full "
                                              "sequences, doubled for the prefix cache")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 26));
  app.add_option("--threads", o->threads, "Torch threads, 0 = all cores")->capture_default_str();
  app.add_option("--http-threads", o->http_threads, "HTTP worker threads (connections served at once), 0 = max(16, 2 x --max-batch)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--served-model-name", o->served_model_name, "Model id for clients (default: the model directory's name)");
  app.add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on /v1/* and /update_weights_from_disk");
  app.add_option("--dtype", o->dtype, "Weights dtype: fp32 | bf16 | fp16")->capture_default_str();
  app.add_flag("--batch-invariant,!--no-batch-invariant", o->batch_invariant,
               "A request's tokens and log-probs are the same bit for bit whatever it is batched with, "
               "cached or not, on any thread count (the engine's batch-invariant kernels; the default). "
               "--no-batch-invariant: BLAS products, whose rounding depends on the batch")
      ->capture_default_str();
  app.add_flag("--huge-pages,!--no-huge-pages", o->huge_pages,
               "Move the weights into transparent huge pages when the engine starts (the same bits; decode "
               "streams them faster where THP is 'madvise'; the default). --no-huge-pages: leave them as loaded")
      ->capture_default_str();
  app.add_flag("--packed-decode,!--no-packed-decode", o->packed_decode,
               "Steps that decode one request alone read a copy of the weights in the decode layout (one "
               "sequential stream per product: the same tokens, faster at batch 1; the default). It costs a second "
               "copy of the weights in memory, built at the first such step (0.3-7 s for a 0.6B bf16 model, with "
               "how readily the kernel finds huge pages). --no-packed-decode: read the weights themselves")
      ->capture_default_str();
  app.add_option("--tool-format", o->tool_format,
                 "Tool-call format of chat responses (hermes, llama3_json, deepseek_v3, mistral, gpt_oss); "
                 "default: the chat template's own");
  return [o]() -> int { return run_serve(*o); };
});

}  // namespace
