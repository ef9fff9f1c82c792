#include "agentr1/serve/openai_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/serve/http_listen.h"
#include "agentr1/serve/sglang_api.h"

namespace agentr1::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Which methods each route answers (405 for the others).
const std::map<std::string, std::string>& routes() {
  static const std::map<std::string, std::string> r = {{"/health", "GET"},
                                                       {"/v1/models", "GET"},
                                                       {"/v1/completions", "POST"},
                                                       {"/v1/chat/completions", "POST"},
                                                       {"/update_weights_from_disk", "POST"},
                                                       {"/generate", "POST"}};
  return r;
}

// Invalid UTF-8 cannot reach these bodies (decodes replace it), but never throw here.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

bool needs_key(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/v1" || path == "/update_weights_from_disk" || path == "/generate";
}

}  // namespace

struct OpenAIServer::Impl {
  Generator& gen;
  ServedModel model;
  ServerOptions opt;
  WeightUpdater update;
  PromptScorer score;
  httplib::Server svr;
  std::mutex rng_mu;
  std::mt19937_64 rng{std::random_device{}()};
  std::atomic<uint64_t> next_id{0};
  std::mutex update_mu;  // one weight update or prompt scoring at a time
  std::atomic<bool> stop_requested{false};

  Impl(Generator& g, ServedModel m, ServerOptions o, WeightUpdater u, PromptScorer sc)
      : gen(g), model(std::move(m)), opt(std::move(o)), update(std::move(u)), score(std::move(sc)) {}

  uint64_t draw_seed() {
    std::lock_guard<std::mutex> lk(rng_mu);
    return rng();
  }

