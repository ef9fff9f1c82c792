// The hotpotqa family: QA metrics (hand-computed cases), the search/open tools, the
// HotpotQA loader on hand-written fixtures (tests/fixtures/hotpotqa), the synthetic
// generator (determinism, split, expert over every level), the expert through play and
// through the real ToolEnv, and the task options.
#include "agentr1/tasks/hotpotqa/hotpotqa_family.h"

#include <gtest/gtest.h>

#include <set>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/env/tool.h"
#include "agentr1/env/tool_env.h"
#include "agentr1/tasks/hotpotqa/hotpotqa_search.h"
#include "agentr1/tasks/play.h"
#include "agentr1/tasks/reward.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::tasks {
namespace {

const std::string kFixtures = std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/hotpotqa";

struct Registered {
  Registered() { register_hotpotqa_family(); }
};
const Registered kRegistered;

using agentr1::testing::error_of;

// --- metrics -----------------------------------------------------------------------

TEST(QaMetrics, NormalizeAnswer) {
  EXPECT_EQ(normalize_answer("The  Eiffel Tower!"), "eiffel tower");
  EXPECT_EQ(normalize_answer("Eiffel-Tower"), "eiffeltower");  // punctuation removed, not spaced
  EXPECT_EQ(normalize_answer("An apple a day"), "apple day");
  EXPECT_EQ(normalize_answer("theatre Anna"), "theatre anna");  // articles only as words
  EXPECT_EQ(normalize_answer("  U.S.A.\t"), "usa");
  EXPECT_EQ(normalize_answer("the"), "");
  EXPECT_EQ(normalize_answer(""), "");
}

TEST(QaMetrics, ExactMatchAndF1ByHand) {
  EXPECT_EQ(exact_match("the Eiffel Tower", "Eiffel Tower"), 1.0);
  EXPECT_EQ(exact_match("Eiffel Tower in Paris", "Eiffel Tower"), 0.0);
  // 2 common of 4 predicted, 2 gold: P 0.5, R 1 -> 2 * 0.5 / 1.5
  EXPECT_NEAR(token_f1("Eiffel Tower in Paris", "Eiffel Tower"), 2.0 / 3.0, 1e-12);
  // multiset overlap: paris counts once (gold has one), london once -> P 2/3 R 2/3
  EXPECT_NEAR(token_f1("paris paris london", "paris london rome"), 2.0 / 3.0, 1e-12);
  // 1 common of 1 predicted, 3 gold: P 1, R 1/3 -> 2 * (1/3) / (4/3) = 0.5
  EXPECT_NEAR(token_f1("Velden", "Mara K. Velden"), 0.5, 1e-12);
  EXPECT_EQ(token_f1("Rome", "Paris"), 0.0);
  EXPECT_EQ(token_f1("", "Paris"), 0.0);
}

TEST(QaMetrics, YesNoSpecialCase) {
  EXPECT_EQ(token_f1("yes", "no"), 0.0);
  EXPECT_EQ(token_f1("Yes.", "yes"), 1.0);
  EXPECT_EQ(token_f1("yes it is", "yes"), 0.0);    // gold is yes/no and they differ
  EXPECT_EQ(token_f1("no", "no way"), 0.0);        // prediction is yes/no and they differ
  EXPECT_EQ(token_f1("noanswer", "the answer"), 0.0);
}

TEST(QaMetrics, FinalAnswerAndScoring) {
  EXPECT_FALSE(extract_final_answer("Paris").has_value());
  EXPECT_FALSE(extract_final_answer("<answer>Paris").has_value());
  EXPECT_EQ(*extract_final_answer("<answer>Rome</answer> then <answer>  Paris \n</answer>"), "Paris");
  EXPECT_EQ(*extract_final_answer("<answer>Rome</answer> <answer>unclosed"), "Rome");
  EXPECT_EQ(score_answer("<answer>the Paris</answer>", "Paris", QaMetric::kExactMatch), 1.0);
  EXPECT_EQ(score_answer("Paris", "Paris", QaMetric::kExactMatch), 0.0);  // no tag
  EXPECT_EQ(score_answer("<answer>Paris France</answer>", json::array({"Lyon", "Paris"}), QaMetric::kExactMatch), 0.0);
  EXPECT_NEAR(score_answer("<answer>Paris France</answer>", json::array({"Lyon", "Paris"}), QaMetric::kF1),
              2.0 / 3.0, 1e-12);  // P 1/2 R 1 against "Paris"
  EXPECT_EQ(score_answer("<answer>x</answer>", json::array(), QaMetric::kF1), 0.0);
  EXPECT_NE(error_of([] { score_answer("<answer>1</answer>", json(1), QaMetric::kExactMatch); })
                .find("ground truth must be a string"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_qa_metric("acc"); }).find("known: em"), std::string::npos);
}

