// Tests of the algo layer against tests/ref/algo_ref.py (an independent python3-torch
// implementation of the published formulas) and hand-worked cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "agentr1/algo/advantage.h"
#include "agentr1/algo/kl.h"
#include "agentr1/algo/loss_agg.h"
#include "agentr1/algo/policy_loss.h"
#include "agentr1/core/error.h"
#include "agentr1/core/json.h"

namespace agentr1::algo {
namespace {

json& reference() {
  static json ref = [] {
    char tmpl[] = "/tmp/agentr1_algo_XXXXXX";
    const char* dir = mkdtemp(tmpl);
    EXPECT_NE(dir, nullptr);
    const std::string out = std::string(dir) + "/algo_ref.json";
    const std::string cmd = std::string(AGENTR1_PYTHON) + " " + AGENTR1_SOURCE_DIR +
                            "/tests/ref/algo_ref.py " + out;
    const int rc = std::system(cmd.c_str());
    if (rc != 0) {
      ADD_FAILURE() << "reference script failed (" << cmd
                    << "); it needs Debian's python3-torch: run scripts/setup.sh";
      return json::object();
    }
    std::ifstream f(out);
    return json::parse(f);
  }();
  return ref;
}

at::Tensor tensor2d(const json& rows) {
  const int64_t b = static_cast<int64_t>(rows.size());
  const int64_t t = static_cast<int64_t>(rows[0].size());
  at::Tensor x = at::empty({b, t}, at::kDouble);
  auto acc = x.accessor<double, 2>();
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < t; ++j) acc[i][j] = rows[i][j].get<double>();
  return x;
}

TEST(GrpoTest, HandWorkedPair) {
  // Group {1, 0}: mean 0.5, unbiased std sqrt(0.5) = 0.70711 -> A = +-0.70711.
  auto a = grpo_advantages({1.0f, 0.0f}, {"g", "g"}, true);
  EXPECT_NEAR(a[0], 0.5 / std::sqrt(0.5), 1e-5);
  EXPECT_NEAR(a[1], -0.5 / std::sqrt(0.5), 1e-5);
  // Constant group: zero advantage; singleton: s / (1 + eps).
  auto b = grpo_advantages({1.0f, 1.0f, 3.0f}, {"x", "x", "y"}, true);
  EXPECT_NEAR(b[0], 0.0, 1e-6);
  EXPECT_NEAR(b[2], 3.0, 1e-5);
}

TEST(GrpoTest, MatchesReferenceLoopAndVectorised) {
  for (const auto& c : reference()["grpo"]) {
    const auto scores = c["scores"].get<std::vector<float>>();
    const auto groups = c["groups"].get<std::vector<std::string>>();
    const bool norm = c["norm_by_std"].get<bool>();
    const auto loop = grpo_advantages(scores, groups, norm);
    int64_t g = 0;
    const auto idx = group_indices(groups, &g);
    at::Tensor vec = grpo_advantages_vectorized(
        at::tensor(scores), at::tensor(std::vector<int64_t>(idx.begin(), idx.end())), g, norm);
    double max_diff = 0;
    for (size_t i = 0; i < scores.size(); ++i) {
      const double want = c["expected"][i].get<double>();
      max_diff = std::max(max_diff, std::abs(loop[i] - want));
      EXPECT_NEAR(vec[i].item<double>(), loop[i], 1e-5) << "loop vs vectorised at " << i;
    }
    EXPECT_LT(max_diff, 1e-5) << "norm_by_std=" << norm;
  }
}

TEST(PpoLossTest, HandWorkedClipping) {
  // One token, A = +1, ratio = e^0.5 = 1.65 -> clipped to 1.2: loss = -1.2, clipfrac 1.
  PolicyLossOptions o;
  auto one = [](double v) { return at::full({1, 1}, v, at::kDouble); };
  auto out = ppo_clip_loss(one(0.5), one(0.0), one(1.0), one(1.0), o);
  EXPECT_NEAR(out.loss.item<double>(), -1.2, 1e-9);
  EXPECT_NEAR(out.metrics["actor/pg_clipfrac"], 1.0, 1e-12);
  // A = -1, ratio = e^2 = 7.39 -> unclipped 7.39 > dual bound 3: loss = 3.
  out = ppo_clip_loss(one(2.0), one(0.0), one(-1.0), one(1.0), o);
  EXPECT_NEAR(out.loss.item<double>(), 3.0, 1e-9);
  EXPECT_NEAR(out.metrics["actor/pg_clipfrac_lower"], 1.0, 1e-12);
  // Gradient: inside the clip range, d loss / d logprob = -A * ratio.
  at::Tensor lp = one(0.1).requires_grad_(true);
  ppo_clip_loss(lp, one(0.0), one(2.0), one(1.0), o).loss.backward();
  EXPECT_NEAR(lp.grad().item<double>(), -2.0 * std::exp(0.1), 1e-9);
}

TEST(PpoLossTest, MatchesReference) {
  for (const auto& c : reference()["ppo"]) {
    PolicyLossOptions o;
    o.clip_ratio_low = c["low"].get<double>();
    o.clip_ratio_high = c["high"].get<double>();
    o.clip_ratio_c = c["c"].get<double>();
    o.agg = loss_agg_from_string(c["mode"].get<std::string>());
    auto out = ppo_clip_loss(tensor2d(c["logp"]), tensor2d(c["old"]), tensor2d(c["adv"]),
                             tensor2d(c["mask"]), o);
    const json& e = c["expected"];
    EXPECT_NEAR(out.loss.item<double>(), e["loss"].get<double>(), 1e-9) << c["mode"];
    EXPECT_NEAR(out.metrics["actor/pg_clipfrac"], e["pg_clipfrac"].get<double>(), 1e-9);
    EXPECT_NEAR(out.metrics["actor/pg_clipfrac_lower"], e["pg_clipfrac_lower"].get<double>(), 1e-9);
    EXPECT_NEAR(out.metrics["actor/ppo_kl"], e["ppo_kl"].get<double>(), 1e-9);
  }
}

TEST(LossAggTest, MatchesReference) {
  for (const auto& c : reference()["agg"]) {
    auto got = aggregate_loss(tensor2d(c["loss"]), tensor2d(c["mask"]),
                              loss_agg_from_string(c["mode"].get<std::string>()));
    EXPECT_NEAR(got.item<double>(), c["expected"].get<double>(), 1e-9) << c["mode"];
  }
  EXPECT_THROW(loss_agg_from_string("token_mean"), Error);
}

TEST(KlTest, MatchesReference) {
  for (const auto& c : reference()["kl"]) {
    at::Tensor got = kl_penalty(tensor2d(c["logp"]), tensor2d(c["ref"]),
                                kl_type_from_string(c["kind"].get<std::string>()));
    at::Tensor want = tensor2d(c["expected"]);
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-9) << c["kind"];
  }
  // k3 is non-negative and zero when the policies agree.
  at::Tensor x = at::randn({3, 4}, at::kDouble);
  EXPECT_LT(kl_penalty(x, x, KlType::kLowVarKl).abs().max().item<double>(), 1e-12);
  EXPECT_THROW(kl_type_from_string("k4"), Error);
}

}  // namespace
}  // namespace agentr1::algo
