#include "agentr1/sft/sft.h"

#include <chrono>
#include <cmath>
#include <mutex>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/rng.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/device.h"
#include "agentr1/train/learner/scoring.h"

namespace agentr1::train {

void SftOptions::validate() const {
  optim.validate("sft.optim");
  AGENTR1_CHECK(epochs >= 1, "sft.epochs must be >= 1, got " << epochs);
  AGENTR1_CHECK(batch_size >= 1, "sft.batch_size must be >= 1, got " << batch_size);
  AGENTR1_CHECK(micro_batch_size >= 1, "sft.micro_batch_size must be >= 1, got " << micro_batch_size);
  AGENTR1_CHECK(min_shared_prefix >= 0, "sft.min_shared_prefix must be >= 0, got " << min_shared_prefix);
}

SftLearner::SftLearner(model::Transformer policy, const SftOptions& opts)
    : policy_(std::move(policy)), opts_(opts), device_(module_device(*policy_)),
      optim_(policy_->parameters(), opts.optim, "sft", /*max_consecutive_skips=*/5,
             "lower the SFT learning rate (agentr1 sft --lr) or keep gradient clipping on") {
  opts_.validate();
}

at::Tensor SftLearner::micro_batch_loss(const TrainBatch& b, const MicroBatchScale&, Metrics& m) {
  // logits: [B,T-1,V]; the NLL of every action token, averaged over this micro-batch's.
  const at::Tensor logits = batch_logits(*policy_, b);
  const at::Tensor logp_all = at::log_softmax(logits, /*dim=*/-1);
  const at::Tensor lp = logp_all.gather(/*dim=*/-1, b.targets.unsqueeze(-1)).squeeze(-1);  // [B,T-1]
  const double n = static_cast<double>(b.num_action_tokens);
  const at::Tensor hit = (logits.argmax(/*dim=*/-1) == b.targets).to(at::kFloat) * b.action_mask;
  m["sft/token_acc"] += hit.sum().item<double>() / n;
  return -(lp * b.action_mask).sum() / n;
}

Metrics SftLearner::step(const std::vector<PackedRow>& rows) {
  policy_->train();
  int64_t total = 0;
  for (const auto& r : rows) total += r.num_action_tokens();
  AGENTR1_CHECK(total > 0, "SFT step: no assistant tokens in the batch");
  UpdateLoopOptions u;
  u.epochs = 1;
  u.mini_batch_trajectories = 0;  // the step's rows are one optimiser step
  u.micro_batch_size = opts_.micro_batch_size;
  u.min_shared_prefix = opts_.min_shared_prefix;
  u.device = device_;
  LossSpec spec;
  spec.agg = algo::LossAgg::kTokenMean;
  spec.units = [](const PackedRow& r) { return static_cast<double>(r.num_action_tokens()); };
  Metrics m = run_update(rows, u, spec, optim_, [this](const TrainBatch& b, const MicroBatchScale& s, Metrics& mm) {
    return micro_batch_loss(b, s, mm);
  });
  Metrics out;
  // A skipped step (non-finite loss or gradient) reports NaN, not the 0 of an empty average.
  const bool applied = m["sft/updates"] > 0;
  out["sft/loss"] = applied ? m["sft/loss"] : std::nan("");
  out["sft/token_acc"] = applied ? m["sft/token_acc"] : std::nan("");
  out["sft/tokens"] = static_cast<double>(total);
  for (const char* k : {"sft/grad_norm", "sft/lr"})
    if (m.count(k)) out[k] = m[k];
  out["sft/skipped_updates"] = m["sft/skipped_updates"];
  return out;
}

namespace {

// Replays a fixed list of responses (token ids), one per request, in order.
class ScriptedGenerator : public Generator {
 public:
  ScriptedGenerator(std::vector<TokenIds> script, int max_context)
      : script_(std::move(script)), max_context_(max_context) {}
  std::future<GenResult> submit(GenRequest request) override {
    std::promise<GenResult> p;
    std::lock_guard<std::mutex> lock(mu_);
    AGENTR1_CHECK(next_ < script_.size(), "demonstration has " << script_.size()
                  << " actions but the environment asked for turn " << next_ + 1);
    GenResult r;
    r.token_ids = script_[next_++];
    AGENTR1_CHECK(static_cast<int>(r.token_ids.size()) <= request.sampling.max_new_tokens,
                  "demonstration action of " << r.token_ids.size() << " tokens exceeds the turn budget of "
                  << request.sampling.max_new_tokens << " (HINT: raise rollout.max_new_tokens)");
    r.logprobs.assign(r.token_ids.size(), 0.0f);
    r.finish = FinishReason::kStopToken;
    p.set_value(std::move(r));
    return p.get_future();
  }
  int max_context() const override { return max_context_; }
  size_t used() const { return next_; }

