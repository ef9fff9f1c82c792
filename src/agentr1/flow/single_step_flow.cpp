#include "agentr1/flow/single_step_flow.h"

#include "agentr1/flow/trajectory_builder.h"

namespace agentr1::flow {

Trajectory SingleStepFlow::run(const Sample& sample, const FlowContext& ctx,
                               const FlowOptions& opts, uint64_t seed) {
  TrajectoryBuilder b(ctx, opts, seed);
  std::optional<Step> step = b.generate(b.prompt_ids(env::Observation::from_messages(sample.prompt)));
  if (step) {
    if (!b.aborted()) step->done = true;
    b.add(std::move(*step));
  }
  return b.finish(sample);
}

}  // namespace agentr1::flow
