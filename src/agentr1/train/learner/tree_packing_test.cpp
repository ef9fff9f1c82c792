// Tree packing: a micro-batch laid out as a prefix tree (every shared prefix forwarded
// once) gives the same log-probs, critic values and parameter gradients as forwarding
// every row on its own, for each architecture; and the tree has exactly one node per
// distinct row prefix.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <set>

#include "agentr1/model/model_test_util.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/learner/critic.h"
#include "agentr1/train/learner/scoring.h"

namespace agentr1::train {
namespace {

using model::testing::graph_has;
using model::testing::spicy_model;
using model::testing::tiny_config;

TokenIds ids_from(uint64_t seed, int n) {
  TokenIds t;
  uint64_t x = seed;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t.push_back(static_cast<int32_t>((x >> 33) % 90 + 3));
  }
  return t;
}

Step step(const TokenIds& prompt, const TokenIds& response) {
  Step s;
  s.prompt_ids = prompt;
  s.response_ids = response;
  s.response_logprobs.assign(response.size(), -1.0f);
  return s;
}

// Two GRPO groups of three samples behind one system prompt; each sample has two
// append-only turns (merged into one row), and one sample a third turn that rewrites
// its context (a row of its own).
std::vector<PackedRow> rows_of_groups() {
  const TokenIds system = ids_from(1, 10);
  std::vector<Trajectory> trajs;
  for (int g = 0; g < 2; ++g) {
    TokenIds prompt = system;
    const TokenIds q = ids_from(10 + g, 5 + g);
    prompt.insert(prompt.end(), q.begin(), q.end());
    for (int s = 0; s < 3; ++s) {
      Trajectory t;
      t.uid = "g" + std::to_string(g) + "s" + std::to_string(s);
      t.group = "g" + std::to_string(g);
      const TokenIds r1 = ids_from(100 + 10 * g + s, 3 + s);
      t.steps.push_back(step(prompt, r1));
      TokenIds p2 = prompt;
      p2.insert(p2.end(), r1.begin(), r1.end());
      const TokenIds obs = ids_from(200 + g, 4);  // the same tool answer for the group
      p2.insert(p2.end(), obs.begin(), obs.end());
      t.steps.push_back(step(p2, ids_from(300 + 10 * g + s, 2 + s)));
      if (g == 1 && s == 2) t.steps.push_back(step(ids_from(400, 7), ids_from(401, 3)));
      trajs.push_back(t);
    }
  }
  StepTokenValues adv(trajs.size());
  for (size_t i = 0; i < trajs.size(); ++i)
    for (const Step& st : trajs[i].steps) adv[i].push_back(std::vector<float>(st.response_ids.size(), 1.0f));
  std::vector<PackedRow> rows = pack_trajectories(trajs, /*merge_prefix_steps=*/true);
  scatter_step_tokens(rows, adv, &PackedRow::advantage);
  return rows;
}

class TreePackingTest : public ::testing::TestWithParam<model::Arch> {};

TEST_P(TreePackingTest, LogprobsValuesAndGradientsEqualPerRowForwards) {
  const std::vector<PackedRow> rows = rows_of_groups();
  ASSERT_EQ(rows.size(), 7u);
  std::vector<int64_t> all(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) all[i] = static_cast<int64_t>(i);
  model::Transformer m = spicy_model(tiny_config(GetParam()), 5);
  m->train();

  // One node per distinct prefix of any row.
  std::set<TokenIds> prefixes;
  int64_t row_tokens = 0;
  for (const auto& r : rows) {
    row_tokens += static_cast<int64_t>(r.tokens.size());
    for (size_t n = 1; n <= r.tokens.size(); ++n) prefixes.insert(TokenIds(r.tokens.begin(), r.tokens.begin() + n));
  }
  const TrainBatch tree = collate(rows, all, 0, at::Device(at::kCPU), /*tree=*/true);
  EXPECT_EQ(tree.tree_nodes, static_cast<int64_t>(prefixes.size()));
  EXPECT_LT(tree.tree_nodes * 3, row_tokens * 2);  // the groups' prompts are shared (97 of 169)

  // Per-token weights: the loss is sum(w * logp) over action positions.
  at::manual_seed(3);
  const at::Tensor w = at::rand(tree.action_mask.sizes(), at::TensorOptions().dtype(at::kFloat)) * tree.action_mask;
  m->zero_grad();
  const at::Tensor lp_tree = target_logprobs(m, tree, nullptr, 0.7);
  (lp_tree * w).sum().backward();
  std::vector<at::Tensor> g_tree;
  for (auto& p : m->parameters()) g_tree.push_back(p.grad().clone());

  m->zero_grad();
  double worst_lp = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const TrainBatch one = collate(rows, {static_cast<int64_t>(i)});
    const at::Tensor lp = target_logprobs(m, one, nullptr, 0.7);  // [1,L-1]
    const int64_t n = lp.size(1);
    const at::Tensor wi = w[static_cast<int64_t>(i)].narrow(0, 0, n).unsqueeze(0);
    (lp * wi).sum().backward();
    const at::Tensor mask = one.action_mask;
    worst_lp = std::max(worst_lp, ((lp - lp_tree[static_cast<int64_t>(i)].narrow(0, 0, n)).abs() * mask)
                                      .max()
                                      .item<double>());
  }
  EXPECT_LT(worst_lp, 1e-5);
  double scale = 0, diff = 0;
  auto params = m->parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    scale = std::max(scale, params[k].grad().abs().max().item<double>());
    diff = std::max(diff, (params[k].grad() - g_tree[k]).abs().max().item<double>());
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LT(diff / scale, 1e-5) << "relative gradient difference";
  std::printf("[tree] %s: %lld nodes for %lld row tokens; max |dlogp| %.2e, grad rel diff %.2e\n",
              model::arch_name(GetParam()), (long long)tree.tree_nodes, (long long)row_tokens, worst_lp, diff / scale);

