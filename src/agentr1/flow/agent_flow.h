// agentr1/flow/agent_flow.h — an agent flow turns one Sample into one Trajectory by
// asking a Generator for responses. No torch here.
//
//   FlowContext ctx;
//   ctx.generator = &engine; ctx.tokenizer = &tok; ctx.chat_template = &tmpl;
//   ctx.tool_pool = &tool_pool;
//   ctx.stop_token_ids = default_stop_token_ids(tok);     // <|im_end|>, eos
//   FlowOptions opts;                                     // budgets, sampling, agent
//   std::unique_ptr<AgentFlow> flow = make_flow_for(sample, opts);
//   Trajectory t = flow->run(sample, ctx, opts, /*seed=*/derive_seed(run_seed, {i}));
//   // or, for a whole batch: run_group_rollouts (group_rollout.h)
//
// Which flow runs a sample (make_flow_for): the agent name is sample.agent_name, or
// opts.default_agent when that is empty. A registered flow of that name runs it
// ("single_step", or your own register_flow); otherwise a registered AgentEnv of that
// name runs in the generic AgentEnvLoop ("tool" = ToolEnv); otherwise Error listing
// both kinds of names.
//
// Layers (Agent-R1's): AgentFlow (full control, returns steps) > AgentEnvLoop (reset ->
// (generate -> env.step)* until done or max_steps) > AgentEnv > ToolEnv > Tool.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"

namespace agentr1::text {
class Tokenizer;
class ChatTemplate;
}  // namespace agentr1::text

namespace agentr1 {
class ThreadPool;
}

namespace agentr1::flow {

// What flows use; owned by the caller, outlives every run.
struct FlowContext {
  Generator* generator = nullptr;                  // where responses come from (thread-safe)
  const text::Tokenizer* tokenizer = nullptr;      // decode responses, encode text prompts
  const text::ChatTemplate* chat_template = nullptr;  // render message prompts
  ThreadPool* tool_pool = nullptr;                 // tool execution; null = inline (no
                                                   // timeouts). Must not be the pool that
                                                   // runs the flows themselves.
  TokenIds stop_token_ids;                         // end a turn (e.g. <|im_end|>, eos); added
                                                   // to FlowOptions.sampling.stop_token_ids
  uint64_t affinity_key = 0;                       // GenRequest.affinity_key of every turn;
                                                   // run_trajectory sets it per sample (the
                                                   // group), so a group stays on one server

  // Throws Error naming the missing member (generator, tokenizer, chat_template).
  void validate() const;
};

// <|im_end|> and the tokenizer's eos token (and <|endoftext|>), those that exist.
TokenIds default_stop_token_ids(const text::Tokenizer& tokenizer);

struct FlowOptions {
  int max_steps = 4;               // most policy turns per trajectory; >= 1. Reaching it
                                   // without the env ending the episode truncates
  int max_new_tokens = 256;        // generation cap of one turn; >= 1
  int max_response_tokens = 1024;  // response tokens of all turns of one trajectory; >= 1.
                                   // Each turn gets min(max_new_tokens, what is left);
                                   // none left and not done -> truncated
  int max_prompt_tokens = 2048;    // context window for one turn's prompt; >= 1. A longer
                                   // prompt ends the trajectory truncated ("context_overflow")
  SamplingParams sampling;         // temperature, top_p, top_k, stop ids/strings; its
                                   // max_new_tokens and seed are set per turn
  std::string default_agent = "tool";  // agent (flow or env name) for samples whose
                                       // agent_name is empty
  json env_kwargs = json::object();    // env kwargs defaults; a sample's env_kwargs
                                       // override them key by key
  std::string reward_fn = "";      // outcome reward function (tasks::make_reward_fn);
                                   // "" = the sample's data_source, else its reward style
  json reward_kwargs = json::object();  // kwargs for make_reward_fn
  bool enable_thinking = true;     // chat template option (Qwen3: false appends an empty
                                   // think block to the generation prompt)
  float success_threshold = 1.0f;  // outcome_reward >= this counts as success in metrics
  std::vector<double> env_latency_ms;  // simulated latency of every env step (core/latency.h):
                                       // [] none, [ms] fixed, [lo, hi] uniform; the driver
                                       // sleeps after env.step, other trajectories go on

  // Names every field once (core/config.h's bind_config; rollout.* keys).
  template <class V>
  void visit(V& v) {
    v.field("max_steps", max_steps, "most policy turns per trajectory");
    v.field("max_new_tokens", max_new_tokens, "generation cap of one turn");
    v.field("max_response_tokens", max_response_tokens,
            "response tokens of all turns of one trajectory");
    v.field("max_prompt_tokens", max_prompt_tokens, "context window for one turn's prompt");
    v.field("temperature", sampling.temperature, "sampling temperature; 0 = greedy");
    v.field("top_p", sampling.top_p, "nucleus mass in (0, 1]; 1 disables");
    v.field("top_k", sampling.top_k, "keep the k most likely tokens; 0 disables");
    v.field("stop_strings", sampling.stop_strings, "finish a turn once its text contains one");
    v.field("default_agent", default_agent, "agent for samples without agent_name");
    v.field("env_kwargs", env_kwargs, "env kwargs defaults (samples override per key)");
    v.field("reward_fn", reward_fn, "outcome reward function; empty = by data_source");
    v.field("reward_kwargs", reward_kwargs, "kwargs for the reward function");
    v.field("enable_thinking", enable_thinking, "chat template enable_thinking");
    v.field("success_threshold", success_threshold, "outcome reward counted as success");
    v.field("env_latency_ms", env_latency_ms,
            "simulated env-step latency: [] none, [ms] fixed, [lo, hi] uniform (ms)");
  }
  // Throws Error naming the field, the rule and the value.
  void validate() const;
};

// flow defaults merged with the sample's env_kwargs (the sample wins per top-level key).
json merge_env_kwargs(const json& defaults, const json& sample_kwargs);

class AgentFlow {
 public:
  virtual ~AgentFlow() = default;
  virtual std::string name() const = 0;
  // Runs one trajectory of `sample`. `seed` is this trajectory's seed: every turn's
  // SamplingParams.seed derives from it (so the result does not depend on scheduling).
  // Returns the steps, outcome_reward and metrics; uid/group are left for the caller.
  // Throws Error for configuration or programming errors only; whatever the policy
  // writes is an observation. Runs concurrently with other runs of other objects.
  virtual Trajectory run(const Sample& sample, const FlowContext& ctx, const FlowOptions& opts,
                         uint64_t seed) = 0;
};

using FlowFactory = std::function<std::unique_ptr<AgentFlow>()>;

// Throws Error if `name` is empty or already registered ("single_step" is built in).
void register_flow(const std::string& name, FlowFactory factory);
// Throws Error listing the known names when `name` is unknown.
std::unique_ptr<AgentFlow> make_flow(const std::string& name);
bool has_flow(const std::string& name);
std::vector<std::string> flow_names();

// The flow for `sample` (see the top of this file). Throws Error listing the known flow
// and env names when the agent name is neither.
std::unique_ptr<AgentFlow> make_flow_for(const Sample& sample, const FlowOptions& opts);

}  // namespace agentr1::flow
