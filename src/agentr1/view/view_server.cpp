#include "agentr1/view/view_server.h"

#include <atomic>
#include <cctype>
#include <filesystem>
#include <map>
#include <mutex>

#include <httplib.h>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/serve/http_listen.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::view {

namespace {

// An error answered with its status (the request named something wrong).
struct HttpError : Error {
  HttpError(int status, const std::string& msg) : Error(msg), status(status) {}
  int status;
};

int64_t int_param(const httplib::Request& req, const char* name, std::optional<int64_t> fallback = std::nullopt) {
  if (!req.has_param(name)) {
    if (fallback) return *fallback;
    throw HttpError(400, std::string("missing query parameter '") + name + "'");
  }
  const std::string v = req.get_param_value(name);
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size())
    throw HttpError(400, std::string("query parameter '") + name + "' must be an integer, got '" + v + "'");
  return x;
}

}  // namespace

bool host_allowed(const std::string& host_header, const std::string& bound_host) {
  if (bound_host == "0.0.0.0" || bound_host == "::") return true;
  if (host_header.empty()) return true;  // HTTP/1.0 clients send none; browsers always do
  std::string h = host_header;
  if (!h.empty() && h.front() == '[') {  // [::1]:6070
    const size_t close = h.find(']');
    h = close == std::string::npos ? h : h.substr(1, close - 1);
  } else if (const size_t colon = h.rfind(':'); colon != std::string::npos) {
    h = h.substr(0, colon);
  }
  for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return h == "127.0.0.1" || h == "localhost" || h == "::1" || h == bound_host;
}

struct ViewServer::Impl {
  std::vector<RunEntry> runs;
  std::vector<const text::Tokenizer*> run_tokenizer;  // per run, or null
  std::map<std::string, text::Tokenizer> tokenizers;  // by directory
  ViewOptions options;
  httplib::Server svr;
  std::atomic<bool> stop_requested{false};

  std::mutex tokenizer_mu;  // run_tokenizer and tokenizers after start-up

  // The run's tokenizer; a run that had none at start-up (a new run without a checkpoint
  // yet) is looked at again, so its tokens are decoded once its files name one.
  const text::Tokenizer* tokenizer_of(size_t run) {
    std::lock_guard<std::mutex> lock(tokenizer_mu);
    if (run_tokenizer[run] == nullptr && options.tokenizer_dir.empty()) {
      const std::string dir = find_tokenizer_dir(runs[run].path);
      if (!dir.empty()) {
        try {
          auto it = tokenizers.find(dir);
          if (it == tokenizers.end()) it = tokenizers.emplace(dir, text::Tokenizer::load(dir)).first;
          run_tokenizer[run] = &it->second;
          AGENTR1_LOG(INFO) << "view: run " << runs[run].name << ": tokens decoded with " << dir;
        } catch (const std::exception&) {
          // not loadable (yet): ids it is
        }
      }
    }
    return run_tokenizer[run];
  }

  size_t run_index(const httplib::Request& req) const {
    const int64_t id = int_param(req, "run");
    if (id < 0 || id >= static_cast<int64_t>(runs.size()))
      throw HttpError(404, "no run " + std::to_string(id) + ": there are " + std::to_string(runs.size()) +
                               " (ids 0.." + std::to_string(static_cast<int64_t>(runs.size()) - 1) + ")");
    return static_cast<size_t>(id);
  }

  // Registers a JSON route: fn's value is the answer; an exception becomes an error object.
  void route(const std::string& path, std::function<json(const httplib::Request&)> fn) {
    svr.Get(path, [fn = std::move(fn), path](const httplib::Request& req, httplib::Response& res) {
      json body;
      int status = 200;
      try {
        body = fn(req);
      } catch (const HttpError& e) {
        status = e.status;
        body = {{"error", e.what()}};
      } catch (const std::exception& e) {
        status = 500;
        body = {{"error", e.what()}};
      }
      res.status = status;
      res.set_header("Cache-Control", "no-store");
      res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
      if (status != 200) {
        AGENTR1_LOG(WARN) << "view: " << req.path << " -> " << status << ": " << body["error"].get<std::string>();
      }
    });
  }
};

