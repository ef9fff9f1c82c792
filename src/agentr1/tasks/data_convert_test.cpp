#include "agentr1/tasks/data_convert.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/dataset.h"

namespace agentr1::tasks {
namespace {

const std::string kFixtures = std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/";

// The agentr1::Error message of fn(), or "<no error>".
std::string error_of(const std::function<void()>& fn) { return agentr1::testing::error_of(fn, "<no error>"); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs a stream converter and returns the output lines.
std::vector<std::string> convert_lines(const std::string& input, const ConvertOptions& opts, ConvertReport* report,
                                       bool hotpot) {
  std::istringstream in(input);
  std::vector<std::string> lines;
  const SampleSink sink = [&](const Sample& s) { lines.push_back(s.to_json().dump()); };
  const ConvertReport r = hotpot ? convert_hotpotqa(in, "in.json", opts, sink) : convert_gsm8k(in, "in.jsonl", opts, sink);
  if (report != nullptr) *report = r;
  return lines;
}

// ---- GSM8K ------------------------------------------------------------------------------

// Two rows in GSM8K's format and the two sample lines they must give, written by hand
// from the format: the final answer is the text after "####" without commas; the
// calculator tool; verl's extra_info layout {split, index, answer, question}.
TEST(DataConvert, Gsm8kExactOutput) {
  const std::string input =
      R"({"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"})"
      "\n\n"
      R"({"question": "A box holds 1,200 pens. How many pens are in 2 boxes?", "answer": "2 * 1200 = <<2*1200=2400>>2400\n#### 2,400"})"
      "\n";
  ConvertOptions o;
  o.split = DataSplit::kTest;
  o.system_prompt = "Solve it.";
  ConvertReport r;
  const std::vector<std::string> got = convert_lines(input, o, &r, /*hotpot=*/false);
  const std::vector<std::string> want = {
      R"({"prompt":[{"role":"system","content":"Solve it."},{"role":"user","content":"Tom has 3 apples and buys 4 more. How many apples does he have?"}],)"
      R"("agent_name":"tool","reward_model":{"style":"rule","ground_truth":"7"},"env_kwargs":{"tools":["calculator"]},)"
      R"("data_source":"openai/gsm8k","extra_info":{"split":"test","index":0,"answer":"3 + 4 = <<3+4=7>>7\n#### 7",)"
      R"("question":"Tom has 3 apples and buys 4 more. How many apples does he have?"}})",
      R"({"prompt":[{"role":"system","content":"Solve it."},{"role":"user","content":"A box holds 1,200 pens. How many pens are in 2 boxes?"}],)"
      R"("agent_name":"tool","reward_model":{"style":"rule","ground_truth":"2400"},"env_kwargs":{"tools":["calculator"]},)"
      R"("data_source":"openai/gsm8k","extra_info":{"split":"test","index":1,"answer":"2 * 1200 = <<2*1200=2400>>2400\n#### 2,400",)"
      R"("question":"A box holds 1,200 pens. How many pens are in 2 boxes?"}})"};
  EXPECT_EQ(got, want);
  EXPECT_EQ(r.rows, 2);
  EXPECT_EQ(r.written, 2);
  EXPECT_TRUE(r.errors.empty());
}

TEST(DataConvert, Gsm8kOptions) {
  const std::string input = R"({"question": "Q?", "answer": "x\n#### -3"})" "\n";
  ConvertOptions o;
  o.use_system_prompt = false;
  o.kwargs = {{"use_calculator", false}, {"instruction", "Think."}, {"data_source", "gsm8k"}};
  const std::vector<std::string> got = convert_lines(input, o, nullptr, false);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0],
            R"({"prompt":[{"role":"user","content":"Q? Think."}],"agent_name":"","reward_model":{"style":"rule","ground_truth":"-3"},)"
            R"("env_kwargs":{},"data_source":"gsm8k","extra_info":{"split":"train","index":0,"answer":"x\n#### -3","question":"Q?"}})");
  o.kwargs = {{"use_calculater", false}};
  const std::string typo = error_of([&] { convert_lines(input, o, nullptr, false); });
  EXPECT_TRUE(contains(typo, "unknown config key 'gsm8k.use_calculater'")) << typo;
  EXPECT_TRUE(contains(typo, "did you mean 'gsm8k.use_calculator'?")) << typo;
  o.kwargs = json::object();
  o.system_prompt = "S";  // with use_system_prompt false
  EXPECT_TRUE(contains(error_of([&] { convert_lines(input, o, nullptr, false); }), "system prompt off"));
}

// Malformed rows: stop at the first with its line, or (skip_bad_rows) every one of them
// with its line and rule while the good rows are still written.
TEST(DataConvert, Gsm8kBadRowsAreNumbered) {
  const std::string input =
      R"({"question": "Q1", "answer": "#### 1"})" "\n"        // line 1: good
      R"({"question": "Q2", "answer": )" "\n"                 // line 2: not JSON
      "\n"                                                    // line 3: blank
      R"({"question": "Q4"})" "\n"                            // line 4: no answer
      R"({"question": "Q5", "answer": "five"})" "\n"          // line 5: no ####
      R"(["Q6"])" "\n"                                        // line 6: not an object
      R"({"question": "Q7", "answer": "#### 7"})" "\n";       // line 7: good
  ConvertOptions strict;
  const std::string e = error_of([&] { convert_lines(input, strict, nullptr, false); });
  EXPECT_TRUE(contains(e, "in.jsonl:2: not valid JSON")) << e;
  EXPECT_TRUE(contains(e, "HINT")) << e;

  ConvertOptions lenient;
  lenient.skip_bad_rows = true;
  ConvertReport r;
  const std::vector<std::string> got = convert_lines(input, lenient, &r, false);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(r.rows, 6);
  EXPECT_EQ(r.written, 2);
  ASSERT_EQ(r.errors.size(), 4u);
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_EQ(r.errors[1].line, 4);
  EXPECT_EQ(r.errors[2].line, 5);
  EXPECT_EQ(r.errors[3].line, 6);
  EXPECT_TRUE(contains(r.errors[1].describe("in.jsonl"), "in.jsonl:4: GSM8K row 2: field 'answer' is missing"))
      << r.errors[1].describe("in.jsonl");
  EXPECT_TRUE(contains(r.errors[2].rule, "no '#### <number>'")) << r.errors[2].rule;
  EXPECT_TRUE(contains(r.errors[3].rule, "expected an object")) << r.errors[3].rule;
  // index counts source rows, bad ones included: the row on line 7 is row 5
  EXPECT_EQ(json::parse(got[1])["extra_info"]["index"], 5);
}

// The fixture file (GSM8K's format) through the file converter.
TEST(DataConvert, Gsm8kFixtureConverts) {
  ConvertOptions o;
  o.split = DataSplit::kTest;
  std::vector<Sample> s;
  convert_dataset(DataFormat::kGsm8k, kFixtures + "gsm8k/sample.jsonl", o, [&](const Sample& x) { s.push_back(x); });
  ASSERT_EQ(s.size(), 5u);
  // Ground truths read by hand from the fixture's "#### " lines.
  const std::vector<std::string> want = {"72", "251", "1248", "25", "13.5"};
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].ground_truth, want[i]) << i;
    EXPECT_EQ(s[i].data_source, "openai/gsm8k");
    EXPECT_EQ(s[i].reward_style, "rule");
    EXPECT_EQ(s[i].agent_name, "tool");
    EXPECT_EQ(s[i].env_kwargs["tools"], json::array({"calculator"}));
    EXPECT_EQ(s[i].extra_info["split"], "test");
    EXPECT_EQ(s[i].extra_info["index"], static_cast<int64_t>(i));
    ASSERT_EQ(s[i].prompt.size(), 2u);
    EXPECT_EQ(s[i].prompt[0]["role"], "system");
    EXPECT_EQ(s[i].prompt[1]["role"], "user");
    EXPECT_EQ(s[i].prompt[1]["content"], s[i].extra_info["question"]);
  }
  EXPECT_EQ(s[0].prompt[1]["content"].get<std::string>().rfind("A baker fills 14 trays", 0), 0u);

  Gsm8kConvertOptions plain;
  plain.use_calculator = false;
  plain.use_system_prompt = false;
  plain.instruction = "Let's think step by step and output the final answer after \"####\".";
  Sample p = gsm8k_row_to_sample({{"question", "Q?"}, {"answer", "A\n#### 7"}}, 3, "train", plain);
  ASSERT_EQ(p.prompt.size(), 1u);
  EXPECT_EQ(p.prompt[0]["content"], "Q? Let's think step by step and output the final answer after \"####\".");
  EXPECT_EQ(p.agent_name, "");
  EXPECT_TRUE(p.env_kwargs.empty());
}

