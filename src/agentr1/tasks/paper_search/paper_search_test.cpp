// Tests of the paper_search family: the generated corpus and queries, the tools' rewards
// on hand-made cases, the pool and its context policy, the environment, the loaders and
// the expert (full recall on every generated query).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <thread>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/env/tool.h"
#include "agentr1/env/tool_env.h"
#include "agentr1/env/agent_env.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/game_demo.h"
#include "agentr1/tasks/paper_search/paper_env.h"
#include "agentr1/tasks/paper_search/paper_family.h"
#include "agentr1/tasks/paper_search/paper_generator.h"
#include "agentr1/tasks/paper_search/paper_pool.h"
#include "agentr1/tasks/play.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/text/tool_format/tool_format.h"

namespace agentr1::tasks {
namespace {

using agentr1::testing::error_of;

Paper paper(const std::string& id, const std::string& title, const std::string& abstract,
            std::vector<std::string> refs = {}, int year = 2020) {
  Paper p;
  p.id = id;
  p.title = title;
  p.abstract = abstract;
  p.year = year;
  p.references = std::move(refs);
  return p;
}

// A hand-made corpus: A is cited by B, C and D; E is unrelated. "graph kernels" matches
// A, B and C (no stemming: C's "kernel methods" alone would not).
std::vector<Paper> small_corpus() {
  return {paper("A", "Graph kernels for molecules", "We study graph kernels on molecule data.", {}, 2015),
          paper("B", "Deep graph kernels", "Graph kernels with deep features.", {"A"}, 2018),
          paper("C", "Kernel methods revisited", "A survey of kernel methods, graph kernels included.", {"A", "B"}, 2019),
          paper("D", "Molecular transformers", "Transformers for molecule property prediction.", {"A"}, 2021),
          paper("E", "Speech recognition at scale", "Large speech models.", {}, 2022)};
}

text::ToolCall call(const std::string& name, json args) {
  text::ToolCall c;
  c.name = name;
  c.arguments = std::move(args);
  return c;
}

TEST(PaperCorpus, SearchAndExpand) {
  PaperCorpus c(small_corpus());
  ASSERT_EQ(c.size(), 5u);
  const std::vector<size_t> hits = c.search("graph kernels", 10);
  ASSERT_GE(hits.size(), 2u);
  std::set<std::string> ids;
  for (size_t i : hits) ids.insert(c.paper(i).id);
  EXPECT_TRUE(ids.count("A") && ids.count("B") && !ids.count("E"));
  // expand(A): citing papers newest first (D 2021, C 2019, B 2018), then its references (none).
  std::vector<std::string> around;
  for (size_t i : c.expand(*c.find("A"), 30)) around.push_back(c.paper(i).id);
  EXPECT_EQ(around, (std::vector<std::string>{"D", "C", "B"}));
  // expand(C): citing none, then references in order A, B; the limit cuts.
  around.clear();
  for (size_t i : c.expand(*c.find("C"), 1)) around.push_back(c.paper(i).id);
  EXPECT_EQ(around, (std::vector<std::string>{"A"}));
  EXPECT_NE(error_of([] {
              auto p = small_corpus();
              p[1].id = "A";
              PaperCorpus bad(p);
            }).find("'A' appears twice"),
            std::string::npos);
}

TEST(PaperCorpus, JsonlRoundTripAndErrors) {
  const std::string dir = ::testing::TempDir() + "/paper_corpus_io";
  std::filesystem::create_directories(dir);
  write_paper_corpus_jsonl(dir + "/c.jsonl", small_corpus());
  const std::vector<Paper> back = read_paper_corpus_jsonl(dir + "/c.jsonl");
  ASSERT_EQ(back.size(), 5u);
  EXPECT_EQ(back[2].references, (std::vector<std::string>{"A", "B"}));
  std::ofstream(dir + "/bad.jsonl") << "{\"id\": \"X\", \"title\": \"ok\"}\n{\"id\": \"Y\"}\n";
  EXPECT_NE(error_of([&] { read_paper_corpus_jsonl(dir + "/bad.jsonl"); }).find("bad.jsonl: paper 2"), std::string::npos);
  std::ofstream(dir + "/ext.jsonl") << "{\"id\": \"X\", \"title\": \"t\", \"references\": [\"nowhere\"]}\n";
  EXPECT_EQ(load_paper_corpus_file(dir + "/ext.jsonl")->dropped_references(), 1u);
}

TEST(PaperGenerator, DeterministicAndSplitsDisjoint) {
  PaperWorldOptions o;
  const PaperWorld a = generate_paper_world(o), b = generate_paper_world(o);
  ASSERT_EQ(a.corpus.size(), b.corpus.size());
  for (size_t i = 0; i < a.corpus.size(); ++i) EXPECT_EQ(a.corpus.paper(i).to_json(), b.corpus.paper(i).to_json());
  ASSERT_EQ(a.all_queries.size(), b.all_queries.size());
  for (size_t i = 0; i < a.all_queries.size(); ++i) {
    EXPECT_EQ(a.all_queries[i].question, b.all_queries[i].question);
    EXPECT_EQ(a.all_queries[i].gold, b.all_queries[i].gold);
  }
  PaperWorldOptions o2 = o;
  o2.seed = 2;
  EXPECT_NE(generate_paper_world(o2).corpus.paper(0).to_json(), a.corpus.paper(0).to_json());

  std::set<std::string> train, test;
  std::map<int, int> levels_train, levels_test;
  for (const auto& q : a.queries(DataSplit::kTrain)) train.insert(q.id), ++levels_train[q.level];
  for (const auto& q : a.queries(DataSplit::kTest)) test.insert(q.id), ++levels_test[q.level];
  for (const auto& id : test) EXPECT_FALSE(train.count(id)) << id;
  // The same (method, task, datasets) never on both sides, whatever its wording.
  std::set<std::string> train_q;
  for (const auto& q : a.queries(DataSplit::kTrain)) train_q.insert(q.question);
  for (const auto& q : a.queries(DataSplit::kTest)) EXPECT_FALSE(train_q.count(q.question)) << q.question;
  // No held-out gold paper is gold in training (the split is by method and task).
  std::set<std::string> train_gold;
  for (const auto& q : a.queries(DataSplit::kTrain)) train_gold.insert(q.gold.begin(), q.gold.end());
  for (const auto& q : a.queries(DataSplit::kTest))
    for (const auto& g : q.gold) EXPECT_FALSE(train_gold.count(g)) << q.id << " " << g;
  int revisited = 0;
  for (const Paper& p : a.corpus.papers()) revisited += p.title.size() > 10 && p.title.rfind(" Revisited") == p.title.size() - 10;
  EXPECT_GT(revisited, 10) << "near-duplicate titles";
  for (int level = 1; level <= 3; ++level) {
    EXPECT_GE(levels_train[level], 10) << "level " << level;
    EXPECT_GE(levels_test[level], 2) << "level " << level;
  }
  // Distractors: near-duplicate titles and namesake authors exist.
  std::map<std::string, int> author_count;
  for (const Paper& p : a.corpus.papers())
    for (const auto& n : p.authors) ++author_count[n];
  int shared = 0;
  for (auto& [n, k] : author_count) shared += k >= 3;
  EXPECT_GT(shared, 20);
}

// Runs the expert of `s` through play and returns the final recall.
double expert_recall(const PaperSearchFamily& fam, const Sample& s, int* steps) {
  auto ep = fam.play_episode(s);
  ep->reset();
  json last;
  *steps = 0;
  while (!ep->done()) {
    std::optional<std::string> a = ep->expert_action();
    if (!a) break;
    last = ep->step(*a);
    ++*steps;
  }
  return last["info"].value("recall", -1.0);
}

TEST(PaperFamily, ExpertReachesFullRecallOnEveryQuery) {
  register_builtin_tasks();
  PaperSearchFamily fam;
  auto world = generated_paper_world(fam.options().world());
  int checked = 0;
  for (const ScholarQuery& q : world->all_queries) {
    Sample s;
    s.prompt = json::array({{{"role", "user"}, {"content", "Query: " + q.question}}});
    s.ground_truth = q.gold;
    s.env_kwargs = fam.options().env_kwargs();
    s.extra_info = {{"question", q.question}, {"plan", q.plan}};
    int steps = 0;
    ASSERT_DOUBLE_EQ(expert_recall(fam, s, &steps), 1.0) << q.id << ": " << q.question;
    EXPECT_LE(steps, 5) << q.id;  // within the recipe's 5 steps (the last is "Done.")
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

TEST(PaperFamily, DatasetSamples) {
  register_builtin_tasks();
  auto fam = make_task_family("paper_search", {{"max_level", 1}});
  const auto a = fam->make_dataset(DataSplit::kTest, 8, 5), b = fam->make_dataset(DataSplit::kTest, 8, 5);
  ASSERT_EQ(a.size(), 8u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].to_json(), b[i].to_json());
    EXPECT_EQ(a[i].agent_name, "paper_search");
    EXPECT_EQ(a[i].reward_style, "env");
    EXPECT_EQ(a[i].extra_info["level"], 1);
    EXPECT_EQ(a[i].extra_info["split"], "test");
    EXPECT_TRUE(a[i].ground_truth.is_array() && !a[i].ground_truth.empty());
  }
  EXPECT_NE(error_of([] { make_task_family("paper_search", {{"max_levl", 1}}); }).find("max_level"), std::string::npos);
  EXPECT_NE(error_of([] { make_task_family("paper_search", {{"min_level", 3}, {"max_level", 2}}); }).find("min_level"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_task_family("paper_search", {{"corpus_file", "x.jsonl"}}); }).find("go together"),
            std::string::npos);
}

PaperSearchEnvOptions small_options() {
  PaperSearchEnvOptions o;
  o.corpus = {{"file", "unused"}};
  o.call_cost = 0.05;
  o.repeat_cost = 0.5;
  o.reward_top = 3;
  return o;
}

TEST(PaperSession, RewardsOnHandMadeCases) {
  PaperCorpus c(small_corpus());
  auto sel = make_paper_selector("rule");
  const PaperSearchEnvOptions o = small_options();
  PaperSearchSession s(c, *sel, o, 20, "graph kernels", {"A", "B", "D"});
  // An id that exists but was not returned yet: an error line, no cost.
  auto r0 = s.run({call("expand", {{"paper_id", "A"}})}, {});
  EXPECT_NEAR(r0.reward, 0.0, 1e-9);
  EXPECT_NE(r0.tool_messages[0]["content"].get<std::string>().find("was not returned"), std::string::npos);
  // search finds A and B (gold, new) and C (not gold): reward 1 + 1 - 0.05.
  auto r1 = s.run({call("search", {{"query", "graph kernels"}})}, {});
  EXPECT_NEAR(r1.reward, 2.0 - 0.05, 1e-6);
  EXPECT_EQ(r1.tool_messages[0]["content"], "3 papers, 3 new, 2 kept in the pool");
  EXPECT_NEAR(s.recall(), 2.0 / 3.0, 1e-9);
  EXPECT_NEAR(r1.recall_gain, 2.0 / 3.0, 1e-6);
  ASSERT_EQ(r1.tool_messages.size(), 1u);
  EXPECT_EQ(r1.tool_messages[0]["items"].size(), 2u);
  // The same query again (case and spacing differ): not run, costs 0.5.
  auto r2 = s.run({call("search", {{"query", "  Graph   KERNELS "}})}, {});
  EXPECT_NEAR(r2.reward, -0.5, 1e-6);
  EXPECT_EQ(r2.info["episode_metrics"]["paper/repeats"], 1);
  // Two calls in parallel: expand A finds D (new gold), C and B (seen); an unknown id is an error.
  auto r3 = s.run({call("expand", {{"paper_id", "A"}}), call("expand", {{"paper_id", "Z9"}})}, {});
  EXPECT_NEAR(r3.reward, 1.0 - 0.05, 1e-6);
  EXPECT_EQ(r3.info["tool_errors"], 1);
  EXPECT_NE(r3.tool_messages[1]["content"].get<std::string>().find("no paper with id 'Z9'"), std::string::npos);
  EXPECT_DOUBLE_EQ(s.recall(), 1.0);
  // Re-expanding A costs 0.5; an unknown tool and a malformed block are errors, not exceptions.
  text::ToolCallError bad;
  bad.message = "invalid JSON";
  auto r4 = s.run({call("expand", {{"paper_id", "A"}}), call("browse", {{"url", "x"}})}, {bad});
  EXPECT_NEAR(r4.reward, -0.5, 1e-6);
  EXPECT_EQ(r4.info["malformed_calls"], 1);
  EXPECT_EQ(r4.info["unknown_tools"], 1);
  EXPECT_EQ(r4.info["tool_calls"], 3);
  EXPECT_NEAR(r4.info["episode_metrics"]["paper/precision"].get<double>(), 1.0, 1e-9);
  // Only the top reward_top new scores count: 5 new gold papers at once give 3.
  PaperSearchSession s2(c, *sel, o, 20, "q", {"A", "B", "C", "D", "E"});
  auto r5 = s2.run({call("search", {{"query", "graph kernels molecule speech"}})}, {});
  EXPECT_EQ(r5.tool_messages[0]["content"], "5 papers, 5 new, 5 kept in the pool");
  EXPECT_NEAR(r5.reward, 3.0 - 0.05, 1e-6);
  // More calls than max_calls_per_step: the extra ones are not run.
  PaperSearchEnvOptions o1 = o;
  o1.max_calls_per_step = 1;
  PaperSearchSession s3(c, *sel, o1, 20, "q", {"A"});
  auto r6 = s3.run({call("search", {{"query", "graph"}}), call("search", {{"query", "speech"}})}, {});
  EXPECT_EQ(r6.info["episode_metrics"]["paper/searches"], 1);
  EXPECT_NE(r6.tool_messages[1]["content"].get<std::string>().find("at most 1"), std::string::npos);
}

// A fake judge: POST /v1/completions answers "yes" for prompts whose title line mentions
// "graph", "no" otherwise (status 500 when failing is set); counts requests and prompts.
class FakeJudge {
 public:
  FakeJudge() {
    svr_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      ++requests;
      if (failing) {
        res.status = 500;
        res.set_content("{\"error\": {\"message\": \"down\"}}", "application/json");
        return;
      }
      const json body = json::parse(req.body);
      json choices = json::array();
      for (size_t i = 0; i < body["prompt"].size(); ++i) {
        const std::string p = body["prompt"][i].get<std::string>();
        ++prompts;
        const size_t t = p.find("Paper title: ");
        const std::string title = p.substr(t, p.find('\n', t) - t);
        choices.push_back({{"index", i}, {"text", title.find("raph") != std::string::npos ? " Yes" : " No"}});
      }
      res.set_content(json{{"choices", choices}}.dump(), "application/json");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    for (int i = 0; i < 400 && !svr_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeJudge() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::atomic<int> requests{0}, prompts{0};
  std::atomic<bool> failing{false};

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

TEST(PaperSelector, RemoteJudgeKeepsWhatItApprovesAndFailsAsInfra) {
  FakeJudge judge;
  PaperCorpus c(small_corpus());
  auto sel = make_paper_selector({{"type", "remote"}, {"url", judge.url()}, {"parser", "yes_no"}, {"retries", 0},
                                  {"batch_wait_ms", 0}});
  EXPECT_EQ(sel->name(), "remote");
  const PaperSearchEnvOptions o = small_options();
  // The judge, not the gold set, decides: gold is empty here.
  PaperSearchSession s(c, *sel, o, 20, "graph kernels", {});
  auto r = s.run({call("search", {{"query", "graph kernels"}})}, {});
  // A and B (titles with "Graph") kept at score 1; C ("Kernel methods revisited") not.
  EXPECT_NEAR(r.reward, 2.0 - 0.05, 1e-6);
  ASSERT_EQ(s.pool().size(), 2u);
  EXPECT_EQ(judge.requests.load(), 1) << "one step's papers go to the judge in one request";
  EXPECT_EQ(judge.prompts.load(), 3);
  EXPECT_EQ(r.info["infra_failures"], 0);
  // The judge fails: the step is marked (infra_error), nothing is kept, no exception.
  judge.failing = true;
  auto f = s.run({call("expand", {{"paper_id", "A"}})}, {});
  EXPECT_EQ(f.info["infra_failures"], 1);
  ASSERT_TRUE(f.info.contains("infra_error"));
  EXPECT_NE(f.info["infra_error"].get<std::string>().find(judge.url()), std::string::npos);
  EXPECT_EQ(s.pool().size(), 2u);
  EXPECT_NE(f.tool_messages[0]["content"].get<std::string>().find("the selector failed"), std::string::npos);
  // Bad options name the key.
  EXPECT_NE(error_of([] { make_paper_selector({{"type", "remote"}}); }).find("url"), std::string::npos);
  EXPECT_NE(error_of([&] {
              make_paper_selector({{"type", "remote"}, {"url", judge.url()}, {"prompt_template", "{colour}"}});
            }).find("colour"),
            std::string::npos);
}

TEST(PaperPool, RankingTruncationAndMessage) {
  std::vector<PoolItem> items = {{"a", "A", "x", 0.5}, {"b", "B", "y", 0.9}, {"c", "C", "z", 0.5},
                                 {"a", "A", "x", 0.95}, {"d", "D", "w", 0.1}};
  // a: highest of its scores (0.95); ties (a/c at 0.5 before) keep the first-kept order.
  std::vector<PoolItem> r = rank_pool(items, 3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].id, "a");
  EXPECT_EQ(r[1].id, "b");
  EXPECT_EQ(r[2].id, "c");
  EXPECT_DOUBLE_EQ(r[0].score, 0.95);
  PaperPoolOptions o;
  o.max_pool = 3;
  o.max_words = 2;
  const std::string m = pool_message({"search(query=\"q\") -> 10 papers"}, {{"P1", "T1", "one two three", 1.0}}, o);
  EXPECT_EQ(m,
            "Actions so far:\n1. search(query=\"q\") -> 10 papers\n\nPaper pool (1 of at most 3, best first):\n"
            "[1] P1 | T1 | score 1.00\none two ...");
  EXPECT_EQ(cut_words("one two", 2), "one two");
}

struct TokFixture {
  text::Tokenizer tok = text::Tokenizer::load(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3");
  text::ChatTemplate tmpl = text::ChatTemplate::from_template_text(tok.chat_template());
};

TEST(PaperEnv, StepsRebuildThePromptFromThePool) {
  register_builtin_tasks();
  static TokFixture f;
  env::EnvContext ctx;
  ctx.tokenizer = &f.tok;
  ctx.chat_template = &f.tmpl;
  auto fam = make_task_family("paper_search", {{"max_level", 2}, {"min_level", 2}});
  const Sample s = fam->make_dataset(DataSplit::kTrain, 1, 3)[0];
  auto e = env::make_env("paper_search", ctx, s.env_kwargs);
  const env::Observation first = e->reset(s);
  ASSERT_TRUE(first.kind() == env::Observation::Kind::kTokens);
  const std::string first_text = f.tok.decode(first.tokens());
  EXPECT_NE(first_text.find("\"name\": \"expand\""), std::string::npos) << "the tools block lists expand";
  const json plan = s.extra_info["plan"];
  // Step 1: the plan's searches as hermes calls, in one response.
  json msg = {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array()}};
  for (const json& c : plan[0]) msg["tool_calls"].push_back({{"type", "function"}, {"function", c}});
  const std::string a1 = assistant_action_text(msg, "");
  env::StepResult r = e->step({f.tok.encode(a1), a1});
  double game = r.game_reward.value_or(0);
  ASSERT_FALSE(r.done);
  EXPECT_GT(r.reward, 0.0f);
  ASSERT_TRUE(r.observation.kind() == env::Observation::Kind::kText);
  const std::string p2 = r.observation.text();
  EXPECT_NE(p2.find("Paper pool ("), std::string::npos);
  EXPECT_NE(p2.find("Actions so far:\n1. search(query="), std::string::npos);
  EXPECT_EQ(p2.find(a1), std::string::npos) << "the response is not concatenated into the prompt";
  EXPECT_EQ(r.info["context_omitted_turns"], 1);
  // Every pool paper's id is shown, and they are gold (rule selector).
  auto* pe = dynamic_cast<PaperSearchEnv*>(e.get());
  ASSERT_NE(pe, nullptr);
  for (const PoolItem& it : pe->pool()) EXPECT_NE(p2.find("] " + it.id + " |"), std::string::npos) << it.id;
  // Step 2: the expansions; then "Done." ends the episode with full recall.
  for (size_t k = 1; k < plan.size(); ++k) {
    json m = {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array()}};
    for (const json& c : plan[k]) m["tool_calls"].push_back({{"type", "function"}, {"function", c}});
    const std::string a = assistant_action_text(m, "");
    r = e->step({f.tok.encode(a), a});
    game += r.game_reward.value_or(0);
    ASSERT_FALSE(r.done);
  }
  EXPECT_DOUBLE_EQ(pe->recall(), 1.0);
  EXPECT_EQ(static_cast<float>(game), 1.0f) << "the recall rewards sum to the final recall exactly";
  EXPECT_NE(r.anchor.find("pool:"), std::string::npos);
  r = e->step({f.tok.encode("Done."), "Done."});
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.info["episode_metrics"]["paper/recall"], 1.0);
  // A model's garbage is feedback, not an exception.
  e->reset(s);
  r = e->step({f.tok.encode("<tool_call>{oops</tool_call>"), "<tool_call>{oops</tool_call>"});
  EXPECT_FALSE(r.done);
  EXPECT_EQ(r.info["malformed_calls"], 1);
  EXPECT_NE(r.observation.text().find("malformed tool call -> Error:"), std::string::npos);
}

TEST(PaperEnv, OtherToolFormatsAndOptionErrors) {
  register_builtin_tasks();
  static TokFixture f;
  env::EnvContext ctx;
  ctx.tokenizer = &f.tok;
  ctx.chat_template = &f.tmpl;
  auto fam = make_task_family("paper_search", {{"max_level", 1}});
  const Sample s = fam->make_dataset(DataSplit::kTrain, 1, 4)[0];
  const std::string query = s.extra_info["plan"][0][0]["arguments"]["query"].get<std::string>();
  const std::map<std::string, std::string> responses = {
      {"llama3_json", "{\"name\": \"search\", \"parameters\": {\"query\": \"" + query + "\"}}"},
      {"mistral", "[TOOL_CALLS][{\"name\": \"search\", \"arguments\": {\"query\": \"" + query + "\"}, \"id\": \"abc123XYZ\"}]"},
      {"hermes", "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"" + query + "\"}}\n</tool_call>"},
      {"deepseek_v3", "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>function<\uff5ctool\u2581sep\uff5c>search\n```json\n{\"query\": \"" + query +
                          "\"}\n```<\uff5ctool\u2581call\u2581end\uff5c><\uff5ctool\u2581calls\u2581end\uff5c>"},
      {"gpt_oss", "<|channel|>commentary to=functions.search <|constrain|>json<|message|>{\"query\": \"" + query + "\"}<|call|>"}};
  for (const auto& [fmt, text] : responses) {
    json kw = s.env_kwargs;
    kw["tool_format"] = fmt;
    auto e = env::make_env("paper_search", ctx, kw);
    e->reset(s);
    env::StepResult r = e->step({f.tok.encode(text), text});
    EXPECT_EQ(r.info["tool_calls"], 1) << fmt;
    EXPECT_DOUBLE_EQ(dynamic_cast<PaperSearchEnv*>(e.get())->recall(), 1.0) << fmt;
  }
  json kw = s.env_kwargs;
  kw["top_k"] = 0;
  EXPECT_NE(error_of([&] { env::make_env("paper_search", ctx, kw); }).find("top_k"), std::string::npos);
  kw = s.env_kwargs;
  kw["selector"] = "oracle";
  EXPECT_NE(error_of([&] { env::make_env("paper_search", ctx, kw); }).find("known: rule, remote"), std::string::npos);
  kw = s.env_kwargs;
  kw["colour"] = 1;
  EXPECT_NE(error_of([&] { env::make_env("paper_search", ctx, kw); }).find("colour"), std::string::npos);
}

TEST(PaperFamily, LoadsAutoScholarQueryFiles) {
  const std::string dir = ::testing::TempDir() + "/paper_asq";
  std::filesystem::create_directories(dir);
  write_paper_corpus_jsonl(dir + "/corpus.jsonl", small_corpus());
  std::ofstream(dir + "/train.jsonl")
      << R"({"question": "graph kernel papers", "answer": ["Graph Kernels for Molecules", "Deep graph kernels"], "answer_arxiv_id": ["A", "9999.0000"], "qid": "t1"})"
      << "\n"
      << R"({"question": "nothing here", "answer": ["Unknown"], "answer_arxiv_id": ["nope"]})" << "\n";
  std::ofstream(dir + "/test.jsonl") << R"({"question": "speech", "answer": ["Speech recognition at scale"]})" << "\n";
  PaperCorpus c(small_corpus());
  const auto qs = load_scholar_queries(dir + "/train.jsonl", c);
  ASSERT_EQ(qs.size(), 1u) << "the row without any corpus paper is skipped";
  EXPECT_EQ(qs[0].id, "t1");
  EXPECT_EQ(qs[0].gold, (std::vector<std::string>{"A", "B"})) << "by id, else by title (case ignored)";
  register_builtin_tasks();
  auto fam = make_task_family("paper_search", {{"corpus_file", dir + "/corpus.jsonl"},
                                               {"train_file", dir + "/train.jsonl"},
                                               {"test_file", dir + "/test.jsonl"}});
  const auto test = fam->make_dataset(DataSplit::kTest, 5, 0);
  ASSERT_EQ(test.size(), 1u);
  EXPECT_EQ(test[0].ground_truth, json::array({"E"}));
  EXPECT_TRUE(test[0].env_kwargs["corpus"].contains("file"));
  std::ofstream(dir + "/bad.jsonl") << R"({"query": "x"})" << "\n";
  EXPECT_NE(error_of([&] { load_scholar_queries(dir + "/bad.jsonl", c); }).find("bad.jsonl: row 1"), std::string::npos);
  std::ofstream(dir + "/broken.jsonl") << "{\"question\": \"x\"}\n{oops\n";
  EXPECT_NE(error_of([&] { load_scholar_queries(dir + "/broken.jsonl", c); }).find("broken.jsonl:2"), std::string::npos);
}

TEST(PaperFamily, DemonstrationsReplayTheExpert) {
  register_builtin_tasks();
  auto fam = make_task_family("paper_search");
  std::vector<std::string> rendered;
  const auto demos = fam->demonstrations(4, 7, text::ChatTemplate::for_family(text::ChatFamily::kQwen3), "<|im_end|>",
                                         &rendered);
  ASSERT_EQ(demos.size(), 4u);
  ASSERT_EQ(rendered.size(), 4u);
  for (size_t i = 0; i < demos.size(); ++i) {
    const auto& acts = demos[i]["actions"];
    ASSERT_GE(acts.size(), 2u);
    EXPECT_NE(acts[0].get<std::string>().find("<tool_call>"), std::string::npos);
    EXPECT_EQ(acts.back(), "Done.<|im_end|>");
    EXPECT_NE(rendered[i].find("Paper pool ("), std::string::npos);
    // The demonstration's actions, replayed, reach full recall.
    const Sample s = Sample::from_json(demos[i]["sample"]);
    auto ep = fam->play_episode(s);
    ep->reset();
    json last;
    for (const json& a : acts) {
      std::string text = a.get<std::string>();
      text = text.substr(0, text.size() - std::string("<|im_end|>").size());
      last = ep->step(text);
    }
    EXPECT_TRUE(ep->done());
    EXPECT_DOUBLE_EQ(last["info"].value("recall", -1.0), 1.0) << i;
  }
}

// A ToolEnv tool that returns info "items" feeds the paper_pool context like the env.
class ItemTool : public env::Tool {
 public:
  std::string name() const override { return "paper_test_lookup"; }
  std::string description() const override { return "Looks up a thing."; }
  json parameters() const override {
    return {{"type", "object"}, {"properties", {{"q", {{"type", "string"}}}}}, {"required", {"q"}}};
  }
  env::ToolResult execute(const json& args) override {
    env::ToolResult r;
    r.text = "found " + args.value("q", "");
    r.info["items"] = json::array({{{"id", "X1"}, {"title", "Thing " + args.value("q", "")}, {"score", 0.8}}});
    return r;
  }
};

TEST(PaperPool, ToolEnvToolsFeedThePool) {
  register_builtin_tasks();
  static std::once_flag once;
  std::call_once(once, [] {
    env::register_tool("paper_test_lookup", [](const json&) { return std::make_unique<ItemTool>(); });
  });
  static TokFixture f;
  env::EnvContext ctx;
  ctx.tokenizer = &f.tok;
  ctx.chat_template = &f.tmpl;
  env::ToolEnv e(ctx, env::ToolEnvOptions::from_json({{"tools", {"paper_test_lookup"}},
                                                       {"context", {{"type", "paper_pool"}, {"max_pool", 3}}}}));
  Sample s;
  s.prompt = json::array({{{"role", "user"}, {"content", "find x"}}});
  e.reset(s);
  const std::string a = "<tool_call>\n{\"name\": \"paper_test_lookup\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>";
  const env::StepResult r = e.step({f.tok.encode(a), a});
  ASSERT_EQ(r.observation.kind(), env::Observation::Kind::kText);
  EXPECT_NE(r.observation.text().find("[1] X1 | Thing x | score 0.80"), std::string::npos) << r.observation.text();
  EXPECT_NE(r.observation.text().find("1. found x"), std::string::npos) << "the result's first line";
}

}  // namespace
}  // namespace agentr1::tasks
