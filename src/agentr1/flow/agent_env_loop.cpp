#include "agentr1/flow/agent_env_loop.h"

#include <set>

#include "agentr1/core/error.h"
#include "agentr1/env/agent_env.h"
#include "agentr1/flow/trajectory_builder.h"
#include "agentr1/text/tokenizer.h"

namespace agentr1::flow {

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

  env::Observation obs = env->reset(sample);
  while (true) {
    std::optional<Step> step = b.generate(b.prompt_ids(obs));
    if (!step) break;  // a budget ended the trajectory
    if (b.aborted()) {  // the engine gave up on this request: nothing to show the env
      b.add(std::move(*step));
      break;
    }
    env::Action action{step->response_ids, ctx.tokenizer->decode(step->response_ids)};
    env::StepResult r = env->step(action);
    step->reward = r.reward;
    step->done = r.done;
    for (const auto& kv : r.info.items()) step->info[kv.key()] = kv.value();
    b.add(std::move(*step));
    for (Step& side : r.side_steps) b.add(std::move(side));  // e.g. a trained summary
    if (r.done) break;
    obs = std::move(r.observation);
  }
  return b.finish(sample);
}

void check_env_setup(const std::vector<Sample>& samples, const FlowContext& ctx, const FlowOptions& opts,
                     const std::string& what) {
  text::RenderOptions ro;
  ro.enable_thinking = opts.enable_thinking;
  env::EnvContext ectx;
  ectx.tokenizer = ctx.tokenizer;
  ectx.chat_template = ctx.chat_template;
  ectx.pool = ctx.tool_pool;
  ectx.render_options = &ro;
  ectx.generator = ctx.generator;
  ectx.sampling = opts.sampling;
  std::set<std::string> seen;
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    const std::string agent = s.agent_name.empty() ? opts.default_agent : s.agent_name;
    if (has_flow(agent)) continue;
    const std::string where = what + " sample " + std::to_string(i);
    const json kwargs = with_context(where, [&] { return merge_env_kwargs(opts.env_kwargs, s.env_kwargs); });
    if (!seen.insert(agent + "\n" + kwargs.dump()).second) continue;
    with_context(where + ": env '" + agent + "' (rollout.env_kwargs merged with the row's env_kwargs)", [&] {
      make_flow_for(s, opts);  // an unknown agent lists the known flows and envs
      return env::make_env(agent, ectx, kwargs);
    });
  }
}

}  // namespace agentr1::flow
