#include "agentr1/tasks/dataset.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/tasks/arithmetic/arithmetic.h"

namespace agentr1::tasks {
namespace {

const std::string kFixture = std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/gsm8k/sample.jsonl";

std::string temp_file(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// The agentr1::Error message of fn(), or "<no error>".
std::string error_of(const std::function<void()>& fn) { return agentr1::testing::error_of(fn, "<no error>"); }

TEST(Dataset, Gsm8kFixtureConverts) {
  std::vector<Sample> s = load_gsm8k_jsonl(kFixture, "test");
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

TEST(Dataset, Gsm8kRowErrorsNameTheIndex) {
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

TEST(Dataset, WriteThenLoadRoundTrips) {
  ArithDatasetOptions o;
  std::vector<Sample> ds = make_arith_dataset(20, 5, o);
  std::string path = ::testing::TempDir() + "/arith_roundtrip.jsonl";
  write_jsonl(path, ds);
  std::vector<Sample> back = load_jsonl(path);
  ASSERT_EQ(back.size(), ds.size());
  for (size_t i = 0; i < ds.size(); ++i) EXPECT_EQ(back[i].to_json(), ds[i].to_json());
  // One JSON object per line.
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_TRUE(json::parse(line).is_object());
  }
  EXPECT_EQ(lines, 20);
}

// A row check (the trainer's: env, tools, context, reward) rejects rows like a parse
// error: file:line in the message, or skipped and counted with skip_bad_rows.
TEST(Dataset, RowCheckRejectsRowsWithFileAndLine) {
  auto row = [](const std::string& source) {
    return R"({"prompt": [{"role": "user", "content": "hi"}], "data_source": ")" + source +
           R"(", "reward_model": {"style": "rule", "ground_truth": "1"}})";
  };
  const std::string path = temp_file("checked.jsonl", row("ok") + "\n" + row("nope") + "\n" + row("ok") + "\n");
  JsonlReadOptions o;
  o.check = [](const Sample& s) {
    if (s.data_source == "nope") throw Error("no reward function for data_source 'nope'");
  };
  const std::string e = error_of([&] { load_jsonl(path, o); });
  EXPECT_NE(e.find(path + ":2: no reward function for data_source 'nope'"), std::string::npos) << e;
  o.skip_bad_rows = true;
  int64_t skipped = -1;
  EXPECT_EQ(load_jsonl(path, o, &skipped).size(), 2u);
  EXPECT_EQ(skipped, 1);
}

TEST(Dataset, MalformedLinesNameFileAndLine) {
  const std::string good =
      R"({"prompt": [{"role": "user", "content": "hi"}], "reward_model": {"style": "rule", "ground_truth": "1"}})";
  std::string path = temp_file("bad.jsonl", good + "\n\n" + "{not json\n" + good + "\n" +
                                                R"({"prompt": "just text"})" + "\n" + good + "\n");
  std::string e = error_of([&] { load_jsonl(path); });
  EXPECT_NE(e.find(path + ":3: not valid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("skip_bad_rows"), std::string::npos) << e;

  JsonlReadOptions lenient;
  lenient.skip_bad_rows = true;
  int64_t skipped = -1;
  std::vector<Sample> s = load_jsonl(path, lenient, &skipped);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(skipped, 2);

  // The field problem is named (line 5: prompt is not a list).
  std::string only_bad = temp_file("bad2.jsonl", good + "\n" + R"({"prompt": "just text"})" + "\n");
  e = error_of([&] { load_jsonl(only_bad); });
  EXPECT_NE(e.find(only_bad + ":2: "), std::string::npos) << e;
  EXPECT_NE(e.find("'prompt'"), std::string::npos) << e;

  e = error_of([] { load_jsonl("/nonexistent/dir/x.jsonl"); });
  EXPECT_NE(e.find("cannot open JSONL file '/nonexistent/dir/x.jsonl'"), std::string::npos) << e;
  e = error_of([] { write_jsonl("/nonexistent/dir/x.jsonl", {}); });
  EXPECT_NE(e.find("cannot open '/nonexistent/dir/x.jsonl' for writing"), std::string::npos) << e;
}

TEST(Dataset, Gsm8kFileWithBadRowNamesFileAndRow) {
  std::string path = temp_file("gsm_bad.jsonl", R"({"question": "Q1", "answer": "#### 1"})" "\n"
                                                R"({"question": "Q2", "answer": "forgot the marker"})" "\n");
  std::string e = error_of([&] { load_gsm8k_jsonl(path, "train"); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("GSM8K row 1"), std::string::npos) << e;
}

}  // namespace
}  // namespace agentr1::tasks