ViewServer::ViewServer(std::vector<RunEntry> runs, ViewOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.runs = std::move(runs);
  m.options = std::move(options);
  const ViewOptions& o = m.options;
  std::error_code ec;
  AGENTR1_CHECK(std::filesystem::is_regular_file(o.static_dir + "/index.html", ec),
                "view: the page's files are missing (" << o.static_dir
                                                       << "/index.html does not exist); rebuild (scripts/setup.sh "
                                                          "copies them into the data dir) or set AGENTR1_DATA_DIR");
  AGENTR1_CHECK(o.threads >= 1, "view: threads must be >= 1, got " << o.threads);
  auto load = [&](const std::string& dir) -> const text::Tokenizer* {
    auto it = m.tokenizers.find(dir);
    if (it == m.tokenizers.end()) it = m.tokenizers.emplace(dir, text::Tokenizer::load(dir)).first;
    return &it->second;
  };
  if (!o.tokenizer_dir.empty()) {
    const text::Tokenizer* t = with_context("view: --tokenizer " + o.tokenizer_dir, [&] { return load(o.tokenizer_dir); });
    m.run_tokenizer.assign(m.runs.size(), t);
  } else {
    for (const RunEntry& r : m.runs) {
      const std::string dir = find_tokenizer_dir(r.path);
      const text::Tokenizer* t = nullptr;
      if (!dir.empty()) {
        try {
          t = load(dir);
        } catch (const std::exception& e) {
          AGENTR1_LOG(WARN) << "view: run " << r.name << ": its tokenizer " << dir
                            << " does not load, so tokens show as ids (" << e.what() << ")";
        }
      } else {
        AGENTR1_LOG(WARN) << "view: run " << r.name
                          << " has no tokenizer yet (no checkpoint with a tokenizer.json, and config.yaml's model.path "
                             "is not a local directory with one): tokens show as ids until it has one, or pass "
                             "--tokenizer DIR";
      }
      m.run_tokenizer.push_back(t);
    }
  }

  m.svr.new_task_queue = [n = o.threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  // DNS rebinding: a web page from elsewhere whose name is made to resolve to 127.0.0.1
  // reaches this server with its own name in Host. Only the loopback names and the bound
  // host are answered (any Host when bound to all interfaces: the user chose to expose it).
  m.svr.set_pre_routing_handler([&m](const httplib::Request& req, httplib::Response& res) {
    if (host_allowed(req.get_header_value("Host"), m.options.host)) return httplib::Server::HandlerResponse::Unhandled;
    res.status = 403;
    res.set_content(json{{"error", "Host '" + req.get_header_value("Host") +
                                       "' is not this server's address (a guard against DNS rebinding); open "
                                       "http://127.0.0.1:PORT/ or http://localhost:PORT/, or start with --host"}}
                        .dump(-1, ' ', false, json::error_handler_t::replace),
                    "application/json");
    return httplib::Server::HandlerResponse::Handled;
  });
  AGENTR1_CHECK(m.svr.set_mount_point("/", o.static_dir), "view: cannot serve files from " << o.static_dir);
  m.route("/api/runs", [&m](const httplib::Request&) {
    json runs = json::array();
    for (size_t i = 0; i < m.runs.size(); ++i)
      runs.push_back({{"id", i}, {"name", m.runs[i].name}, {"path", m.runs[i].path},
                      {"tokenizer", m.tokenizer_of(i) != nullptr}});
    return json{{"runs", runs}};
  });
  m.route("/api/metrics", [&m](const httplib::Request& req) {
    const int64_t from = int_param(req, "from", 0);
    if (from < 0) throw HttpError(400, "query parameter 'from' must be >= 0, got " + std::to_string(from));
    return read_metrics(m.runs[m.run_index(req)].path, static_cast<uint64_t>(from),
                        req.has_param("file") ? req.get_param_value("file") : "");
  });
  m.route("/api/steps", [&m](const httplib::Request& req) { return list_steps(m.runs[m.run_index(req)].path); });
  m.route("/api/trajectories", [&m](const httplib::Request& req) {
    const size_t run = m.run_index(req);
    const int64_t step = int_param(req, "step");
    const std::string kind = req.has_param("kind") ? req.get_param_value("kind") : "train";
    if (kind != "train" && kind != "val")
      throw HttpError(400, "query parameter 'kind' must be train or val, got '" + kind + "'");
    try {
      return read_trajectories(m.runs[run].path, step, kind == "val" ? DumpKind::Val : DumpKind::Train,
                               m.tokenizer_of(run));
    } catch (const Error& e) {
      throw HttpError(404, e.what());
    }
  });
  m.route("/api/val_compare", [&m](const httplib::Request& req) {
    const size_t run = m.run_index(req);
    const int64_t index = int_param(req, "index", 0);
    try {
      return val_compare(m.runs[run].path, index, m.tokenizer_of(run));
    } catch (const Error& e) {
      throw HttpError(404, e.what());
    }
  });
  m.route("/api/config", [&m](const httplib::Request& req) { return read_config(m.runs[m.run_index(req)].path); });
  m.route("/api/summary", [&m](const httplib::Request& req) { return read_summary(m.runs[m.run_index(req)].path); });
  // Neither handler may throw: httplib calls them outside its own try/catch. Paths are
  // percent-decoded, so they may hold any bytes (invalid UTF-8 is replaced in the answer).
  m.svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    try {
      if (req.path.rfind("/api/", 0) == 0 && res.status == 404 && res.body.empty())
        res.set_content(json{{"error", "unknown route " + req.path}}.dump(-1, ' ', false, json::error_handler_t::replace),
                        "application/json");
    } catch (...) {
    }
  });
  m.svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    res.status = 500;
    res.set_content(json{{"error", what}}.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  });
}

ViewServer::~ViewServer() = default;

int ViewServer::bind() { return serve::bind_http(impl_->svr, impl_->options.host, impl_->options.port, "view"); }

void ViewServer::serve() { serve::listen_until(impl_->svr, impl_->stop_requested); }

void ViewServer::stop() { impl_->stop_requested = true; }

}  // namespace agentr1::view