TEST(QaMetrics, RegisteredRewardFunctions) {
  RewardFn em = make_reward_fn("em");
  RewardFn f1 = make_reward_fn("f1");
  EXPECT_EQ(em("I think <answer>Mara Velden</answer>", json("mara velden"), json::object()), 1.0f);
  EXPECT_EQ(em("<answer>Velden</answer>", json("Mara Velden"), json::object()), 0.0f);
  EXPECT_NEAR(f1("<answer>Velden</answer>", json("Mara Velden"), json::object()), 2.0f / 3.0f, 1e-6);
  EXPECT_EQ(f1("Mara Velden", json("Mara Velden"), json::object()), 0.0f);
  EXPECT_THROW(make_reward_fn("em", {{"method", "strict"}}), Error);
}

// --- tools -------------------------------------------------------------------------

json tiny_docs() {
  return json::array({json::array({"Paris", "Paris is the capital of France."}),
                      json::array({"Berlin", "Berlin is the capital of Germany."}),
                      json::array({"Lyon", "Lyon is a city in France on the Rhone."})});
}

TEST(SearchTool, FormatTopKAndNoHits) {
  auto search = env::make_tool("search", {{"docs", tiny_docs()}, {"top_k", 2}});
  const env::ToolResult r = search->execute({{"query", "capital of France"}});
  // Paris has capital + france, Lyon france only, Berlin capital only: Paris first.
  EXPECT_EQ(r.text.substr(0, r.text.find('\n')), "Doc 1(Title: Paris) Paris is the capital of France.");
  EXPECT_EQ(std::count(r.text.begin(), r.text.end(), '\n'), 1);  // two passages
  EXPECT_EQ(r.info["titles"][0], "Paris");
  EXPECT_EQ(search->execute({{"query", "zebra"}}).text, "No results found for 'zebra'.");
  EXPECT_EQ(search->execute({{"query", "the of"}}).text, "No results found for 'the of'.");  // stop words only
  auto cut = env::make_tool("search", {{"docs", tiny_docs()}, {"top_k", 1}, {"max_chars", 5}});
  EXPECT_EQ(cut->execute({{"query", "Berlin"}}).text, "Doc 1(Title: Berlin) Berli...");
  EXPECT_NE(search->schema().dump().find("\"query\""), std::string::npos);
}

TEST(SearchTool, BadArgumentsThrowReadableErrors) {
  auto search = env::make_tool("search", {{"docs", tiny_docs()}});
  EXPECT_NE(error_of([&] { search->execute(json::object()); }).find("argument 'query' must be a string"),
            std::string::npos);
  EXPECT_NE(error_of([&] { search->execute({{"query", 3}}); }).find("got 3"), std::string::npos);
  EXPECT_NE(error_of([&] { search->execute({{"query", "  "}}); }).find("must not be empty"), std::string::npos);
  EXPECT_NE(error_of([&] { search->execute(json::array({"Paris"})); }).find("must be an object"), std::string::npos);
}

TEST(SearchTool, KwargsValidation) {
  EXPECT_NE(error_of([] { env::make_tool("search", {{"docs", tiny_docs()}, {"k", 2}}); })
                .find("unknown config key 'env_kwargs.tool_kwargs.search.k'"),
            std::string::npos);
  EXPECT_NE(error_of([] { env::make_tool("search", {{"docs", tiny_docs()}, {"k", 2}}); })
                .find("Valid keys under 'env_kwargs.tool_kwargs.search': docs, corpus_file, top_k, max_chars."),
            std::string::npos);
  EXPECT_NE(error_of([] { env::make_tool("search", json::object()); }).find("exactly one of"), std::string::npos);
  EXPECT_NE(error_of([] {
              env::make_tool("search", {{"docs", tiny_docs()}, {"corpus_file", kFixtures + "/corpus.jsonl"}});
            }).find("got both"),
            std::string::npos);
  EXPECT_NE(error_of([] { env::make_tool("search", {{"docs", tiny_docs()}, {"top_k", 0}}); }).find("top_k"),
            std::string::npos);
  EXPECT_NE(error_of([] { env::make_tool("search", {{"docs", json::array({json::array({"only title"})})}}); })
                .find("entry 0 must be [title, text]"),
            std::string::npos);
  EXPECT_NE(error_of([] { env::make_tool("search", {{"corpus_file", "/nonexistent/c.jsonl"}}); })
                .find("/nonexistent/c.jsonl"),
            std::string::npos);
}