TEST(DataConvert, Gsm8kRowErrorsNameTheIndex) {
  std::string e = error_of([] { gsm8k_row_to_sample({{"question", "Q"}, {"answer", "no marker, 42"}}, 17, "train"); });
  EXPECT_NE(e.find("GSM8K row 17"), std::string::npos) << e;
  EXPECT_NE(e.find("####"), std::string::npos) << e;
  e = error_of([] { gsm8k_row_to_sample({{"question", "Q"}}, 4, "train"); });
  EXPECT_NE(e.find("GSM8K row 4: field 'answer' is missing or not a string"), std::string::npos) << e;
  e = error_of([] { gsm8k_row_to_sample({{"question", "Q"}, {"answer", "#### many"}}, 5, "train"); });
  EXPECT_NE(e.find("GSM8K row 5"), std::string::npos) << e;
  EXPECT_NE(e.find("plain number"), std::string::npos) << e;
  EXPECT_EQ(gsm8k_final_answer("x\n#### 1,234 "), "1234");
  EXPECT_EQ(gsm8k_final_answer("#### 1\n#### -5"), "-5");
}

TEST(DataConvert, Gsm8kFileWithBadRowNamesFileAndRow) {
  const std::string path = ::testing::TempDir() + "/gsm_bad.jsonl";
  std::ofstream(path, std::ios::binary) << R"({"question": "Q1", "answer": "#### 1"})" "\n"
                                       R"({"question": "Q2", "answer": "forgot the marker"})" "\n";
  std::string e = error_of([&] { convert_dataset(DataFormat::kGsm8k, path, ConvertOptions{}, [](const Sample&) {}); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("GSM8K row 1"), std::string::npos) << e;
}

TEST(DataConvert, Limit) {
  std::string input;
  for (int i = 0; i < 5; ++i) input += R"({"question": "Q", "answer": "#### )" + std::to_string(i) + "\"}\n";
  ConvertOptions o;
  o.limit = 3;
  ConvertReport r;
  const std::vector<std::string> got = convert_lines(input, o, &r, false);
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(r.written, 3);
  EXPECT_EQ(r.rows, 3);
  EXPECT_EQ(json::parse(got[2])["reward_model"]["ground_truth"], "2");
  o.limit = -1;
  EXPECT_TRUE(contains(error_of([&] { convert_lines(input, o, nullptr, false); }), "limit must be >= 0"));
}

// ---- HotpotQA ---------------------------------------------------------------------------

// HotpotQA's JSON array, pretty-printed so that rows start on known lines.
const std::string kHotpotArray = R"([
  {
    "_id": "a1",
    "question": "Where was Anna Berg born?",
    "answer": "Oslo",
    "type": "bridge",
    "level": "easy",
    "supporting_facts": [["Anna Berg", 0]],
    "context": [["Anna Berg", ["Anna Berg was born in Oslo.", " She was a painter."]], ["Bergen", ["Bergen is a city.", "It rains."]]]
  },
  {
    "question": "No id here?",
    "answer": "x",
    "context": []
  },
  {"_id": "c3", "question": "Is Oslo a city?", "answer": "yes", "context": [["Oslo", ["Oslo is a city."]]]}
]
)";