  // A critic on the same body: values from the tree equal per-row values.
  ValueModel vm = make_value_model("", m, at::kFloat, at::Device(at::kCPU));
  {
    torch::NoGradGuard ng;
    for (auto& p : vm->head()->parameters()) p.normal_(0, 0.5);
    const at::Tensor v_tree = value_predictions(vm, tree);
    double worst_v = 0;
    const double v_scale = v_tree.abs().max().item<double>();
    for (size_t i = 0; i < rows.size(); ++i) {
      const TrainBatch one = collate(rows, {static_cast<int64_t>(i)});
      const at::Tensor v = value_predictions(vm, one);
      const int64_t n = v.size(1);
      worst_v = std::max(worst_v, (v[0] - v_tree[static_cast<int64_t>(i)].narrow(0, 0, n)).abs().max().item<double>());
    }
    EXPECT_GT(v_scale, 0.1);
    EXPECT_LT(worst_v / v_scale, 1e-5) << "relative value difference";
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, TreePackingTest,
                         ::testing::Values(model::Arch::kQwen2, model::Arch::kQwen3, model::Arch::kLlama),
                         [](const auto& info) { return std::string(model::arch_name(info.param)); });

// The tree's attention in tiles (Transformer::set_attention_block: each owned node over
// its row's path of up to 30 keys, in tiles of 4) equals its dense attention: log-probs
// and every parameter's gradient.
TEST_P(TreePackingTest, TiledAttentionEqualsDenseAttention) {
  const std::vector<PackedRow> rows = rows_of_groups();
  std::vector<int64_t> all(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) all[i] = static_cast<int64_t>(i);
  model::Transformer m = spicy_model(tiny_config(GetParam()), 5);
  m->train();
  const TrainBatch tree = collate(rows, all, 0, at::Device(at::kCPU), /*tree=*/true);
  at::manual_seed(3);
  const at::Tensor w = at::rand(tree.action_mask.sizes(), at::TensorOptions().dtype(at::kFloat)) * tree.action_mask;
  std::vector<at::Tensor> lps, grads[2];
  for (int64_t block : {0, 4}) {
    m->set_attention_block(block);
    m->zero_grad();
    const at::Tensor lp = target_logprobs(m, tree, nullptr, 0.7);
    EXPECT_EQ(graph_has(lp, "BlockedAttention"), block > 0);  // the tiles really ran (or not)
    (lp * w).sum().backward();
    lps.push_back((lp * tree.action_mask).detach());
    for (auto& p : m->parameters()) grads[block > 0].push_back(p.grad().clone());
  }
  m->set_attention_block(model::kDefaultAttentionBlock);
  EXPECT_LT((lps[0] - lps[1]).abs().max().item<double>(), 1e-5);
  double scale = 0, diff = 0;
  for (size_t k = 0; k < grads[0].size(); ++k) {
    scale = std::max(scale, grads[0][k].abs().max().item<double>());
    diff = std::max(diff, (grads[0][k] - grads[1][k]).abs().max().item<double>());
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LT(diff / scale, 1e-5) << "relative gradient difference";
}

// Ordering by prefix puts a group's rows into the same micro-batch.
TEST(TreePackingTest, MicroBatchesByPrefixKeepGroupsTogether) {
  const std::vector<PackedRow> rows = rows_of_groups();
  const auto mbs = make_micro_batches(rows, 3, 0, /*by_prefix=*/true);
  int64_t nodes = 0;
  for (const auto& mb : mbs) nodes += collate(rows, mb, 0, at::Device(at::kCPU), true).tree_nodes;
  int64_t nodes_by_length = 0;
  for (const auto& mb : make_micro_batches(rows, 3)) nodes_by_length += collate(rows, mb, 0, at::Device(at::kCPU), true).tree_nodes;
  EXPECT_LT(nodes, nodes_by_length);
}

}  // namespace
}  // namespace agentr1::train
