// A remote distillation teacher (train/distill.h, teachers.<name>.url) served by an
// in-process `agentr1 serve` equals the local teacher of the same model directory: the
// same teacher_logprob and top-k columns, scored by the learner's own path (score_teacher)
// for the local one and by the server's prompt forward for the remote one. Also: the
// section's checks for url, and a dead URL failing fast, named.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/serve/test_server.h"
#include "agentr1/train/distill.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::serve {
namespace {

namespace fs = std::filesystem;
using agentr1::testing::error_of;
using train::TeacherSpec;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// dir/model (the student) and dir/other (the teacher: other weights, same tokenizer).
const std::string& dir() {
  static const std::string d = [] {
    const std::string d = train::testing::make_tiny_model_dir("remote_teacher");
    fs::create_directories(d + "/other");
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(d + "/model/" + f, d + "/other/" + f);
    model::Transformer m = model::load_pretrained(d + "/model", at::kFloat, at::Device(at::kCPU));
    model::Transformer o = model::init_random(m->config(), 77);
    model::save_pretrained(o, d + "/other", at::kFloat);
    return d;
  }();
  return d;
}

// Three rows (two trajectories, one of two steps), ids inside the vocabulary.
std::vector<train::PackedRow> rows(int64_t vocab) {
  auto ids = [&](int from, int n) {
    TokenIds t;
    for (int i = 0; i < n; ++i) t.push_back(static_cast<TokenId>((from + 7 * i) % (vocab - 10) + 5));
    return t;
  };
  std::vector<Trajectory> trajs(2);
  for (int i = 0; i < 2; ++i) {
    trajs[i].uid = "t" + std::to_string(i);
    trajs[i].group = "g";
    trajs[i].data_source = "arith";
    Step s;
    s.prompt_ids = ids(10 + i, 9);
    s.response_ids = ids(40 + i, 6);
    s.response_logprobs.assign(6, -1.0f);
    trajs[i].steps.push_back(s);
  }
  Step s2;
  s2.prompt_ids = ids(80, 5);
  s2.response_ids = ids(90, 4);
  s2.response_logprobs.assign(4, -1.0f);
  trajs[0].steps.push_back(s2);
  return train::pack_trajectories(trajs, /*merge_prefix_steps=*/false);
}

train::DistillSection section(const TeacherSpec& t, int topk) {
  train::DistillSection d;
  d.teachers["t"] = t;
  d.options.loss = topk > 0 ? "topk_fkl" : "k1_pg";
  d.options.topk = topk > 0 ? topk : 5;
  d.resolve();
  return d;
}

TEST(RemoteTeacher, ScoresAsTheLocalTeacherOfTheSameModel) {
  testing::InProcessServer server(dir() + "/other");
  const text::Tokenizer student = text::Tokenizer::load(dir() + "/model");
  model::Transformer policy = model::load_pretrained(dir() + "/model", at::kFloat, at::Device(at::kCPU));
  const int k = 5;
  TeacherSpec local, remote;
  local.path = remote.path = dir() + "/other";
  remote.url = server.url();
  remote.model = "teacher";
  train::TeacherSet lt(section(local, k), student, policy, at::kFloat, at::Device(at::kCPU), 0);
  train::TeacherSet rt(section(remote, k), student, policy, at::kFloat, at::Device(at::kCPU), 0);
  train::ScoringOptions so;
  so.temperature = 0.7;
  so.min_shared_prefix = 0;  // the local teacher zeroes a shared prefix's tokens; the server scores all
  std::vector<train::PackedRow> a = rows(student.vocab_size()), b = a;
  lt.score(a, so);
  const train::Metrics m = rt.score(b, so);
  EXPECT_EQ(m.at("distill/rows/t"), 3.0);
  // Tolerance 1e-5: the local path forwards padded micro-batches ([B,T]) and the server
  // one prompt at a time ([1,n], then its logits in chunks): the same fp32 weights through
  // products of other shapes, a few ulps apart (log-probs about -5, ulp 5e-7).
  double max_lp = 0, max_top = 0;
  int swapped = 0;
  for (size_t r = 0; r < a.size(); ++r) {
    ASSERT_EQ(b[r].teacher_logprob.size(), a[r].tokens.size());
    ASSERT_EQ(b[r].teacher_topk_ids.size(), a[r].tokens.size() * k);
    EXPECT_EQ(b[r].teacher_logprob[0], 0.0f);
    for (size_t t = 1; t < a[r].tokens.size(); ++t) {
      EXPECT_NEAR(b[r].teacher_logprob[t], a[r].teacher_logprob[t], 1e-5) << "row " << r << " token " << t;
      max_lp = std::max(max_lp, static_cast<double>(std::abs(b[r].teacher_logprob[t] - a[r].teacher_logprob[t])));
      for (size_t j = 0; j < static_cast<size_t>(k); ++j) {
        const size_t at = t * k + j;
        EXPECT_NEAR(b[r].teacher_topk_logprob[at], a[r].teacher_topk_logprob[at], 1e-5);
        max_top = std::max(max_top, static_cast<double>(std::abs(b[r].teacher_topk_logprob[at] -
                                                                 a[r].teacher_topk_logprob[at])));
        if (b[r].teacher_topk_ids[at] != a[r].teacher_topk_ids[at]) {
          ++swapped;  // only a near tie may order two ids differently
          const size_t nb = j + 1 < static_cast<size_t>(k) ? at + 1 : at - 1;
          EXPECT_NEAR(a[r].teacher_topk_logprob[at], a[r].teacher_topk_logprob[nb], 1e-5) << "row " << r;
        }
      }
    }
  }
  EXPECT_EQ(swapped, 0);
  std::printf("remote vs local teacher: max |teacher_logprob diff| = %.3g, max |topk logprob diff| = %.3g\n", max_lp,
              max_top);
}

TEST(RemoteTeacher, SectionChecksAndADeadUrl) {
  TeacherSpec t;
  t.url = "http://127.0.0.1:9";
  std::string e = error_of([&] { section(t, 0); });
  EXPECT_TRUE(contains(e, "algorithm.distill.teachers.t.url is set but algorithm.distill.teachers.t.path is empty: "
                          "a remote teacher still needs path, the directory of its tokenizer")) << e;
  t.path = dir() + "/other";
  t.url = "127.0.0.1:9";
  e = error_of([&] { section(t, 0); });
  EXPECT_TRUE(contains(e, "algorithm.distill.teachers.t.url='127.0.0.1:9' must start with http://")) << e;

  std::string dead;
  {
    testing::InProcessServer s(dir() + "/other");  // a port that had a server a moment ago
    dead = s.url();
  }
  t.url = dead;
  t.retries = 1;
  t.timeout_s = 2;
  const text::Tokenizer student = text::Tokenizer::load(dir() + "/model");
  const auto t0 = std::chrono::steady_clock::now();
  e = error_of([&] {
    train::TeacherSet(section(t, 0), student, model::Transformer(nullptr), at::kFloat, at::Device(at::kCPU), 0);
  });
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(contains(e, "distillation teacher 't' (" + dead)) << e;
  EXPECT_TRUE(contains(e, "remote teacher " + dead + ": GET /v1/models failed after 2 attempts")) << e;
  EXPECT_LT(took, 10.0);
}

}  // namespace
}  // namespace agentr1::serve
