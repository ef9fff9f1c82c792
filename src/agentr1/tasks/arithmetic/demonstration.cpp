#include "agentr1/tasks/arithmetic/demonstration.h"

#include <memory>

#include "agentr1/core/error.h"
#include "agentr1/tasks/calculator.h"
#include "agentr1/text/jinja/chat_template.h"

namespace agentr1::tasks {
namespace {

bool lists_tool(const json& tools, const std::string& name) {
  if (!tools.is_array()) return false;
  for (const auto& t : tools) {
    if (!t.is_object()) continue;
    if (t.contains("function") && t["function"].is_object() && t["function"].value("name", "") == name) {
      return true;
    }
    if (t.value("name", "") == name) return true;
  }
  return false;
}

json call_message(const std::string& content, const std::string& tool, const json& arguments) {
  json call = {{"type", "function"}, {"function", {{"name", tool}, {"arguments", arguments}}}};
  return {{"role", "assistant"}, {"content", content}, {"tool_calls", json::array({call})}};
}

// One expression, as the chosen tool is called on it: the call's arguments, the text the
// expression is restated with, and the number the tool's output stands for.
struct ToolRunner {
  ArithTool tool;
  std::shared_ptr<env::PythonTool> python;  // kPython only: opts.python_interpreter, or a
                                            // tool of its own (fresh interpreters, opts.python)
  Calculator calc;

  json arguments(const std::string& expression) const {
    if (tool == ArithTool::kPython) return {{"code", "print(" + python_expression(expression) + ")"}};
    return {{"expression", expression}};
  }
  std::string restated(const std::string& expression) const {
    return tool == ArithTool::kPython ? python_expression(expression) : expression;
  }
  // The tool's text for `args`; throws Error when the call failed.
  std::string run(const json& args) {
    env::ToolResult r = tool == ArithTool::kPython ? python->execute(args) : calc.execute(args);
    AGENTR1_CHECK(!r.info.value("error", true), "expert_demonstration: the " << arith_tool_name(tool) << " tool failed on "
                                                                           << args.dump() << ": " << r.text);
    return r.text;
  }
  // The value the output shows: the calculator's text as is; python's printed line
  // without its newline.
  std::string value_of(const std::string& out) const {
    if (tool == ArithTool::kPython && !out.empty() && out.back() == '\n') return out.substr(0, out.size() - 1);
    return out;
  }
};

}  // namespace

DemoStyle parse_demo_style(const std::string& name) {
  if (name == "single") return DemoStyle::kSingleCall;
  if (name == "per_step") return DemoStyle::kPerStep;
  throw Error("unknown demonstration style '" + name + "'; known: single, per_step");
}

json expert_demonstration(const ArithProblem& p, const json& tool_schema_list, const DemoOptions& opts) {
  const std::string tool_name = arith_tool_name(opts.tool);
  AGENTR1_CHECK(lists_tool(tool_schema_list, tool_name),
                "expert_demonstration: the tool list must contain '" << tool_name << "' (the demonstration calls it), got "
                                                                     << tool_schema_list.dump().substr(0, 120));
  AGENTR1_CHECK(!p.expression.empty() && !p.steps.empty(),
                "expert_demonstration: problem " << p.index << " has no expression/steps");
  ToolRunner runner{opts.tool, nullptr, Calculator()};
  if (opts.tool == ArithTool::kPython) {
    runner.python = opts.python_interpreter != nullptr ? opts.python_interpreter
                                                       : std::make_shared<env::PythonTool>(opts.python);
  }
  const std::string preamble = opts.call_preamble.value_or(
      opts.tool == ArithTool::kPython ? "I will compute it in python." : "I will use the calculator.");
  json msgs = opts.include_prompt ? arith_prompt_messages(p, opts.prompt) : json::array();

  std::string final_value;
  std::string summary;
  if (opts.style == DemoStyle::kSingleCall) {
    const json args = runner.arguments(p.expression);
    msgs.push_back(call_message(preamble, tool_name, args));
    const std::string out = runner.run(args);
    msgs.push_back({{"role", "tool"}, {"content", out}});
    final_value = runner.value_of(out);
    summary = runner.restated(p.expression) + " = " + final_value;
  } else {
    // Each step is written with the numbers the tool returned before (the generator's
    // step texts use the same values; they are checked to agree).
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const ArithStep& st = p.steps[i];
      const json args = runner.arguments(st.expression);
      msgs.push_back(call_message(i == 0 ? preamble : "", tool_name, args));
      const std::string out = runner.run(args);
      const std::string value = runner.value_of(out);
      AGENTR1_CHECK(value == std::to_string(st.result),
                    "expert_demonstration: step '" << st.expression << "' gives " << out
                                                   << " but the generator recorded " << st.result);
      msgs.push_back({{"role", "tool"}, {"content", out}});
      summary += (summary.empty() ? "" : "\n") + runner.restated(st.expression) + " = " + value;
      final_value = value;
    }
  }
  AGENTR1_CHECK(final_value == std::to_string(p.ground_truth),
                "expert_demonstration: the " << tool_name << " tool gives " << final_value << " for '" << p.expression
                                             << "' but the ground truth is " << p.ground_truth);
  const std::string final_text = opts.restate_expression ? summary + "\n#### " + final_value : "#### " + final_value;
  msgs.push_back({{"role", "assistant"}, {"content", final_text}});
  return {{"messages", msgs}, {"tools", tool_schema_list}};
}

}  // namespace agentr1::tasks
