#include "agentr1/flow/agent_flow.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "agentr1/core/error.h"
#include "agentr1/core/latency.h"
#include "agentr1/core/registry.h"
#include "agentr1/core/strings.h"
#include "agentr1/env/agent_env.h"
#include "agentr1/flow/agent_env_loop.h"
#include "agentr1/flow/single_step_flow.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::flow {
namespace {

using FlowRegistry = Registry<AgentFlow>;

// The registry with the built-in flows added on first use.
FlowRegistry& registry() {
  static std::once_flag once;
  std::call_once(once, [] {
    FlowRegistry::instance().add(
        "single_step", [] { return std::make_unique<SingleStepFlow>(); }, "AgentFlow");
  });
  return FlowRegistry::instance();
}

// "a, b", or "(none)" when there is nothing to list.
std::string list_or_none(const std::vector<std::string>& v) {
  const std::string out = join(v, ", ");
  return out.empty() ? "(none)" : out;
}

}  // namespace

void FlowContext::validate() const {
  AGENTR1_CHECK(generator != nullptr, "FlowContext.generator is null; set it to the engine");
  AGENTR1_CHECK(tokenizer != nullptr, "FlowContext.tokenizer is null");
  AGENTR1_CHECK(chat_template != nullptr, "FlowContext.chat_template is null");
}

TokenIds default_stop_token_ids(const text::Tokenizer& tokenizer) {
  TokenIds ids;
  auto add = [&](std::optional<TokenId> id) {
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  };
  add(tokenizer.token_to_id("<|im_end|>"));
  add(tokenizer.eos_token_id());
  add(tokenizer.token_to_id("<|endoftext|>"));
  return ids;
}

void FlowOptions::validate() const {
  AGENTR1_CHECK(max_steps >= 1, "flow option max_steps must be >= 1, got " << max_steps);
  AGENTR1_CHECK(max_new_tokens >= 1,
                "flow option max_new_tokens must be >= 1, got " << max_new_tokens);
  AGENTR1_CHECK(max_response_tokens >= 1,
                "flow option max_response_tokens must be >= 1, got " << max_response_tokens);
  AGENTR1_CHECK(max_prompt_tokens >= 1,
                "flow option max_prompt_tokens must be >= 1, got " << max_prompt_tokens);
  AGENTR1_CHECK(std::isfinite(sampling.temperature) && sampling.temperature >= 0,
                "flow option temperature must be >= 0 (0 = greedy), got " << sampling.temperature);
  AGENTR1_CHECK(sampling.top_p > 0 && sampling.top_p <= 1,
                "flow option top_p must be in (0, 1], got " << sampling.top_p);
  AGENTR1_CHECK(sampling.top_k >= 0, "flow option top_k must be >= 0 (0 disables), got "
                                         << sampling.top_k);
  AGENTR1_CHECK(!default_agent.empty(),
                "flow option default_agent is empty; name a flow or an env (e.g. tool)");
  AGENTR1_CHECK(env_kwargs.is_object(),
                "flow option env_kwargs must be an object, got " << env_kwargs.dump().substr(0, 80));
  AGENTR1_CHECK(reward_kwargs.is_object(), "flow option reward_kwargs must be an object, got "
                                               << reward_kwargs.dump().substr(0, 80));
  Latency::from_ms(env_latency_ms, "flow option env_latency_ms");
}

json merge_env_kwargs(const json& defaults, const json& sample_kwargs) {
  json out = defaults.is_null() ? json::object() : defaults;
  AGENTR1_CHECK(out.is_object(), "env_kwargs defaults must be an object, got "
                                     << defaults.dump().substr(0, 80));
  if (sample_kwargs.is_null()) return out;
  AGENTR1_CHECK(sample_kwargs.is_object(), "a sample's env_kwargs must be an object, got "
                                               << sample_kwargs.dump().substr(0, 80));
  for (const auto& kv : sample_kwargs.items()) out[kv.key()] = kv.value();
  return out;
}

void register_flow(const std::string& name, FlowFactory factory) {
  AGENTR1_CHECK(factory != nullptr, "register_flow('" << name << "'): the factory is empty");
  registry().add(name, std::move(factory), "AgentFlow");
}

std::unique_ptr<AgentFlow> make_flow(const std::string& name) {
  auto flow = registry().create(name, "AgentFlow");
  AGENTR1_CHECK(flow != nullptr, "the factory of AgentFlow '" << name << "' returned null");
  return flow;
}

bool has_flow(const std::string& name) { return registry().contains(name); }

std::vector<std::string> flow_names() { return registry().names(); }

std::unique_ptr<AgentFlow> make_flow_for(const Sample& sample, const FlowOptions& opts) {
  const std::string agent = sample.agent_name.empty() ? opts.default_agent : sample.agent_name;
  if (has_flow(agent)) return make_flow(agent);
  const std::vector<std::string> envs = env::env_names();
  if (std::find(envs.begin(), envs.end(), agent) != envs.end())
    return std::make_unique<AgentEnvLoop>(agent);
  throw Error("unknown agent '" + agent + "' (" +
              (sample.agent_name.empty() ? "flow option default_agent" : "the sample's agent_name") +
              "); known flows: " + list_or_none(flow_names()) + "; known envs (run by the env loop): " +
              list_or_none(envs));
}

}  // namespace agentr1::flow
