// agentr1/flow/single_step_flow.h — one prompt, one response, one reward.
//
//   SingleStepFlow flow;                    // registered as AgentFlow "single_step"
//   Trajectory t = flow.run(sample, ctx, opts, seed);
//
// The prompt is render(sample.prompt, no tools, add_generation_prompt=true) encoded with
// special tokens; one generation capped by min(max_new_tokens, max_response_tokens,
// context left); the Step is done with reward 0; the outcome reward is the reward
// function on the response text. A prompt over max_prompt_tokens gives a trajectory
// with no steps, truncated, context_overflow = 1.
#pragma once

#include "agentr1/flow/agent_flow.h"

namespace agentr1::flow {

class SingleStepFlow : public AgentFlow {
 public:
  std::string name() const override { return "single_step"; }
  Trajectory run(const Sample& sample, const FlowContext& ctx, const FlowOptions& opts,
                 uint64_t seed) override;
};

}  // namespace agentr1::flow
