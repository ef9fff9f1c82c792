// The critic: value positions against a direct per-row hidden_states computation (with
// and without the shared prefix), the update lowering the value loss on a fixed batch,
// initialisation from the policy, and save/load.
#include "agentr1/train/learner/critic.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "agentr1/model/model_test_util.h"
#include "agentr1/train/advantages.h"
#include "agentr1/train/learner/batch.h"

namespace agentr1::train {
namespace {

using model::testing::spicy_model;
using model::testing::tiny_config;

// A value model with a random (non-zero) head so every position's value differs.
ValueModel random_value_model(uint64_t seed) {
  model::Transformer body = spicy_model(tiny_config(model::Arch::kQwen3), seed);
  ValueModel vm(body);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed + 7);
  torch::NoGradGuard ng;
  vm->head()->weight.normal_(0.0, 0.5, gen);
  vm->head()->bias.fill_(0.1);
  return vm;
}

TokenIds range_ids(int64_t from, int64_t n) {
  TokenIds t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((from + 13 * i) % 90 + 3));
  return t;
}

Step make_step(const TokenIds& prompt, const TokenIds& response, float reward = 0) {
  Step s;
  s.prompt_ids = prompt;
  s.response_ids = response;
  s.response_logprobs.assign(response.size(), -1.0f);
  s.reward = reward;
  return s;
}

// Three trajectories: a shared 20-token system prefix; trajectory 0 has two append-only
// steps (merged into one row), 1 and 2 one step each, so rows differ in length.
std::vector<Trajectory> make_trajs() {
  const TokenIds sys = range_ids(1, 20);
  std::vector<Trajectory> out(3);
  for (int i = 0; i < 3; ++i) {
    out[i].uid = "t" + std::to_string(i);
    out[i].group = "g";
    TokenIds p = sys;
    TokenIds q = range_ids(100 + i, 4 + i);
    p.insert(p.end(), q.begin(), q.end());
    const TokenIds r = range_ids(200 + i, 3 + i);
    out[i].steps.push_back(make_step(p, r));
    out[i].outcome_reward = static_cast<float>(i % 2);
  }
  // Step 2 of trajectory 0: prompt = step 1 prompt + response + observation.
  TokenIds p2 = out[0].steps[0].prompt_ids;
  p2.insert(p2.end(), out[0].steps[0].response_ids.begin(), out[0].steps[0].response_ids.end());
  const TokenIds obs = range_ids(300, 5);
  p2.insert(p2.end(), obs.begin(), obs.end());
  out[0].steps.push_back(make_step(p2, range_ids(400, 4)));
  return out;
}

// Value of every position of `tokens` computed alone: [len].
std::vector<float> direct_values(ValueModel& vm, const TokenIds& tokens) {
  torch::NoGradGuard ng;
  at::Tensor ids = at::empty({1, static_cast<int64_t>(tokens.size())}, at::kLong);
  for (size_t t = 0; t < tokens.size(); ++t) ids[0][static_cast<int64_t>(t)] = tokens[t];
  at::Tensor h = vm->body()->hidden_states(ids);  // [1,len,H]
  at::Tensor v = vm->head()->forward(h.to(at::kFloat)).squeeze(-1).squeeze(0).contiguous();
  return std::vector<float>(v.data_ptr<float>(), v.data_ptr<float>() + v.numel());
}