  std::string new_id(const char* prefix) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s-%016llx%08llx", prefix, static_cast<unsigned long long>(draw_seed()),
                  static_cast<unsigned long long>(next_id.fetch_add(1)));
    return buf;
  }

  static int64_t now_unix() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  static void log_request(const httplib::Request& req, int status, int64_t tokens, Clock::time_point t0) {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    AGENTR1_LOG(INFO) << "serve: " << req.method << " " << req.path << " " << status << " " << tokens
                      << " tokens " << static_cast<int64_t>(ms + 0.5) << " ms";
  }

  static json parse_body(const httplib::Request& req) {
    try {
      return json::parse(req.body);
    } catch (const json::exception& e) {
      throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
    }
  }

  // Runs fn (which fills res and returns the tokens it generated) with every failure
  // turned into an error object, then logs the request.
  void guarded(const httplib::Request& req, httplib::Response& res, const std::function<int64_t()>& fn) {
    const auto t0 = Clock::now();
    int64_t tokens = 0;
    try {
      tokens = fn();
    } catch (const ApiError& e) {
      send_json(res, e.status, error_body(e));
    } catch (const Error& e) {
      send_json(res, 400, error_body(e.what()));
    } catch (const std::exception& e) {
      send_json(res, 500, error_body(std::string("internal error: ") + e.what(), "server_error"));
    } catch (...) {
      send_json(res, 500, error_body("internal error", "server_error"));
    }
    log_request(req, res.status, tokens, t0);
  }

  // Submits all, then waits for all. A request the generator refuses is a 400; a
  // failure while generating a 500.
  std::vector<GenResult> generate(std::vector<GenRequest> reqs) {
    std::vector<std::future<GenResult>> futures;
    futures.reserve(reqs.size());
    for (GenRequest& r : reqs) {
      try {
        futures.push_back(gen.submit(std::move(r)));
      } catch (const std::exception& e) {
        throw ApiError(400, e.what());
      }
    }
    std::vector<GenResult> out;
    out.reserve(futures.size());
    for (auto& f : futures) {
      try {
        out.push_back(f.get());
      } catch (const std::exception& e) {
        throw ApiError(500, std::string("generation failed: ") + e.what(), "", "server_error");
      }
    }
    return out;
  }

  static int64_t count_tokens(const std::vector<GenRequest>& reqs, const std::vector<GenResult>& results) {
    int64_t n = 0;
    for (const GenResult& r : results) n += static_cast<int64_t>(r.token_ids.size());
    for (const GenRequest& r : reqs) n += static_cast<int64_t>(r.prompt_ids.size());
    return n;
  }

  // A streamed response: the engine's on_token callbacks feed a Streamer, whose chunks
  // the HTTP thread writes as they come (server-sent events). A client that goes away
  // aborts the generation (on_token returns false).
  struct Stream {
    Stream(std::shared_ptr<const void> r, Streamer s) : request(std::move(r)), st(std::move(s)) {}
    std::shared_ptr<const void> request;  // what st points at; destroyed after it
    std::mutex mu;
    std::condition_variable cv;
    Streamer st;
    struct Token {
      size_t choice;
      TokenId id;
      float logprob;
    };
    std::vector<Token> tokens_in;    // from on_token (the engine's thread): kept cheap there
    std::deque<std::string> events;  // ready to write
    std::vector<std::future<GenResult>> futures;
    std::vector<bool> finished;
    size_t n_finished = 0;
    int64_t tokens = 0;
    std::atomic<bool> client_gone{false};
    Clock::time_point t0;
    std::string path;
  };

  static std::string sse(const json& chunk) { return "data: " + dump(chunk) + "\n\n"; }

  // Submits reqs with on_token hooked to the stream, then answers with the event stream.
  // A request the generator refuses is a 400 before anything is sent.
  void stream(const httplib::Request& http, httplib::Response& res, std::vector<GenRequest> reqs,
              std::shared_ptr<const void> request, Streamer st, int64_t prompt_tokens) {
    auto s = std::make_shared<Stream>(std::move(request), std::move(st));
    s->t0 = Clock::now();
    s->path = http.path;
    s->tokens = prompt_tokens;
    s->finished.assign(reqs.size(), false);
    for (const json& c : s->st.begin()) s->events.push_back(sse(c));
    for (size_t i = 0; i < reqs.size(); ++i) {
      reqs[i].on_token = [s, i](TokenId id, float lp) {
        {
          std::lock_guard<std::mutex> lk(s->mu);
          s->tokens_in.push_back({i, id, lp});
        }
        s->cv.notify_all();
        return !s->client_gone.load();
      };
      try {
        s->futures.push_back(gen.submit(std::move(reqs[i])));
      } catch (const std::exception& e) {
        s->client_gone = true;  // abort what was already submitted
        throw ApiError(400, e.what());
      }
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [s](size_t, httplib::DataSink& sink) {
      std::deque<std::string> out;
      bool all_done = false;
      {
        std::unique_lock<std::mutex> lk(s->mu);
        s->cv.wait_for(lk, std::chrono::milliseconds(20), [&] { return !s->tokens_in.empty(); });
        for (const Stream::Token& t : s->tokens_in)
          for (const json& c : s->st.push(t.choice, t.id, t.logprob)) s->events.push_back(sse(c));
        s->tokens_in.clear();
        // Results that are ready: their last chunks (in choice order as they finish).
        for (size_t i = 0; i < s->futures.size(); ++i) {
          if (s->finished[i] || s->futures[i].wait_for(std::chrono::seconds(0)) != std::future_status::ready)
            continue;
          s->finished[i] = true;
          ++s->n_finished;
          try {
            const GenResult r = s->futures[i].get();
            s->tokens += static_cast<int64_t>(r.token_ids.size());
            for (const json& c : s->st.finish(i, r)) s->events.push_back(sse(c));
          } catch (const std::exception& e) {
            s->events.push_back(sse(error_body(std::string("generation failed: ") + e.what(), "server_error")));
          }
        }
        all_done = s->n_finished == s->futures.size();
        if (all_done) {
          for (const json& c : s->st.end()) s->events.push_back(sse(c));
          s->events.push_back("data: [DONE]\n\n");
        }
        out.swap(s->events);
      }
      for (const std::string& e : out) {
        if (!sink.write(e.data(), e.size())) {  // the client went away: stop generating
          s->client_gone = true;
          AGENTR1_LOG(INFO) << "serve: stream on " << s->path << " ended by the client; generation aborted";
          return false;
        }
      }
      if (all_done) {
        sink.done();
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - s->t0).count();
        AGENTR1_LOG(INFO) << "serve: stream on " << s->path << " done: " << s->tokens << " tokens "
                          << static_cast<int64_t>(ms + 0.5) << " ms";
      }
      return true;
    });
  }

  void completions(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      const CompletionRequest cr = parse_completion_request(parse_body(req), model, draw_seed());
      std::vector<GenRequest> reqs = cr.gen_requests();
      if (cr.out.stream) {
        // The streamer points at the request: the stream owns a copy.
        auto held = std::make_shared<CompletionRequest>(cr);
        int64_t prompt_tokens = 0;
        for (const GenRequest& r : reqs) prompt_tokens += static_cast<int64_t>(r.prompt_ids.size());
        stream_held(req, res, std::move(reqs), held, new_id("cmpl"), prompt_tokens);
        return int64_t{0};
      }
      std::vector<PromptLogprobs> prompt_lps;
      if (cr.prompt_logprobs) {
        if (!score)
          throw ApiError(400, "this server cannot compute prompt log-probs (it was started without a scorer)",
                         "prompt_logprobs");
        try {
          std::lock_guard<std::mutex> lk(update_mu);  // no weight reload during the forward
          prompt_lps = score(cr.prompts, cr.prompt_temperature, *cr.prompt_logprobs);
        } catch (const std::exception& e) {
          throw ApiError(500, std::string("scoring the prompt failed: ") + e.what(), "", "server_error");
        }
      }
      // max_tokens 0 (prompt log-probs only): nothing to generate.
      const std::vector<GenResult> results =
          cr.sampling.max_new_tokens == 0 ? std::vector<GenResult>(reqs.size(), GenResult{}) : generate(reqs);
      send_json(res, 200, completion_response(cr, results, model, new_id("cmpl"), now_unix(),
                                              cr.prompt_logprobs ? &prompt_lps : nullptr));
      return count_tokens(reqs, results);
    });
  }

  void chat(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      const ChatRequest cr = parse_chat_request(parse_body(req), model, draw_seed());
      std::vector<GenRequest> reqs = cr.gen_requests();
      if (cr.out.stream) {
        auto held = std::make_shared<ChatRequest>(cr);
        stream_held(req, res, std::move(reqs), held, new_id("chatcmpl"),
                    static_cast<int64_t>(cr.prompt.size()) * cr.out.n);
        return int64_t{0};
      }
      const std::vector<GenResult> results = generate(reqs);
      send_json(res, 200, chat_response(cr, results, model, new_id("chatcmpl"), now_unix()));
      return count_tokens(reqs, results);
    });
  }

  // stream() with the request kept alive as long as the streamer that points at it.
  template <class Req>
  void stream_held(const httplib::Request& http, httplib::Response& res, std::vector<GenRequest> reqs,
                   std::shared_ptr<Req> held, const std::string& id, int64_t prompt_tokens) {
    Streamer st(*held, model, id, now_unix());
    stream(http, res, std::move(reqs), held, std::move(st), prompt_tokens);
  }

  void update_weights(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&]() -> int64_t {
      const json body = parse_body(req);
      if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object", "");
      if (!body.contains("model_path") || !body["model_path"].is_string())
        throw ApiError(400, "'model_path' (a directory with config.json and model.safetensors) is required",
                       "model_path");
      if (body.contains("policy_version") && !body["policy_version"].is_null() &&
          !body["policy_version"].is_number_integer())
        throw ApiError(400, "'policy_version' must be an integer, got " + body["policy_version"].dump(),
                       "policy_version");
      if (!update) throw ApiError(400, "this server cannot reload weights");
      std::string message;
      try {
        std::lock_guard<std::mutex> lk(update_mu);
        message = update(body);
      } catch (const ApiError& e) {
        json b = error_body(e);
        b["success"] = false;
        b["message"] = e.what();
        send_json(res, e.status, b);
        return 0;
      } catch (const std::exception& e) {
        json b = error_body(e.what(), "invalid_request_error", "model_path");
        b["success"] = false;
        b["message"] = e.what();
        send_json(res, 400, b);
        return 0;
      }
      send_json(res, 200, json{{"success", true}, {"message", message}});
      return 0;
    });
  }

  void install() {
    svr.new_task_queue = [n = opt.threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
    svr.set_payload_max_length(opt.max_body_bytes);
    // httplib's default also sets SO_REUSEPORT, which lets a second server bind a port in
    // use and silently share its connections; SO_REUSEADDR alone only allows rebinding
    // a port whose old connections linger in TIME_WAIT.
    svr.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (opt.api_key.empty() || !needs_key(req.path)) return httplib::Server::HandlerResponse::Unhandled;
      if (req.get_header_value("Authorization") == "Bearer " + opt.api_key)
        return httplib::Server::HandlerResponse::Unhandled;
      const auto t0 = Clock::now();
      send_json(res, 401,
                error_body(req.has_header("Authorization")
                               ? "incorrect API key: the Authorization header must be 'Bearer <the server's --api-key>'"
                               : "missing API key: send the header 'Authorization: Bearer <the server's --api-key>'",
                           "authentication_error", "", "invalid_api_key"));
      log_request(req, 401, 0, t0);
      return httplib::Server::HandlerResponse::Handled;
    });
    svr.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                      httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours already
      const auto t0 = Clock::now();
      const auto route = routes().find(req.path);
      if (res.status == 404 && route != routes().end()) {
        res.set_header("Allow", route->second);
        send_json(res, 405, error_body("method " + req.method + " is not allowed on " + req.path + "; use " +
                                           route->second,
                                       "invalid_request_error", "", "method_not_allowed"));
      } else if (res.status == 404) {
        std::string known;
        for (const auto& [path, method] : routes()) known += (known.empty() ? "" : ", ") + method + " " + path;
        send_json(res, 404, error_body("unknown route " + req.method + " " + req.path + "; routes: " + known,
                                       "invalid_request_error", "", "not_found"));
      } else {
        send_json(res, res.status, error_body("HTTP " + std::to_string(res.status) + " for " + req.method + " " +
                                                  req.path,
                                              res.status >= 500 ? "server_error" : "invalid_request_error"));
      }
      log_request(req, res.status, 0, t0);
      return httplib::Server::HandlerResponse::Handled;
    }));
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_json(res, 500, error_body("internal error: " + what, "server_error"));
    });

    svr.Get("/health", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(req, res, [&] {
        send_json(res, 200, json{{"status", "ok"}});
        return int64_t{0};
      });
    });
    svr.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(req, res, [&] {
        send_json(res, 200, models_response(model));
        return int64_t{0};
      });
    });
    svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { completions(req, res); });
    svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { chat(req, res); });
    // SGLang's native API (sglang_api.h): rollout.remote.api=sglang against this server.
    svr.Post("/generate", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(req, res, [&] {
        const GenerateRequest gr = parse_generate_request(parse_body(req), model, draw_seed());
        const std::vector<GenRequest> reqs = gr.gen_requests();
        const std::vector<GenResult> results = generate(reqs);
        const std::string id = new_id("gen");
        if (!gr.stream) {
          send_json(res, 200, generate_response(gr, results, model, id));
        } else {
          auto events = std::make_shared<std::vector<std::string>>();
          for (const json& c : generate_stream_chunks(gr, results, model, id)) events->push_back("data: " + dump(c) + "\n\n");
          events->push_back("data: [DONE]\n\n");
          res.status = 200;
          res.set_header("Cache-Control", "no-cache");
          res.set_chunked_content_provider("text/event-stream", [events](size_t, httplib::DataSink& sink) {
            for (const std::string& e : *events)
              if (!sink.write(e.data(), e.size())) return false;  // client gone
            sink.done();
            return true;
          });
        }
        return count_tokens(reqs, results);
      });
    });
    svr.Post("/update_weights_from_disk",
             [this](const httplib::Request& req, httplib::Response& res) { update_weights(req, res); });
  }
};

OpenAIServer::OpenAIServer(Generator& generator, ServedModel model, ServerOptions options, WeightUpdater update,
                           PromptScorer score)
    : impl_(std::make_unique<Impl>(generator, std::move(model), std::move(options), std::move(update),
                                   std::move(score))) {
  AGENTR1_CHECK(impl_->opt.threads >= 1, "serve: threads must be >= 1, got " << impl_->opt.threads);
  AGENTR1_CHECK(impl_->opt.port >= 0 && impl_->opt.port <= 65535,
                "serve: port must be in 0..65535 (0 = any free port), got " << impl_->opt.port);
  impl_->install();
}

OpenAIServer::~OpenAIServer() = default;

int OpenAIServer::bind() { return bind_http(impl_->svr, impl_->opt.host, impl_->opt.port, "serve"); }

void OpenAIServer::serve() { listen_until(impl_->svr, impl_->stop_requested); }

void OpenAIServer::stop() { impl_->stop_requested = true; }

}  // namespace agentr1::serve
