#include "agentr1/train/rl_trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "agentr1/algo/estimator.h"
#include "agentr1/algo/kl_controller.h"
#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/rng.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/flow/group_rollout.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/tasks/arithmetic.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/dataset.h"
#include "agentr1/text/chat_template.h"
#include "agentr1/text/tokenizer.h"
#include "agentr1/train/actor.h"
#include "agentr1/train/advantages.h"
#include "agentr1/train/batch.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/train/critic.h"
#include "agentr1/train/run_dir.h"

namespace agentr1::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string default_run_name(const std::string& estimator) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return estimator + "-" + buf;
}

bool step_level_values(const std::string& name) {
  return algo::make_estimator(name)->step_level_values();
}

std::vector<Sample> load_or_generate(const std::string& files, int64_t n, uint64_t seed,
                                     tasks::DataSplit split, const DataOptions& d) {
  if (!files.empty()) {
    tasks::JsonlReadOptions ro;
    ro.skip_bad_rows = d.skip_bad_rows;
    auto rows = tasks::load_jsonl(files, ro);
    AGENTR1_CHECK(!rows.empty(), "dataset '" << files << "' has no samples");
    return rows;
  }
  tasks::ArithDatasetOptions o;
  o.problem.min_level = d.min_level;
  o.problem.max_level = d.max_level;
  o.problem.split = split;
  o.prompt.use_system_prompt = d.use_system_prompt;
  return tasks::make_arith_dataset(n, seed, o);
}

}  // namespace

struct RLTrainer::State {
  TrainConfig cfg;
  json tree;
  std::string model_path;
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::unique_ptr<text::ChatTemplate> chat;
  model::Transformer policy{nullptr};
  model::Transformer reference{nullptr};
  std::unique_ptr<rollout::Engine> engine;
  std::unique_ptr<Actor> actor;
  std::unique_ptr<Critic> critic;                // gae / token_gae only
  std::unique_ptr<algo::KlController> kl_ctrl;   // algorithm.use_kl_in_reward only
  std::unique_ptr<ThreadPool> tool_pool;
  std::unique_ptr<ThreadPool> drivers;
  std::vector<Sample> train_set;
  std::vector<Sample> val_set;
  flow::FlowContext ctx;
  std::unique_ptr<RunDir> run;
};

