#include "agentr1/rollout/remote_generator.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "agentr1/core/error.h"
#include "agentr1/core/http_client.h"
#include "agentr1/core/log.h"

namespace agentr1::rollout {
namespace {

using http::body_message;
using http::field_of;
using http::float_for_wire;
using http::http_call;
using http::make_client;
using http::malformed;
using http::parse_body;
using http::Reply;
using http::snippet;

using Clock = std::chrono::steady_clock;

constexpr size_t kAffinityEntries = 1 << 16;  // keys remembered (oldest forgotten first)

// The HTTP policy of RemoteOptions (peer "remote engine", keys "rollout.remote.").
http::HttpPolicy http_policy(const RemoteOptions& o) {
  http::HttpPolicy p;
  p.timeout_s = o.timeout_s;
  p.retries = o.retries;
  p.backoff_s = o.backoff_s;
  p.api_key = o.api_key;
  return p;
}

// A stop token the server did not return is appended (see the header).
void append_missing_stop(GenResult& r, TokenId stop, bool* unknown_logprob) {
  if (!r.token_ids.empty() && r.token_ids.back() == stop) return;
  r.token_ids.push_back(stop);
  r.logprobs.push_back(0.0f);
  if (unknown_logprob != nullptr) *unknown_logprob = true;
}

std::optional<int64_t> version_field(const json& obj, const std::string& path) {
  if (!obj.is_object() || !obj.contains("policy_version") || obj["policy_version"].is_null()) return std::nullopt;
  const json& v = obj["policy_version"];
  if (!v.is_number_integer()) malformed(path, "must be an integer", v);
  return v.get<int64_t>();
}

float logprob_value(const json& v, const std::string& path) {
  if (!v.is_number()) malformed(path, "must be a number (a log-probability)", v);
  return static_cast<float>(v.get<double>());
}

TokenId token_value(const json& v, const std::string& path) {
  if (!v.is_number_integer()) malformed(path, "must be an integer token id", v);
  const int64_t id = v.get<int64_t>();
  if (id < 0 || id > INT32_MAX) malformed(path, "must be a token id in 0..2^31-1", v);
  return static_cast<TokenId>(id);
}

struct Job {
  GenRequest request;
  std::promise<GenResult> promise;
};

struct Server {
  std::string url;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Job>> queue;
  std::vector<std::thread> threads;
  int idle = 0;       // workers waiting for a job
  int load = 0;       // jobs queued or in flight
  int64_t answered = 0;
  bool stop = false;
  bool unsigned_seed = false;  // agentr1 serve takes seeds as 0..2^64-1, vLLM as int64
};

}  // namespace

RemoteApi remote_api_from_string(const std::string& name) {
  if (name == "openai") return RemoteApi::kOpenAI;
  if (name == "sglang") return RemoteApi::kSGLang;
  throw Error("unknown remote api '" + name + "' (known: openai, sglang)");
}

const char* remote_api_name(RemoteApi api) { return api == RemoteApi::kOpenAI ? "openai" : "sglang"; }

void RemoteOptions::validate(const std::string& p) const {
  AGENTR1_CHECK(!urls.empty(), p << "urls must list at least one server (e.g. " << p
                                 << "urls=[http://127.0.0.1:8000]), got []");
  for (size_t i = 0; i < urls.size(); ++i) {
    const std::string& u = urls[i];
    http::check_base_url(u, p + "urls[" + std::to_string(i) + "]", "/v1/completions, /generate, ...");
    for (size_t j = 0; j < i; ++j)
      AGENTR1_CHECK(urls[j] != u, p << "urls lists '" << u << "' twice (urls[" << j << "] and urls[" << i << "])");
  }
  with_context(p + "api", [&] { return remote_api_from_string(api); });
  http::check_retry_options(timeout_s, retries, backoff_s, p);
  AGENTR1_CHECK(max_inflight >= 1 && max_inflight <= 4096, p << "max_inflight must be in 1..4096, got " << max_inflight);
  AGENTR1_CHECK(max_context >= 2, p << "max_context must be >= 2, got " << max_context);
}

GenResult parse_openai_completion(const json& body, const TokenIds& stop_token_ids, int64_t fallback_version,
                                  bool* unknown_logprob) {
  const json& choices = field_of(body, "choices", "choices");
  if (!choices.is_array() || choices.empty()) malformed("choices", "must be a non-empty list", choices);
  const json& c = choices[0];
  if (!c.is_object()) malformed("choices[0]", "must be an object", c);
  const json& ids = field_of(c, "token_ids", "choices[0].token_ids");
  if (!ids.is_array())
    malformed("choices[0].token_ids", "must be a list of token ids (HINT: the server must honour \"return_token_ids\": "
              "vLLM >= 0.10.2, agentr1 serve)", ids);
  const json& lpo = field_of(c, "logprobs", "choices[0].logprobs");
  if (!lpo.is_object()) malformed("choices[0].logprobs", "must be an object (the request asks for logprobs)", lpo);
  const json& lps = field_of(lpo, "token_logprobs", "choices[0].logprobs.token_logprobs");
  if (!lps.is_array()) malformed("choices[0].logprobs.token_logprobs", "must be a list of numbers", lps);
  if (lps.size() != ids.size())
    malformed("choices[0].logprobs.token_logprobs",
              "must have one entry per token id (" + std::to_string(ids.size()) + ")",
              json(std::to_string(lps.size()) + " entries"));
  GenResult r;
  r.token_ids.reserve(ids.size() + 1);
  r.logprobs.reserve(ids.size() + 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    r.token_ids.push_back(token_value(ids[i], "choices[0].token_ids[" + std::to_string(i) + "]"));
    r.logprobs.push_back(logprob_value(lps[i], "choices[0].logprobs.token_logprobs[" + std::to_string(i) + "]"));
  }
  const json& fr = field_of(c, "finish_reason", "choices[0].finish_reason");
  if (!fr.is_string()) malformed("choices[0].finish_reason", "must be \"stop\", \"length\" or \"abort\"", fr);
  const std::string reason = fr.get<std::string>();
  const json stop_reason = c.contains("stop_reason") ? c["stop_reason"] : json();
  if (reason == "stop") {
    if (stop_reason.is_string()) {
      r.finish = FinishReason::kStopString;
    } else {
      r.finish = FinishReason::kStopToken;
      if (stop_reason.is_number_integer()) {
        const TokenId stop = token_value(stop_reason, "choices[0].stop_reason");
        append_missing_stop(r, stop, unknown_logprob);
      } else if (!stop_reason.is_null()) {
        malformed("choices[0].stop_reason", "must be a token id, a string or null", stop_reason);
      }
    }
  } else if (reason == "length") {
    r.finish = FinishReason::kLength;
  } else if (reason == "abort") {
    r.finish = FinishReason::kAborted;
  } else {
    malformed("choices[0].finish_reason", "must be \"stop\", \"length\" or \"abort\"", fr);
  }
  (void)stop_token_ids;
  r.policy_version = version_field(c, "choices[0].policy_version").value_or(fallback_version);
  return r;
}

GenResult parse_sglang_generate(const json& body, const TokenIds& stop_token_ids, int64_t fallback_version,
                                bool* unknown_logprob) {
  const json& meta = field_of(body, "meta_info", "meta_info");
  if (!meta.is_object()) malformed("meta_info", "must be an object", meta);
  const json& olp = field_of(meta, "output_token_logprobs", "meta_info.output_token_logprobs");
  if (!olp.is_array())
    malformed("meta_info.output_token_logprobs", "must be a list of [logprob, token_id, text] (the request sets "
              "\"return_logprob\": true)", olp);
  GenResult r;
  r.token_ids.reserve(olp.size() + 1);
  r.logprobs.reserve(olp.size() + 1);
  for (size_t i = 0; i < olp.size(); ++i) {
    const std::string path = "meta_info.output_token_logprobs[" + std::to_string(i) + "]";
    const json& e = olp[i];
    if (!e.is_array() || e.size() < 2) malformed(path, "must be [logprob, token_id, text]", e);
    r.logprobs.push_back(logprob_value(e[0], path + "[0]"));
    r.token_ids.push_back(token_value(e[1], path + "[1]"));
  }
  if (body.contains("output_ids") && body["output_ids"].is_array() && body["output_ids"].size() != olp.size())
    malformed("output_ids", "must have as many ids as meta_info.output_token_logprobs (" +
              std::to_string(olp.size()) + ")", json(std::to_string(body["output_ids"].size()) + " ids"));
  const json& fr = field_of(meta, "finish_reason", "meta_info.finish_reason");
  if (!fr.is_object()) malformed("meta_info.finish_reason", "must be an object {\"type\", ...}", fr);
  const json& type = field_of(fr, "type", "meta_info.finish_reason.type");
  if (!type.is_string()) malformed("meta_info.finish_reason.type", "must be \"stop\", \"length\" or \"abort\"", type);
  const std::string t = type.get<std::string>();
  if (t == "stop") {
    const json matched = fr.contains("matched") ? fr["matched"] : json();
    if (matched.is_string()) {
      r.finish = FinishReason::kStopString;
    } else {
      r.finish = FinishReason::kStopToken;
      if (matched.is_number_integer())
        append_missing_stop(r, token_value(matched, "meta_info.finish_reason.matched"), unknown_logprob);
      else if (!matched.is_null() && !matched.is_array())
        malformed("meta_info.finish_reason.matched", "must be a token id, a string or null", matched);
    }
  } else if (t == "length") {
    r.finish = FinishReason::kLength;
  } else if (t == "abort") {
    r.finish = FinishReason::kAborted;
  } else {
    malformed("meta_info.finish_reason.type", "must be \"stop\", \"length\" or \"abort\"", type);
  }
  (void)stop_token_ids;
  r.policy_version = version_field(meta, "meta_info.policy_version").value_or(fallback_version);
  return r;
}

struct RemoteGenerator::Impl {
  RemoteOptions opts;
  RemoteApi api = RemoteApi::kOpenAI;
  std::string model;
  const RemoteGenerator* owner = nullptr;
  std::vector<std::unique_ptr<Server>> servers;
  std::mutex route_mu;
  std::unordered_map<uint64_t, size_t> affinity;
  std::deque<uint64_t> affinity_order;
  std::atomic<int64_t> requests{0}, retries{0}, tokens{0}, unknown{0};
  std::atomic<bool> warned_unknown{false};

