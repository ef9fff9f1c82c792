#include "agentr1/env/agent_env.h"

#include <mutex>

#include "agentr1/core/registry.h"
#include "agentr1/env/tool_env.h"

namespace agentr1::env {
namespace {

using EnvRegistry = Registry<AgentEnv, const EnvContext&, const json&>;

// The registry with the built-in environments added on first use, so that a program
// never sees "unknown AgentEnv 'tool'" because nobody called a registration function
// (static initialisers in static libraries are dropped by the linker).
EnvRegistry& registry() {
  static std::once_flag once;
  std::call_once(once, [] {
    EnvRegistry::instance().add(
        "tool",
        [](const EnvContext& ctx, const json& kwargs) -> std::unique_ptr<AgentEnv> {
          return std::make_unique<ToolEnv>(ctx, ToolEnvOptions::from_json(kwargs));
        },
        "AgentEnv");
  });
  return EnvRegistry::instance();
}

}  // namespace

void register_env(const std::string& name, EnvFactory factory) {
  AGENTR1_CHECK(factory != nullptr, "register_env('" << name << "'): the factory is empty");
  registry().add(name, std::move(factory), "AgentEnv");
}

std::unique_ptr<AgentEnv> make_env(const std::string& name, const EnvContext& ctx,
                                   const json& kwargs) {
  auto env = registry().create(name, ctx, kwargs, "AgentEnv");
  AGENTR1_CHECK(env != nullptr, "the factory of AgentEnv '" << name << "' returned null");
  return env;
}

std::vector<std::string> env_names() { return registry().names(); }

}  // namespace agentr1::env
