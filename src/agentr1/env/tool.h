// agentr1/env/tool.h — one executable tool the policy can call.
//
//   class Calculator : public Tool {
//     std::string name() const override { return "calculator"; }
//     std::string description() const override { return "Evaluates + - * / ( )"; }
//     json parameters() const override { return {{"type","object"}, ...}; }
//     ToolResult execute(const json& args) override { ... }
//   };
//   register_tool("calculator", [](const json& kwargs) { return std::make_unique<Calculator>(); });
//
// execute() may throw: ToolEnv turns any exception into an error text for the model
// (counted in metrics) and the episode goes on; ToolInfraError marks the failure as the
// infrastructure's, not the model's. It runs on a thread pool with a
// per-tool timeout, so it must not touch shared state without locking.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"

namespace agentr1::env {

// Thrown by execute() when the call failed for a reason that is not the model's doing:
// a server that died or never started, a sandbox that could not be created. ToolEnv
// reports it to the model as an error text like any failure, but counts it as
// "infra_failures" (call status "infra_error"); the flow marks the trajectory
// (Trajectory::infra_failure) and the advantage leaves it out of its group rather than
// scoring it as a wrong answer.
class ToolInfraError : public InfraError {
 public:
  explicit ToolInfraError(const std::string& what) : InfraError(what) {}
};

struct ToolResult {
  std::string text;                 // what the model sees
  std::optional<float> reward;      // optional per-call reward (summed into the step reward)
  json info = json::object();       // anything worth logging
};

class Tool {
 public:
  virtual ~Tool() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual json parameters() const = 0;      // JSON schema of the arguments object
  virtual ToolResult execute(const json& args) = 0;
  // OpenAI function schema {"type":"function","function":{name, description, parameters}},
  // the form chat templates render in their tools block.
  json schema() const;
};

using ToolFactory = std::function<std::unique_ptr<Tool>(const json& kwargs)>;
void register_tool(const std::string& name, ToolFactory factory);   // twice -> Error
std::unique_ptr<Tool> make_tool(const std::string& name, const json& kwargs = json::object());
std::vector<std::string> tool_names();

}  // namespace agentr1::env