// The first row's sample, written by hand from the format: passages are the sentences
// joined (a space added only where neither side has one), the search tool gets them as
// [title, text] docs with top_k 3, hops are the supporting-fact titles.
const std::string kHotpotRow0 =
    R"({"prompt":[{"role":"system","content":"Find it."},{"role":"user","content":"Question: Where was Anna Berg born?"}],)"
    R"("agent_name":"tool","reward_model":{"style":"em","ground_truth":"Oslo"},)"
    R"("env_kwargs":{"tools":["search"],"tool_kwargs":{"search":{"docs":[["Anna Berg","Anna Berg was born in Oslo. She was a painter."],)"
    R"(["Bergen","Bergen is a city. It rains."]],"top_k":3}}},"data_source":"hotpotqa",)"
    R"("extra_info":{"id":"a1","type":"bridge","level":"easy","hops":[{"query":"Anna Berg","title":"Anna Berg","found":""}],)"
    R"("supporting_facts":[["Anna Berg",0]],"index":0,"split":"test","question":"Where was Anna Berg born?","source_file":"in.json"}})";

TEST(DataConvert, HotpotArrayExactOutputAndRowLines) {
  ConvertOptions o;
  o.split = DataSplit::kTest;
  o.system_prompt = "Find it.";
  const std::string e = error_of([&] { convert_lines(kHotpotArray, o, nullptr, true); });
  EXPECT_TRUE(contains(e, "in.json:11: row 1: missing required field '_id'")) << e;

  o.skip_bad_rows = true;
  ConvertReport r;
  const std::vector<std::string> got = convert_lines(kHotpotArray, o, &r, true);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], kHotpotRow0);
  EXPECT_EQ(r.rows, 3);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 11);
  const json row2 = json::parse(got[1]);
  EXPECT_EQ(row2["extra_info"]["index"], 2);
  EXPECT_EQ(row2["extra_info"]["type"], "");
  EXPECT_EQ(row2["extra_info"]["hops"], json::array());
  EXPECT_EQ(row2["env_kwargs"]["tool_kwargs"]["search"]["docs"], json::parse(R"([["Oslo","Oslo is a city."]])"));

  // the third row (line 16) without its answer: both bad rows are reported
  std::string two_bad = kHotpotArray;
  two_bad.erase(two_bad.find(R"("answer": "yes", )"), std::string(R"("answer": "yes", )").size());
  convert_lines(two_bad, o, &r, true);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[1].line, 16);
  EXPECT_EQ(r.errors[1].rule.rfind("row 2: missing required field 'answer'", 0), 0u) << r.errors[1].rule;
  EXPECT_EQ(r.written, 1);
}

