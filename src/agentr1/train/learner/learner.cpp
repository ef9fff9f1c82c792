#include "agentr1/train/learner/learner.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <set>

#include "agentr1/core/error.h"
#include "agentr1/core/timing.h"
#include "agentr1/train/device.h"

namespace agentr1::train {

Learner::Learner(model::Transformer policy, model::Transformer reference, std::unique_ptr<Critic> critic,
                 ActorOptions actor_opts, at::Device device)
    : actor_(std::move(policy), std::move(actor_opts)),
      reference_(std::move(reference)),
      critic_(std::move(critic)),
      device_(device) {
  AGENTR1_CHECK(module_device(*actor_.policy()) == device_, "Learner: the policy is on "
                << module_device(*actor_.policy()) << ", not on trainer.device " << device_);
  AGENTR1_CHECK(reference_.is_empty() || reference_.get() != actor_.policy().get() ||
                    actor_.policy()->lora() != nullptr,
                "Learner: the reference is the policy itself but it has no LoRA adapters (the KL would be 0); "
                "pass a frozen copy");
  AGENTR1_CHECK(reference_.is_empty() || module_device(*reference_) == device_,
                "Learner: the reference model is not on trainer.device " << device_);
  AGENTR1_CHECK(!critic_ || module_device(*critic_->model()) == device_,
                "Learner: the critic is not on trainer.device " << device_);
}

Learner::~Learner() = default;

void Learner::set_teachers(std::unique_ptr<TeacherSet> teachers) { teachers_ = std::move(teachers); }

void Learner::set_process_group(ProcessGroup* pg) {
  pg_ = pg;
  actor_.set_process_group(pg);
  if (critic_) critic_->set_process_group(pg);
}

void Learner::fill_columns(std::vector<PackedRow>& rows, Metrics& m) {
  auto t0 = std::chrono::steady_clock::now();
  if (!actor_.options().bypass_scoring()) actor_.fill_logprobs(rows, &PackedRow::old_logprob);
  m["timing/old_log_prob"] = seconds_since(t0);
  if (has_reference()) {
    t0 = std::chrono::steady_clock::now();
    // LoRA: the reference is the policy's own base, its adapters off on this thread.
    std::optional<model::BaseOnly> base;
    if (reference_.get() == actor_.policy().get()) base.emplace();
    score_logprobs(reference_, rows, &PackedRow::ref_logprob,
                   actor_.options().loop.scoring(device_, actor_.options().temperature));
    m["timing/ref"] = seconds_since(t0);
  }
  if (teachers_) merge_into(m, teachers_->score(rows, actor_.options().loop.scoring(device_, actor_.options().temperature)));
  if (critic_) {
    t0 = std::chrono::steady_clock::now();
    critic_->fill_values(rows);
    m["timing/values"] = seconds_since(t0);
  }
}

Metrics Learner::score(std::vector<PackedRow>& rows) {
  Metrics m;
  const bool bypass = actor_.options().bypass_scoring();
  if (bypass)  // the rollout's weights are the ones the update starts from
    for (auto& r : rows) r.old_logprob = r.rollout_logprob;
  if (pg_ == nullptr) {
    fill_columns(rows, m);
  } else {
    // Each rank scores the rows of the trajectories it generated, then the columns are
    // shared: every rank holds the whole scored batch.
    int64_t trajectories = 0;
    for (const auto& r : rows) trajectories = std::max(trajectories, r.trajectory + 1);
    std::vector<uint8_t> owned(rows.size(), 0);
    std::vector<PackedRow> local;
    for (size_t i = 0; i < rows.size(); ++i)
      if ((owned[i] = rollout_owner(rows[i].trajectory, trajectories, pg_->world_size()) == pg_->rank()))
        local.push_back(rows[i]);
    fill_columns(local, m);
    size_t k = 0;
    for (size_t i = 0; i < rows.size(); ++i)
      if (owned[i]) rows[i] = std::move(local[k++]);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<float> PackedRow::*> cols{&PackedRow::ref_logprob, &PackedRow::value,
                                                      &PackedRow::teacher_logprob};
    if (!bypass) cols.push_back(&PackedRow::old_logprob);
    share_row_columns(rows, owned, cols, *pg_);
    share_teacher_topk(rows, owned, *pg_);
    m["timing/share_scores"] = seconds_since(t0);
  }
  double diff = 0;
  int64_t n = 0;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.tokens.size(); ++i)
      if (r.action[i]) {
        diff = std::max<double>(diff, std::abs(r.old_logprob[i] - r.rollout_logprob[i]));
        n++;
      }
  if (!bypass) m["rollout/logprob_max_diff"] = diff;  // else the actor's update reports it
  if (actor_.options().off_policy.enabled()) {
    // The batch's importance-weight statistics, once: the weights depend on pi_old and
    // pi_behav only, so every epoch's micro-batches use these same values.
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<double> old_lp, behav_lp;
    std::vector<int64_t> seq;
    int64_t seq_base = 0;
    for (const auto& r : rows) {
      int64_t top = -1;
      for (size_t i = 0; i < r.tokens.size(); ++i)
        if (r.action[i]) {
          old_lp.push_back(r.old_logprob[i]);
          behav_lp.push_back(r.rollout_logprob[i]);
          seq.push_back(seq_base + r.step_of[i]);  // unique per (row, step)
          top = std::max<int64_t>(top, r.step_of[i]);
        }
      seq_base += top + 1;
    }
    const int64_t n_tok = static_cast<int64_t>(old_lp.size());
    const at::Tensor old_t = at::tensor(old_lp, at::kDouble).reshape({1, n_tok});
    const at::Tensor behav_t = at::tensor(behav_lp, at::kDouble).reshape({1, n_tok});
    const at::Tensor seq_t = at::tensor(seq, at::kLong).reshape({1, n_tok});
    const algo::OffPolicyWeights w =
        algo::off_policy_weights(old_t, behav_t, at::ones({1, n_tok}, at::kDouble), seq_t, actor_.options().off_policy);
    for (const auto& kv : w.metrics) m[kv.first] = kv.second;
    m["timing/off_policy"] = seconds_since(t1);
  }
  m["batch/rows"] = static_cast<double>(rows.size());
  // Tokens the learner forwards per trajectory (rows x length, before any shared prefix):
  // the compute a context policy costs the learner.
  double row_tokens = 0;
  std::set<int64_t> trajectories;
  for (const auto& r : rows) {
    row_tokens += static_cast<double>(r.tokens.size());
    trajectories.insert(r.trajectory);
  }
  m["batch/row_tokens_per_trajectory"] = row_tokens / static_cast<double>(std::max<size_t>(1, trajectories.size()));
  m["batch/action_tokens"] = static_cast<double>(n);
  // Learner compute of the scoring passes, 2 x parameters x tokens each (a forward; the
  // teachers count their own in perf/teacher_gflop).
  const double p = static_cast<double>(actor_.policy()->config().num_parameters());
  const double passes = (bypass ? 0.0 : 1.0) + (has_reference() ? 1.0 : 0.0);
  double gflop = 2.0 * p * row_tokens * passes / 1e9;
  if (critic_) gflop += 2.0 * static_cast<double>(critic_->model()->body()->config().num_parameters()) * row_tokens / 1e9;
  m["perf/score_gflop"] = gflop;
  return m;
}