void check_positions(int64_t min_shared_prefix) {
  ValueModel vm = random_value_model(3);
  CriticOptions o;
  o.loop.min_shared_prefix = min_shared_prefix;
  o.loop.micro_batch_size = 8;  // all rows in one micro-batch (the shared prefix applies)
  Critic critic(vm, o);
  const std::vector<Trajectory> trajs = make_trajs();
  std::vector<PackedRow> rows = pack_trajectories(trajs, /*merge=*/true);
  ASSERT_EQ(rows.size(), 3u);  // trajectory 0's two steps share a row
  std::vector<int64_t> all = {0, 1, 2};
  const int64_t p = shared_prefix_length(rows, all);
  if (min_shared_prefix > 0) ASSERT_GE(p, min_shared_prefix) << "the test must exercise the prefix path";
  critic.fill_values(rows);
  double max_diff = 0;
  for (const PackedRow& row : rows) {
    const std::vector<float> d = direct_values(vm, row.tokens);
    ASSERT_EQ(row.value.size(), row.tokens.size());
    const size_t first = min_shared_prefix > 0 ? static_cast<size_t>(p) + 1 : 1;
    // Token t's value is the head at t-1 (the state before it), for every scored token.
    for (size_t t = first; t < row.tokens.size(); ++t)
      max_diff = std::max<double>(max_diff, std::abs(row.value[t] - d[t - 1]));
  }
  EXPECT_LT(max_diff, 1e-4) << "min_shared_prefix " << min_shared_prefix;
  // Step-level V(s_t): the head at the step's last prompt token, for each step.
  const StepTokenValues v = gather_step_tokens(rows, trajs, &PackedRow::value);
  for (size_t i = 0; i < trajs.size(); ++i)
    for (size_t s = 0; s < trajs[i].steps.size(); ++s) {
      const Step& st = trajs[i].steps[s];
      TokenIds full = st.prompt_ids;
      full.insert(full.end(), st.response_ids.begin(), st.response_ids.end());
      const std::vector<float> d = direct_values(vm, full);
      ASSERT_EQ(v[i][s].size(), st.response_ids.size());
      EXPECT_NEAR(v[i][s][0], d[st.prompt_ids.size() - 1], 1e-4) << "trajectory " << i << " step " << s;
      // token_gae: action token k's value is read at the position that predicts it.
      for (size_t k = 0; k < st.response_ids.size(); ++k)
        EXPECT_NEAR(v[i][s][k], d[st.prompt_ids.size() - 1 + k], 1e-4);
    }
}

TEST(CriticTest, ValueHeadReadsTheStateBeforeEachToken) { check_positions(0); }
TEST(CriticTest, ValueHeadReadsTheSamePositionsWithASharedPrefix) { check_positions(8); }

TEST(CriticTest, StepLevelValueMaskMarksEachStepsFirstActionToken) {
  const std::vector<Trajectory> trajs = make_trajs();
  std::vector<PackedRow> rows = pack_trajectories(trajs, true);
  set_value_mask(rows, /*step_level=*/true);
  const StepTokenValues m = gather_step_tokens(rows, trajs, &PackedRow::value_mask);
  for (size_t i = 0; i < trajs.size(); ++i)
    for (size_t s = 0; s < trajs[i].steps.size(); ++s)
      for (size_t k = 0; k < m[i][s].size(); ++k) EXPECT_EQ(m[i][s][k], k == 0 ? 1.0f : 0.0f);
  set_value_mask(rows, /*step_level=*/false);
  for (const PackedRow& r : rows)
    for (size_t t = 0; t < r.tokens.size(); ++t) EXPECT_EQ(r.value_mask[t], r.action[t] ? 1.0f : 0.0f);
}

// The trajectories packed, with advantage = return = `target` (< 0: the trajectory's
// outcome reward) on every response token, and the value mask set (set_value_mask:
// step_level marks each step's first action token, else every action token).
std::vector<PackedRow> rows_with_returns(const std::vector<Trajectory>& trajs, bool step_level, float target = -1) {
  StepTokenValues targets(trajs.size());
  for (size_t i = 0; i < trajs.size(); ++i)
    for (const Step& s : trajs[i].steps)
      targets[i].emplace_back(s.response_ids.size(), target < 0 ? trajs[i].outcome_reward : target);
  std::vector<PackedRow> rows = pack_trajectories(trajs, true);
  scatter_step_tokens(rows, targets, &PackedRow::advantage);
  scatter_step_tokens(rows, targets, &PackedRow::returns);
  set_value_mask(rows, step_level);
  return rows;
}