RLTrainer::RLTrainer(TrainConfig cfg, json tree) : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.cfg = std::move(cfg);
  s.tree = std::move(tree);
  const TrainConfig& c = s.cfg;
  AGENTR1_CHECK(!c.model.path.empty(), "model.path is empty (the CLI resolves the built-in default)");
  s.model_path = c.model.path;
  tasks::register_builtin_tasks();
  s.tokenizer = std::make_unique<text::Tokenizer>(with_context(
      "loading tokenizer from '" + s.model_path + "'", [&] { return text::Tokenizer::load(s.model_path); }));
  s.chat = std::make_unique<text::ChatTemplate>(with_context(
      "chat template of '" + s.model_path + "'",
      [&] { return text::ChatTemplate::from_template_text(s.tokenizer->chat_template()); }));
  const at::ScalarType dtype = model::parse_dtype(c.model.dtype);
  s.policy = with_context("loading model from '" + s.model_path + "'", [&] {
    return model::load_pretrained(s.model_path, dtype, at::kCPU);
  });
  AGENTR1_CHECK(s.policy->config().vocab_size >= s.tokenizer->vocab_size(),
                "model vocab_size " << s.policy->config().vocab_size << " < tokenizer vocab size "
                                    << s.tokenizer->vocab_size());
  // The reference is the initial policy, frozen (KL loss and KL in the reward).
  if (c.actor.use_kl_loss || c.algorithm.use_kl_in_reward) {
    s.reference = model::load_pretrained(s.model_path, dtype, at::kCPU);
    for (auto& p : s.reference->parameters()) p.requires_grad_(false);
    s.reference->eval();
  }
  // Datasets: train and held-out from disjoint splits.
  s.train_set = load_or_generate(c.data.train_files, c.data.train_size, c.data.seed,
                                 tasks::DataSplit::kTrain, c.data);
  s.val_set = load_or_generate(c.data.val_files, c.data.val_size, c.data.seed + 1000003,
                               tasks::DataSplit::kTest, c.data);
  // Engine shares the policy module.
  rollout::EngineOptions eo;
  eo.max_batch = c.rollout.max_batch;
  eo.max_context = c.rollout.flow.max_prompt_tokens + c.rollout.flow.max_new_tokens;
  eo.prefix_cache = c.rollout.prefix_cache;
  const text::Tokenizer* tok = s.tokenizer.get();
  eo.detokenize = [tok](const TokenIds& ids) { return tok->decode(ids); };
  s.engine = std::make_unique<rollout::Engine>(s.policy, eo);
  ActorOptions ao = c.actor;
  ao.temperature = c.rollout.flow.sampling.temperature;  // score what the sampler drew from
  s.actor = std::make_unique<Actor>(s.policy, ao);
  if (c.algorithm.uses_critic()) {
    ValueModel vm = make_value_model(c.critic.model_path, s.policy, dtype);
    AGENTR1_CHECK(vm->body()->config().vocab_size >= s.tokenizer->vocab_size(),
                  "critic.model_path '" << c.critic.model_path << "': vocab_size " << vm->body()->config().vocab_size
                                        << " < the policy tokenizer's " << s.tokenizer->vocab_size());
    s.critic = std::make_unique<Critic>(vm, c.critic);
  }
  if (c.algorithm.use_kl_in_reward) s.kl_ctrl = algo::make_kl_controller(c.algorithm.kl_ctrl);
  s.tool_pool = std::make_unique<ThreadPool>(c.trainer.tool_threads);
  const int n_drivers = std::max(8, std::min(256, c.data.train_batch_size * c.rollout.n));
  s.drivers = std::make_unique<ThreadPool>(n_drivers);
  s.ctx.generator = s.engine.get();
  s.ctx.tokenizer = s.tokenizer.get();
  s.ctx.chat_template = s.chat.get();
  s.ctx.tool_pool = s.tool_pool.get();
  s.ctx.stop_token_ids = flow::default_stop_token_ids(*s.tokenizer);
  // Run directory.
  std::string dir = c.trainer.output_dir;
  if (dir.empty()) {
    const std::string name = c.trainer.run_name.empty() ? default_run_name(c.algorithm.adv_estimator)
                                                        : c.trainer.run_name;
    dir = "runs/" + name;
  }
  s.run = std::make_unique<RunDir>(dir);
}

RLTrainer::~RLTrainer() = default;

std::string format_before_after(const EvalResult& before, const EvalResult& after) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3);
  auto row = [&](const std::string& name, double a, double b) {
    os << "  " << std::left << std::setw(26) << name << std::right << std::setw(10) << a
       << std::setw(10) << b << std::setw(10) << std::showpos << (b - a) << std::noshowpos << "\n";
  };
  os << "  " << std::left << std::setw(26) << "metric" << std::right << std::setw(10) << "before"
     << std::setw(10) << "after" << std::setw(10) << "delta" << "\n";
  row("greedy success", before.greedy_success, after.greedy_success);
  if (before.k > 0 && after.k > 0) row("mean@" + std::to_string(after.k) + " success", before.mean_at_k, after.mean_at_k);
  if (before.k > 0 && after.k > 0) row("pass@" + std::to_string(after.k), before.pass_at_k, after.pass_at_k);
  row("greedy reward", before.greedy_reward, after.greedy_reward);
  row("tool use (greedy)", before.greedy_tool_use, after.greedy_tool_use);
  row("tool calls / traj", before.mean_tool_calls, after.mean_tool_calls);
  row("turns / traj", before.mean_turns, after.mean_turns);
  row("response tokens / traj", before.mean_response_length, after.mean_response_length);
  return os.str();
}

