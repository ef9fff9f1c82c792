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

std::string temp_file(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// The agentr1::Error message of fn(), or "<no error>".
std::string error_of(const std::function<void()>& fn) { return agentr1::testing::error_of(fn, "<no error>"); }

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

}  // namespace
}  // namespace agentr1::tasks