  size_t route(uint64_t key) {
    std::lock_guard<std::mutex> g(route_mu);
    if (key != 0) {
      const auto it = affinity.find(key);
      if (it != affinity.end()) return it->second;
    }
    size_t best = 0;
    int best_load = INT32_MAX;
    for (size_t i = 0; i < servers.size(); ++i) {
      std::lock_guard<std::mutex> s(servers[i]->mu);
      if (servers[i]->load < best_load) {
        best_load = servers[i]->load;
        best = i;
      }
    }
    if (key != 0) {
      affinity.emplace(key, best);
      affinity_order.push_back(key);
      if (affinity_order.size() > kAffinityEntries) {
        affinity.erase(affinity_order.front());
        affinity_order.pop_front();
      }
    }
    return best;
  }

  json request_body(const GenRequest& req, bool unsigned_seed) const {
    const SamplingParams& s = req.sampling;
    // vLLM and SGLang take the seed as a signed 64-bit integer (the same 64 bits; torch's
    // manual_seed reads a negative one as its two's complement); agentr1 serve as unsigned.
    const json seed = unsigned_seed ? json(s.seed) : json(static_cast<int64_t>(s.seed));
    if (api == RemoteApi::kOpenAI) {
      json j = {{"model", model},
                {"prompt", req.prompt_ids},
                {"max_tokens", s.max_new_tokens},
                {"temperature", float_for_wire(s.temperature)},
                {"top_p", float_for_wire(s.top_p)},
                {"seed", seed},
                {"n", 1},
                {"stop_token_ids", s.stop_token_ids},
                {"logprobs", 1},
                {"return_token_ids", true},
                {"skip_special_tokens", false},
                {"include_stop_str_in_output", true},
                {"ignore_eos", true}};
      if (s.top_k > 0) j["top_k"] = s.top_k;
      if (!s.stop_strings.empty()) j["stop"] = s.stop_strings;
      return j;
    }
    json sp = {{"max_new_tokens", s.max_new_tokens},
               {"temperature", float_for_wire(s.temperature)},
               {"top_p", float_for_wire(s.top_p)},
               {"sampling_seed", seed},
               {"stop_token_ids", s.stop_token_ids},
               {"skip_special_tokens", false},
               {"no_stop_trim", true},
               {"ignore_eos", false}};
    if (s.top_k > 0) sp["top_k"] = s.top_k;
    if (!s.stop_strings.empty()) sp["stop"] = s.stop_strings;
    return json{{"input_ids", req.prompt_ids}, {"sampling_params", sp}, {"return_logprob", true}};
  }