double masked_mse(const std::vector<PackedRow>& rows) {
  double ss = 0, n = 0;
  for (const PackedRow& r : rows)
    for (size_t t = 0; t < r.tokens.size(); ++t) {
      ss += r.value_mask[t] * (r.value[t] - r.returns[t]) * (r.value[t] - r.returns[t]);
      n += r.value_mask[t];
    }
  return ss / n;
}

TEST(CriticTest, UpdateLowersTheValueLossOnAFixedBatch) {
  ValueModel vm = random_value_model(11);
  CriticOptions o;
  o.optim.lr = 3e-3;
  o.loop.micro_batch_size = 2;  // gradient accumulation over micro-batches
  Critic critic(vm, o);
  const std::vector<Trajectory> trajs = make_trajs();
  std::vector<PackedRow> rows = rows_with_returns(trajs, /*step_level=*/false);
  critic.fill_values(rows);
  const double before = masked_mse(rows);
  std::map<std::string, double> first;
  for (int it = 0; it < 30; ++it) {
    auto m = critic.update(rows);
    if (it == 0) first = m;
    critic.fill_values(rows);  // the next step's old values
  }
  const double after = masked_mse(rows);
  EXPECT_LT(after, 0.25 * before) << "before " << before << " after " << after;
  for (const char* k : {"critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm",
                        "critic/lr"}) {
    ASSERT_TRUE(first.count(k)) << k;
    EXPECT_TRUE(std::isfinite(first[k])) << k;
  }
  // vf_loss = 0.5 * token-mean squared error before the first step (nothing clipped yet).
  EXPECT_NEAR(first["critic/vf_loss"], 0.5 * before, 1e-4);
  EXPECT_EQ(first["critic/lr"], 3e-3);
  EXPECT_EQ(critic.optimizer().steps(), 30);
}

TEST(CriticTest, InitialisesFromThePolicyAndRoundTripsThroughSave) {
  model::Transformer policy = spicy_model(tiny_config(model::Arch::kQwen3, /*tied=*/true), 5);
  ValueModel vm = make_value_model("", policy, at::kFloat, at::Device(at::kCPU));
  {
    auto pp = policy->named_parameters();
    for (const auto& kv : vm->body()->named_parameters()) {
      ASSERT_TRUE(pp.find(kv.key()) != nullptr) << kv.key();
      EXPECT_TRUE(kv.value().equal(*pp.find(kv.key()))) << kv.key();
      EXPECT_NE(kv.value().data_ptr(), pp.find(kv.key())->data_ptr()) << "critic must not share " << kv.key();
    }
    EXPECT_EQ(vm->head()->weight.abs().sum().item<double>(), 0.0);  // zero head: V = 0
  }
  CriticOptions o;
  Critic critic(vm, o);
  const std::vector<Trajectory> trajs = make_trajs();
  std::vector<PackedRow> rows = rows_with_returns(trajs, /*step_level=*/true, /*target=*/1.0f);
  critic.fill_values(rows);
  for (const PackedRow& r : rows)
    for (float v : r.value) EXPECT_EQ(v, 0.0f);
  critic.update(rows);
  critic.update(rows);
  const std::string dir = model::testing::temp_dir("critic");
  critic.save(dir + "/critic");
  // The saved body loads as a plain HF model; a fresh critic restores the same values.
  Critic other(make_value_model("", policy, at::kFloat, at::Device(at::kCPU)), o);
  other.load(dir + "/critic");
  std::vector<PackedRow> a = rows, b = rows;
  critic.fill_values(a);
  other.fill_values(b);
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t t = 0; t < a[i].value.size(); ++t) EXPECT_FLOAT_EQ(a[i].value[t], b[i].value[t]);
  // critic.model_path pointing at a saved critic loads the head too.
  ValueModel reloaded = make_value_model(dir + "/critic", policy, at::kFloat, at::Device(at::kCPU));
  EXPECT_TRUE(reloaded->head()->weight.equal(critic.model()->head()->weight));
  std::filesystem::remove_all(dir);
}