 private:
  std::mutex mu_;
  std::vector<TokenIds> script_;
  size_t next_ = 0;
  int max_context_;
};

}  // namespace

std::vector<Trajectory> demonstration_trajectories(const std::vector<json>& demos,
                                                   const flow::FlowContext& ctx,
                                                   const flow::FlowOptions& opts) {
  AGENTR1_CHECK(ctx.tokenizer != nullptr, "demonstration_trajectories needs a tokenizer");
  std::vector<Trajectory> out;
  out.reserve(demos.size());
  for (size_t i = 0; i < demos.size(); ++i) {
    with_context("demonstration " + std::to_string(i), [&] {
      const Sample sample = Sample::from_json(demos[i].at("sample"));
      std::vector<TokenIds> script;
      for (const auto& a : demos[i].at("actions")) script.push_back(ctx.tokenizer->encode(a.get<std::string>()));
      ScriptedGenerator gen(script, opts.max_prompt_tokens + opts.max_new_tokens);
      flow::FlowContext c = ctx;
      c.generator = &gen;
      auto flow = flow::make_flow_for(sample, opts);
      Trajectory t = flow->run(sample, c, opts, /*seed=*/i);
      AGENTR1_CHECK(gen.used() == script.size(), "the episode ended after " << gen.used() << " of "
                    << script.size() << " actions");
      t.uid = "demo:" + std::to_string(i);
      t.group = t.uid;
      out.push_back(std::move(t));
    });
  }
  return out;
}

SftResult run_sft(model::Transformer& policy, const std::vector<Trajectory>& trajs,
                  const SftOptions& opts, const std::function<void(const json&)>& metrics_sink) {
  opts.validate();
  AGENTR1_CHECK(!trajs.empty(), "SFT needs at least one demonstration");
  const auto t0 = std::chrono::steady_clock::now();
  SftLearner learner(policy, opts);
  std::vector<PackedRow> rows = pack_trajectories(trajs, /*merge_prefix_steps=*/true);
  SftResult res;
  Rng rng(static_cast<uint64_t>(opts.seed));
  for (int epoch = 0; epoch < opts.epochs; ++epoch) {
    std::vector<size_t> order = rng.permutation(rows.size());
    double loss_sum = 0, acc_sum = 0;
    int n = 0;
    for (size_t start = 0; start < order.size(); start += static_cast<size_t>(opts.batch_size)) {
      std::vector<PackedRow> batch;
      for (size_t k = start; k < std::min(order.size(), start + opts.batch_size); ++k) batch.push_back(rows[order[k]]);
      auto m = learner.step(batch);
      res.steps++;
      if (res.steps == 1) res.first_loss = m["sft/loss"];
      loss_sum += m["sft/loss"];
      acc_sum += m["sft/token_acc"];
      n++;
      m["sft/epoch"] = epoch;
      res.history.push_back(m);
      if (metrics_sink) {
        json j;
        j["step"] = res.steps;
        for (const auto& kv : m) j[kv.first] = kv.second;
        metrics_sink(j);
      }
      if (opts.log_every > 0 && res.steps % opts.log_every == 0) {
        AGENTR1_LOG(INFO) << "sft step " << res.steps << " epoch " << epoch + 1 << "/" << opts.epochs
                          << " loss " << m["sft/loss"] << " token acc " << m["sft/token_acc"];
      }
    }
    res.final_loss = loss_sum / std::max(1, n);
    res.final_token_acc = acc_sum / std::max(1, n);
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace agentr1::train