  GenResult generate_on(httplib::Client& cli, const Server& server, const GenRequest& req) {
    const std::string& url = server.url;
    const std::string path = api == RemoteApi::kOpenAI ? "/v1/completions" : "/generate";
    const std::string what = "POST " + path;
    const Reply rep =
        http_call(cli, url, http_policy(opts), "POST", path, request_body(req, server.unsigned_seed).dump(), retries);
    if (rep.status >= 400)
      throw Error("remote engine " + url + ": " + what + " was refused with HTTP " + std::to_string(rep.status) +
                  " (not retried): " + body_message(rep.body));
    const json body = parse_body(rep, url, what);
    bool unknown_lp = false;
    GenResult r = with_context("remote engine " + url + ": " + what, [&] {
      return api == RemoteApi::kOpenAI
                 ? parse_openai_completion(body, req.sampling.stop_token_ids, owner->policy_version(), &unknown_lp)
                 : parse_sglang_generate(body, req.sampling.stop_token_ids, owner->policy_version(), &unknown_lp);
    });
    if (unknown_lp) unknown.fetch_add(1);
    if (unknown_lp && !warned_unknown.exchange(true)) {
      AGENTR1_LOG(WARN) << "remote engine " << url << ": a response ended on a stop token it did not return; it is "
                        << "appended with log-prob 0 (unknown), counted in remote/unknown_logprobs";
    }
    AGENTR1_CHECK(static_cast<int>(r.token_ids.size()) <= req.sampling.max_new_tokens,
                  "remote engine " << url << ": " << what << " returned " << r.token_ids.size()
                                   << " tokens for max_tokens " << req.sampling.max_new_tokens);
    requests.fetch_add(1);
    tokens.fetch_add(static_cast<int64_t>(r.token_ids.size()));
    if (req.on_token) {  // no streaming from the server: replay the whole response
      for (size_t i = 0; i < r.token_ids.size(); ++i) {
        if (!req.on_token(r.token_ids[i], r.logprobs[i]) && i + 1 < r.token_ids.size()) {
          r.token_ids.resize(i + 1);
          r.logprobs.resize(i + 1);
          r.finish = FinishReason::kAborted;
          break;
        }
      }
    }
    return r;
  }

