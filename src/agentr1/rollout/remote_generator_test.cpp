// RemoteGenerator against in-test HTTP servers that answer as vLLM's /v1/completions
// (token-id prompts, return_token_ids), SGLang's /generate and agentr1 serve's
// /update_weights_from_disk do, per their documented schemas: the request body sent,
// the mapping of each response shape to GenResult, retries and their limits, timeouts,
// dead servers, malformed bodies, routing by affinity key and the in-flight cap.
#include "agentr1/rollout/remote_generator.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"

namespace agentr1::rollout {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One fake server on 127.0.0.1 (a free port). Handlers get the parsed JSON body and
// set the reply; every request is recorded.
class FakeServer {
 public:
  struct Seen {
    std::string path;
    json body;
    std::string authorization;
  };
  using Handler = std::function<void(const json& body, httplib::Response& res)>;

  FakeServer() {
    svr_.new_task_queue = [] { return new httplib::ThreadPool(32); };
    models({{"id", "tiny"}, {"max_model_len", 4096}});
    svr_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      record("/v1/models", json(), req);
      std::lock_guard<std::mutex> g(mu_);
      res.set_content(json{{"object", "list"}, {"data", json::array({model_})}}.dump(), "application/json");
    });
    svr_.Get("/health", [this](const httplib::Request& req, httplib::Response& res) {
      record("/health", json(), req);
      res.set_content("{}", "application/json");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    EXPECT_GT(port_, 0);
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    for (int i = 0; i < 200 && !svr_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // GET /v1/models lists this model; GET /health answers 200.
  void models(json model) {
    std::lock_guard<std::mutex> g(mu_);
    model_ = std::move(model);
  }
  void post(const std::string& path, Handler h) {
    svr_.Post(path, [this, path, h](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body, nullptr, false);
      record(path, body, req);
      const int now = ++active_;
      int p = peak_.load();
      while (now > p && !peak_.compare_exchange_weak(p, now)) {
      }
      h(body, res);
      --active_;
    });
  }
  std::vector<Seen> seen(const std::string& path) const {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<Seen> out;
    for (const auto& s : seen_)
      if (s.path == path) out.push_back(s);
    return out;
  }
  int peak() const { return peak_.load(); }

 private:
  void record(const std::string& path, const json& body, const httplib::Request& req) {
    std::lock_guard<std::mutex> g(mu_);
    seen_.push_back({path, body, req.get_header_value("Authorization")});
  }
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  json model_;
  std::vector<Seen> seen_;
  std::atomic<int> active_{0}, peak_{0};
};

void reply(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_content(j.dump(), "application/json");
}

// A vLLM /v1/completions response (choices[0] with token_ids, logprobs, finish_reason,
// stop_reason), as its OpenAI-compatible server writes it.
json vllm_completion(const TokenIds& ids, const std::vector<double>& lps, const std::string& finish, json stop_reason) {
  json tokens = json::array();
  for (TokenId id : ids) tokens.push_back("token_id:" + std::to_string(id));
  return {{"id", "cmpl-1"},
          {"object", "text_completion"},
          {"model", "tiny"},
          {"choices",
           json::array({{{"index", 0},
                         {"text", "..."},
                         {"logprobs",
                          {{"text_offset", json::array()},
                           {"token_logprobs", lps},
                           {"tokens", tokens},
                           {"top_logprobs", json::array()}}},
                         {"finish_reason", finish},
                         {"stop_reason", stop_reason},
                         {"token_ids", ids},
                         {"prompt_token_ids", json::array({1, 2, 3})}}})},
          {"usage", {{"prompt_tokens", 3}, {"completion_tokens", ids.size()}, {"total_tokens", 3 + ids.size()}}}};
}

RemoteOptions options_for(const std::vector<const FakeServer*>& servers) {
  RemoteOptions o;
  for (const FakeServer* s : servers) o.urls.push_back(s->url());
  o.timeout_s = 5;
  o.retries = 2;
  o.backoff_s = 0.01;
  o.max_context = 64;
  return o;
}

GenRequest request(TokenIds prompt, uint64_t seed = 1, uint64_t key = 0) {
  GenRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0.7f;
  r.sampling.top_p = 0.9f;
  r.sampling.max_new_tokens = 8;
  r.sampling.seed = seed;
  r.sampling.stop_token_ids = {7, 9};
  r.affinity_key = key;
  return r;
}

// The agentr1::Error message of fn(), or "(no error)".
std::string error_of(const std::function<void()>& fn) { return agentr1::testing::error_of(fn, "(no error)"); }

TEST(RemoteGenerator, OpenAIRequestBodyAndResponse) {
  FakeServer s;
  s.post("/v1/completions", [](const json&, httplib::Response& res) {
    reply(res, vllm_completion({11, 12, 7}, {-0.5, -1.25, -0.125}, "stop", 7));
  });
  RemoteOptions o = options_for({&s});
  o.api_key = "sekrit";
  RemoteGenerator gen(o);
  EXPECT_EQ(gen.model_name(), "tiny");
  gen.set_policy_version(4);
  GenRequest req = request({1, 2, 3}, /*seed=*/0xFFFFFFFFFFFFFFFEULL);
  req.sampling.stop_strings = {"</answer>"};
  const GenResult r = gen.submit(req).get();
  EXPECT_EQ(r.token_ids, (TokenIds{11, 12, 7}));
  EXPECT_EQ(r.logprobs, (std::vector<float>{-0.5f, -1.25f, -0.125f}));
  EXPECT_EQ(r.finish, FinishReason::kStopToken);
  EXPECT_EQ(r.policy_version, 4) << "vLLM sends no policy_version: the one set is stamped";

  const auto seen = s.seen("/v1/completions");
  ASSERT_EQ(seen.size(), 1u);
  const json b = seen[0].body;
  EXPECT_EQ(seen[0].authorization, "Bearer sekrit");
  EXPECT_EQ(b["model"], "tiny");
  EXPECT_EQ(b["prompt"], json::array({1, 2, 3}));
  EXPECT_EQ(b["max_tokens"], 8);
  EXPECT_EQ(b["temperature"].get<double>(), 0.7) << "the float's shortest decimal";
  EXPECT_EQ(b["top_p"].get<double>(), 0.9);
  EXPECT_EQ(b["seed"].get<int64_t>(), -2) << "the 64 seed bits as vLLM's signed integer";
  EXPECT_EQ(b["n"], 1);
  EXPECT_EQ(b["stop_token_ids"], json::array({7, 9}));
  EXPECT_EQ(b["stop"], json::array({"</answer>"}));
  EXPECT_EQ(b["logprobs"], 1);
  EXPECT_EQ(b["return_token_ids"], true);
  EXPECT_EQ(b["skip_special_tokens"], false);
  EXPECT_EQ(b["include_stop_str_in_output"], true);
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_FALSE(b.contains("top_k")) << "top_k 0 (off) is not sent";

  // top_k sent when set; no "stop" without stop strings.
  GenRequest k = request({1, 2});
  k.sampling.top_k = 5;
  gen.submit(k).get();
  const json b2 = s.seen("/v1/completions").back().body;
  EXPECT_EQ(b2["top_k"], 5);
  EXPECT_FALSE(b2.contains("stop"));
  EXPECT_EQ(gen.stats().requests, 2);
  EXPECT_EQ(gen.stats().generated_tokens, 6);

  // agentr1 serve (owned_by "agentr1") takes the seed unsigned, as the engine has it.
  FakeServer ours;
  ours.models({{"id", "tiny"}, {"owned_by", "agentr1"}, {"max_model_len", 4096}});
  ours.post("/v1/completions", [](const json&, httplib::Response& res) {
    reply(res, vllm_completion({11}, {-0.5}, "length", nullptr));
  });
  RemoteGenerator ours_gen(options_for({&ours}));
  ours_gen.submit(request({1}, /*seed=*/0xFFFFFFFFFFFFFFFEULL)).get();
  const json seed = ours.seen("/v1/completions").at(0).body["seed"];
  EXPECT_TRUE(seed.is_number_unsigned()) << seed;
  EXPECT_EQ(seed.get<uint64_t>(), 0xFFFFFFFFFFFFFFFEULL);
}

// A server response arrives whole: on_token replays it token by token before the
// future is ready; returning false keeps the tokens up to there and marks kAborted.
TEST(RemoteGenerator, OnTokenReplaysTheResponse) {
  FakeServer s;
  s.post("/v1/completions", [](const json&, httplib::Response& res) {
    reply(res, vllm_completion({11, 12, 13, 7}, {-0.5, -1.25, -2.0, -0.125}, "stop", 7));
  });
  RemoteGenerator gen(options_for({&s}));
  std::vector<std::pair<TokenId, float>> seen;
  GenRequest req = request({1, 2, 3});
  req.on_token = [&](TokenId id, float lp) {
    seen.push_back({id, lp});
    return true;
  };
  const GenResult r = gen.submit(req).get();
  EXPECT_EQ(r.token_ids, (TokenIds{11, 12, 13, 7}));
  EXPECT_EQ(r.finish, FinishReason::kStopToken);
  const std::vector<std::pair<TokenId, float>> want = {{11, -0.5f}, {12, -1.25f}, {13, -2.0f}, {7, -0.125f}};
  EXPECT_EQ(seen, want);

  GenRequest abort = request({1, 2, 3});
  int calls = 0;
  abort.on_token = [&](TokenId, float) { return ++calls < 2; };
  const GenResult a = gen.submit(abort).get();
  EXPECT_EQ(a.token_ids, (TokenIds{11, 12}));
  EXPECT_EQ(a.logprobs, (std::vector<float>{-0.5f, -1.25f}));
  EXPECT_EQ(a.finish, FinishReason::kAborted);
}

TEST(RemoteGenerator, OpenAIFinishReasonsAndPolicyVersion) {
  FakeServer s;
  std::atomic<int> call{0};
  s.post("/v1/completions", [&](const json&, httplib::Response& res) {
    switch (call++) {
      case 0: {  // a stop string: stop_reason is the string
        reply(res, vllm_completion({4, 5}, {-1, -2}, "stop", "</answer>"));
        break;
      }
      case 1:
        reply(res, vllm_completion({4, 5, 6}, {-1, -2, -3}, "length", nullptr));
        break;
      case 2: {  // agentr1 serve's extension: the version that generated
        json j = vllm_completion({4, 9}, {-1, -2}, "stop", 9);
        j["choices"][0]["policy_version"] = 12;
        reply(res, j);
        break;
      }
      case 3:  // the stop token left out of token_ids: appended, its log-prob unknown
        reply(res, vllm_completion({4, 5}, {-1, -2}, "stop", 9));
        break;
      default:
        reply(res, vllm_completion({4}, {-1}, "abort", nullptr));
    }
  });
  RemoteGenerator gen(options_for({&s}));
  gen.set_policy_version(3);
  GenResult r = gen.submit(request({1})).get();
  EXPECT_EQ(r.finish, FinishReason::kStopString);
  EXPECT_EQ(r.token_ids, (TokenIds{4, 5}));
  r = gen.submit(request({1})).get();
  EXPECT_EQ(r.finish, FinishReason::kLength);
  r = gen.submit(request({1})).get();
  EXPECT_EQ(r.finish, FinishReason::kStopToken);
  EXPECT_EQ(r.policy_version, 12);
  EXPECT_EQ(gen.stats().unknown_logprobs, 0);
  r = gen.submit(request({1})).get();
  EXPECT_EQ(r.finish, FinishReason::kStopToken);
  EXPECT_EQ(r.token_ids, (TokenIds{4, 5, 9}));
  EXPECT_EQ(r.logprobs, (std::vector<float>{-1, -2, 0}));
  EXPECT_EQ(gen.stats().unknown_logprobs, 1);
  EXPECT_EQ(r.policy_version, 3);
  r = gen.submit(request({1})).get();
  EXPECT_EQ(r.finish, FinishReason::kAborted);
}

// SGLang's /generate: input_ids + sampling_params in, meta_info out.
TEST(RemoteGenerator, SGLangRequestBodyAndResponse) {
  FakeServer s;
  std::atomic<int> call{0};
  s.post("/generate", [&](const json&, httplib::Response& res) {
    const int c = call++;
    json finish = c == 0   ? json{{"type", "stop"}, {"matched", 7}}
                  : c == 1 ? json{{"type", "stop"}, {"matched", "</answer>"}}
                  : c == 2 ? json{{"type", "length"}, {"length", 2}}
                           : json{{"type", "stop"}, {"matched", 9}};
    TokenIds ids = c == 0 ? TokenIds{21, 7} : c == 3 ? TokenIds{21} : TokenIds{21, 22};
    json olp = json::array();
    for (size_t i = 0; i < ids.size(); ++i) olp.push_back({-0.25 * static_cast<double>(i + 1), ids[i], nullptr});
    reply(res, {{"text", "..."},
                {"output_ids", ids},
                {"meta_info",
                 {{"id", "abc"},
                  {"finish_reason", finish},
                  {"prompt_tokens", 3},
                  {"completion_tokens", ids.size()},
                  {"output_token_logprobs", olp}}}});
  });
  RemoteOptions o = options_for({&s});
  o.api = "sglang";
  RemoteGenerator gen(o);
  EXPECT_EQ(s.seen("/health").size(), 1u);
  EXPECT_TRUE(s.seen("/v1/models").empty());
  gen.set_policy_version(2);
  GenRequest req = request({1, 2, 3}, /*seed=*/77);
  req.sampling.top_k = 4;
  GenResult r = gen.submit(req).get();
  EXPECT_EQ(r.token_ids, (TokenIds{21, 7}));
  EXPECT_EQ(r.logprobs, (std::vector<float>{-0.25f, -0.5f}));
  EXPECT_EQ(r.finish, FinishReason::kStopToken);
  EXPECT_EQ(r.policy_version, 2);
  const json b = s.seen("/generate").at(0).body;
  EXPECT_EQ(b["input_ids"], json::array({1, 2, 3}));
  EXPECT_EQ(b["return_logprob"], true);
  const json sp = b.at("sampling_params");
  EXPECT_EQ(sp["max_new_tokens"], 8);
  EXPECT_EQ(sp["temperature"].get<double>(), 0.7);
  EXPECT_EQ(sp["top_p"].get<double>(), 0.9);
  EXPECT_EQ(sp["top_k"], 4);
  EXPECT_EQ(sp["sampling_seed"], 77);
  EXPECT_EQ(sp["stop_token_ids"], json::array({7, 9}));
  EXPECT_EQ(sp["skip_special_tokens"], false);
  EXPECT_EQ(sp["no_stop_trim"], true);
  EXPECT_EQ(sp["ignore_eos"], false);  // SGLang: true would disable stop_token_ids too
  r = gen.submit(request({1})).get();
  EXPECT_EQ(r.finish, FinishReason::kStopString);
  r = gen.submit(request({1})).get();
  EXPECT_EQ(r.finish, FinishReason::kLength);
  r = gen.submit(request({1})).get();
  EXPECT_EQ(r.token_ids, (TokenIds{21, 9})) << "a matched stop token not returned is appended";
  EXPECT_EQ(gen.stats().unknown_logprobs, 1);
}

TEST(RemoteGenerator, ClientErrorsAreNotRetriedServerErrorsAre) {
  FakeServer s;
  std::atomic<int> flaky_fails{0};
  s.post("/v1/completions", [&](const json& body, httplib::Response& res) {
    if (body["max_tokens"] == 1) {  // 4xx: the request's fault
      reply(res, {{"error", {{"message", "max_tokens too small"}, {"type", "invalid_request_error"}}}}, 400);
    } else if (body["max_tokens"] == 2) {  // always 5xx
      reply(res, {{"error", {{"message", "engine dead"}}}}, 500);
    } else if (flaky_fails++ < 2) {  // two 503s, then fine
      reply(res, {{"message", "warming up"}}, 503);
    } else {
      reply(res, vllm_completion({1}, {-1}, "length", nullptr));
    }
  });
  RemoteGenerator gen(options_for({&s}));
  GenRequest bad = request({1});
  bad.sampling.max_new_tokens = 1;
  std::string e = error_of([&] { gen.submit(bad).get(); });
  EXPECT_TRUE(contains(e, s.url())) << e;
  EXPECT_TRUE(contains(e, "POST /v1/completions")) << e;
  EXPECT_TRUE(contains(e, "HTTP 400")) << e;
  EXPECT_TRUE(contains(e, "max_tokens too small")) << e;
  EXPECT_EQ(s.seen("/v1/completions").size(), 1u) << "a 4xx is not retried";

  GenRequest dead = request({1});
  dead.sampling.max_new_tokens = 2;
  e = error_of([&] { gen.submit(dead).get(); });
  EXPECT_TRUE(contains(e, s.url())) << e;
  EXPECT_TRUE(contains(e, "failed after 3 attempts")) << e;
  EXPECT_TRUE(contains(e, "HTTP 500: engine dead")) << e;
  EXPECT_EQ(s.seen("/v1/completions").size(), 4u) << "1 + retries=2 attempts";

  gen.reset_stats();
  GenRequest flaky = request({1});
  flaky.sampling.max_new_tokens = 3;
  EXPECT_EQ(gen.submit(flaky).get().token_ids, (TokenIds{1}));
  EXPECT_EQ(gen.stats().retries, 2);
}

TEST(RemoteGenerator, TimeoutsAndDeadServersNameTheServer) {
  FakeServer s;
  s.post("/v1/completions", [](const json&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    reply(res, vllm_completion({1}, {-1}, "length", nullptr));
  });
  RemoteOptions o = options_for({&s});
  o.timeout_s = 0.3;
  o.retries = 1;
  RemoteGenerator gen(o);
  const auto t0 = std::chrono::steady_clock::now();
  std::string e = error_of([&] { gen.submit(request({1})).get(); });
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(contains(e, s.url())) << e;
  EXPECT_TRUE(contains(e, "POST /v1/completions failed after 2 attempts")) << e;
  EXPECT_TRUE(contains(e, "no response within rollout.remote.timeout_s=0.3 s")) << e;
  EXPECT_LT(dt, 1.5) << "two attempts of 0.3 s, not the server's 1.2 s";

  // Nothing listens on the port of a server that was stopped.
  std::string dead_url;
  {
    FakeServer gone;
    dead_url = gone.url();
  }
  RemoteOptions d;
  d.urls = {dead_url};
  d.retries = 2;
  d.backoff_s = 0.01;
  e = error_of([&] { RemoteGenerator g(d); });
  EXPECT_TRUE(contains(e, dead_url)) << e;
  EXPECT_TRUE(contains(e, "GET /v1/models failed after 3 attempts")) << e;
  EXPECT_TRUE(contains(e, "cannot connect")) << e;
  EXPECT_TRUE(contains(e, "checking the server at start")) << e;
}

TEST(RemoteGenerator, MalformedResponsesNameTheField) {
  FakeServer s;
  std::atomic<int> call{0};
  s.post("/v1/completions", [&](const json&, httplib::Response& res) {
    const int c = call++;
    if (c == 0) {
      res.set_content("<html>oops</html>", "text/html");
    } else if (c == 1) {
      json j = vllm_completion({1, 2}, {-1, -2}, "length", nullptr);
      j["choices"][0].erase("token_ids");
      reply(res, j);
    } else if (c == 2) {
      reply(res, vllm_completion({1, 2}, {-1}, "length", nullptr));
    } else if (c == 3) {
      reply(res, vllm_completion({1, 2}, {-1, -2}, "eos", nullptr));
    } else if (c == 4) {
      json j = vllm_completion({1, 2}, {-1, -2}, "length", nullptr);
      j["choices"][0]["token_ids"][1] = "two";
      reply(res, j);
    } else {
      reply(res, {{"choices", json::array()}});
    }
  });
  RemoteGenerator gen(options_for({&s}));
  const std::vector<std::string> expect = {"the response is not JSON: <html>oops</html>",
                                           "field 'choices[0].token_ids' is missing",
                                           "field 'choices[0].logprobs.token_logprobs' must have one entry per token id",
                                           "field 'choices[0].finish_reason' must be",
                                           "field 'choices[0].token_ids[1]' must be an integer token id",
                                           "field 'choices' must be a non-empty list"};
  for (const auto& x : expect) {
    const std::string e = error_of([&] { gen.submit(request({1})).get(); });
    EXPECT_TRUE(contains(e, x)) << e;
    EXPECT_TRUE(contains(e, s.url())) << e;
  }
  EXPECT_EQ(s.seen("/v1/completions").size(), expect.size()) << "malformed answers are not retried";
}

TEST(RemoteGenerator, StartChecks) {
  FakeServer s;
  s.models({{"id", "tiny"}, {"max_model_len", 32}});
  RemoteOptions o = options_for({&s});
  std::string e = error_of([&] { RemoteGenerator g(o); });
  EXPECT_TRUE(contains(e, "max_model_len 32")) << e;
  EXPECT_TRUE(contains(e, "64")) << e;
  o.max_context = 32;
  o.model = "other";
  e = error_of([&] { RemoteGenerator g(o); });
  EXPECT_TRUE(contains(e, "does not serve model 'other' (it lists: tiny)")) << e;
  o.model = "tiny";
  RemoteGenerator ok(o);
  EXPECT_EQ(ok.max_context(), 32);

  // Options are checked before any connection.
  RemoteOptions bad;
  e = error_of([&] { RemoteGenerator g(bad); });
  EXPECT_TRUE(contains(e, "rollout.remote.urls must list at least one server")) << e;
  bad.urls = {"http://127.0.0.1:1/v1"};
  e = error_of([&] { RemoteGenerator g(bad); });
  EXPECT_TRUE(contains(e, "without a path")) << e;
  EXPECT_TRUE(contains(e, "HINT: http://127.0.0.1:1")) << e;
  bad.urls = {"127.0.0.1:8000"};
  EXPECT_TRUE(contains(error_of([&] { RemoteGenerator g(bad); }), "must start with http://"));
  bad.urls = {"http://a:1", "http://a:1"};
  EXPECT_TRUE(contains(error_of([&] { RemoteGenerator g(bad); }), "twice"));
  bad.urls = {"http://a:1"};
  bad.api = "tgi";
  EXPECT_TRUE(contains(error_of([&] { RemoteGenerator g(bad); }), "unknown remote api 'tgi' (known: openai, sglang)"));
  bad.api = "openai";
  bad.retries = 11;
  EXPECT_TRUE(contains(error_of([&] { RemoteGenerator g(bad); }), "rollout.remote.retries must be in 0..10, got 11"));
  bad.retries = 0;
  bad.max_inflight = 0;
  EXPECT_TRUE(contains(error_of([&] { RemoteGenerator g(bad); }), "max_inflight must be in 1..4096, got 0"));

  // Requests are checked before they are queued.
  EXPECT_TRUE(contains(error_of([&] { ok.submit(request({})); }), "the prompt is empty"));
  EXPECT_TRUE(contains(error_of([&] { ok.submit(request(TokenIds(32, 1))); }), "leaves no room"));
}

// Two servers: a group's requests (one affinity key) all go to one server, the groups
// spread over both; each server sees at most max_inflight requests at once.
TEST(RemoteGenerator, AffinityRoutingAndInflightCap) {
  FakeServer a, b;
  for (FakeServer* s : {&a, &b})
    s->post("/v1/completions", [](const json&, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      reply(res, vllm_completion({1}, {-1}, "length", nullptr));
    });
  RemoteOptions o = options_for({&a, &b});
  o.max_inflight = 3;
  RemoteGenerator gen(o);
  const int groups = 8, n = 4;
  std::vector<std::future<GenResult>> fs;
  for (int g = 0; g < groups; ++g)
    for (int r = 0; r < n; ++r)
      fs.push_back(gen.submit(request({100 + g, r}, /*seed=*/r, /*key=*/1000 + static_cast<uint64_t>(g))));
  for (auto& f : fs) f.get();
  std::map<int, std::set<int>> where;  // group -> servers
  for (int si = 0; si < 2; ++si)
    for (const auto& seen : (si == 0 ? a : b).seen("/v1/completions"))
      where[seen.body["prompt"][0].get<int>() - 100].insert(si);
  ASSERT_EQ(where.size(), static_cast<size_t>(groups));
  int on_a = 0;
  for (const auto& [g, servers] : where) {
    EXPECT_EQ(servers.size(), 1u) << "group " << g << " was split";
    on_a += servers.count(0) ? 1 : 0;
  }
  EXPECT_GT(on_a, 0);
  EXPECT_LT(on_a, groups);
  EXPECT_LE(a.peak(), 3);
  EXPECT_LE(b.peak(), 3);
  EXPECT_GE(a.peak() + b.peak(), 3) << "requests ran concurrently";
  const auto st = gen.stats();
  EXPECT_EQ(st.requests, groups * n);
  EXPECT_EQ(st.per_server[0] + st.per_server[1], groups * n);

  // Without a key: the least loaded server.
  std::vector<std::future<GenResult>> free;
  for (int i = 0; i < 8; ++i) free.push_back(gen.submit(request({1, i})));
  for (auto& f : free) f.get();
  EXPECT_GE(gen.stats().per_server[0], st.per_server[0] + 2);
  EXPECT_GE(gen.stats().per_server[1], st.per_server[1] + 2);
}

TEST(RemoteGenerator, UpdateWeightsReachesEveryServer) {
  FakeServer a, b;
  std::atomic<bool> b_fails{false};
  a.post("/update_weights_from_disk", [](const json& body, httplib::Response& res) {
    reply(res, {{"success", true}, {"message", "loaded " + body["model_path"].get<std::string>()}});
  });
  b.post("/update_weights_from_disk", [&](const json&, httplib::Response& res) {
    if (b_fails)
      reply(res, {{"success", false}, {"message", "tensor 'lm_head.weight': expected [64, 32], found [32, 64]"}}, 400);
    else
      reply(res, {{"success", true}, {"message", "ok"}});
  });
  RemoteGenerator gen(options_for({&a, &b}));
  gen.update_weights("/tmp/w/v3", 3);
  EXPECT_EQ(gen.policy_version(), 3);
  for (FakeServer* s : {&a, &b}) {
    const auto seen = s->seen("/update_weights_from_disk");
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].body["model_path"], "/tmp/w/v3");
    EXPECT_EQ(seen[0].body["policy_version"], 3);
  }
  b_fails = true;
  const std::string e = error_of([&] { gen.update_weights("/tmp/w/v4", 4); });
  EXPECT_TRUE(contains(e, "failed on 1 of 2 servers")) << e;
  EXPECT_TRUE(contains(e, b.url() + ": POST /update_weights_from_disk refused with HTTP 400")) << e;
  EXPECT_TRUE(contains(e, "expected [64, 32], found [32, 64]")) << e;
  EXPECT_FALSE(contains(e, a.url())) << e;
  EXPECT_TRUE(contains(e, "HINT: the servers must read rollout.remote.weights_dir")) << e;
  EXPECT_EQ(gen.policy_version(), 3) << "the version is stamped only when every server loaded";

  // A server that is gone: named, with the attempts; no file-system hint.
  RemoteOptions o = options_for({&a});
  o.retries = 0;
  std::string gone_url;
  std::unique_ptr<RemoteGenerator> g2;
  {
    FakeServer gone;
    gone_url = gone.url();
    o.urls.push_back(gone_url);
    g2 = std::make_unique<RemoteGenerator>(o);
  }
  const std::string e2 = error_of([&] { g2->update_weights("/tmp/w/v5", 5); });
  EXPECT_TRUE(contains(e2, "failed on 1 of 2 servers")) << e2;
  EXPECT_TRUE(contains(e2, gone_url + ": POST /update_weights_from_disk failed after 1 attempt ")) << e2;
  EXPECT_FALSE(contains(e2, "weights_dir")) << e2;
}

}  // namespace
}  // namespace agentr1::rollout
