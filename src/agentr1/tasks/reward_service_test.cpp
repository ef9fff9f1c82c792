#include "agentr1/tasks/reward_service.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/tasks/reward.h"

namespace agentr1::tasks {
namespace {

using agentr1::testing::error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The message of the InfraError fn throws; "" when it throws nothing (any other
// exception propagates, so a plain Error fails the test).
template <class Fn>
std::string infra_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const InfraError& e) {
    return e.what();
  }
  return "";
}

// The judge's answer to one prompt: "score=<x>" in the prompt -> " <x>", "verdict=<w>" ->
// "<w>", else "?" (a deterministic function of the prompt text).
std::string answer_for(const std::string& prompt) {
  for (const char* tag : {"score=", "verdict="}) {
    const size_t at = prompt.find(tag);
    if (at == std::string::npos) continue;
    const size_t from = at + std::string(tag).size();
    const size_t end = prompt.find(' ', from);
    return (tag[0] == 's' ? " " : "") + prompt.substr(from, end == std::string::npos ? std::string::npos : end - from);
  }
  return "?";
}

// A fake judge on 127.0.0.1 (a free port): POST /v1/completions with a list of prompts,
// answered by `handler` (default: answer_for each prompt, choices in order). Every
// request body is recorded.
class FakeJudge {
 public:
  using Handler = std::function<void(const json& body, httplib::Response& res)>;

