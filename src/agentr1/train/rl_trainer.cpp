#include "agentr1/train/rl_trainer.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/timing.h"
#include "agentr1/flow/agent_env_loop.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/rollout/remote_generator.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/rollout/async_rollout_source.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/learner/metrics.h"
#include "agentr1/train/device.h"
#include "agentr1/train/memory_budget.h"

namespace agentr1::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string default_run_name(const std::string& estimator) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return estimator + "-" + buf;
}

// "2 servers (http://a:8000, http://b:8000), api openai, model 'm'"
std::string ro_summary(const rollout::RemoteGenerator& g) {
  const rollout::RemoteOptions& o = g.options();
  std::string urls;
  for (const auto& u : o.urls) urls += (urls.empty() ? "" : ", ") + u;
  return std::to_string(o.urls.size()) + (o.urls.size() == 1 ? " server (" : " servers (") + urls + "), api " +
         o.api + (g.model_name().empty() ? "" : ", model '" + g.model_name() + "'");
}

}  // namespace

RLTrainer::RLTrainer(TrainConfig cfg, json tree)
    : cfg_(std::move(cfg)), tree_(std::move(tree)), device_(parse_device(cfg_.trainer.device)) {
  const TrainConfig& c = cfg_;
  require_device_available(device_);
  // trainer.threads applies to library users too (the CLI sets it before anything runs;
  // 0 = leave the process's setting). Results depend on it: BLAS splits work by thread.
  if (c.trainer.threads > 0 && at::get_num_threads() != c.trainer.threads) at::set_num_threads(c.trainer.threads);
  if (c.trainer.threads == 0) {
    max_threads_ = at::get_num_threads();
    if (max_threads_ > 1) free_cores_ = std::make_unique<core::FreeCores>();
  }
  // Data parallelism: one rank of several when launched so (torchrun's environment).
  if (const std::optional<DistEnv> env = dist_env_from_environment(); env && env->world_size > 1) {
    AGENTR1_CHECK(device_.is_cpu(), "data parallelism runs on Gloo (CPU) in this build; trainer.device="
                                        << c.trainer.device << " needs NCCL. HINT: trainer.device=cpu");
    AGENTR1_CHECK(!c.rollout.asynchronous(),
                  "rollout.max_staleness=" << c.rollout.max_staleness << " (asynchronous rollout) with "
                      << env->world_size << " data-parallel ranks is not supported yet; HINT: "
                      "rollout.max_staleness=0, or one process");
    pg_ = std::make_unique<ProcessGroup>(*env, c.trainer.dist.timeout_s);
    writer_ = pg_->rank() == 0;
  }
  AGENTR1_CHECK(!c.model.path.empty(), "model.path is empty (the CLI resolves the built-in default)");
  const std::string& path = c.model.path;
  tasks::register_builtin_tasks();
  // Model side: tokenizer, template, policy (+ frozen reference), engine, pools.
  tokenizer_ = std::make_unique<text::Tokenizer>(
      with_context("loading tokenizer from '" + path + "'", [&] { return text::Tokenizer::load(path); }));
  chat_ = std::make_unique<text::ChatTemplate>(with_context(
      "chat template of '" + path + "'", [&] { return text::ChatTemplate::from_tokenizer(*tokenizer_); }));
  const at::ScalarType dtype = model::parse_dtype(c.model.dtype);
  auto load = [&] {
    return with_context("loading model from '" + path + "'", [&] { return model::load_pretrained(path, dtype, device_); });
  };
  // Memory: the run's estimate against trainer.memory_gb (or the machine) from config.json,
  // before any weights load, so a configuration that cannot fit stops here naming its
  // biggest items and the keys that shrink them instead of being killed mid-step. The KV
  // cache gets what the rest leaves. On an accelerator the models live in its memory, which
  // this does not model.
  // Positions first (config.json alone): a context the model cannot hold is the error to
  // report, not the memory it would take.
  const int64_t max_pos =
      with_context("model config of '" + path + "'", [&] {
        return model::ModelConfig::load((fs::path(path) / "config.json").string());
      }).max_position_embeddings;
  AGENTR1_CHECK(c.rollout.flow.max_prompt_tokens + c.rollout.flow.max_new_tokens <= max_pos,
                "rollout.max_prompt_tokens (" << c.rollout.flow.max_prompt_tokens << ") + rollout.max_new_tokens ("
                    << c.rollout.flow.max_new_tokens << ") = "
                    << c.rollout.flow.max_prompt_tokens + c.rollout.flow.max_new_tokens
                    << " exceeds the model's max_position_embeddings (" << max_pos
                    << "); HINT: set rollout.max_prompt_tokens=" << max_pos - c.rollout.flow.max_new_tokens
                    << " or lower");
  std::optional<MemoryPlan> memory;
  if (device_.is_cpu()) {
    memory = plan_run_memory(c);
    log_memory_plan(*memory);
    check_memory_plan(*memory);
  }
  policy_ = load();
  AGENTR1_CHECK(policy_->config().vocab_size >= tokenizer_->vocab_size(),
                "model vocab_size " << policy_->config().vocab_size << " < tokenizer vocab size "
                                    << tokenizer_->vocab_size());
  // LoRA: adapters before any engine copies the policy; only they train.
  if (c.actor.lora.enabled()) policy_->add_lora(c.actor.lora, static_cast<uint64_t>(c.trainer.seed));
  model::Transformer reference{nullptr};  // the initial policy, frozen (KL loss, KL in the reward)
  if ((c.actor.use_kl_loss || c.algorithm.use_kl_in_reward) && c.actor.lora.enabled()) {
    reference = policy_;  // its base, adapters off while scoring: no second copy of the weights
  } else if (c.actor.use_kl_loss || c.algorithm.use_kl_in_reward) {
    reference = load();
    for (auto& p : reference->parameters()) p.requires_grad_(false);
    reference->eval();
    // The same attention as the policy's: at step 0 their log-probs are then the same bits
    // and the KL exactly 0 (tiles and the dense softmax differ in the last place).
    reference->set_attention_block(c.actor.attention_block);
  }
  rollout::EngineOptions eo;
  eo.max_batch = c.rollout.max_batch;
  eo.max_context = c.rollout.flow.max_prompt_tokens + c.rollout.flow.max_new_tokens;
  eo.prefix_cache = c.rollout.prefix_cache;
  eo.batch_invariant = c.rollout.batch_invariant;
  eo.huge_pages = c.rollout.huge_pages;
  eo.packed_decode = c.rollout.packed_decode;
  eo.block_size = c.rollout.kv_block_size;
  eo.n_blocks = memory ? memory->kv_blocks : c.rollout.kv_blocks;
  const text::Tokenizer* tok = tokenizer_.get();
  eo.detokenize = [tok](const TokenIds& ids) { return tok->decode(ids); };
  // rollout.engine=remote: the servers generate (rollouts and validation), so there is no
  // in-process engine; they are checked now (an unreachable one fails naming its URL).
  // Under data parallelism every rank has its own client of the same servers.
  std::unique_ptr<rollout::RemoteGenerator> remote;
  if (c.rollout.remote_engine()) {
    rollout::RemoteOptions ro = c.rollout.remote.client;
    ro.max_context = eo.max_context;
    remote = with_context("rollout.engine=remote", [&] { return std::make_unique<rollout::RemoteGenerator>(ro); });
  } else {
    engine_ = std::make_unique<rollout::Engine>(policy_, eo);  // shares the policy module
  }
  tool_pool_ = std::make_unique<ThreadPool>(c.trainer.tool_threads);
  // Drivers mostly wait on the engine or on tools; an asynchronous source keeps up to
  // max_staleness + 1 steps of trajectories in flight, beside a validation.
  const int per_step = c.data.train_batch_size * c.rollout.n;
  const int in_flight = c.rollout.asynchronous() ? per_step * (c.rollout.max_staleness + 1) + 64 : per_step;
  drivers_ = std::make_unique<ThreadPool>(std::max(8, std::min(c.rollout.asynchronous() ? 1024 : 256, in_flight)));
  ctx_.generator = remote ? static_cast<Generator*>(remote.get()) : engine_.get();
  ctx_.tokenizer = tokenizer_.get();
  ctx_.chat_template = chat_.get();
  ctx_.tool_pool = tool_pool_.get();
  ctx_.stop_token_ids = flow::default_stop_token_ids(*tokenizer_);
  // Data: the task family generates what no file gives.
  const auto family = with_context("data.task", [&] { return tasks::make_task_family(c.data.task, c.data.task_kwargs); });
  // Every row's agent, env options (rollout.env_kwargs and its own), tools, context
  // policy and reward function are checked here, before any rollout: rows read from
  // files with file:line (skipped under data.skip_bad_rows), generated ones by index.
  flow::SampleChecker checker(ctx_, c.rollout.flow);
  RunDatasets data = load_datasets(c.data, *family, [&](const Sample& s) { checker.check(s); });
  if (c.data.train_files.empty()) flow::check_env_setup(data.train, ctx_, c.rollout.flow, "the training set");
  if (c.data.val_files.empty()) flow::check_env_setup(data.val, ctx_, c.rollout.flow, "the validation set");
  AGENTR1_CHECK(!data.train.empty() && !data.val.empty(),
                "no " << (data.train.empty() ? "training" : "validation")
                      << " samples left after skipping bad rows (data.skip_bad_rows); fix the rows");
  val_set_ = std::move(data.val);
  std::string dir = c.trainer.output_dir;
  if (dir.empty())
    dir = "runs/" + (c.trainer.run_name.empty() ? default_run_name(c.algorithm.adv_estimator) : c.trainer.run_name);
  if (pg_) dir = pg_->all_gather_bytes(dir, "run directory")[0];  // a timestamped name: rank 0's
  run_dir_existed_ = fs::exists(dir);
  run_dir_ = std::make_unique<RunDir>(dir, /*create=*/false);  // run() creates it
  // The phases.
  prompts_ = std::make_unique<PromptSource>(std::move(data.train), c.data.train_batch_size,
                                            static_cast<uint64_t>(c.data.seed));
  // Rollouts: a scheduler (sync | async) over a backend (the in-process engine, a copy of
  // it, or the remote servers; train/rollout/rollout_backend.h).
  std::unique_ptr<RolloutBackend> backend;
  std::optional<at::ScalarType> rollout_dtype;
  if (!c.rollout.dtype.empty() && model::parse_dtype(c.rollout.dtype) != dtype)
    rollout_dtype = model::parse_dtype(c.rollout.dtype);
  if (remote) {
    const std::string wdir = c.rollout.remote.weights_dir.empty() ? run_dir_->file("remote_weights")
                                                                  : c.rollout.remote.weights_dir;
    AGENTR1_LOG(INFO) << "remote rollout: " << ro_summary(*remote) << "; weights handed over in " << wdir;
    auto rb = std::make_unique<RemoteBackend>(std::move(remote), WeightPusher(policy_, dtype, wdir, path));
    if (!c.rollout.asynchronous()) rb->set_process_group(pg_.get());
    backend = std::move(rb);
  } else if (c.rollout.asynchronous()) {
    // Its own engine over a copy of the weights; engine_ (sharing the policy) stays for
    // validation.
    rollout::EngineOptions aeo = eo;
    aeo.threads = c.rollout.engine_threads;
    aeo.nice = c.rollout.engine_nice;
    backend = std::make_unique<EngineCopyBackend>(policy_, aeo, rollout_dtype);
  } else if (rollout_dtype) {
    // rollout.dtype differs from the learner's: rollouts on a converted copy, updated
    // every step; validation stays on engine_ (the learner's weights as they are).
    AGENTR1_LOG(INFO) << "rollout engine: a " << c.rollout.dtype << " copy of the " << c.model.dtype
                      << " policy (validation uses the policy's own weights)";
    backend = std::make_unique<EngineCopyBackend>(policy_, eo, rollout_dtype);
  } else {
    backend = std::make_unique<SharedEngineBackend>(*engine_);
  }
  if (c.rollout.asynchronous()) {
    AsyncRolloutOptions ao;
    ao.max_staleness = c.rollout.max_staleness;
    ao.partial_rollout = c.rollout.partial_rollout;
    ao.prefer_fresh = c.rollout.prefer_fresh;
    AGENTR1_LOG(INFO) << "asynchronous rollout on " << backend->describe() << ": max_staleness " << ao.max_staleness
                      << ", partial rollouts " << (ao.partial_rollout ? "allowed" : "forbidden")
                      << ", off-policy correction " << c.actor.off_policy.method;
    rollout_ = std::make_unique<AsyncRolloutSource>(std::move(backend), ctx_, c.rollout.flow, c.rollout.n,
                                                    c.data.train_batch_size, static_cast<uint64_t>(c.trainer.seed),
                                                    *prompts_, *drivers_, ao);
  } else {
    backend_ = std::move(backend);
    flow::FlowContext rctx = ctx_;
    rctx.generator = &backend_->generator();  // engine_ itself, or the converted copy's engine
    auto sync = std::make_unique<SyncRolloutSource>(*backend_, rctx, c.rollout.flow, c.rollout.n,
                                                    static_cast<uint64_t>(c.trainer.seed), *prompts_, *drivers_);
    sync->set_process_group(pg_.get());
    rollout_ = std::move(sync);
  }
  advantages_ = std::make_unique<AdvantagePhase>(c.algorithm);
  std::unique_ptr<Critic> critic;
  if (advantages_->needs_values()) {
    ValueModel vm = make_value_model(c.critic.model_path, policy_, dtype, device_, c.critic.lora);
    vm->body()->set_attention_block(c.actor.attention_block);  // every learner model attends alike
    AGENTR1_CHECK(vm->body()->config().vocab_size >= tokenizer_->vocab_size(),
                  "critic.model_path '" << c.critic.model_path << "': vocab_size " << vm->body()->config().vocab_size
                                        << " < the policy tokenizer's " << tokenizer_->vocab_size());
    critic = std::make_unique<Critic>(vm, c.critic);
    critic->set_base_model(c.critic.model_path.empty() ? path : c.critic.model_path);
  }
  ActorOptions ao = c.actor;
  ao.temperature = c.rollout.flow.sampling.temperature;  // score what the sampler drew from
  if (rollout_dtype && ao.use_rollout_logprobs) {
    // The engine's log-probs are the bf16 copy's, not the learner's: pi_old is scored by
    // the learner (as verl recomputes old_log_prob), so the ratio starts at 1.
    AGENTR1_LOG(INFO) << "rollout.dtype=" << c.rollout.dtype << " under model.dtype=" << c.model.dtype
                      << ": old log-probs come from a scoring pass (actor.use_rollout_logprobs off)";
    ao.use_rollout_logprobs = false;
  }
  const DistillSection& distill = c.algorithm.distill;
  if (distill.enabled() && distill.options.kind == algo::DistillLoss::kTopkFkl) {
    ao.distill_topk = distill.options;
  }
  learner_ = std::make_unique<Learner>(policy_, reference, std::move(critic), ao, device_);
  learner_->set_process_group(pg_.get());
  // Online policy distillation: the teachers score every step's rows in the learner's
  // scoring phase; k1_pg's reward enters the advantages (AdvantagePhase), topk_fkl's loss
  // the actor's.
  if (distill.enabled()) {
    auto teachers = with_context("algorithm.distill", [&] {
      return std::make_unique<TeacherSet>(distill, *tokenizer_, policy_, dtype, device_, c.actor.attention_block);
    });
    AGENTR1_LOG(INFO) << "online policy distillation: loss " << distill.options.loss << ", coef "
                      << distill.options.coef << (distill.options.use_task_rewards ? ", plus" : ", without")
                      << " the task's advantages, " << teachers->routing().names().size() << " teacher(s)";
    learner_->set_teachers(std::move(teachers));
  }
  const LoggerSinks sinks = c.trainer.logger_sinks();
  logger_ = std::make_unique<StepLogger>(*run_dir_, *tokenizer_, c.trainer.dump_trajectories,
                                         sinks.console && c.trainer.progress, sinks.tensorboard);
  health_ = std::make_unique<HealthMonitor>(c.trainer.health);
  checkpointer_ = std::make_unique<Checkpointer>(run_dir_->file("checkpoints"), path, policy_,
                                                 learner_->actor().optimizer(), learner_->critic());
}

