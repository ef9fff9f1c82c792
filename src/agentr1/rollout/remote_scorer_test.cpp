// RemoteScorer against an in-test HTTP server answering as vLLM's /v1/completions does
// with "prompt_logprobs" (entries written out by hand here): the request sent, chunking,
// the top-k order, and errors for dead servers and malformed bodies.
#include "agentr1/rollout/remote_scorer.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"

namespace agentr1::rollout {
namespace {

using agentr1::testing::error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// GET /v1/models lists "tiny"; POST /v1/completions runs `reply` on each request body.
class FakeServer {
 public:
  std::function<json(const json&)> reply;
  std::vector<json> seen;
  std::mutex mu;

  FakeServer() {
    svr_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(json{{"object", "list"}, {"data", json::array({json{{"id", "tiny"}}})}}.dump(),
                      "application/json");
    });
    svr_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body);
      {
        std::lock_guard<std::mutex> g(mu);
        seen.push_back(body);
      }
      res.set_content(reply(body).dump(), "application/json");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    for (int i = 0; i < 200 && !svr_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

// vLLM's entry for prompt token `id` at position t of a fake model whose log-prob of
// token v at position t is -(v + t) / 10: ranks follow ids (0 most likely), the top k
// are ids 0..k-1 and the actual token is added when outside them.
json entry(int id, int t, int k) {
  json e = json::object();
  auto add = [&](int v) {
    e[std::to_string(v)] = json{{"logprob", -(v + t) / 10.0}, {"rank", v + 1}, {"decoded_token", "x"}};
  };
  add(id);
  for (int v = 0; v < k; ++v) add(v);
  return e;
}

json answer(const json& body) {
  const int k = body["prompt_logprobs"].get<int>();
  json choices = json::array();
  for (size_t i = 0; i < body["prompt"].size(); ++i) {
    json pl = json::array({nullptr});
    const json& ids = body["prompt"][i];
    for (size_t t = 1; t < ids.size(); ++t) pl.push_back(entry(ids[t].get<int>(), static_cast<int>(t), k));
    choices.push_back(json{{"index", i}, {"text", "z"}, {"prompt_logprobs", pl}});
  }
  return json{{"choices", choices}};
}

RemoteScorerOptions opts(const std::string& url) {
  RemoteScorerOptions o;
  o.url = url;
  o.retries = 0;
  o.timeout_s = 5;
  return o;
}

TEST(RemoteScorer, SendsVllmPromptLogprobRequestsInChunksAndReadsTheTopK) {
  FakeServer s;
  s.reply = answer;
  RemoteScorerOptions o = opts(s.url());
  o.max_prompts_per_request = 2;
  o.max_inflight = 1;
  RemoteScorer scorer(o, "teacher.");
  EXPECT_EQ(scorer.model_name(), "tiny");
  const std::vector<TokenIds> seqs = {{5, 1, 7}, {2, 9}, {3, 0, 4, 8}};
  const std::vector<PromptScores> r = scorer.score(seqs, 0.7, 3);
  ASSERT_EQ(s.seen.size(), 2u);  // two chunks: 2 + 1 sequences
  EXPECT_EQ(s.seen[0]["prompt"], json(std::vector<TokenIds>{{5, 1, 7}, {2, 9}}));
  EXPECT_EQ(s.seen[0]["model"], "tiny");
  EXPECT_EQ(s.seen[0]["prompt_logprobs"], 3);
  EXPECT_EQ(s.seen[0]["max_tokens"], 1);
  EXPECT_DOUBLE_EQ(s.seen[0]["temperature"].get<double>(), 0.7);
  ASSERT_EQ(r.size(), 3u);
  for (size_t i = 0; i < seqs.size(); ++i) {
    ASSERT_EQ(r[i].logprob.size(), seqs[i].size());
    ASSERT_EQ(r[i].topk_ids.size(), seqs[i].size() * 3);
    EXPECT_EQ(r[i].logprob[0], 0.0f);
    for (size_t t = 1; t < seqs[i].size(); ++t) {
      EXPECT_FLOAT_EQ(r[i].logprob[t], static_cast<float>(-(seqs[i][t] + static_cast<int>(t)) / 10.0));
      for (int j = 0; j < 3; ++j) {  // ids 0, 1, 2 whatever the actual token
        EXPECT_EQ(r[i].topk_ids[t * 3 + j], j);
        EXPECT_FLOAT_EQ(r[i].topk_logprob[t * 3 + j], static_cast<float>(-(j + static_cast<int>(t)) / 10.0));
      }
    }
  }
}

TEST(RemoteScorer, MalformedResponsesAreErrorsNamingTheUrlAndField) {
  FakeServer s;
  RemoteScorer scorer(opts(s.url()));
  const std::vector<TokenIds> seqs = {{5, 1, 7}};
  s.reply = [](const json&) { return json{{"choices", json::array({json{{"index", 0}, {"text", ""}}})}}; };
  std::string e = error_of([&] { scorer.score(seqs, 1.0, 0); });
  EXPECT_TRUE(contains(e, "remote teacher " + s.url())) << e;
  EXPECT_TRUE(contains(e, "field 'choices[0].prompt_logprobs' is missing")) << e;
  s.reply = [](const json& b) {
    json a = answer(b);
    a["choices"][0]["prompt_logprobs"].erase(2);
    return a;
  };
  e = error_of([&] { scorer.score(seqs, 1.0, 0); });
  EXPECT_TRUE(contains(e, "must have one entry per prompt token (3)")) << e;
  s.reply = [](const json& b) {
    json a = answer(b);
    a["choices"][0]["prompt_logprobs"][2].erase("7");
    return a;
  };
  e = error_of([&] { scorer.score(seqs, 1.0, 0); });
  EXPECT_TRUE(contains(e, "'choices[0].prompt_logprobs[2]' must hold the actual prompt token 7")) << e;
  s.reply = [](const json& b) {  // a server that ignores prompt_logprobs: the actual token only
    json c = b;
    c["prompt_logprobs"] = 0;
    return answer(c);
  };
  e = error_of([&] { scorer.score(seqs, 1.0, 4); });
  EXPECT_TRUE(contains(e, "must hold the top 4 tokens")) << e;
}

TEST(RemoteScorer, ADeadServerIsAnErrorNamingItsUrl) {
  std::string url;
  {
    FakeServer s;  // a port that was free a moment ago and now has no listener
    url = s.url();
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { RemoteScorer scorer(opts(url), "algorithm.distill.teachers.t."); });
  EXPECT_TRUE(contains(e, "remote teacher " + url + ": GET /v1/models failed after 1 attempt")) << e;
  EXPECT_TRUE(contains(e, "algorithm.distill.teachers.t.retries=0")) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  RemoteScorerOptions bad = opts("127.0.0.1:8000");
  EXPECT_TRUE(contains(error_of([&] { bad.validate("k."); }), "k.url='127.0.0.1:8000' must start with http://"));
}

}  // namespace
}  // namespace agentr1::rollout