  FakeJudge() {
    svr_.new_task_queue = [] { return new httplib::ThreadPool(16); };
    svr_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body, nullptr, false);
      Handler h;
      {
        std::lock_guard<std::mutex> g(mu_);
        bodies_.push_back(body);
        auth_.push_back(req.get_header_value("Authorization"));
        h = handler_;
      }
      h(body, res);
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    EXPECT_GT(port_, 0);
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    for (int i = 0; i < 400 && !svr_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeJudge() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void on(Handler h) {
    std::lock_guard<std::mutex> g(mu_);
    handler_ = std::move(h);
  }
  std::vector<json> bodies() const {
    std::lock_guard<std::mutex> g(mu_);
    return bodies_;
  }
  std::vector<std::string> auth() const {
    std::lock_guard<std::mutex> g(mu_);
    return auth_;
  }

  // choices for the body's prompts: {"index": i, "text": answer(prompt i)}, in order.
  static json choices(const json& body, const std::function<std::string(const std::string&)>& answer = answer_for) {
    json out = json::array();
    for (size_t i = 0; i < body["prompt"].size(); ++i)
      out.push_back({{"index", i}, {"text", answer(body["prompt"][i].get<std::string>())}, {"finish_reason", "stop"}});
    return out;
  }
  static void reply(httplib::Response& res, const json& choices, int status = 200) {
    res.status = status;
    res.set_content(json{{"object", "text_completion"}, {"choices", choices}}.dump(), "application/json");
  }

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  Handler handler_ = [](const json& body, httplib::Response& res) { reply(res, choices(body)); };
  std::vector<json> bodies_;
  std::vector<std::string> auth_;
};

RewardServiceOptions options_for(const FakeJudge& judge, const std::string& parser = "score") {
  RewardServiceOptions o;
  o.url = judge.url();
  o.parser = parser;
  o.timeout_s = 5;
  o.backoff_s = 0.01;
  return o;
}

// --- parsers ---------------------------------------------------------------------

std::string why_not(const std::string& answer, JudgeParser p, double lo = 0, double hi = 1) {
  std::string why;
  return parse_judge_answer(answer, p, lo, hi, &why) ? "(read)" : why;
}

TEST(RewardService, YesNoParser) {
  EXPECT_EQ(parse_judge_answer(" Yes.", JudgeParser::kYesNo), 1.0f);
  EXPECT_EQ(parse_judge_answer("no", JudgeParser::kYesNo), 0.0f);
  EXPECT_EQ(parse_judge_answer("NO, it is wrong", JudgeParser::kYesNo), 0.0f);
  EXPECT_EQ(parse_judge_answer("<think>hmm</think>\nyes", JudgeParser::kYesNo), 1.0f);
  EXPECT_EQ(parse_judge_answer("\n <think>no? yes?</think> No", JudgeParser::kYesNo), 0.0f);
  EXPECT_FALSE(parse_judge_answer("Nope", JudgeParser::kYesNo));
  EXPECT_FALSE(parse_judge_answer("yesterday", JudgeParser::kYesNo));
  EXPECT_FALSE(parse_judge_answer("The answer is yes", JudgeParser::kYesNo));
  EXPECT_FALSE(parse_judge_answer("", JudgeParser::kYesNo));
  EXPECT_TRUE(contains(why_not("<think>still thinking", JudgeParser::kYesNo), "without </think>"));
  EXPECT_TRUE(contains(why_not("maybe", JudgeParser::kYesNo), "does not start with yes or no"));
}

TEST(RewardService, ScoreParser) {
  EXPECT_EQ(parse_judge_answer("0.7", JudgeParser::kScore), 0.7f);
  EXPECT_EQ(parse_judge_answer("Score: 3", JudgeParser::kScore, 0, 5), 3.0f);
  EXPECT_EQ(parse_judge_answer("3/5, because", JudgeParser::kScore, 0, 5), 3.0f);
  EXPECT_EQ(parse_judge_answer(" .5", JudgeParser::kScore), 0.5f);
  EXPECT_EQ(parse_judge_answer("-1 (bad)", JudgeParser::kScore, -1, 1), -1.0f);
  EXPECT_EQ(parse_judge_answer("<think>maybe 9</think> 1", JudgeParser::kScore), 1.0f);  // the think block is skipped
  EXPECT_FALSE(parse_judge_answer("7", JudgeParser::kScore, 0, 5));
  EXPECT_FALSE(parse_judge_answer("no idea", JudgeParser::kScore));
  EXPECT_TRUE(contains(why_not("7", JudgeParser::kScore, 0, 5), "7 lies outside [min_score, max_score] = [0, 5]"));
  EXPECT_TRUE(contains(why_not("none", JudgeParser::kScore), "no number"));
  EXPECT_EQ(parse_judge_parser("score"), JudgeParser::kScore);
  EXPECT_TRUE(contains(error_of([] { parse_judge_parser("maybe"); }), "known: yes_no, score"));
}

// --- templates -------------------------------------------------------------------

TEST(RewardService, TemplateRendersPlaceholdersAndBraces) {
  const json extra{{"question", "2+2?"}, {"meta", {{"k", 1}}}, {"n", 4}};
  EXPECT_EQ(render_judge_prompt("Q: {extra_info.question} A: {response} Ref: {ground_truth}", "four", "4", extra),
            "Q: 2+2? A: four Ref: 4");
  EXPECT_EQ(render_judge_prompt("{ground_truth}|{extra_info.meta}|{extra_info.n}", "", json{{"a", 1}}, extra),
            "{\"a\":1}|{\"k\":1}|4");
  EXPECT_EQ(render_judge_prompt("{ground_truth}", "", 12.5, extra), "12.5");
  EXPECT_EQ(render_judge_prompt("{{\"answer\": {response}}} }}{{", "\"x\"", "", extra), "{\"answer\": \"x\"} }{");
  EXPECT_EQ(judge_template("{response}{extra_info.q}{response}").placeholders(),
            (std::vector<std::string>{"response", "extra_info.q"}));
}

TEST(RewardService, TemplateErrors) {
  std::string e = error_of([] { judge_template("Is {answer} right?"); });
  EXPECT_TRUE(contains(e, "unknown placeholder {answer} at offset 3")) << e;
  EXPECT_TRUE(contains(e, "{response}, {ground_truth}, {extra_info.KEY}")) << e;
  EXPECT_TRUE(contains(error_of([] { judge_template("{\"a\": 1}"); }), "unknown placeholder")) ;
  EXPECT_TRUE(contains(error_of([] { judge_template("{extra_info.}"); }), "unknown placeholder {extra_info.}"));
  EXPECT_TRUE(contains(error_of([] { judge_template("a } b"); }), "lone '}' at offset 2"));
  EXPECT_TRUE(contains(error_of([] { judge_template("a {response"); }), "unclosed '{' at offset 2"));
  e = error_of([] { render_judge_prompt("{extra_info.topic}", "r", "g", json{{"question", "q"}, {"index", 3}}); });
  EXPECT_TRUE(contains(e, "{extra_info.topic}: extra_info has no key 'topic' (its keys: question, index)")) << e;
  e = error_of([] { render_judge_prompt("{extra_info.topic}", "r", "g", json()); });
  EXPECT_TRUE(contains(e, "it is null, not an object")) << e;
  // Other families' templates name their own fields.
  PromptTemplate t("{title}: {abstract}", {"title", "abstract"});
  EXPECT_EQ(t.render({{"title", "T"}, {"abstract", "A"}}), "T: A");
  EXPECT_TRUE(contains(error_of([&] { t.render({{"title", "T"}}); }), "{abstract} has no value"));
}

// --- options ---------------------------------------------------------------------

TEST(RewardService, OptionsNameTheKey) {
  std::string e = error_of([] { RewardServiceOptions::from_json({{"parser", "yes_no"}}); });
  EXPECT_TRUE(contains(e, "reward_kwargs: url is required")) << e;
  e = error_of([] { RewardServiceOptions::from_json({{"url", "http://127.0.0.1:1"}, {"urll", "x"}}); });
  EXPECT_TRUE(contains(e, "reward_kwargs.urll")) << e;
  e = error_of([] { RewardServiceOptions::from_json({{"url", "http://127.0.0.1:1"}, {"parser", "maybe"}}); });
  EXPECT_TRUE(contains(e, "reward_kwargs: parser: unknown judge parser 'maybe' (known: yes_no, score)")) << e;
  e = error_of([] { RewardServiceOptions::from_json({{"url", "127.0.0.1:8000"}}); });
  EXPECT_TRUE(contains(e, "url='127.0.0.1:8000' must start with http://")) << e;
  e = error_of([] { RewardServiceOptions::from_json({{"url", "http://h:1/v1"}}); });
  EXPECT_TRUE(contains(e, "without a path")) << e;
  e = error_of([] { RewardServiceOptions::from_json({{"url", "http://h:1"}, {"max_batch", 0}}); });
  EXPECT_TRUE(contains(e, "max_batch must be >= 1, got 0")) << e;
  e = error_of([] { RewardServiceOptions::from_json({{"url", "http://h:1"}, {"min_score", 2}}); });
  EXPECT_TRUE(contains(e, "min_score must be < max_score")) << e;
  e = error_of([] { RewardServiceOptions::from_json({{"url", "http://h:1"}, {"retries", 11}}); });
  EXPECT_TRUE(contains(e, "retries must be in 0..10, got 11")) << e;
  e = error_of([] { RewardServiceOptions::from_json({{"url", "http://h:1"}, {"prompt_template", "a } b"}}); });
  EXPECT_TRUE(contains(e, "reward_kwargs: prompt_template: a lone '}'")) << e;
  e = error_of([] { RewardServiceOptions::from_json({{"url", "http://h:1"}, {"api_key_env", "sk-secret key"}}); });
  EXPECT_TRUE(contains(e, "api_key_env must be the NAME of an environment variable")) << e;
  EXPECT_FALSE(contains(e, "sk-secret")) << e;  // a key pasted by mistake is not echoed
  EXPECT_EQ(error_of([] { RewardServiceOptions::from_json({{"url", "http://h:1"}}); }), "");
  EXPECT_EQ(RewardServiceOptions::from_json({{"url", "http://h:1"}}).max_batch, 32);
}

// --- the service -----------------------------------------------------------------

// A minimal countdown latch (C++17 has no std::latch).
class Latch {
 public:
  explicit Latch(int n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lk(mu_);
    if (--n_ == 0) cv_.notify_all();
    cv_.wait(lk, [&] { return n_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
};

TEST(RewardService, MergesConcurrentCallersIntoBatches) {
  FakeJudge judge;
  RewardServiceOptions o = options_for(judge);
  o.max_batch = 4;
  o.batch_wait_ms = 60000;  // only full batches go: 16 callers -> exactly 4 requests
  RewardService svc(o);
  constexpr int kThreads = 16;
  std::vector<float> got(kThreads, -1.0f);
  Latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      got[i] = svc.score({"caller " + std::to_string(i) + " score=" + std::to_string(i / 16.0)}).at(0);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_FLOAT_EQ(got[i], static_cast<float>(i / 16.0)) << "caller " << i;
  const std::vector<json> bodies = judge.bodies();
  ASSERT_EQ(bodies.size(), 4u);
  for (const json& b : bodies) {
    EXPECT_EQ(b["prompt"].size(), 4u) << b.dump();
    EXPECT_EQ(b["max_tokens"], 16);
    EXPECT_EQ(b["temperature"], 0.0);
    EXPECT_FALSE(b.contains("model"));  // "" = not sent
  }
  EXPECT_EQ(svc.stats(), (json{{"requests", 4}, {"prompts", 16}, {"retries", 0}, {"failures", 0}}));
}

TEST(RewardService, MaxBatchDeadlineAndChoicesByIndex) {
  FakeJudge judge;
  judge.on([](const json& body, httplib::Response& res) {
    json c = FakeJudge::choices(body);
    std::reverse(c.begin(), c.end());  // out of order: matched by "index"
    FakeJudge::reply(res, c);
  });
  RewardServiceOptions o = options_for(judge);
  o.max_batch = 4;
  o.batch_wait_ms = 1;
  o.model = "judge";
  RewardService svc(o);
  std::vector<std::string> prompts;
  std::vector<float> want;
  for (int i = 0; i < 10; ++i) {
    prompts.push_back("p" + std::to_string(i) + " score=0." + std::to_string(i));
    want.push_back(static_cast<float>(i / 10.0));
  }
  const std::vector<float> got = svc.score(prompts);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  // One caller: two full batches, then the rest when its wait is over.
  const std::vector<json> bodies = judge.bodies();
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_EQ(bodies[0]["prompt"].size(), 4u);
  EXPECT_EQ(bodies[1]["prompt"].size(), 4u);
  EXPECT_EQ(bodies[2]["prompt"], json({prompts[8], prompts[9]}));
  EXPECT_EQ(bodies[0]["model"], "judge");
  EXPECT_TRUE(svc.score({}).empty());
}

TEST(RewardService, TimeoutIsRetried) {
  FakeJudge judge;
  std::atomic<int> calls{0};
  judge.on([&](const json& body, httplib::Response& res) {
    if (calls.fetch_add(1) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    FakeJudge::reply(res, FakeJudge::choices(body));
  });
  RewardServiceOptions o = options_for(judge, "yes_no");
  o.timeout_s = 0.4;  // the first attempt times out, the second has time to spare
  o.retries = 2;
  RewardService svc(o);
  EXPECT_EQ(svc.score({"verdict=Yes"}), std::vector<float>{1.0f});
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(svc.counters().retries.load(), 1);
  EXPECT_EQ(svc.counters().requests.load(), 1);
  EXPECT_EQ(svc.counters().failures.load(), 0);
}

TEST(RewardService, ServiceFailureIsInfraError) {
  FakeJudge judge;
  judge.on([](const json&, httplib::Response& res) {
    res.status = 500;
    res.set_content(R"({"error": {"message": "judge fell over"}})", "application/json");
  });
  RewardServiceOptions o = options_for(judge);
  o.retries = 1;
  RewardService svc(o);
  const std::string e = infra_error_of([&] { svc.score({"score=1"}); });
  EXPECT_TRUE(contains(e, judge.url())) << e;
  EXPECT_TRUE(contains(e, "HTTP 500: judge fell over")) << e;
  EXPECT_TRUE(contains(e, "failed after 2 attempts (reward_kwargs.retries=1)")) << e;
  EXPECT_TRUE(contains(e, "HINT")) << e;
  EXPECT_EQ(judge.bodies().size(), 2u);
  EXPECT_EQ(svc.stats()["failures"], 1);
  EXPECT_EQ(svc.stats()["retries"], 1);

  // A server that is down.
  std::string down;
  {
    FakeJudge gone;
    down = gone.url();
  }
  o.url = down;
  o.retries = 0;
  RewardService dead(o);
  const std::string e2 = infra_error_of([&] { dead.score({"score=1"}); });
  EXPECT_TRUE(contains(e2, down)) << e2;
  EXPECT_TRUE(contains(e2, "cannot connect")) << e2;

  // A 4xx is not retried.
  judge.on([](const json&, httplib::Response& res) {
    res.status = 404;
    res.set_content(R"({"message": "model 'x' is not served here"})", "application/json");
  });
  o.url = judge.url();
  o.retries = 3;
  RewardService refused(o);
  const size_t before = judge.bodies().size();
  const std::string e3 = infra_error_of([&] { refused.score({"score=1"}); });
  EXPECT_TRUE(contains(e3, "refused with HTTP 404 (not retried): model 'x' is not served here")) << e3;
  EXPECT_EQ(judge.bodies().size(), before + 1);
}

TEST(RewardService, UnreadableAnswersAndMissingChoicesAreInfraErrors) {
  FakeJudge judge;
  RewardServiceOptions o = options_for(judge);
  o.max_score = 5;
  o.max_batch = 2;
  o.batch_wait_ms = 60000;
  RewardService svc(o);
  // Two callers in one request: only the one whose answer is unreadable fails.
  std::string e;
  float ok = -1;
  Latch start(2);
  std::thread a([&] {
    start.arrive_and_wait();
    ok = svc.score({"score=4"}).at(0);
  });
  std::thread b([&] {
    start.arrive_and_wait();
    e = infra_error_of([&] { svc.score({"score=7 is too high"}); });
  });
  a.join();
  b.join();
  EXPECT_EQ(ok, 4.0f);
  EXPECT_TRUE(contains(e, judge.url())) << e;
  EXPECT_TRUE(contains(e, "parser 'score' (its number 7 lies outside [min_score, max_score] = [0, 5])")) << e;
  EXPECT_TRUE(contains(e, "answer ' 7'")) << e;
  EXPECT_TRUE(contains(e, "HINT: make reward_kwargs.prompt_template ask for a number in [0, 5]")) << e;
  ASSERT_EQ(judge.bodies().size(), 1u);
  EXPECT_EQ(svc.stats()["failures"], 1);

  judge.on([](const json& body, httplib::Response& res) {
    json c = FakeJudge::choices(body);
    c.erase(c.begin() + 1);
    FakeJudge::reply(res, c);
  });
  o.batch_wait_ms = 1;
  RewardService gaps(o);
  e = infra_error_of([&] { gaps.score({"score=1", "score=2"}); });
  EXPECT_TRUE(contains(e, "no choice with index 1 (of 2 prompts)")) << e;

  judge.on([](const json&, httplib::Response& res) { res.set_content("not json", "text/plain"); });
  e = infra_error_of([&] { gaps.score({"score=1"}); });
  EXPECT_TRUE(contains(e, "reward service " + judge.url() + ": POST /v1/completions: the response is not JSON")) << e;
}

TEST(RewardService, ApiKeyFromTheEnvironment) {
  FakeJudge judge;
  RewardServiceOptions o = options_for(judge);
  o.api_key_env = "AGENTR1_TEST_JUDGE_KEY";
  ::unsetenv("AGENTR1_TEST_JUDGE_KEY");
  const std::string e = error_of([&] { RewardService s(o); });
  EXPECT_TRUE(contains(e, "api_key_env=AGENTR1_TEST_JUDGE_KEY names an environment variable that is not set")) << e;
  ::setenv("AGENTR1_TEST_JUDGE_KEY", "sekrit", 1);
  RewardService svc(o);
  svc.score({"score=1"});
  EXPECT_EQ(judge.auth(), std::vector<std::string>{"Bearer sekrit"});
  ::unsetenv("AGENTR1_TEST_JUDGE_KEY");
}

TEST(RewardService, SharedPerOptions) {
  RewardServiceOptions a;
  a.url = "http://127.0.0.1:9";
  RewardServiceOptions b = a;
  b.prompt_template = "{response}";  // the service never reads it
  RewardServiceOptions c = a;
  c.max_batch = 8;
  EXPECT_EQ(shared_reward_service(a), shared_reward_service(b));
  EXPECT_NE(shared_reward_service(a), shared_reward_service(c));
  EXPECT_NE(shared_reward_service(a), shared_reward_service(a, "env_kwargs.selector."));
}

TEST(RewardService, RemoteRewardFunctionEndToEnd) {
  register_reward_service();
  register_reward_service();  // idempotent
  ASSERT_TRUE(has_reward_fn("remote"));
  FakeJudge judge;
  judge.on([](const json& body, httplib::Response& res) {
    // "yes" when the response equals the reference in the rendered prompt.
    FakeJudge::reply(res, FakeJudge::choices(body, [](const std::string& p) {
                       const size_t r = p.find("ref=") + 4, a = p.find("ans=") + 4;
                       return p.substr(r, p.find(';', r) - r) == p.substr(a, p.find(';', a) - a) ? "Yes" : "No";
                     }));
  });
  const json kwargs{{"url", judge.url()},
                    {"parser", "yes_no"},
                    {"prompt_template", "{extra_info.q} ref={ground_truth}; ans={response};"}};
  RewardFn fn = make_reward_fn("remote", kwargs);
  EXPECT_EQ(fn("42", "42", json{{"q", "6*7?"}}), 1.0f);
  EXPECT_EQ(fn("41", 42, json{{"q", "6*7?"}}), 0.0f);
  EXPECT_EQ(judge.bodies().at(0)["prompt"], json::array({"6*7? ref=42; ans=42;"}));
  // A missing extra_info key is a data error (Error, not InfraError).
  std::string e = error_of([&] { fn("42", "42", json::object()); });
  EXPECT_TRUE(contains(e, "extra_info has no key 'q'")) << e;
  // A judge that cannot be read: InfraError, so the flow marks the trajectory.
  judge.on([](const json& body, httplib::Response& res) {
    FakeJudge::reply(res, FakeJudge::choices(body, [](const std::string&) { return "Perhaps"; }));
  });
  e = infra_error_of([&] { fn("42", "42", json{{"q", "x"}}); });
  EXPECT_TRUE(contains(e, "answer 'Perhaps'")) << e;

  e = error_of([] { make_reward_fn("remote", {{"parser", "yes_no"}}); });
  EXPECT_TRUE(contains(e, "reward function 'remote': invalid config: reward_kwargs: url is required")) << e;
  e = error_of([&] { make_reward_fn("remote", {{"url", "http://127.0.0.1:9"}, {"prompt", "x"}}); });
  EXPECT_TRUE(contains(e, "reward_kwargs.prompt")) << e;
  e = error_of([&] { make_reward_fn("remote", {{"url", "http://127.0.0.1:9"}, {"parser", "maybe"}}); });
  EXPECT_TRUE(contains(e, "reward_kwargs: parser: unknown judge parser 'maybe'")) << e;
  e = error_of([&] { make_reward_fn("remote", {{"url", "http://127.0.0.1:9"}, {"prompt_template", "{answer}"}}); });
  EXPECT_TRUE(contains(e, "reward_kwargs.prompt_template: unknown placeholder {answer}")) << e;
}

}  // namespace
}  // namespace agentr1::tasks