RLTrainer::~RLTrainer() = default;

EvalResult RLTrainer::validate(int64_t step) {
  // Remote servers: validation generates through the rollout's backend, so first it must
  // hold the learner's weights, as the in-process engine_ does (asynchronous: the producer
  // may not have loaded them yet; synchronous: it does already).
  if (cfg_.rollout.remote_engine()) rollout_->wait_weights_loaded();
  const EvalResult r = evaluate(val_set_, ctx_, cfg_.rollout.flow, cfg_.rollout.val_k, cfg_.rollout.val_temperature,
                                static_cast<uint64_t>(cfg_.trainer.seed) * 7919 + 17, *drivers_, pg_.get());
  if (writer_) logger_->validation(step, r, val_set_);
  return r;
}

void RLTrainer::save_checkpoint(int64_t step) {
  if (writer_)
    checkpointer_->save(step, advantages_->kl_in_reward() ? json{{"kl_coef", advantages_->kl_coef()}} : json::object());
  if (pg_) pg_->barrier("checkpoint of step " + std::to_string(step) + " written");
}

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

RunSummary RLTrainer::run(RunMode mode) {
  const bool holds_run = run_dir_->has_run();
  // Every rank looks before rank 0 writes anything.
  if (pg_) pg_->barrier("run directory checked");
  if (mode == RunMode::kFresh && holds_run)
    throw Error("run directory '" + run_dir_->path() + "' already holds a run (metrics.jsonl, summary.json or "
                "checkpoints/); a second run would mix its logs with the first's. HINT: --resume to continue "
                "it, --overwrite to start it over, or another trainer.output_dir / trainer.run_name");
  json summary_json = json::object();
  bool started = false;
  int64_t step = 0;
  try {
    return run_steps(mode, summary_json, &started, &step);
  } catch (const StopRequested&) {
    throw;
  } catch (const std::exception& e) {
    const std::string dir = run_dir_->path();
    if (!writer_) throw;  // rank 0 records the failure
    if (!started && mode != RunMode::kResume) {
      // Nothing worth keeping was written: leave the directory as this run found it.
      run_dir_->clear_run();
      std::error_code ec;
      if (!run_dir_existed_) fs::remove_all(dir, ec);
      AGENTR1_LOG(INFO) << "start-up failed; removed what this run had written in " << dir;
      throw;
    }
    if (!started) throw;  // a resume that failed before training left the run as it was
    summary_json["failed"] = {{"step", step}, {"error", e.what()}};
    try {
      run_dir_->write_json("summary.json", summary_json);
    } catch (const std::exception&) {
      // the original error matters more
    }
    const std::optional<std::string> last = latest_checkpoint(checkpointer_->dir());
    std::string hint = last ? "fix the cause, then the same command with --resume continues from " + *last
                            : "no checkpoint was written (trainer.save_freq), so --resume cannot "
                              "continue; fix the cause, then the same command with --overwrite starts over";
    throw Error(std::string(e.what()) + "\n  the run stopped in step " + std::to_string(step) +
                "; its logs are kept in " + dir + " (summary.json records the failure). HINT: " + hint);
  }
}

