#include "agentr1/flow/agent_env_loop.h"

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

}  // namespace agentr1::flow
