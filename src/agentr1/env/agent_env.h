// agentr1/env/agent_env.h — a stateful environment, stepped once per policy turn.
//
//   std::unique_ptr<AgentEnv> env = make_env("tool", ctx, sample.env_kwargs);
//   Observation obs = env->reset(sample);
//   while (...) { StepResult r = env->step(action); if (r.done) break; obs = r.observation; }
//
// Register with register_env("name", factory); make_env with an unknown name fails
// listing the known names. kwargs are the flow defaults merged with the sample's
// env_kwargs (the sample wins), as in Agent-R1.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/env/observation.h"

namespace agentr1::text {
class Tokenizer;
class ChatTemplate;
struct RenderOptions;
}  // namespace agentr1::text

namespace agentr1 {
class ThreadPool;
}

namespace agentr1::env {

// What environments may use; owned by the caller (the flow), outlives the env.
struct EnvContext {
  const text::Tokenizer* tokenizer = nullptr;      // for token-exact observations
  const text::ChatTemplate* chat_template = nullptr;
  ThreadPool* pool = nullptr;                      // for tool execution; null = inline
  const text::RenderOptions* render_options = nullptr;  // chat template options (e.g.
                                                   // enable_thinking); null = defaults
  Generator* generator = nullptr;                  // the policy's generator, for envs and
                                                   // context policies that call the model
                                                   // (summarize); null = none
  SamplingParams sampling;                         // the rollout's sampling (temperature,
                                                   // stop ids) for such calls
  uint64_t seed = 0;                               // the trajectory's seed (derive per call)
};

class AgentEnv {
 public:
  virtual ~AgentEnv() = default;
  virtual std::string name() const = 0;
  // Starts an episode for `sample`; returns the first prompt.
  virtual Observation reset(const Sample& sample) = 0;
  // Applies the policy's response. Must not throw for anything the policy can cause
  // (malformed output is feedback); throws Error only for programming/config errors.
  //
  // The response's text is action.text (see Action); an env does not decode action.ids.
  //
  // StepResult::anchor (optional, "" = none): the raw environment state the action was
  // taken in — the observation the env produced before this step, not the whole
  // prompt; "<start>" or the intro at the first step. GiGPO
  // (algorithm.adv_estimator=gigpo) groups the steps of one prompt's trajectories whose
  // anchors are equal; a step without one is never grouped. GameEnv uses the game's
  // text observation, ToolEnv the previous turn's tool responses. It becomes
  // Step::anchor (info "anchor" in trajectory dumps).
  virtual StepResult step(const Action& action) = 0;
};

using EnvFactory = std::function<std::unique_ptr<AgentEnv>(const EnvContext&, const json& kwargs)>;

// Throws Error if `name` is already registered.
void register_env(const std::string& name, EnvFactory factory);
// Throws Error listing the known names when `name` is unknown.
std::unique_ptr<AgentEnv> make_env(const std::string& name, const EnvContext& ctx,
                                   const json& kwargs);
std::vector<std::string> env_names();

}  // namespace agentr1::env