RunSummary RLTrainer::run(bool resume) {
  State& s = *s_;
  const TrainConfig& c = s.cfg;
  const auto t_run = Clock::now();
  RunSummary summary;
  summary.run_dir = s.run->path();
  s.run->write_text("config.yaml", to_yaml(s.tree));

  int64_t start_step = 0;
  json summary_json = json::object();
  if (resume) {
    auto ck = latest_checkpoint(s.run->file("checkpoints"));
    AGENTR1_CHECK(ck.has_value(), "--resume: no checkpoint under '" << s.run->file("checkpoints")
                                  << "' (HINT: run without --resume, or point trainer.output_dir at the run)");
    json state;
    start_step = load_checkpoint(*ck, s.policy, *s.actor, s.critic.get(), &state);
    if (s.kl_ctrl && state.contains("kl_coef")) {
      algo::KlControllerOptions ko = c.algorithm.kl_ctrl;
      ko.kl_coef = state["kl_coef"].get<double>();
      s.kl_ctrl = algo::make_kl_controller(ko);
    }
    s.engine->clear_prefix_cache();
    s.engine->set_policy_version(start_step);
    if (fs::exists(s.run->file("summary.json")))
      summary_json = json::parse(read_text_file(s.run->file("summary.json")));
    AGENTR1_LOG(INFO) << "resumed from " << *ck << " at step " << start_step;
  }

  auto validate = [&](int64_t step) {
    EvalResult r = evaluate(s.val_set, s.ctx, c.rollout.flow, c.rollout.val_k, c.rollout.val_temperature,
                            static_cast<uint64_t>(c.trainer.seed) * 7919 + 17, *s.drivers);
    s.run->append_jsonl("metrics.jsonl", metrics_json(step, r.metrics()));
    for (size_t i = 0; i < r.greedy_trajectories.size() && i < 16; ++i) {
      json j = r.greedy_trajectories[i].to_json();
      j["sample"] = s.val_set[i].to_json();
      s.run->append_jsonl("trajectories/val_" + step_name(step) + ".jsonl", j);
    }
    AGENTR1_LOG(INFO) << "validation @ step " << step << ": greedy success " << r.greedy_success
                      << ", mean@" << r.k << " " << r.mean_at_k << ", tool use " << r.greedy_tool_use
                      << " (" << r.num_prompts << " prompts, " << std::fixed << std::setprecision(1)
                      << r.wall_s << " s)";
    return r;
  };

  // On resume the run's original baseline stays in summary.json; the validation at the
  // resume point is logged to metrics.jsonl like any other.
  EvalResult baseline = validate(start_step);
  if (!summary_json.contains("baseline")) summary_json["baseline"] = baseline.to_json();
  summary_json["baseline_step"] = start_step;
  s.run->write_json("summary.json", summary_json);

  const int64_t total = c.trainer.total_steps;
  const int64_t bs = c.data.train_batch_size;
  const int64_t n_train = static_cast<int64_t>(s.train_set.size());
  std::vector<size_t> order;
  int64_t order_epoch = -1;
  double step_time_ema = 0;
  for (int64_t step = start_step + 1; step <= total; ++step) {
    const auto t_step = Clock::now();
    std::map<std::string, double> m;
    // 1. Prompts (deterministic per step: epoch permutation + offset).
    std::vector<Sample> prompts;
    for (int64_t i = 0; i < bs; ++i) {
      const int64_t flat = (step - 1) * bs + i;
      const int64_t epoch = flat / n_train;
      if (epoch != order_epoch) {
        Rng rng(derive_seed(static_cast<uint64_t>(c.data.seed), {0x5eed, static_cast<uint64_t>(epoch)}));
        order = rng.permutation(static_cast<size_t>(n_train));
        order_epoch = epoch;
      }
      prompts.push_back(s.train_set[order[static_cast<size_t>(flat % n_train)]]);
    }
    // 2. Rollouts.
    auto t0 = Clock::now();
    s.engine->reset_stats();
    std::vector<Trajectory> trajs = flow::run_group_rollouts(
        prompts, c.rollout.n, s.ctx, c.rollout.flow,
        derive_seed(static_cast<uint64_t>(c.trainer.seed), {static_cast<uint64_t>(step)}), *s.drivers);
    m["timing/gen"] = seconds_since(t0);
    const auto es = s.engine->stats();
    m["rollout/prefix_reuse_rate"] = es.prefix_reuse_rate();
    m["rollout/mean_decode_batch"] = es.mean_decode_batch();
    m["rollout/generated_tokens"] = static_cast<double>(es.generated_tokens);
    m["perf/gen_tokens_per_s"] = es.generated_tokens / std::max(1e-9, m["timing/gen"]);
    // 3. Pack and score: old (and reference) log-probs, critic values.
    std::vector<float> scores;
    for (const auto& t : trajs) scores.push_back(t.total_reward());
    t0 = Clock::now();
    StepTokenValues zeros(trajs.size());
    for (size_t i = 0; i < trajs.size(); ++i)
      for (const Step& st : trajs[i].steps) zeros[i].emplace_back(st.response_ids.size(), 0.0f);
    std::vector<PackedRow> rows = pack_trajectory_tokens(trajs, zeros, c.actor.merge_prefix_steps);
    s.actor->fill_logprobs(rows, &PackedRow::old_logprob);
    m["timing/old_log_prob"] = seconds_since(t0);
    if (s.reference) {
      t0 = Clock::now();
      ActorOptions ro = c.actor;
      ro.temperature = c.rollout.flow.sampling.temperature;
      Actor ref(s.reference, ro);
      ref.fill_logprobs(rows, &PackedRow::ref_logprob);
      m["timing/ref"] = seconds_since(t0);
    }
    StepTokenValues values, token_kl;
    AdvantageInputs in;
    if (s.critic) {
      t0 = Clock::now();
      s.critic->fill_values(rows);
      values = gather_step_tokens(rows, trajs, &PackedRow::value);
      in.values = &values;
      m["timing/values"] = seconds_since(t0);
    }
    if (s.kl_ctrl) {
      token_kl = reward_token_kl(rows, trajs, c.algorithm.kl_penalty_type);
      in.token_kl = &token_kl;
      in.kl_coef = s.kl_ctrl->value();
    }
    // 4. Advantages (and returns, the critic's targets).
    t0 = Clock::now();
    AdvantageResult est = estimate_advantages(trajs, c.algorithm, in);
    m["timing/adv"] = seconds_since(t0);
    for (const auto& kv : est.metrics) m[kv.first] = kv.second;
    const StepTokenValues& token_adv = est.advantages;
    scatter_step_tokens(rows, token_adv, &PackedRow::advantage);
    std::vector<float> adv(trajs.size(), 0.0f);  // per trajectory: mean over its tokens (dumps)
    for (size_t i = 0; i < trajs.size(); ++i) {
      double sum = 0;
      size_t n = 0;
      for (const auto& st : token_adv[i])
        for (float a : st) sum += a, ++n;
      adv[i] = n > 0 ? static_cast<float>(sum / n) : 0.0f;
    }
    if (s.kl_ctrl) s.kl_ctrl->update(est.mean_kl, static_cast<int64_t>(trajs.size()));
    // Rollout-vs-learner log-prob agreement (exactness check on the same weights).
    double lp_diff = 0;
    int64_t lp_n = 0;
    for (const auto& r : rows)
      for (size_t i = 0; i < r.tokens.size(); ++i)
        if (r.action[i]) {
          lp_diff = std::max<double>(lp_diff, std::abs(r.old_logprob[i] - r.rollout_logprob[i]));
          lp_n++;
        }
    m["rollout/logprob_max_diff"] = lp_diff;
    // 5. Update: the critic, then (after trainer.critic_warmup steps) the actor.
    if (s.critic) {
      t0 = Clock::now();
      scatter_step_tokens(rows, est.returns, &PackedRow::returns);
      set_value_mask(rows, step_level_values(c.algorithm.adv_estimator));
      std::map<std::string, double> cm = s.critic->update(rows);
      m["timing/update_critic"] = seconds_since(t0);
      m.insert(cm.begin(), cm.end());
    }
    if (step > c.trainer.critic_warmup) {
      t0 = Clock::now();
      // The engine shares the weights: hold it paused while they change.
      std::map<std::string, double> um;
      s.engine->with_model([&](model::Transformer&) { um = s.actor->update(rows); });
      m["timing/update_actor"] = seconds_since(t0);
      m.insert(um.begin(), um.end());
    }
    s.engine->clear_prefix_cache();
    s.engine->set_policy_version(step);
    // 6. Metrics (verl-style names).
    double sum = 0, mx = -1e30, mn = 1e30;
    for (float x : scores) {
      sum += x;
      mx = std::max<double>(mx, x);
      mn = std::min<double>(mn, x);
    }
    m["critic/score/mean"] = sum / scores.size();
    m["critic/score/max"] = mx;
    m["critic/score/min"] = mn;
    double rsum = 0;
    for (double r : est.rewards) rsum += r;
    m["critic/rewards/mean"] = rsum / static_cast<double>(std::max<size_t>(est.rewards.size(), 1));
    auto tm = mean_trajectory_metrics(trajs);
    for (const auto& kv : tm) m["env/" + kv.first + "/mean"] = kv.second;
    m["response_length/mean"] = tm["response_length"];
    m["env/success/mean"] = tm["success"];
    m["batch/rows"] = static_cast<double>(rows.size());
    m["batch/action_tokens"] = static_cast<double>(lp_n);
    m["timing/step"] = seconds_since(t_step);
    // 7. Trajectory dumps.
    const int dump = c.trainer.dump_trajectories;
    const bool step_level = s.critic && step_level_values(c.algorithm.adv_estimator);
    for (size_t i = 0; i < trajs.size() && (dump < 0 || static_cast<int>(i) < dump); ++i) {
      json j = trajs[i].to_json();
      j["advantage"] = adv[i];
      j["score"] = scores[i];
      for (auto& st : j["steps"]) {
        st["response_text"] = s.tokenizer->decode(st["response_ids"].get<TokenIds>());
      }
      if (s.kl_ctrl) j["reward"] = est.rewards[i];  // score - kl_coef * sum(token_kl)
      for (size_t k = 0; k < j["steps"].size(); ++k) {
        json& st = j["steps"][k];
        st["advantage"] = token_adv[i][k];
        // Audit columns: per action token, or per step (one V(s_t)) for step-level gae.
        const bool per_step = step_level && !token_adv[i][k].empty();
        if (per_step) {
          st["advantages"] = token_adv[i][k].front();
          st["returns"] = est.returns[i][k].front();
          st["values"] = values[i][k].front();
        } else {
          st["advantages"] = token_adv[i][k];
          st["returns"] = est.returns[i][k];
          if (s.critic) st["values"] = values[i][k];
        }
        if (s.kl_ctrl) st["token_kl"] = token_kl[i][k];
      }
      if (!j["steps"].empty())
        j["steps"][0]["prompt_text"] = s.tokenizer->decode(j["steps"][0]["prompt_ids"].get<TokenIds>());
      s.run->append_jsonl("trajectories/" + step_name(step) + ".jsonl", j);
    }
    // 8. Validation and checkpoints.
    if (c.trainer.test_freq > 0 && step % c.trainer.test_freq == 0 && step != total) {
      EvalResult r = validate(step);
      for (const auto& kv : r.metrics()) m[kv.first] = kv.second;
    }
    if ((c.trainer.save_freq > 0 && step % c.trainer.save_freq == 0) || step == total)
      save_checkpoint(s.run->file("checkpoints/" + step_name(step)), step, s.policy, *s.actor,
                      s.model_path, s.critic.get(),
                      s.kl_ctrl ? json{{"kl_coef", s.kl_ctrl->value()}} : json::object());
    s.run->append_jsonl("metrics.jsonl", metrics_json(step, m));
    summary.steps = step;
    const double dt = seconds_since(t_step);
    step_time_ema = step_time_ema == 0 ? dt : 0.7 * step_time_ema + 0.3 * dt;
    if (c.trainer.progress) {
      const double eta = step_time_ema * static_cast<double>(total - step);
      AGENTR1_LOG(INFO) << "step " << step << "/" << total << "  reward " << std::fixed
                        << std::setprecision(3) << m["critic/score/mean"] << "  success "
                        << tm["success"] << "  tool calls " << tm["tool_calls"] << "  len "
                        << std::setprecision(1) << tm["response_length"] << "  pg_loss "
                        << std::setprecision(4) << m["actor/pg_loss"] << "  "
                        << std::setprecision(1) << dt << " s/step  ETA " << eta << " s";
    }
  }
  EvalResult final_eval = validate(total);
  summary.baseline = baseline;
  summary.final_eval = final_eval;
  summary.wall_s = seconds_since(t_run);
  summary_json["final"] = final_eval.to_json();
  summary_json["steps"] = total;
  summary_json["run_dir"] = s.run->path();
  summary_json["wall_s"] = summary.wall_s;
  s.run->write_json("summary.json", summary_json);
  return summary;
}

}  // namespace agentr1::train
