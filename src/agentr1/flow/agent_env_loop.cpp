#include "agentr1/flow/agent_env_loop.h"


#include "agentr1/core/error.h"
#include "agentr1/core/latency.h"
#include "agentr1/core/rng.h"
#include "agentr1/env/agent_env.h"
#include "agentr1/flow/trajectory_builder.h"

namespace agentr1::flow {
namespace {
constexpr uint64_t kSeedEnvLatency = 0x656e766cULL;  // "envl"
}  // namespace

Trajectory AgentEnvLoop::run(const Sample& sample, const FlowContext& ctx, const FlowOptions& opts,
                             uint64_t seed) {
  TrajectoryBuilder b(ctx, opts, seed);
  env::EnvContext ectx;
  ectx.tokenizer = ctx.tokenizer;
  ectx.chat_template = ctx.chat_template;
  ectx.pool = ctx.tool_pool;
  ectx.render_options = &b.render_options();
  ectx.generator = ctx.generator;
  ectx.sampling = opts.sampling;
  for (TokenId id : ctx.stop_token_ids) ectx.sampling.stop_token_ids.push_back(id);
  ectx.seed = seed;
  const json kwargs = merge_env_kwargs(opts.env_kwargs, sample.env_kwargs);
  std::unique_ptr<env::AgentEnv> env = with_context(
      "env '" + env_name_ + "'", [&] { return env::make_env(env_name_, ectx, kwargs); });

  // Simulated env latency (rollout.env_latency_ms): its own stream, so it never changes
  // what the policy samples.
  const Latency latency = Latency::from_ms(opts.env_latency_ms, "rollout.env_latency_ms");
  Rng latency_rng(derive_seed(seed, {kSeedEnvLatency}));
  env::Observation obs = env->reset(sample);
  while (true) {
    std::optional<Step> step = b.generate(b.prompt_ids(obs));
    if (!step) break;  // a budget ended the trajectory
    if (b.aborted()) {  // the engine gave up on this request: nothing to show the env
      b.add(std::move(*step));
      break;
    }
    env::Action action{step->response_ids, step->response_text};
    env::StepResult r = env->step(action);
    latency.sleep(latency_rng);
    step->reward = r.reward;
    step->done = r.done;
    step->anchor = std::move(r.anchor);
    step->game_reward = r.game_reward;
    for (const auto& kv : r.info.items()) {
      AGENTR1_CHECK(!is_step_field_info_key(kv.key()),
                    "env '" << env_name_ << "' returned StepResult::info['" << kv.key()
                            << "'], the key of a typed Step field; set StepResult::anchor or "
                               "game_reward instead (info is only logged)");
      step->info[kv.key()] = kv.value();
    }
    b.add(std::move(*step));
    for (Step& side : r.side_steps) b.add(std::move(side));  // e.g. a trained summary
    if (r.done) break;
    obs = std::move(r.observation);
  }
  return b.finish(sample);
}

SampleChecker::SampleChecker(const FlowContext& ctx, const FlowOptions& opts) : ctx_(ctx), opts_(opts) {
  render_options_.enable_thinking = opts.enable_thinking;
}

void SampleChecker::check(const Sample& s) {
  const std::string agent = s.agent_name.empty() ? opts_.default_agent : s.agent_name;
  make_flow_for(s, opts_);        // an unknown agent lists the known flows and envs
  reward_fn_name_for(s, opts_);   // an unknown data_source lists the reward functions
  if (has_flow(agent)) return;
  const json kwargs = merge_env_kwargs(opts_.env_kwargs, s.env_kwargs);
  if (!seen_.insert(agent + "\n" + kwargs.dump()).second) return;
  env::EnvContext ectx;
  ectx.tokenizer = ctx_.tokenizer;
  ectx.chat_template = ctx_.chat_template;
  ectx.pool = ctx_.tool_pool;
  ectx.render_options = &render_options_;
  ectx.generator = ctx_.generator;
  ectx.sampling = opts_.sampling;
  with_context("env '" + agent + "' (rollout.env_kwargs merged with the row's env_kwargs)",
               [&] { return env::make_env(agent, ectx, kwargs); });
}

void check_env_setup(const std::vector<Sample>& samples, const FlowContext& ctx, const FlowOptions& opts,
                     const std::string& what) {
  SampleChecker checker(ctx, opts);
  for (size_t i = 0; i < samples.size(); ++i)
    with_context(what + " sample " + std::to_string(i), [&] {
      checker.check(samples[i]);
      return 0;
    });
}

}  // namespace agentr1::flow
