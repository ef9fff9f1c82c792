// agentr1/flow/agent_env_loop.h — the generic loop over an AgentEnv:
// reset -> (generate -> env.step)* until the env is done or a budget ends it.
//
//   AgentEnvLoop loop("tool");                       // any registered AgentEnv
//   Trajectory t = loop.run(sample, ctx, opts, seed);
//
// Per run: env = make_env(name, {tokenizer, chat_template, tool_pool, render options},
// merge_env_kwargs(opts.env_kwargs, sample.env_kwargs)); obs = env->reset(sample); then
// each turn generates from the observation's prompt ids (TrajectoryBuilder: budgets,
// seeds), hands Action{ids, Step::response_text} (the text decoded once by the builder)
// to env->step, and records the Step with the env's reward, done, anchor, game_reward
// and info (plus the builder's finish and info "turn", "max_new_tokens"). The outcome
// reward and metrics come from TrajectoryBuilder::finish.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "agentr1/flow/agent_flow.h"
#include "agentr1/text/jinja/chat_template.h"

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

// Start-up check of one sample: its agent resolves (make_flow_for), its reward function
// resolves (reward_fn_name_for), and for an env agent the env is constructed with the
// merged env kwargs as a run would construct it (options, tools, context policy),
// without running it. Throws Error with the env's own message (the key and the rule).
// One construction per distinct (env, kwargs): `seen` remembers them across calls.
class SampleChecker {
 public:
  SampleChecker(const FlowContext& ctx, const FlowOptions& opts);
  void check(const Sample& sample);

 private:
  const FlowContext& ctx_;
  const FlowOptions& opts_;
  text::RenderOptions render_options_;
  std::set<std::string> seen_;
};

// Start-up check of a data set: for every distinct (env, merged env kwargs) among the
// samples (SampleChecker::check on each). `what` names the data set in errors, e.g. "the
// training set". Throws Error with the first failing sample's index and the check's
// message, so a bad rollout.env_kwargs or dataset row fails before the first rollout.
void check_env_setup(const std::vector<Sample>& samples, const FlowContext& ctx, const FlowOptions& opts,
                     const std::string& what);

}  // namespace agentr1::flow