TEST(DataConvert, HotpotJsonlMatchesTheArray) {
  // The same rows one per line (blank lines and a byte-order mark allowed).
  std::string jsonl = "\xEF\xBB\xBF\n";
  const json rows = json::parse(kHotpotArray);
  jsonl += rows[0].dump() + "\n\n" + rows[2].dump() + "\n";
  ConvertOptions o;
  o.split = DataSplit::kTest;
  o.system_prompt = "Find it.";
  ConvertReport r;
  const std::vector<std::string> got = convert_lines(jsonl, o, &r, true);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], kHotpotRow0);
  EXPECT_EQ(json::parse(got[1])["extra_info"]["id"], "c3");
  // a bad JSONL row names its line
  o.skip_bad_rows = true;
  convert_lines("\n" + rows[0].dump() + "\n" + rows[1].dump() + "\n", o, &r, true);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 3);
  EXPECT_TRUE(contains(r.errors[0].rule, "row 1: missing required field '_id'")) << r.errors[0].rule;
}

TEST(DataConvert, HotpotFileErrors) {
  ConvertOptions o;
  // the fixture's row has a context entry without sentences
  const std::string e = error_of([&] {
    convert_dataset(DataFormat::kHotpotqa, kFixtures + "hotpotqa/bad_row.json", o, [](const Sample&) {});
  });
  EXPECT_TRUE(contains(e, "bad_row.json:1: row 0: each context entry must be [title, [sentences]]")) << e;
  // a broken array stops even with skip_bad_rows
  o.skip_bad_rows = true;
  const std::string broken = kHotpotArray.substr(0, kHotpotArray.size() / 2);
  const std::string b = error_of([&] { convert_lines(broken, o, nullptr, true); });
  EXPECT_TRUE(contains(b, "in.json:")) << b;
  EXPECT_TRUE(contains(b, "not valid JSON")) << b;
  // an unknown option names the known ones; the input file is not an option
  o.kwargs = {{"topk", 3}};
  EXPECT_TRUE(contains(error_of([&] { convert_lines(kHotpotArray, o, nullptr, true); }), "unknown config key 'data.task_kwargs.topk'"));
  o.kwargs = {{"train_file", "x.json"}};
  EXPECT_TRUE(contains(error_of([&] { convert_lines(kHotpotArray, o, nullptr, true); }), "is the input file itself"));
  // corpus=global: the corpus is the input file, which must be the array form
  o.kwargs = {{"corpus", "global"}};
  EXPECT_TRUE(contains(error_of([&] { convert_lines(json::parse(kHotpotArray)[0].dump() + "\n", o, nullptr, true); }),
                       "needs the JSON-array form"));
  std::vector<std::string> got = convert_lines(kHotpotArray, o, nullptr, true);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(json::parse(got[0])["env_kwargs"]["tool_kwargs"]["search"], json::parse(R"({"corpus_file":"in.json","top_k":3})"));
}