TEST(OpenTool, ByTitleAndUnknownTitle) {
  auto open = env::make_tool("open", {{"docs", tiny_docs()}});
  EXPECT_EQ(open->execute({{"title", "Lyon"}}).text, "Title: Lyon\nLyon is a city in France on the Rhone.");
  EXPECT_EQ(open->execute({{"title", " lyon "}}).text, "Title: Lyon\nLyon is a city in France on the Rhone.");
  EXPECT_NE(error_of([&] { open->execute({{"title", "Rome"}}); }).find("no passage titled 'Rome'"), std::string::npos);
  EXPECT_THROW(open->execute({{"query", "Lyon"}}), Error);
}

TEST(CorpusFile, JsonlAndHotpotGlobalCorpusCached) {
  const std::vector<Passage> ps = read_corpus_file(kFixtures + "/corpus.jsonl");
  ASSERT_EQ(ps.size(), 3u);  // the blank line is skipped
  EXPECT_EQ(ps[0].title, "\"Orvane Tower\"");  // Search-R1 contents: first line is the title
  EXPECT_EQ(ps[0].text, "The Orvane Tower is a radio tower designed by Helga Marsten.");
  EXPECT_EQ(ps[2].title, "Lisbeck");
  const auto a = load_corpus_file(kFixtures + "/mini_dev.json");
  EXPECT_EQ(a.get(), load_corpus_file(kFixtures + "/mini_dev.json").get());
  // 9 context entries, "Orvane Tower" twice -> 8 passages.
  EXPECT_EQ(a->size(), 8u);
  auto search = env::make_tool("search", {{"corpus_file", kFixtures + "/mini_dev.json"}, {"top_k", 1}});
  EXPECT_EQ(search->execute({{"query", "Helga Marsten"}}).text,
            "Doc 1(Title: Helga Marsten) Helga Marsten (1902\xE2\x80\x93" "1977) was an architect. She was born in "
            "Lisbeck.");
}

// --- HotpotQA loader ---------------------------------------------------------------

TEST(HotpotData, LoadsTheRealFormat) {
  const std::vector<HotpotExample> rows = load_hotpot_file(kFixtures + "/mini_dev.json");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].id, "hand0000000000000000000001");
  EXPECT_EQ(rows[0].answer, "Lisbeck");
  EXPECT_EQ(rows[1].type, "comparison");
  EXPECT_EQ(rows[1].level, "hard");
  ASSERT_EQ(rows[0].supporting_facts.size(), 2u);
  EXPECT_EQ(rows[0].supporting_facts[1], (std::pair<std::string, int>("Helga Marsten", 1)));
  const std::vector<Passage> ctx = context_passages(rows[0]);
  ASSERT_EQ(ctx.size(), 4u);
  EXPECT_EQ(ctx[0].text, "The Orvane Tower is a radio tower designed by Helga Marsten. It was completed in 1961.");
  EXPECT_EQ(supporting_titles(rows[1]), (std::vector<std::string>{"Kelso Ridge", "Amber Fell"}));
  EXPECT_EQ(join_sentences({"A.", "B.", " C."}), "A. B. C.");
}

TEST(HotpotData, MalformedInputsNameTheProblem) {
  EXPECT_NE(error_of([] { load_hotpot_file(kFixtures + "/bad_row.json"); }).find("row 0: each context entry"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_hotpot_file(kFixtures + "/missing.json"); }).find("missing.json"), std::string::npos);
  EXPECT_NE(error_of([] { load_hotpot_file(kFixtures + "/corpus.jsonl"); }).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hotpot_rows(json::object(), "x"); }).find("one JSON array"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hotpot_row({{"_id", "1"}, {"question", "q"}, {"context", json::array()}}, "r"); })
                .find("missing required field 'answer'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_hotpot_row({{"_id", "1"}, {"question", "q"}, {"answer", "a"}, {"context", json::array()},
                                {"supporting_facts", json::array({json::array({"T", "zero"})})}},
                               "r");
            }).find("[title, sentence index]"),
            std::string::npos);
}

