#include "agentr1/env/tool.h"

#include "agentr1/core/registry.h"

namespace agentr1::env {
namespace {
using ToolRegistry = Registry<Tool, const json&>;
}  // namespace

json Tool::schema() const {
  json fn = json::object();
  fn["name"] = name();
  fn["description"] = description();
  fn["parameters"] = parameters();
  json s = json::object();
  s["type"] = "function";
  s["function"] = std::move(fn);
  return s;
}

void register_tool(const std::string& name, ToolFactory factory) {
  AGENTR1_CHECK(factory != nullptr, "register_tool('" << name << "'): the factory is empty");
  ToolRegistry::instance().add(name, std::move(factory), "tool");
}

std::unique_ptr<Tool> make_tool(const std::string& name, const json& kwargs) {
  auto tool = ToolRegistry::instance().create(name, kwargs, "tool");
  AGENTR1_CHECK(tool != nullptr, "the factory of tool '" << name << "' returned null");
  AGENTR1_CHECK(tool->name() == name, "tool registered as '" << name << "' reports name() '"
                                          << tool->name()
                                          << "'; the model calls tools by name(), so they must match");
  return tool;
}

std::vector<std::string> tool_names() { return ToolRegistry::instance().names(); }

}  // namespace agentr1::env