  void worker(Server* s) {
    std::unique_ptr<httplib::Client> cli = make_client(s->url, http_policy(opts));
    for (;;) {
      std::unique_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lk(s->mu);
        ++s->idle;
        s->cv.wait(lk, [&] { return s->stop || !s->queue.empty(); });
        --s->idle;
        if (s->queue.empty()) return;  // stopping
        job = std::move(s->queue.front());
        s->queue.pop_front();
      }
      std::optional<GenResult> result;
      std::exception_ptr error;
      try {
        result = generate_on(*cli, *s, job->request);
      } catch (...) {
        error = std::current_exception();
      }
      {  // counted before the future is ready, so a caller that waited sees the counts
        std::lock_guard<std::mutex> lk(s->mu);
        --s->load;
        if (result) ++s->answered;
      }
      if (result)
        job->promise.set_value(std::move(*result));
      else
        job->promise.set_exception(error);
    }
  }

  // GET /v1/models (openai) or /health (sglang) on every server; learns the model name.
  void check_servers() {
    for (const auto& s : servers) {
      auto cli = make_client(s->url, http_policy(opts));
      const std::string path = api == RemoteApi::kOpenAI ? "/v1/models" : "/health";
      const Reply rep = with_context("checking the server at start (rollout.remote.urls)", [&] {
        return http_call(*cli, s->url, http_policy(opts), "GET", path, "", retries);
      });
      AGENTR1_CHECK(rep.status < 400, "remote engine " << s->url << ": GET " << path << " answered HTTP "
                                                       << rep.status << ": " << body_message(rep.body)
                                                       << (rep.status == 401 ? " (HINT: rollout.remote.api_key)" : ""));
      if (api != RemoteApi::kOpenAI) continue;
      const json body = parse_body(rep, s->url, "GET /v1/models");
      std::vector<std::string> ids;
      int64_t max_len = 0;
      with_context("remote engine " + s->url + ": GET /v1/models", [&] {
        const json& data = field_of(body, "data", "data");
        if (!data.is_array()) malformed("data", "must be a list of models", data);
        for (size_t i = 0; i < data.size(); ++i) {
          const json& id = field_of(data[i], "id", "data[" + std::to_string(i) + "].id");
          if (!id.is_string()) malformed("data[" + std::to_string(i) + "].id", "must be a string", id);
          ids.push_back(id.get<std::string>());
          if (model.empty() ? i == 0 : ids.back() == model) {
            if (data[i].contains("max_model_len") && data[i]["max_model_len"].is_number_integer())
              max_len = data[i]["max_model_len"].get<int64_t>();
            s->unsigned_seed = data[i].value("owned_by", json()) == json("agentr1");
          }
        }
      });
      std::string listed;
      for (const auto& id : ids) listed += (listed.empty() ? "" : ", ") + id;
      AGENTR1_CHECK(!ids.empty(), "remote engine " << s->url << ": GET /v1/models lists no model");
      if (model.empty()) model = ids.front();
      AGENTR1_CHECK(std::find(ids.begin(), ids.end(), model) != ids.end(),
                    "remote engine " << s->url << " does not serve model '" << model << "' (it lists: " << listed
                                     << "); HINT: rollout.remote.model=<one of them>, and every server must serve it");
      AGENTR1_CHECK(max_len == 0 || max_len >= opts.max_context,
                    "remote engine " << s->url << " serves '" << model << "' with max_model_len " << max_len
                                     << ", less than the rollout context of " << opts.max_context
                                     << " tokens (rollout.max_prompt_tokens + rollout.max_new_tokens); HINT: start "
                                        "the server with a longer context, or lower those two");
    }
  }
};