// The fixture converted through convert_dataset: the answers are the fixture's, the
// source file its absolute path, and the samples load with the trainer's loader.
TEST(DataConvert, HotpotFixtureFileLoadsWithTheTrainerLoader) {
  const std::string path = kFixtures + "hotpotqa/mini_dev.json";
  const std::string out = ::testing::TempDir() + "/hotpot_converted.jsonl";
  {
    std::ofstream f(out, std::ios::binary);
    ConvertOptions o;
    o.split = DataSplit::kTest;
    o.kwargs = {{"reward", "f1"}};
    const ConvertReport r = convert_dataset(DataFormat::kHotpotqa, path, o,
                                            [&](const Sample& s) { f << s.to_json().dump() << '\n'; });
    EXPECT_EQ(r.written, 3);
  }
  const std::vector<Sample> s = load_jsonl(out);
  ASSERT_EQ(s.size(), 3u);
  const std::vector<std::string> answers = {"Lisbeck", "yes", "Helga Marsten"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s[i].ground_truth, answers[i]);
    EXPECT_EQ(s[i].reward_style, "f1");
    EXPECT_EQ(s[i].extra_info["source_file"], std::filesystem::absolute(path).lexically_normal().string());
  }
  EXPECT_EQ(s[0].extra_info["hops"].size(), 2u);  // Orvane Tower, Helga Marsten
}

// ---- WebShop ----------------------------------------------------------------------------

TEST(DataConvert, WebshopGoalsOfTheFixtureFiles) {
  const std::string dir = kFixtures + "webshop/";
  ConvertOptions o;
  o.split = DataSplit::kAny;
  o.kwargs = {{"attributes_file", dir + "items_ins_v2_fixture.json"},
              {"human_instructions_file", dir + "items_human_ins_fixture.json"}};
  std::vector<Sample> got;
  const ConvertReport r =
      convert_dataset(DataFormat::kWebshop, dir + "items_shuffle_fixture.json", o, [&](const Sample& s) { got.push_back(s); });
  // The human file has 4 instructions: one without attributes and one of a product that
  // is not in the product file are WebShop's skipped ones, leaving one goal per product.
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(r.written, 2);
  std::set<std::string> asins;
  for (const Sample& s : got) {
    asins.insert(s.ground_truth["asin"].get<std::string>());
    EXPECT_EQ(s.agent_name, "webshop");
    EXPECT_EQ(s.data_source, "webshop");
    EXPECT_EQ(s.env_kwargs["game"]["products_file"],
              std::filesystem::absolute(dir + "items_shuffle_fixture.json").lexically_normal().string());
  }
  EXPECT_EQ(asins, (std::set<std::string>{"B09QKP7XQL", "B08CXT4GJD"}));
  // train + test = all
  int64_t split_total = 0;
  for (DataSplit sp : {DataSplit::kTrain, DataSplit::kTest}) {
    o.split = sp;
    try {
      split_total += convert_dataset(DataFormat::kWebshop, dir + "items_shuffle_fixture.json", o, [](const Sample&) {}).written;
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "split")) << e.what();  // a split without goals says so
    }
  }
  EXPECT_EQ(split_total, 2);
  o.kwargs["products_file"] = "x.json";
  EXPECT_TRUE(contains(error_of([&] { convert_dataset(DataFormat::kWebshop, dir + "items_shuffle_fixture.json", o, [](const Sample&) {}); }),
                       "is the input file itself"));
}