RunSummary RLTrainer::run_steps(RunMode mode, json& summary_json, bool* started, int64_t* step_out) {
  const TrainConfig& c = cfg_;
  const auto t_run = Clock::now();
  RunSummary summary;
  summary.run_dir = run_dir_->path();
  if (writer_) {
    make_dirs(run_dir_->path());
    if (mode == RunMode::kOverwrite) {
      AGENTR1_LOG(INFO) << "overwrite: removing the earlier run in " << run_dir_->path();
      run_dir_->clear_run();
    }
    run_dir_->write_text("config.yaml", to_yaml(tree_));
  }

  int64_t start_step = 0;
  EvalResult baseline;
  bool have_baseline = false;
  if (mode == RunMode::kResume) {
    std::optional<Checkpointer::Restored> r;
    rollout_->with_weights_exclusive([&] { r = checkpointer_->restore_latest(); });
    AGENTR1_CHECK(r.has_value(), "--resume: no checkpoint under '" << checkpointer_->dir()
                  << "' (HINT: run without --resume, or point trainer.output_dir at the run)");
    start_step = r->step;
    if (r->state.contains("kl_coef")) advantages_->set_kl_coef(r->state["kl_coef"].get<double>());
    rollout_->push_weights(start_step);
    if (fs::exists(run_dir_->file("summary.json")))
      summary_json = json::parse(read_text_file(run_dir_->file("summary.json")), nullptr, false);
    if (!summary_json.is_object()) summary_json = json::object();
    // Every rank has read the checkpoint and summary before rank 0 changes the run.
    if (pg_) pg_->barrier("checkpoint read");
    // What the interrupted run logged after its checkpoint is redone below.
    if (writer_) {
      const size_t lines = run_dir_->cut_jsonl_after("metrics.jsonl", start_step);
      const size_t dumps = run_dir_->cut_dumps_after(start_step);
      logger_->resumed(start_step);
      AGENTR1_LOG(INFO) << "resumed from " << r->dir << " at step " << start_step << " (cut " << lines
                        << " metrics lines and " << dumps << " dump files logged after it)";
    }
    if (summary_json.contains("baseline")) {
      baseline = EvalResult::from_json(summary_json["baseline"]);
      have_baseline = true;
    }
    if (start_step >= c.trainer.total_steps && summary_json.contains("final") &&
        summary_json.value("steps", int64_t{-1}) == start_step) {
      AGENTR1_LOG(INFO) << "the run is complete at step " << start_step
                        << " (raise trainer.total_steps to train on)";
      summary.baseline = EvalResult::from_json(summary_json.value("baseline", json::object()));
      summary.final_eval = EvalResult::from_json(summary_json["final"]);
      summary.steps = start_step;
      summary.wall_s = seconds_since(t_run);
      return summary;
    }
    summary_json.erase("final");  // written again when this run ends
    summary_json.erase("failed");  // an earlier failure this resume goes past
  }
  // The servers start from the learner's weights, whatever they loaded before (a resume
  // pushed the checkpoint's above).
  if (mode != RunMode::kResume && c.rollout.remote_engine()) rollout_->push_weights(0);
  if (!have_baseline) {
    baseline = validate(start_step);
    summary_json["baseline"] = baseline.to_json();
    summary_json["baseline_step"] = start_step;
  }
  if (writer_) run_dir_->write_json("summary.json", summary_json);
  *started = true;

  const int64_t total = c.trainer.total_steps;
  const DumpColumns dump_columns{advantages_->needs_values(), advantages_->step_level_values(),
                                 advantages_->kl_in_reward(),
                                 /*learner_logprobs=*/!learner_->actor().options().bypass_scoring()};
  // Steps in a row whose trajectories all failed for infrastructure reasons.
  constexpr int kMaxStepsWithoutRows = 3;
  int steps_without_rows = 0;
  for (int64_t step = start_step + 1; step <= total; ++step) {
    *step_out = step;
    const auto t_step = Clock::now();
    Metrics m;
    // 0. Threads: the cores other processes left free over the last step.
    if (free_cores_) {
      const int n = free_cores_->threads(max_threads_);
      if (n != at::get_num_threads()) {
        AGENTR1_LOG(DEBUG) << "threads: " << at::get_num_threads() << " -> " << n << " (other processes use "
                           << free_cores_->others_busy().value_or(0) << " cores)";
        at::set_num_threads(n);
        if (engine_) engine_->set_threads(n);
      }
      m["perf/threads"] = n;
    }
    // 1. Prompts and rollouts.
    RolloutBatch batch = rollout_->collect(step);
    // Trajectories the infrastructure failed (a tool's server or sandbox, the reward
    // service) are no evidence about the policy: left out of their groups, counted.
    // A group left with one member has no baseline: that member is left out too.
    const InfraSplit infra = take_infra_failures(batch.trajectories);
    m["env/infra_failures"] = static_cast<double>(infra.failed.size());
    m["env/infra_orphans"] = static_cast<double>(infra.orphaned.size());
    if (!infra.failed.empty()) {
      AGENTR1_LOG(WARN) << "step " << step << ": " << infra.failed.size() << " of "
                        << infra.failed.size() + infra.orphaned.size() + batch.trajectories.size()
                        << " trajectories failed for infrastructure reasons (not the model's) and are left out of "
                           "training, with "
                        << infra.orphaned.size() << " left alone in their group; the first: "
                        << infra.failed.front().infra_failure;
    }
    const std::vector<Trajectory>& trajs = batch.trajectories;
    merge_into(m, batch.metrics);
    // 2. Pack, then score: old (and reference) log-probs, critic values.
    std::vector<PackedRow> rows = pack_trajectories(trajs, c.actor.merge_prefix_steps);
    AdvantagePhase::Output adv;
    if (!trajs.empty()) {
      merge_into(m, learner_->score(rows));
      // 3. Advantages (and returns, the critic's targets; the KL coefficient's update).
      auto t0 = Clock::now();
      adv = advantages_->compute(trajs, rows);
      m["timing/adv"] = seconds_since(t0);
      merge_into(m, adv.result.metrics);
      // 4. Update: the critic, then (after trainer.critic_warmup steps) the actor; then
      //    later rollouts use the new weights.
      rollout_->with_weights_exclusive(
          [&] { merge_into(m, learner_->update(rows, step > c.trainer.critic_warmup)); });
    } else {
      // A run whose infrastructure fails every trajectory trains nothing: say so and stop
      // rather than write checkpoints of an unchanged policy.
      AGENTR1_CHECK(++steps_without_rows < kMaxStepsWithoutRows,
                    "every trajectory of the last " << kMaxStepsWithoutRows
                        << " steps failed for infrastructure reasons, so nothing was trained (step " << step
                        << "); the first failure of this step: " << infra.failed.front().infra_failure
                        << ". HINT: fix what the message names (a tool's server or sandbox, the reward service: "
                           "docs/sandbox.md, docs/mcp.md), then resume with --resume");
      AGENTR1_LOG(WARN) << "step " << step << ": every trajectory failed for infrastructure reasons; no update ("
                        << steps_without_rows << " such steps in a row; the run stops at " << kMaxStepsWithoutRows
                        << ")";
    }
    if (!trajs.empty()) steps_without_rows = 0;
    rollout_->push_weights(step);
    m["perf/learner_gflop"] = m["perf/score_gflop"] + m["perf/update_gflop"] + m["perf/teacher_gflop"];
    // 5. Metrics, dumps, validation, checkpoint.
    merge_into(m, rollout_metrics(trajs, adv.result));
    if (pg_) {
      // Every rank computed the batch-wide values over the whole batch; what differs
      // per rank (timings, its engine's counters) is combined.
      if (c.trainer.dist.check_freq > 0 && step % c.trainer.dist.check_freq == 0) {
        const auto t0c = Clock::now();
        check_same_parameters(policy_->parameters(), *pg_, "policy parameters after step " + std::to_string(step));
        if (learner_->critic() != nullptr)
          check_same_parameters(learner_->critic()->model()->parameters(), *pg_,
                                "critic parameters after step " + std::to_string(step));
        m["timing/dist_check"] = seconds_since(t0c);
      }
      m["timing/step"] = seconds_since(t_step);
      // Summed: counts of this rank's own work (the teachers score each rank's rows).
      std::vector<std::string> sums{"rollout/generated_tokens", "perf/gen_tokens_per_s", "remote/requests",
                                    "remote/retries", "remote/unknown_logprobs", "perf/teacher_gflop"};
      if (const TeacherSet* t = learner_->teachers())
        for (const std::string& name : t->routing().names()) sums.push_back("distill/rows/" + name);
      m = reduce_metrics(m, sums, *pg_, "step metrics");
      m["perf/learner_gflop"] = m["perf/score_gflop"] + m["perf/update_gflop"] + m["perf/teacher_gflop"];
      m["dist/world_size"] = pg_->world_size();
    } else {
      m["timing/step"] = seconds_since(t_step);
    }
    if (writer_) {
      logger_->dump_step(step, trajs, rows, adv, dump_columns);
      logger_->dump_excluded(step, infra.failed, "");
      logger_->dump_excluded(step, infra.orphaned,
                             "the rest of its group failed for infrastructure reasons: no baseline");
    }
    // The validation writes its own line (val/* metrics); the step line keeps the step's.
    if (c.trainer.test_freq > 0 && step % c.trainer.test_freq == 0 && step != total) validate(step);
    const std::vector<std::string> unhealthy = health_->check(step, m);
    // Logged before the checkpoint: a resume cuts what comes after its checkpoint, so a
    // crash in between costs the step, never its line.
    if (writer_) {
      logger_->metrics(step, m);
      logger_->progress(step, total, m, seconds_since(t_step));
    }
    bool signalled = stop_flag_ != nullptr && stop_flag_->load() != 0;
    // A signal reaches the ranks at different moments: all stop at the same step.
    if (pg_) signalled = pg_->all_reduce_max(signalled ? 1.0 : 0.0, "stop request") > 0;
    const bool health_stop = health_->should_stop(unhealthy);
    const bool stop = (signalled || health_stop) && step < total;
    if ((c.trainer.save_freq > 0 && step % c.trainer.save_freq == 0) || step == total || stop) save_checkpoint(step);
    summary.steps = step;
    if (stop) {
      std::string why = "stopped";
      if (health_stop) {
        why = "health monitor";
        for (const auto& u : unhealthy) why += " " + u;
        why += " (trainer.health.stop_on) stopped the run";
      }
      throw StopRequested(why + " at step " + std::to_string(step) + " of " + std::to_string(total) +
                              " (checkpoint saved in " + checkpointer_->dir() + "/" + step_name(step) +
                              "); resume with the same command and --resume (trainer.output_dir=" +
                              run_dir_->path() + ")",
                          step);
    }
  }
  const EvalResult final_eval = validate(total);
  summary.baseline = baseline;
  summary.final_eval = final_eval;
  summary.wall_s = seconds_since(t_run);
  summary_json["final"] = final_eval.to_json();
  summary_json["steps"] = total;
  summary_json["run_dir"] = run_dir_->path();
  summary_json["wall_s"] = summary.wall_s;
  if (writer_) run_dir_->write_json("summary.json", summary_json);
  return summary;
}

}  // namespace agentr1::train