RemoteGenerator::RemoteGenerator(RemoteOptions opts) : impl_(std::make_unique<Impl>()) {
  opts.validate();
  impl_->api = remote_api_from_string(opts.api);
  impl_->model = opts.model;
  impl_->opts = std::move(opts);
  impl_->owner = this;
  for (const auto& u : impl_->opts.urls) {
    auto s = std::make_unique<Server>();
    s->url = u;
    impl_->servers.push_back(std::move(s));
  }
  impl_->check_servers();
}

RemoteGenerator::~RemoteGenerator() {
  for (const auto& s : impl_->servers) {
    std::deque<std::unique_ptr<Job>> dropped;
    {
      std::lock_guard<std::mutex> lk(s->mu);
      s->stop = true;
      dropped.swap(s->queue);
    }
    s->cv.notify_all();
    for (auto& j : dropped)
      j->promise.set_exception(std::make_exception_ptr(Error("remote engine " + s->url +
                                                             ": the generator was destroyed before the request ran")));
    for (auto& t : s->threads) t.join();
  }
}

std::future<GenResult> RemoteGenerator::submit(GenRequest request) {
  AGENTR1_CHECK(!request.prompt_ids.empty(), "RemoteGenerator::submit: the prompt is empty");
  const int64_t plen = static_cast<int64_t>(request.prompt_ids.size());
  AGENTR1_CHECK(plen + 1 <= impl_->opts.max_context,
                "RemoteGenerator::submit: prompt of " << plen << " tokens leaves no room in the context of "
                                                      << impl_->opts.max_context << " tokens");
  AGENTR1_CHECK(request.sampling.max_new_tokens >= 1,
                "RemoteGenerator::submit: max_new_tokens must be >= 1, got " << request.sampling.max_new_tokens);
  Server* s = impl_->servers[impl_->route(request.affinity_key)].get();
  auto job = std::make_unique<Job>();
  job->request = std::move(request);
  std::future<GenResult> f = job->promise.get_future();
  {
    std::lock_guard<std::mutex> lk(s->mu);
    AGENTR1_CHECK(!s->stop, "RemoteGenerator::submit after destruction began");
    s->queue.push_back(std::move(job));
    ++s->load;
    if (static_cast<int>(s->queue.size()) > s->idle && static_cast<int>(s->threads.size()) < impl_->opts.max_inflight)
      s->threads.emplace_back([this, s] { impl_->worker(s); });
  }
  s->cv.notify_one();
  return f;
}