json play_expert(const TaskFamily& fam, const Sample& s) {
  auto ep = fam.play_episode(s);
  ep->reset();
  json last;
  int guard = 0;
  while (!ep->done() && guard++ < 10) {
    auto a = ep->expert_action();
    if (!a) break;
    last = ep->step(*a);
  }
  return last;
}

TEST(HotpotFamily, FileRowsDistractorAndGlobal) {
  const std::string file = kFixtures + "/mini_dev.json";
  HotpotFamilyOptions o;
  o.train_file = file;
  o.test_file = file;
  HotpotFamily fam(o);
  const std::vector<Sample> two = fam.make_dataset(DataSplit::kTrain, 2, 0);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(fam.make_dataset(DataSplit::kTest, 10, 0).size(), 3u);  // all rows, with a warning
  const Sample& s = two[0];
  EXPECT_EQ(s.agent_name, "tool");
  EXPECT_EQ(s.data_source, "hotpotqa");
  EXPECT_EQ(s.reward_style, "em");
  EXPECT_EQ(s.ground_truth, "Lisbeck");
  EXPECT_EQ(s.env_kwargs["tools"], json::array({"search"}));
  EXPECT_EQ(s.env_kwargs["tool_kwargs"]["search"]["docs"].size(), 4u);
  EXPECT_EQ(s.env_kwargs["tool_kwargs"]["search"]["top_k"], 3);
  EXPECT_EQ(s.extra_info["id"], "hand0000000000000000000001");
  EXPECT_EQ(s.extra_info["hops"].size(), 2u);
  EXPECT_EQ(s.prompt.back()["content"], "Question: Which city was the architect of the Orvane Tower born in?");
  for (const Sample& r : fam.make_dataset(DataSplit::kTest, 3, 0)) EXPECT_EQ(play_expert(fam, r)["reward"], 1.0) << r.to_json();

  o.corpus = HotpotCorpus::kGlobal;
  o.open_tool = true;
  o.reward = QaMetric::kF1;
  HotpotFamily global(o);
  const Sample g = global.make_dataset(DataSplit::kTrain, 1, 0)[0];
  EXPECT_EQ(g.env_kwargs["tool_kwargs"]["search"]["corpus_file"], file);
  EXPECT_EQ(g.env_kwargs["tools"], json::array({"search", "open"}));
  EXPECT_EQ(g.reward_style, "f1");
  EXPECT_EQ(play_expert(global, g)["reward"], 1.0);

  HotpotFamilyOptions only_train;
  only_train.train_file = file;
  EXPECT_NE(error_of([&] { HotpotFamily(only_train).make_dataset(DataSplit::kTest, 1, 0); }).find("test_file"),
            std::string::npos);
  const auto demos = fam.demonstrations(3, 0, text::ChatTemplate::for_family(text::ChatFamily::kQwen3), "<|im_end|>");
  EXPECT_EQ(demos.size(), 3u);
}

// --- generator ---------------------------------------------------------------------

TEST(KbGenerator, DeterministicBySeed) {
  HotpotFamily fam;
  const auto a = fam.make_dataset(DataSplit::kTrain, 20, 5);
  const auto b = fam.make_dataset(DataSplit::kTrain, 20, 5);
  const auto c = fam.make_dataset(DataSplit::kTrain, 20, 6);
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].to_json(), b[i].to_json());
    differ += a[i].to_json() != c[i].to_json();
  }
  EXPECT_EQ(differ, 20);
}

TEST(KbGenerator, TrainAndTestDisjoint) {
  HotpotFamily fam;
  std::set<std::string> train;
  for (const Sample& s : fam.make_dataset(DataSplit::kTrain, 400, 1)) {
    train.insert(s.extra_info["question"].get<std::string>());
    EXPECT_EQ(s.extra_info["split"], "train");
  }
  for (uint64_t seed : {1, 2}) {
    for (const Sample& s : fam.make_dataset(DataSplit::kTest, 400, seed)) {
      const std::string q = s.extra_info["question"].get<std::string>();
      EXPECT_EQ(train.count(q), 0u) << q;
      EXPECT_EQ(kb_question_split(q), DataSplit::kTest);
    }
  }
}