Metrics Learner::update(const std::vector<PackedRow>& rows, bool update_actor) {
  Metrics m;
  if (critic_) {
    const auto t0 = std::chrono::steady_clock::now();
    const Metrics cm = critic_->update(rows);
    m["timing/update_critic"] = seconds_since(t0);
    m.insert(cm.begin(), cm.end());
  }
  // Learner compute of the updates: 6 x parameters x tokens per epoch (forward and
  // backward), the usual estimate.
  double tokens = 0;
  for (const auto& r : rows) tokens += static_cast<double>(r.tokens.size());
  double gflop = 0;
  if (critic_)
    gflop += 6.0 * static_cast<double>(critic_->model()->body()->config().num_parameters()) * tokens *
             critic_->options().loop.ppo_epochs / 1e9;
  if (update_actor)
    gflop += 6.0 * static_cast<double>(actor_.policy()->config().num_parameters()) * tokens *
             actor_.options().loop.ppo_epochs / 1e9;
  m["perf/update_gflop"] = gflop;
  if (update_actor) {
    const auto t0 = std::chrono::steady_clock::now();
    const Metrics am = actor_.update(rows);
    m["timing/update_actor"] = seconds_since(t0);
    m.insert(am.begin(), am.end());
  }
  return m;
}

}  // namespace agentr1::train