int RemoteGenerator::max_context() const { return impl_->opts.max_context; }

void RemoteGenerator::update_weights(const std::string& model_path, int64_t policy_version) {
  json body = {{"model_path", model_path}, {"policy_version", policy_version}};
  if (impl_->api == RemoteApi::kSGLang) body["weight_version"] = std::to_string(policy_version);
  const std::string payload = body.dump();
  const std::string what = "POST /update_weights_from_disk";
  // "" = success, else the error; `refused`: servers that answered with a failure.
  std::vector<std::future<std::string>> calls;
  std::atomic<int> refused{0};
  for (const auto& s : impl_->servers) {
    calls.push_back(std::async(std::launch::async, [&, url = s->url]() -> std::string {
      try {
        auto cli = make_client(url, http_policy(impl_->opts));
        const Reply rep = http_call(*cli, url, http_policy(impl_->opts), "POST", "/update_weights_from_disk", payload,
                                    impl_->retries);
        const json j = json::parse(rep.body, nullptr, false);
        const std::string msg = body_message(rep.body);
        const bool ok = rep.status < 400 && !(j.is_object() && j.contains("success") && j["success"] != json(true));
        if (!ok) ++refused;
        if (rep.status >= 400)
          return "remote engine " + url + ": " + what + " refused with HTTP " + std::to_string(rep.status) + ": " + msg;
        if (j.is_object() && j.contains("success")) {
          if (!j["success"].is_boolean())
            return "remote engine " + url + ": " + what + ": malformed response: field 'success' must be true or "
                   "false, got " + snippet(j["success"].dump());
          if (!j["success"].get<bool>())
            return "remote engine " + url + ": " + what + " failed: " +
                   (j.contains("message") && j["message"].is_string() ? j["message"].get<std::string>() : msg);
        }
        return "";
      } catch (const std::exception& e) {
        return e.what();
      }
    }));
  }
  std::string errors;
  int failed = 0;
  for (auto& c : calls) {
    const std::string e = c.get();
    if (!e.empty()) {
      errors += "\n  " + e;
      ++failed;
    }
  }
  AGENTR1_CHECK(failed == 0, "loading the weights of policy version "
                                 << policy_version << " from '" << model_path << "' failed on " << failed << " of "
                                 << impl_->servers.size() << " servers:" << errors
                                 << (refused.load() > 0 ? "\n  HINT: the servers must read rollout.remote.weights_dir "
                                                           "under the same path (a shared file system when they run "
                                                           "elsewhere)" : ""));
  set_policy_version(policy_version);
}

const RemoteOptions& RemoteGenerator::options() const { return impl_->opts; }
const std::string& RemoteGenerator::model_name() const { return impl_->model; }

RemoteGenerator::Stats RemoteGenerator::stats() const {
  Stats st;
  st.requests = impl_->requests.load();
  st.retries = impl_->retries.load();
  st.generated_tokens = impl_->tokens.load();
  st.unknown_logprobs = impl_->unknown.load();
  for (const auto& s : impl_->servers) {
    std::lock_guard<std::mutex> lk(s->mu);
    st.per_server.push_back(s->answered);
  }
  return st;
}

void RemoteGenerator::reset_stats() {
  impl_->requests.store(0);
  impl_->retries.store(0);
  impl_->tokens.store(0);
  impl_->unknown.store(0);
  for (const auto& s : impl_->servers) {
    std::lock_guard<std::mutex> lk(s->mu);
    s->answered = 0;
  }
}

}  // namespace agentr1::rollout