TEST(DataConvert, FormatNames) {
  EXPECT_EQ(parse_data_format("hotpotqa"), DataFormat::kHotpotqa);
  EXPECT_EQ(data_format_name(parse_data_format("gsm8k")), "gsm8k");
  const std::string e = error_of([] { parse_data_format("alfworld"); });
  EXPECT_TRUE(contains(e, "unknown data format 'alfworld'; known: gsm8k, hotpotqa, webshop")) << e;
  EXPECT_TRUE(contains(e, "no file format")) << e;
}

// ---- Checking a sample file ---------------------------------------------------------------

TEST(DataConvert, CheckReportsEveryBadRow) {
  const std::string file =
      R"({"prompt": [{"role": "user", "content": "a"}], "data_source": "openai/gsm8k"})" "\n"  // 1 good
      R"({"prompt": []})" "\n"                                                                  // 2 empty prompt
      "\n"                                                                                      // 3 blank
      R"({"prompt": [{"role": "user", "content": "b"}], "data_source": "openai/gsm8k"})" "\n"  // 4 good
      "{oops\n"                                                                                 // 5 not JSON
      R"({"prompt": [{"role": "user", "content": "c"}], "reward_model": "rule"})" "\n"          // 6 bad reward_model
      R"({"prompt": [{"role": "user", "content": "d"}], "data_source": "hotpotqa"})" "\n"       // 7 good
      R"({"prompt": [{"role": "user", "content": "e"}]})" "\n";                                 // 8 good, no source
  std::istringstream in(file);
  SampleFileReport r = check_sample_stream(in, "s.jsonl");
  EXPECT_EQ(r.rows, 7);
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_TRUE(contains(r.errors[0].rule, "'prompt' must be a non-empty list")) << r.errors[0].rule;
  EXPECT_EQ(r.errors[1].line, 5);
  EXPECT_TRUE(contains(r.errors[1].rule, "not valid JSON")) << r.errors[1].rule;
  EXPECT_EQ(r.errors[2].line, 6);
  EXPECT_TRUE(contains(r.errors[2].rule, "'reward_model' must be an object")) << r.errors[2].rule;
  EXPECT_EQ(r.data_sources, (std::map<std::string, int64_t>{{"openai/gsm8k", 2}, {"hotpotqa", 1}, {"", 1}}));
  EXPECT_FALSE(r.ok());
  const json j = r.to_json();
  EXPECT_EQ(j["bad_rows"], 3);
  EXPECT_EQ(j["errors"][1], (json{{"line", 5}, {"rule", r.errors[1].rule}}));

  // A check rejects rows like a schema error.
  std::istringstream in2(file);
  r = check_sample_stream(in2, "s.jsonl", [](const Sample& s) {
    AGENTR1_CHECK(s.data_source != "hotpotqa", "no hotpotqa here");
  });
  ASSERT_EQ(r.errors.size(), 4u);
  EXPECT_EQ(r.errors[3].line, 7);
  EXPECT_EQ(r.errors[3].rule, "no hotpotqa here");

  std::istringstream empty("\n\n");
  EXPECT_FALSE(check_sample_stream(empty, "e.jsonl").ok());  // no rows is not a data set
  EXPECT_TRUE(contains(error_of([] { check_sample_file("/nonexistent/x.jsonl"); }), "cannot open"));
}

TEST(DataConvert, ConvertedGsm8kFixturePassesTheCheck) {
  std::stringstream out;
  ConvertOptions o;
  const ConvertReport r = convert_dataset(DataFormat::kGsm8k, kFixtures + "gsm8k/sample.jsonl", o,
                                          [&](const Sample& s) { out << s.to_json().dump() << '\n'; });
  EXPECT_EQ(r.written, 5);
  const SampleFileReport v = check_sample_stream(out, "out.jsonl");
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.data_sources, (std::map<std::string, int64_t>{{"openai/gsm8k", 5}}));
}

}  // namespace
}  // namespace agentr1::tasks