TEST(KbGenerator, ExpertSolvesEveryLevelAndType) {
  std::map<std::string, int> types;
  for (int level = 1; level <= 3; ++level) {
    for (int top_k : {1, 3}) {
      HotpotFamilyOptions o;
      o.min_level = o.max_level = level;
      o.top_k = top_k;
      o.reward = top_k == 1 ? QaMetric::kExactMatch : QaMetric::kF1;
      HotpotFamily fam(o);
      for (uint64_t seed = 0; seed < 300; ++seed) {
        for (const Sample& s : fam.make_dataset(seed % 2 ? DataSplit::kTest : DataSplit::kTrain, 2, seed)) {
          ASSERT_EQ(s.extra_info["level"], level);
          ASSERT_EQ(s.extra_info["hops"].size(), static_cast<size_t>(level));
          ++types[s.extra_info["template"].get<std::string>()];
          const json last = play_expert(fam, s);
          ASSERT_EQ(last["reward"], 1.0) << s.to_json().dump();
        }
      }
    }
  }
  EXPECT_EQ(types.size(), 15u);  // 4 lookup + 4 bridge + 4 comparison + 3 three-hop templates
}

TEST(KbGenerator, DistractorsShareNamesWithGoldPassages) {
  KbOptions none;
  none.distractors = 0;
  KbOptions many;
  many.distractors = 6;
  int sharing = 0;
  for (int64_t i = 0; i < 50; ++i) {
    const KbQuestion a = generate_kb_question(3, i, none);
    std::set<std::string> gold;
    for (const KbHop& h : a.hops) gold.insert(h.title);
    EXPECT_EQ(a.docs.size(), gold.size());
    const KbQuestion b = generate_kb_question(3, i, many);
    EXPECT_GT(b.docs.size(), b.hops.size());
    std::set<std::string> gold_words;
    for (const KbHop& h : b.hops)
      for (const std::string& w : bm25_terms(h.title)) gold_words.insert(w);
    for (const Passage& p : b.docs) {
      bool is_gold = false;
      for (const KbHop& h : b.hops) is_gold = is_gold || h.title == p.title;
      if (is_gold) continue;
      for (const std::string& w : bm25_terms(p.title)) sharing += gold_words.count(w) > 0;
    }
  }
  EXPECT_GT(sharing, 50);  // namesakes: same surname, title word, studio or city stem
}

// The answer follows from the hops' facts: chains pass each found entity on to the next
// query and end in the answer; comparisons pick the earlier year (or compare cities).
TEST(KbGenerator, AnswersFollowFromThePassages) {
  HotpotFamily fam;
  int comparisons = 0, chains = 0;
  for (const Sample& s : fam.make_dataset(DataSplit::kTrain, 600, 9)) {
    const std::string a = s.ground_truth.get<std::string>();
    const std::string q = s.extra_info["question"].get<std::string>();
    const json& h = s.extra_info["hops"];
    EXPECT_FALSE(a.empty()) << q;
    // Every hop's found text is non-empty and in its passage.
    for (const json& hop : h) {
      EXPECT_FALSE(hop["found"].get<std::string>().empty()) << q;
      bool in_passage = false;
      for (const json& d : s.env_kwargs["tool_kwargs"]["search"]["docs"])
        in_passage = in_passage || (d[0] == hop["title"] &&
                                    d[1].get<std::string>().find(hop["found"].get<std::string>()) != std::string::npos);
      EXPECT_TRUE(in_passage) << hop.dump();
    }
    if (s.extra_info["type"] != "comparison") {
      ++chains;
      EXPECT_EQ(a, h.back()["found"]) << q;
      for (size_t i = 1; i < h.size(); ++i) EXPECT_EQ(h[i]["query"], h[i - 1]["found"]) << q;
      EXPECT_NE(q.find(h[0]["query"].get<std::string>()), std::string::npos) << q;
      continue;
    }
    ++comparisons;
    ASSERT_EQ(h.size(), 2u);
    if (s.extra_info["template"] == "same_birthplace") {
      EXPECT_EQ(a, h[0]["found"] == h[1]["found"] ? "yes" : "no") << q;
    } else {
      const int y0 = std::stoi(h[0]["found"].get<std::string>());
      const int y1 = std::stoi(h[1]["found"].get<std::string>());
      EXPECT_NE(y0, y1) << q;
      EXPECT_EQ(a, y0 < y1 ? h[0]["query"] : h[1]["query"]) << q;
    }
  }
  EXPECT_GT(comparisons, 50);
  EXPECT_GT(chains, 200);
}

