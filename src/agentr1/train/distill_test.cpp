// Online policy distillation's train side (distill.h): the section's checks, routing by
// data_source, the tokenizer check, teacher scoring against a direct computation with the
// teacher's full forward, and the k1_pg / topk_fkl terms with a teacher equal to the
// student (zero reward, zero gradient).
#include "agentr1/train/distill.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/model/lora.h"
#include "agentr1/model/transformer.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/learner/actor.h"
#include "agentr1/train/learner/learner.h"
#include "agentr1/train/learner/scoring.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;
using agentr1::testing::error_of;

// One tiny model directory for the whole file (model/), and a second model with other
// weights and the same tokenizer (other/).
const std::string& dir() {
  static const std::string d = [] {
    const std::string d = testing::make_tiny_model_dir("distill");
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

model::Transformer load(const std::string& sub) {
  return model::load_pretrained(dir() + "/" + sub, at::kFloat, at::Device(at::kCPU));
}

// Two trajectories of different data sources, 2 and 1 steps, ids from the vocabulary;
// every prompt starts with the same 6 tokens (a system prompt), so collate can share them.
std::vector<Trajectory> make_trajs(int vocab) {
  auto ids = [&](int from, int n) {
    TokenIds t = {7, 8, 9, 10, 11, 12};
    for (int i = 0; i < n; ++i) t.push_back(static_cast<TokenId>((from + 7 * i) % (vocab - 20) + 15));
    return t;
  };
  auto tail = [&](int from, int n) {
    const TokenIds t = ids(from, n);
    return TokenIds(t.begin() + 6, t.end());
  };
  std::vector<Trajectory> out(2);
  for (int i = 0; i < 2; ++i) {
    out[i].uid = "t" + std::to_string(i);
    out[i].group = "g";
    out[i].data_source = i == 0 ? "arith" : "hotpot";
    Step s;
    s.prompt_ids = ids(10 + i, 9);
    s.response_ids = tail(40 + i, 6);
    s.response_logprobs.assign(6, -1.0f);
    out[i].steps.push_back(s);
  }
  Step s2;
  s2.prompt_ids = ids(80, 5);
  s2.response_ids = tail(90, 4);
  s2.response_logprobs.assign(4, -1.0f);
  out[0].steps.push_back(s2);
  return out;
}

DistillSection section(const std::string& teacher, const std::string& loss = "k1_pg") {
  DistillSection d;
  d.teacher = teacher;
  d.options.loss = loss;
  d.options.topk = 5;
  d.resolve();
  return d;
}

TEST(DistillConfig, TeachersAreCheckedNamingTheKey) {
  DistillSection d;
  EXPECT_FALSE(d.enabled());
  d.teachers["a"] = TeacherSpec{"/x", {}};
  d.teachers["b"] = TeacherSpec{"/y", {}};
  std::string e = error_of([&] { d.resolve(); });
  EXPECT_NE(e.find("teachers 'a' and 'b' both take every unlisted data_source"), std::string::npos) << e;
  d.teachers["b"].data_sources = {"arith", "gsm8k"};
  d.teachers["c"] = TeacherSpec{"/z", {"gsm8k"}};
  e = error_of([&] { d.resolve(); });
  EXPECT_NE(e.find("data_source 'gsm8k' is listed by two teachers"), std::string::npos) << e;
  d.teachers.erase("c");
  d.teachers["a"].path = "";
  e = error_of([&] { d.resolve(); });
  EXPECT_NE(e.find("algorithm.distill.teachers.a.path is empty"), std::string::npos) << e;
  d.teachers["a"].path = "/x";
  d.teacher = "/w";
  d.teachers["default"] = TeacherSpec{"/v", {"q"}};
  e = error_of([&] { d.resolve(); });
  EXPECT_NE(e.find("algorithm.distill.teacher and algorithm.distill.teachers.default are both set"),
            std::string::npos) << e;
}

TEST(DistillConfig, RoutingByDataSource) {
  std::map<std::string, TeacherSpec> t;
  t["math"] = TeacherSpec{"/m", {"arith", "gsm8k"}};
  t["web"] = TeacherSpec{"/w", {"webshop"}};
  const TeacherRouting only_listed(t);
  EXPECT_EQ(only_listed.names()[only_listed.teacher_of("gsm8k")], "math");
  EXPECT_EQ(only_listed.names()[only_listed.teacher_of("webshop")], "web");
  const std::string e = error_of([&] { only_listed.teacher_of("alfworld"); });
  EXPECT_NE(e.find("no distillation teacher takes data_source 'alfworld' (math: arith, gsm8k; web: webshop)"),
            std::string::npos) << e;
  t["rest"] = TeacherSpec{"/r", {}};
  const TeacherRouting with_rest(t);
  EXPECT_EQ(with_rest.names()[with_rest.teacher_of("alfworld")], "rest");
  EXPECT_EQ(with_rest.names()[with_rest.teacher_of("")], "rest");
}

TEST(TeacherSet, RefusesATeacherWithAnotherTokenizerNamingTheDifference) {
  const std::string bad = dir() + "/bad_tok";
  if (!fs::exists(bad)) {
    fs::create_directories(bad);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer_config.json"})
      fs::copy_file(dir() + "/model/" + f, bad + "/" + f);
    json tj = json::parse(read_text_file(dir() + "/model/tokenizer.json"));
    // Swap the strings of two ordinary tokens: same size, ids mean other tokens.
    json& vocab = tj["model"]["vocab"];
    std::string a, b;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (it.value() == 20) a = it.key();
      if (it.value() == 21) b = it.key();
    }
    ASSERT_FALSE(a.empty() || b.empty());
    vocab[a] = 21;
    vocab[b] = 20;
    std::ofstream(bad + "/tokenizer.json") << tj.dump();
  }
  const text::Tokenizer student = text::Tokenizer::load(dir() + "/model");
  const std::string e = error_of([&] {
    TeacherSet(section(bad), student, load("model"), at::kFloat, at::Device(at::kCPU), 0);
  });
  EXPECT_NE(e.find("distillation teacher 'default' (" + bad + ") does not share the student's tokenizer: token id 20 is '"),
            std::string::npos) << e;
  EXPECT_NE(e.find("HINT"), std::string::npos) << e;
  // A missing directory and a "base" teacher without LoRA are refused too.
  EXPECT_NE(error_of([&] { TeacherSet(section("/nonexistent/t"), student, load("model"), at::kFloat,
                                      at::Device(at::kCPU), 0); })
                .find("no such directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TeacherSet(section("base"), student, load("model"), at::kFloat, at::Device(at::kCPU), 0); })
                .find("the policy has no adapters"),
            std::string::npos);
}

// "base": the policy's own LoRA base scores, adapters off; the policy itself (adapters on)
// is not the teacher. Checked against the plain model the adapters were added to.
TEST(TeacherSet, BaseTeacherIsThePolicyWithoutItsAdapters) {
  const text::Tokenizer student = text::Tokenizer::load(dir() + "/model");
  model::Transformer policy = load("model");
  model::LoraOptions lo;
  lo.rank = 4;
  policy->add_lora(lo, /*seed=*/3);
  {
    at::NoGradGuard ng;  // B starts at 0 (no change): move it so the adapted policy differs
    for (auto& [name, t] : policy->lora_parameters()) t.normal_(0.0, 0.3);
  }
  TeacherSet ts(section("base"), student, policy, at::kFloat, at::Device(at::kCPU), 0);
  std::vector<PackedRow> rows = pack_trajectories(make_trajs(student.vocab_size()), true);
  ScoringOptions so;
  ts.score(rows, so);
  std::vector<PackedRow> plain = rows, adapted = rows;
  model::Transformer base = load("model");
  score_logprobs(base, plain, &PackedRow::old_logprob, so);
  score_logprobs(policy, adapted, &PackedRow::old_logprob, so);
  double to_base = 0, to_adapted = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t i = 1; i < rows[r].tokens.size(); ++i) {
      to_base = std::max<double>(to_base, std::abs(rows[r].teacher_logprob[i] - plain[r].old_logprob[i]));
      to_adapted = std::max<double>(to_adapted, std::abs(rows[r].teacher_logprob[i] - adapted[r].old_logprob[i]));
    }
  EXPECT_LT(to_base, 1e-5);     // the base's numbers (float rounding: another module layout)
  EXPECT_GT(to_adapted, 1e-3);  // not the adapted policy's
}

// The teacher's columns against its full forward over each row (log_softmax of all
// logits, written here), for rows routed to two teachers.
TEST(TeacherSet, ScoresEachRowWithItsTeacherAsTheFullForwardDoes) {
  const text::Tokenizer student = text::Tokenizer::load(dir() + "/model");
  DistillSection d;
  d.teachers["same"] = TeacherSpec{dir() + "/model", {"arith"}};
  d.teachers["other"] = TeacherSpec{dir() + "/other", {}};
  d.options.loss = "topk_fkl";
  d.options.topk = 4;
  d.resolve();
  TeacherSet ts(d, student, load("model"), at::kFloat, at::Device(at::kCPU), 0);
  const auto trajs = make_trajs(student.vocab_size());
  std::vector<PackedRow> rows = pack_trajectories(trajs, /*merge_prefix_steps=*/true);
  ASSERT_EQ(rows.size(), 3u);
  ScoringOptions so;
  so.temperature = 0.7;
  so.min_shared_prefix = 4;  // a teacher's rows' common 6 tokens are forwarded once (p = 6)
  const Metrics m = ts.score(rows, so);
  EXPECT_EQ(m.at("distill/rows/same"), 2.0);
  EXPECT_EQ(m.at("distill/rows/other"), 1.0);
  model::Transformer same = load("model"), other = load("other");
  at::NoGradGuard ng;
  for (const PackedRow& r : rows) {
    model::Transformer& t = r.data_source == "arith" ? same : other;
    const int64_t n = static_cast<int64_t>(r.tokens.size());
    std::vector<int64_t> ids(r.tokens.begin(), r.tokens.end());
    const at::Tensor in = at::tensor(ids, at::kLong).view({1, n});
    const at::Tensor pos = at::arange(n, at::kLong).view({1, n});
    const at::Tensor logp = at::log_softmax(t->forward(in, pos).to(at::kFloat)[0] / 0.7, -1);  // [n,V]
    ASSERT_EQ(r.teacher_logprob.size(), r.tokens.size());
    ASSERT_EQ(r.teacher_topk_ids.size(), r.tokens.size() * 4);
    // The "same" teacher scores two rows that share 6 tokens: entries 1..6 are not scored
    // (0, as in the other columns). The "other" teacher's single row shares nothing.
    const int64_t p = r.data_source == "arith" ? 6 : 0;
    for (int64_t i = 1; i < n; ++i) {
      if (i <= p) {
        EXPECT_EQ(r.teacher_logprob[static_cast<size_t>(i)], 0.0f);
        EXPECT_EQ(r.teacher_topk_ids[static_cast<size_t>(i) * 4], 0);
        continue;
      }
      EXPECT_NEAR(r.teacher_logprob[static_cast<size_t>(i)], logp[i - 1][ids[static_cast<size_t>(i)]].item<float>(), 2e-5)
          << r.data_source << " token " << i;
      const auto [v, k] = logp[i - 1].topk(4);
      for (int64_t j = 0; j < 4; ++j) {
        const size_t at = static_cast<size_t>(i) * 4 + static_cast<size_t>(j);
        EXPECT_NEAR(r.teacher_topk_logprob[at], v[j].item<float>(), 2e-5);
        EXPECT_NEAR(logp[i - 1][r.teacher_topk_ids[at]].item<float>(), v[j].item<float>(), 2e-5);  // ties: same value
      }
    }
  }
}

// A teacher equal to the student: the k1 reward is exactly 0 on every token (the same
// scoring path and weights give the same bits), so the advantages without the task's are
// 0 and the actor's gradient is 0; with the task's, they are the task's unchanged.
TEST(TeacherSet, TeacherEqualToStudentGivesZeroRewardAndZeroGradient) {
  const text::Tokenizer student = text::Tokenizer::load(dir() + "/model");
  model::Transformer policy = load("model");
  ActorOptions ao;
  ao.use_rollout_logprobs = false;  // old log-probs from the learner's scoring pass
  ao.temperature = 0.7;
  Learner learner(policy, model::Transformer(nullptr), nullptr, ao, at::Device(at::kCPU));
  learner.set_teachers(std::make_unique<TeacherSet>(section(dir() + "/model"), student, policy, at::kFloat,
                                                    at::Device(at::kCPU), ao.attention_block));
  const auto trajs = make_trajs(student.vocab_size());
  std::vector<PackedRow> rows = pack_trajectories(trajs, true);
  learner.score(rows);
  int64_t n = 0;
  for (const PackedRow& r : rows)
    for (size_t i = 0; i < r.tokens.size(); ++i)
      if (r.action[i]) {
        EXPECT_EQ(r.teacher_logprob[i], r.old_logprob[i]);
        ++n;
      }
  EXPECT_EQ(n, 16);
  const Metrics dm = distill_metrics(rows, learner.teachers()->routing(), learner.teachers()->options());
  EXPECT_EQ(dm.at("distill/reverse_kl"), 0.0);
  EXPECT_EQ(dm.at("distill/clamp_frac"), 0.0);
  EXPECT_LT(dm.at("distill/teacher_logprob"), 0.0);

  // With the task's advantages: unchanged. Without: 0.
  algo::DistillOptions o = learner.teachers()->options();
  for (PackedRow& r : rows) r.advantage.assign(r.tokens.size(), 0.0f);
  for (PackedRow& r : rows)
    for (size_t i = 0; i < r.tokens.size(); ++i) r.advantage[i] = r.action[i] ? 0.25f * static_cast<float>(i % 3) - 0.3f : 0.0f;
  std::vector<PackedRow> with_task = rows;
  o.use_task_rewards = true;
  add_distill_advantages(with_task, o);
  for (size_t k = 0; k < rows.size(); ++k) EXPECT_EQ(with_task[k].advantage, rows[k].advantage);
  o.use_task_rewards = false;
  add_distill_advantages(rows, o);
  for (const PackedRow& r : rows)
    for (float a : r.advantage) EXPECT_EQ(a, 0.0f);
  // The actor's loss over these rows has a zero gradient everywhere.
  policy->zero_grad();
  std::vector<int64_t> all(rows.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const TrainBatch b = collate(rows, all);
  Metrics m;
  MicroBatchScale s;
  learner.actor().micro_batch_loss(b, s, m).backward();
  for (const auto& p : policy->parameters())
    if (p.grad().defined()) EXPECT_EQ(p.grad().abs().max().item<float>(), 0.0f);
}

// k1_pg with another teacher: r_t = teacher - student exactly where no clamp binds, and
// coef and use_task_rewards combine as documented.
TEST(TeacherSet, K1AdvantagesAreTheTeachersLogProbMinusTheStudents) {
  const text::Tokenizer student = text::Tokenizer::load(dir() + "/model");
  model::Transformer policy = load("model");
  ActorOptions ao;
  ao.use_rollout_logprobs = false;
  Learner learner(policy, model::Transformer(nullptr), nullptr, ao, at::Device(at::kCPU));
  learner.set_teachers(std::make_unique<TeacherSet>(section(dir() + "/other"), student, policy, at::kFloat,
                                                    at::Device(at::kCPU), ao.attention_block));
  std::vector<PackedRow> rows = pack_trajectories(make_trajs(student.vocab_size()), true);
  learner.score(rows);
  algo::DistillOptions o = learner.teachers()->options();
  o.coef = 0.5;
  o.use_task_rewards = true;
  for (PackedRow& r : rows) r.advantage.assign(r.tokens.size(), 0.0f);
  for (PackedRow& r : rows)
    for (size_t i = 0; i < r.tokens.size(); ++i) r.advantage[i] = r.action[i] ? 0.1f : 0.0f;
  add_distill_advantages(rows, o);
  double kl = 0, n = 0;
  for (const PackedRow& r : rows)
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      if (!r.action[i]) {
        EXPECT_EQ(r.advantage[i], 0.0f);
        continue;
      }
      const double d = double(r.teacher_logprob[i]) - double(r.old_logprob[i]);
      ASSERT_LT(std::abs(d), 10.0);  // random tiny models: far from the clamps
      EXPECT_NEAR(r.advantage[i], 0.1 + 0.5 * d, 1e-5);
      kl -= d;
      n += 1;
    }
  const Metrics dm = distill_metrics(rows, learner.teachers()->routing(), o);
  EXPECT_NEAR(dm.at("distill/reverse_kl"), kl / n, 1e-5);
  EXPECT_NEAR(dm.at("distill/reverse_kl/default"), kl / n, 1e-5);
}

// topk_fkl with a teacher equal to the student: the loss term is ~0 and so is its gradient
// (the teacher's top-k come from the chunk-wise head, the student's log-probs from the
// full forward: equal to float rounding, hence the tolerance).
TEST(TeacherSet, TopkFklWithTeacherEqualToStudentHasZeroLossAndGradient) {
  const text::Tokenizer student = text::Tokenizer::load(dir() + "/model");
  model::Transformer policy = load("model");
  ActorOptions ao;
  ao.use_rollout_logprobs = false;
  ao.distill_topk = section(dir() + "/model", "topk_fkl").options;
  Learner learner(policy, model::Transformer(nullptr), nullptr, ao, at::Device(at::kCPU));
  learner.set_teachers(std::make_unique<TeacherSet>(section(dir() + "/model", "topk_fkl"), student, policy,
                                                    at::kFloat, at::Device(at::kCPU), ao.attention_block));
  std::vector<PackedRow> rows = pack_trajectories(make_trajs(student.vocab_size()), true);
  learner.score(rows);
  for (PackedRow& r : rows) r.advantage.assign(r.tokens.size(), 0.0f);
  std::vector<int64_t> all(rows.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const TrainBatch b = collate(rows, all);
  ASSERT_EQ(b.teacher_topk_ids.size(2), 5);
  policy->zero_grad();
  Metrics m;
  learner.actor().micro_batch_loss(b, MicroBatchScale{}, m).backward();
  EXPECT_LT(std::abs(m.at("distill/topk_fkl")), 1e-6);
  EXPECT_GT(m.at("distill/topk_mass"), 0.0);
  double g_same = 0;
  for (const auto& p : policy->parameters())
    if (p.grad().defined()) g_same = std::max<double>(g_same, p.grad().abs().max().item<float>());
  EXPECT_LT(g_same, 1e-5);
  // Another teacher: a positive divergence and a gradient that is not 0.
  ActorOptions ao2 = ao;
  model::Transformer p2 = load("model");
  Learner l2(p2, model::Transformer(nullptr), nullptr, ao2, at::Device(at::kCPU));
  l2.set_teachers(std::make_unique<TeacherSet>(section(dir() + "/other", "topk_fkl"), student, p2, at::kFloat,
                                               at::Device(at::kCPU), ao2.attention_block));
  std::vector<PackedRow> rows2 = pack_trajectories(make_trajs(student.vocab_size()), true);
  l2.score(rows2);
  for (PackedRow& r : rows2) r.advantage.assign(r.tokens.size(), 0.0f);
  Metrics m2;
  l2.actor().micro_batch_loss(collate(rows2, all), MicroBatchScale{}, m2).backward();
  // (Random tiny models are near uniform, so the divergence is small, but far above the
  // rounding of the equal case.)
  EXPECT_GT(m2.at("distill/topk_fkl"), 1e-4);
  EXPECT_GT(m2.at("distill/topk_fkl"), 100 * std::abs(m.at("distill/topk_fkl")));
  double g = 0;
  for (const auto& p : p2->parameters())
    if (p.grad().defined()) g = std::max<double>(g, p.grad().abs().max().item<float>());
  EXPECT_GT(g, 100 * g_same);
  EXPECT_GT(g, 1e-5);
}

// End to end: a run whose teacher is its own starting point. Step 1 samples from the
// teacher's weights, so the reverse KL is exactly 0 and, without the task's rewards, the
// actor's gradient norm is 0; the metrics are logged per teacher.
TEST(DistillRun, TeacherEqualToTheStartingPolicyLogsZeroKlAtStepOne) {
  const std::string d = testing::make_tiny_model_dir("distill_run");
  json tree = testing::tiny_run_tree(d, {"trainer.total_steps=2", "algorithm.distill.teacher=" + d + "/model",
                                         "actor.use_rollout_logprobs=false"});
  RLTrainer trainer(load_train_config(tree), tree);
  trainer.run(false);
  const std::vector<json> steps = testing::step_metrics(d + "/run");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0]["distill/reverse_kl"].get<double>(), 0.0);
  EXPECT_EQ(steps[0]["distill/reverse_kl/default"].get<double>(), 0.0);
  EXPECT_EQ(steps[0]["actor/grad_norm"].get<double>(), 0.0);
  EXPECT_TRUE(steps[0].contains("timing/teacher"));
  EXPECT_EQ(steps[0]["distill/rows/default"].get<double>(), steps[0]["batch/rows"].get<double>());
  fs::remove_all(d);
}

// Asynchronous rollout: the teacher scores what the producer generated, whatever version
// sampled it (the teacher phase is the learner's, after collection).
TEST(DistillRun, AsynchronousRolloutIsScoredByTheTeacher) {
  const std::string d = testing::make_tiny_model_dir("distill_async");
  json tree = testing::tiny_run_tree(d, {"trainer.total_steps=3", "rollout.max_staleness=1",
                                         "algorithm.distill.teacher=" + dir() + "/other",
                                         "algorithm.distill.use_task_rewards=true"});
  RLTrainer trainer(load_train_config(tree), tree);
  trainer.run(false);
  const std::vector<json> steps = testing::step_metrics(d + "/run");
  ASSERT_EQ(steps.size(), 3u);
  for (const json& m : steps) {
    EXPECT_GT(std::abs(m["distill/reverse_kl"].get<double>()), 0.0);  // another model's judgement
    EXPECT_EQ(m["distill/rows/default"].get<double>(), m["batch/rows"].get<double>());
    EXPECT_GT(m["perf/teacher_gflop"].get<double>(), 0.0);
  }
  fs::remove_all(d);
}

}  // namespace
}  // namespace agentr1::train
