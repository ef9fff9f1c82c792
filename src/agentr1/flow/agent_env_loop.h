// agentr1/flow/agent_env_loop.h — the generic loop over an AgentEnv:
// reset -> (generate -> env.step)* until the env is done or a budget ends it.
//
//   AgentEnvLoop loop("tool");                       // any registered AgentEnv
//   Trajectory t = loop.run(sample, ctx, opts, seed);
//
// Per run: env = make_env(name, {tokenizer, chat_template, tool_pool, render options},
// merge_env_kwargs(opts.env_kwargs, sample.env_kwargs)); obs = env->reset(sample); then
// each turn generates from the observation's prompt ids (TrajectoryBuilder: budgets,
// seeds), hands Action{ids, decode(ids)} to env->step, and records the Step with the
// env's reward, done and info (plus "turn", "finish_reason", "max_new_tokens"). The
// outcome reward and metrics come from TrajectoryBuilder::finish.
#pragma once

#include <string>
#include <vector>

#include "agentr1/flow/agent_flow.h"

namespace agentr1::flow {

class AgentEnvLoop : public AgentFlow {
 public:
  explicit AgentEnvLoop(std::string env_name) : env_name_(std::move(env_name)) {}
  std::string name() const override { return "env_loop:" + env_name_; }
  // Throws Error for an unknown env or invalid env kwargs (with the sample's context).
  Trajectory run(const Sample& sample, const FlowContext& ctx, const FlowOptions& opts,
                 uint64_t seed) override;

 private:
  std::string env_name_;
};

// Start-up check of a data set: for every distinct (env, merged env kwargs) among the
// samples that an env loop runs (make_flow_for's rule; registered flows are skipped), the
// env is constructed as a run would construct it (options, tools, context policy), without
// running it. `what` names the data set in errors, e.g. "data.train". Throws Error with
// the first failing sample's index, the env and the env's own message (the key and the
// rule), so a bad rollout.env_kwargs or dataset row fails before the first rollout.
void check_env_setup(const std::vector<Sample>& samples, const FlowContext& ctx, const FlowOptions& opts,
                     const std::string& what);

}  // namespace agentr1::flow