// LoRA on the critic: from a LoRA policy the body's base is the policy's tensors (shared,
// frozen), only the adapters and the head reach the optimiser, an update lowers the
// value loss without touching the base, and the checkpoint is a PEFT adapter + head
// that a fresh critic restores exactly.
TEST(CriticTest, LoraCriticSharesTheFrozenBaseAndTrainsAdaptersAndHead) {
  model::Transformer policy = spicy_model(tiny_config(model::Arch::kQwen3, /*tied=*/true), 5);
  model::LoraOptions lo;
  lo.rank = 4;
  lo.alpha = 8;
  policy->add_lora(lo, 0);
  const at::Tensor base_before = policy->named_parameters()["model.layers.0.mlp.up_proj.weight"].clone();
  CriticOptions o;
  o.lora = lo;
  o.optim.lr = 3e-3;
  ValueModel vm = make_value_model("", policy, at::kFloat, at::Device(at::kCPU), o.lora);
  {
    auto pp = policy->named_parameters();
    int shared = 0;
    for (const auto& kv : vm->body()->named_parameters()) {
      if (kv.key().find(".lora_") != std::string::npos) {
        EXPECT_TRUE(kv.value().requires_grad()) << kv.key();
        continue;
      }
      ASSERT_TRUE(pp.find(kv.key()) != nullptr) << kv.key();
      EXPECT_EQ(kv.value().data_ptr(), pp.find(kv.key())->data_ptr()) << "critic must share " << kv.key();
      EXPECT_FALSE(kv.value().requires_grad()) << kv.key();
      ++shared;
    }
    EXPECT_EQ(shared, static_cast<int>(policy->named_parameters().size() - policy->lora_parameters().size()));
  }
  Critic critic(vm, o);
  // The optimiser holds the adapters (2 per adapted projection) and the head's two.
  EXPECT_EQ(critic.optimizer().parameters().size(), vm->body()->lora_parameters().size() + 2);

  const std::vector<Trajectory> trajs = make_trajs();
  std::vector<PackedRow> rows = rows_with_returns(trajs, /*step_level=*/false);
  critic.fill_values(rows);
  const double before = masked_mse(rows);
  for (int it = 0; it < 30; ++it) {
    critic.update(rows);
    critic.fill_values(rows);
  }
  EXPECT_LT(masked_mse(rows), 0.25 * before);
  EXPECT_TRUE(policy->named_parameters()["model.layers.0.mlp.up_proj.weight"].equal(base_before));
  const at::Tensor lb = vm->body()->named_parameters()["model.layers.0.mlp.up_proj.lora_B"];
  EXPECT_GT(lb.abs().max().item<double>(), 0.0);  // the adapters moved (B starts at 0)

  const std::string dir = model::testing::temp_dir("critic_lora");
  critic.set_base_model("/some/base");
  critic.save(dir + "/critic");
  EXPECT_TRUE(std::filesystem::exists(dir + "/critic/adapter_config.json"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/critic/adapter_model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/critic/model.safetensors"));  // no copy of the base
  Critic other(make_value_model("", policy, at::kFloat, at::Device(at::kCPU), o.lora), o);
  other.load(dir + "/critic");
  std::vector<PackedRow> a = rows, b = rows;
  critic.fill_values(a);
  other.fill_values(b);
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t t = 0; t < a[i].value.size(); ++t) EXPECT_FLOAT_EQ(a[i].value[t], b[i].value[t]);
  // A critic without adapters refuses the adapter checkpoint, naming the key.
  Critic plain(make_value_model("", policy, at::kFloat, at::Device(at::kCPU)), CriticOptions{});
  try {
    plain.load(dir + "/critic");
    FAIL() << "a LoRA checkpoint loaded into a critic without adapters";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("critic.lora"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::train
