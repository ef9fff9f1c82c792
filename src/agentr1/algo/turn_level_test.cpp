// turn_rloo: hand-worked groups of 1-, 2- and 3-step trajectories, and an exact check
// of unbiasedness: a small stop/continue MDP is enumerated exactly (all paths of every
// member of a group), so the expected gradient of the estimator is computed without
// sampling and compared with the policy gradient; the naive per-turn-index baseline is
// shown to be biased on the same MDP.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>

#include "agentr1/algo/estimator.h"
#include "agentr1/algo/turn_level.h"
#include "agentr1/core/error.h"

namespace agentr1::algo {
namespace {

TEST(TurnRlooTest, OneAndThreeStepsHandWorked) {
  // A: 1 step r = (0); B: 3 steps r = (0.5, 0.5, 0.5); gamma = 1.
  // Naive per-turn-index baseline (incl. self): B's turns 1 and 2 get 0 (B is alone there).
  // turn_rloo: A_0 = 0 - 1.5; B_0 = 1.5 - 0; B_1, B_2 fall back to B's RLOO advantage 1.5.
  auto a = turn_rloo_advantages({{0.0}, {0.5, 0.5, 0.5}}, {"g", "g"}, 1.0);
  EXPECT_NEAR(a.advantages[0][0], -1.5, 1e-12);
  EXPECT_NEAR(a.advantages[1][0], 1.5, 1e-12);
  EXPECT_NEAR(a.advantages[1][1], 1.5, 1e-12);
  EXPECT_NEAR(a.advantages[1][2], 1.5, 1e-12);
  EXPECT_NEAR(a.returns[1][1], 1.0, 1e-12);
}

TEST(TurnRlooTest, ThreeMembersHandWorked) {
  // A (1 step) r=(1), B (3 steps) r=(.5,.5,.5), C (2 steps) r=(0,1).
  // gamma = 1: G_A=(1), G_B=(1.5,1,.5), G_C=(1,1).
  auto a = turn_rloo_advantages({{1.0}, {0.5, 0.5, 0.5}, {0.0, 1.0}}, {"g", "g", "g"}, 1.0);
  EXPECT_NEAR(a.advantages[0][0], 1 - (1.5 + 1) / 2, 1e-12);
  EXPECT_NEAR(a.advantages[1][0], 1.5 - 1, 1e-12);
  EXPECT_NEAR(a.advantages[1][1], 1.0 - 1.0, 1e-12);  // vs C's G_1 only
  EXPECT_NEAR(a.advantages[1][2], 1.5 - 1.0, 1e-12);  // fallback: G_B0 - mean(G_A0, G_C0)
  EXPECT_NEAR(a.advantages[2][0], 1 - 1.25, 1e-12);
  EXPECT_NEAR(a.advantages[2][1], 1.0 - 1.0, 1e-12);  // vs B's G_1
  // gamma = 0.5: G_A=(1), G_B=(.875,.75,.5), G_C=(.5,1); B_2 = (.875 - .75) / .25.
  auto h = turn_rloo_advantages({{1.0}, {0.5, 0.5, 0.5}, {0.0, 1.0}}, {"g", "g", "g"}, 0.5);
  EXPECT_NEAR(h.advantages[1][0], 0.875 - 0.75, 1e-12);
  EXPECT_NEAR(h.advantages[1][1], 0.75 - 1.0, 1e-12);
  EXPECT_NEAR(h.advantages[1][2], 0.5, 1e-12);
  EXPECT_NEAR(h.advantages[2][0], 0.5 - (1 + 0.875) / 2, 1e-12);
}

TEST(TurnRlooTest, IdenticalGroupZeroSingletonAndOneStepIsRloo) {
  auto z = turn_rloo_advantages({{0.2, 0.3}, {0.2, 0.3}, {0.2, 0.3}}, {"g", "g", "g"}, 0.9);
  for (const auto& t : z.advantages)
    for (double x : t) EXPECT_NEAR(x, 0.0, 1e-12);
  // singleton: baseline 0 everywhere it falls back -> (G_0 - 0) / gamma^t
  auto s = turn_rloo_advantages({{1.0, 2.0}}, {"s"}, 0.5);
  EXPECT_NEAR(s.advantages[0][0], 2.0, 1e-12);
  EXPECT_NEAR(s.advantages[0][1], 2.0 / 0.5, 1e-12);
  // one step each: rloo on the totals
  std::vector<TrajectoryTokens> b(3);
  const float r[3] = {1.f, 0.f, 0.25f};
  for (int i = 0; i < 3; ++i) {
    b[i].group = "g";
    b[i].outcome_reward = r[i];
    b[i].steps.resize(1);
    b[i].steps[0].n_tokens = 2;
  }
  auto t = make_estimator("turn_rloo")->compute(b, EstimatorOptions{});
  auto l = make_estimator("rloo")->compute(b, EstimatorOptions{});
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(t.advantages[i][0][1], l.advantages[i][0][1], 1e-6);
  EXPECT_THROW(turn_rloo_advantages({{1.0}}, {"g"}, 0.0), Error);
  EXPECT_THROW(turn_rloo_advantages({{}}, {"g"}, 1.0), Error);
}

// ---- exact expectation over a stop/continue MDP ----
// Turn t in {0,1,2}: continue with probability p_t = sigmoid(theta_t), else stop; the
// episode ends at a stop or after turn 2. Rewards depend on (turn, action).
struct Mdp {
  double theta[3] = {0.4, -0.3, 0.2};
  double r_cont[3] = {0.3, 0.2, -0.5};
  double r_stop[3] = {0.0, 0.6, 1.0};
};
struct Path {
  std::vector<int> actions;  // 1 = continue, 0 = stop
  std::vector<double> rewards;
  double prob = 1;
  std::vector<std::array<double, 3>> score;  // grad_theta log pi(a_t | s_t) per turn
};
std::vector<Path> paths(const Mdp& m) {
  std::vector<Path> out;
  for (int stop_at = 0; stop_at <= 3; ++stop_at) {  // 3 = never stops (truncated)
    Path p;
    for (int t = 0; t < 3; ++t) {
      const double pc = 1 / (1 + std::exp(-m.theta[t]));
      const int a = t < stop_at ? 1 : 0;
      p.actions.push_back(a);
      p.rewards.push_back(a ? m.r_cont[t] : m.r_stop[t]);
      p.prob *= a ? pc : 1 - pc;
      std::array<double, 3> g{0, 0, 0};
      g[t] = a ? 1 - pc : -pc;
      p.score.push_back(g);
      if (!a) break;
    }
    out.push_back(p);
  }
  return out;
}

using AdvFn = std::function<std::vector<std::vector<double>>(
    const std::vector<std::vector<double>>& rewards, double gamma)>;

// E over groups of n iid trajectories of (1/n) sum_i sum_t score_{i,t} * A_{i,t}.
std::array<double, 3> expected_gradient(const Mdp& m, int n, double gamma, const AdvFn& adv) {
  const auto ps = paths(m);
  std::array<double, 3> g{0, 0, 0};
  std::vector<int> choice(n, 0);
  std::function<void(int)> rec = [&](int k) {
    if (k == n) {
      double w = 1;
      std::vector<std::vector<double>> rewards;
      for (int c : choice) w *= ps[c].prob, rewards.push_back(ps[c].rewards);
      const auto a = adv(rewards, gamma);
      for (int i = 0; i < n; ++i)
        for (size_t t = 0; t < a[i].size(); ++t)
          for (int d = 0; d < 3; ++d) g[d] += w * ps[choice[i]].score[t][d] * a[i][t] / n;
      return;
    }
    for (size_t c = 0; c < ps.size(); ++c) choice[k] = static_cast<int>(c), rec(k + 1);
  };
  rec(0);
  return g;
}

std::vector<std::vector<double>> reward_to_go(const std::vector<std::vector<double>>& r, double gamma) {
  std::vector<std::vector<double>> g;
  for (const auto& x : r) {
    std::vector<double> y(x.size());
    double run = 0;
    for (size_t t = x.size(); t-- > 0;) y[t] = run = x[t] + gamma * run;
    g.push_back(y);
  }
  return g;
}

std::vector<std::vector<double>> naive_turn_index(const std::vector<std::vector<double>>& r,
                                                  double gamma) {
  const auto g = reward_to_go(r, gamma);
  auto a = g;
  for (size_t i = 0; i < g.size(); ++i)
    for (size_t t = 0; t < g[i].size(); ++t) {
      double s = 0;
      int c = 0;
      for (const auto& o : g)
        if (o.size() > t) s += o[t], ++c;  // includes trajectory i itself
      a[i][t] = g[i][t] - s / c;
    }
  return a;
}

std::vector<std::vector<double>> ours(const std::vector<std::vector<double>>& r, double gamma) {
  return turn_rloo_advantages(r, std::vector<std::string>(r.size(), "g"), gamma).advantages;
}

TEST(TurnRlooTest, UnbiasedByExactEnumerationNaiveIsNot) {
  const Mdp m;
  for (double gamma : {1.0, 0.8}) {
    // Target: E[sum_t score_t * G_t] (no baseline), = grad J for gamma = 1.
    const auto target = expected_gradient(m, 1, gamma, reward_to_go);
    if (gamma == 1.0) {
      auto J = [&](const Mdp& mm) {
        double j = 0;
        for (const auto& p : paths(mm)) {
          double s = 0;
          for (double x : p.rewards) s += x;
          j += p.prob * s;
        }
        return j;
      };
      for (int d = 0; d < 3; ++d) {
        Mdp hi = m, lo = m;
        hi.theta[d] += 1e-5;
        lo.theta[d] -= 1e-5;
        EXPECT_NEAR(target[d], (J(hi) - J(lo)) / 2e-5, 1e-8) << "finite difference, theta " << d;
      }
    }
    for (int n : {2, 3, 4}) {
      const auto got = expected_gradient(m, n, gamma, ours);
      const auto naive = expected_gradient(m, n, gamma, naive_turn_index);
      double bias_naive = 0;
      for (int d = 0; d < 3; ++d) {
        EXPECT_NEAR(got[d], target[d], 1e-12) << "turn_rloo biased: n=" << n << " gamma=" << gamma
                                              << " theta " << d;
        bias_naive = std::max(bias_naive, std::abs(naive[d] - target[d]));
      }
      std::cerr << "[turn_rloo] n=" << n << " gamma=" << gamma << " target=(" << target[0] << ", "
                << target[1] << ", " << target[2] << ") naive per-turn-index bias="
                << bias_naive << "\n";
      EXPECT_GT(bias_naive, 1e-3) << "the naive baseline should be biased here";
    }
  }
}

}  // namespace
}  // namespace agentr1::algo