// --- expert through the real ToolEnv ------------------------------------------------

TEST(HotpotFamily, DemonstrationReplaysThroughToolEnv) {
  const text::Tokenizer tok =
      text::Tokenizer::load(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3");
  const text::ChatTemplate tmpl = text::ChatTemplate::from_template_text(tok.chat_template());
  HotpotFamilyOptions o;
  o.open_tool = true;
  HotpotFamily fam(o);
  std::vector<std::string> rendered;
  const std::vector<json> demos = fam.demonstrations(12, 4, tmpl, "<|im_end|>", &rendered);
  ASSERT_EQ(demos.size(), 12u);
  ASSERT_EQ(rendered.size(), 12u);
  for (const json& d : demos) {
    const Sample s = Sample::from_json(json::parse(d["sample"].dump()));  // a JSONL round trip
    const json& actions = d["actions"];
    ASSERT_EQ(actions.size(), s.extra_info["hops"].size() + 1);
    EXPECT_EQ(actions[0].get<std::string>().rfind("<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": ", 0),
              0u);
    env::EnvContext ctx;
    ctx.tokenizer = &tok;
    ctx.chat_template = &tmpl;
    env::ToolEnv tenv(ctx, env::ToolEnvOptions::from_json(s.env_kwargs));
    tenv.reset(s);
    env::StepResult r;
    for (size_t i = 0; i < actions.size(); ++i) {
      const std::string a = actions[i].get<std::string>();
      r = tenv.step({tok.encode(a), a});
      EXPECT_EQ(r.done, i + 1 == actions.size());
      if (!r.done) {
        EXPECT_EQ(r.info.value("tool_errors", -1), 0);
        const json& hop = s.extra_info["hops"][i];
        const std::string tool_text = tenv.messages().back()["content"].get<std::string>();
        EXPECT_NE(tool_text.find("(Title: " + hop["title"].get<std::string>() + ")"), std::string::npos);
        EXPECT_NE(tool_text.find(hop["found"].get<std::string>()), std::string::npos);
      }
    }
    const std::string final_text = actions.back().get<std::string>();
    EXPECT_EQ(final_text, "<answer>" + s.ground_truth.get<std::string>() + "</answer><|im_end|>");
    EXPECT_EQ(make_reward_fn(s.reward_style)(final_text, s.ground_truth, s.extra_info), 1.0f);
  }
  EXPECT_NE(rendered[0].find("<tools>"), std::string::npos);
  EXPECT_NE(rendered[0].find("\"name\": \"open\""), std::string::npos);
}

// --- play: invalid actions ---------------------------------------------------------

Sample hand_sample() {
  Sample s;
  s.prompt = json::array({{{"role", "user"}, {"content", "Question: Where was the director of The Pale Road born?"}}});
  s.agent_name = "tool";
  s.reward_style = "f1";
  s.ground_truth = "Old Beravik";
  s.data_source = "hotpotqa";
  const json docs = json::array({json::array({"The Pale Road", "The Pale Road is a film directed by Ivo Sarn."}),
                                 json::array({"Ivo Sarn", "Ivo Sarn is a film director born in Old Beravik."})});
  s.env_kwargs = {{"tools", {"search"}}, {"tool_kwargs", {{"search", {{"docs", docs}, {"top_k", 1}}}}}};
  s.extra_info = {{"hops", json::array({{{"query", "The Pale Road"}, {"title", "The Pale Road"}, {"found", "Ivo Sarn"}},
                                        {{"query", "Ivo Sarn"}, {"title", "Ivo Sarn"}, {"found", "Old Beravik"}}})}};
  return s;
}

TEST(HotpotPlay, HandMadeSampleInvalidActionsAndPartialCredit) {
  HotpotFamily fam;
  const Sample s = hand_sample();
  EXPECT_EQ(play_expert(fam, s)["reward"], 1.0);
  auto ep = fam.play_episode(s);
  EXPECT_EQ(ep->reset()["observation"], "Question: Where was the director of The Pale Road born?");
  EXPECT_EQ(*ep->expert_action(), "{\"name\":\"search\",\"arguments\":{\"query\":\"The Pale Road\"}}");
  json r = ep->step(R"({"name": "calc", "arguments": {}})");
  EXPECT_NE(r["observation"].get<std::string>().find("unknown tool 'calc'; available tools: search"),
            std::string::npos);
  r = ep->step(R"({"name": "search", "arguments": {"q": "x"}})");
  EXPECT_NE(r["observation"].get<std::string>().find("argument 'query' must be a string"), std::string::npos);
  r = ep->step("<tool_call>\n{not json}\n</tool_call>");
  EXPECT_FALSE(r["done"].get<bool>());
  r = ep->step(R"({"name": "search", "arguments": {"query": "Ivo Sarn"}})");
  EXPECT_EQ(r["observation"], "Doc 1(Title: Ivo Sarn) Ivo Sarn is a film director born in Old Beravik.");
  // "Beravik" against "Old Beravik": P 1, R 1/2 -> F1 2/3.
  r = ep->step("<answer>Beravik</answer>");
  EXPECT_TRUE(r["done"].get<bool>());
  EXPECT_NEAR(r["reward"].get<double>(), 2.0 / 3.0, 1e-6);
  auto ep2 = fam.play_episode(s);
  ep2->reset();
  EXPECT_EQ(ep2->step("Old Beravik")["reward"], 0.0);  // no <answer> tag
}

// --- options -----------------------------------------------------------------------

TEST(HotpotOptions, ValidationAndRegistration) {
  register_hotpotqa_family();  // idempotent
  EXPECT_TRUE(has_task_family("hotpotqa"));
  EXPECT_TRUE(has_reward_fn("em"));
  EXPECT_TRUE(has_reward_fn("f1"));
  EXPECT_FALSE(has_reward_fn("hotpotqa"));  // the reward is the sample's style
  EXPECT_NE(error_of([] { make_task_family("hotpotqa", {{"levels", 2}}); })
                .find("unknown config key 'data.task_kwargs.levels'"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_task_family("hotpotqa", {{"levels", 2}}); })
                .find("Valid keys under 'data.task_kwargs': min_level, max_level, top_k, open_tool, reward"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_task_family("hotpotqa", {{"max_level", 4}}); }).find("1..3"), std::string::npos);
  EXPECT_NE(error_of([] { make_task_family("hotpotqa", {{"min_level", 3}, {"max_level", 2}}); }).find("min_level"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_task_family("hotpotqa", {{"reward", "acc"}}); }).find("em"), std::string::npos);
  EXPECT_NE(error_of([] { make_task_family("hotpotqa", {{"corpus", "wiki"}}); }).find("distractor"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_task_family("hotpotqa", {{"open_tool", 1}}); }).find("true or false"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_task_family("hotpotqa", {{"top_k", "3"}}); }).find("top_k"), std::string::npos);
  const HotpotFamilyOptions o = HotpotFamilyOptions::from_json({{"max_level", 2}, {"reward", "f1"}});
  EXPECT_EQ(HotpotFamilyOptions::from_json(o.to_json()).to_json(), o.to_json());
  EXPECT_EQ(HotpotFamily(o).recipe_defaults(),
            (std::vector<std::string>{"rollout.max_steps=4", "rollout.max_new_tokens=128"}));
  auto fam = make_task_family("hotpotqa", {{"use_system_prompt", false}});
  const Sample s = fam->make_dataset(DataSplit::kTrain, 1, 0)[0];
  ASSERT_EQ(s.prompt.size(), 1u);
  EXPECT_EQ(s.prompt[0]["role"], "user");
  EXPECT_EQ(make_task_family("hotpotqa")->make_dataset(DataSplit::kTrain, 1, 0)[0].prompt[0]["content"],
            kHotpotSystemPrompt);
  EXPECT_THROW(fam->make_dataset(DataSplit::kTrain, -1, 0), Error);
}

}  // namespace
}  // namespace agentr1::tasks
