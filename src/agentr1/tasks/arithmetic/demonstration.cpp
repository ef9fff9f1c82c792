#include "agentr1/tasks/arithmetic/demonstration.h"

#include "agentr1/core/error.h"
#include "agentr1/tasks/calculator.h"
#include "agentr1/text/jinja/chat_template.h"

namespace agentr1::tasks {
namespace {

bool lists_calculator(const json& tools) {
  if (!tools.is_array()) return false;
  for (const auto& t : tools) {
    if (!t.is_object()) continue;
    if (t.contains("function") && t["function"].is_object() && t["function"].value("name", "") == "calculator") {
      return true;
    }
    if (t.value("name", "") == "calculator") return true;
  }
  return false;
}

json call_message(const std::string& content, const std::string& expression) {
  json call = {{"type", "function"},
               {"function", {{"name", "calculator"}, {"arguments", {{"expression", expression}}}}}};
  return {{"role", "assistant"}, {"content", content}, {"tool_calls", json::array({call})}};
}

}  // namespace

DemoStyle parse_demo_style(const std::string& name) {
  if (name == "single") return DemoStyle::kSingleCall;
  if (name == "per_step") return DemoStyle::kPerStep;
  throw Error("unknown demonstration style '" + name + "'; known: single, per_step");
}

json expert_demonstration(const ArithProblem& p, const json& tool_schema_list, const DemoOptions& opts) {
  AGENTR1_CHECK(lists_calculator(tool_schema_list),
                "expert_demonstration: the tool list must contain 'calculator' (the demonstration "
                "calls it), got " << tool_schema_list.dump().substr(0, 120));
  AGENTR1_CHECK(!p.expression.empty() && !p.steps.empty(),
                "expert_demonstration: problem " << p.index << " has no expression/steps");
  Calculator calc;
  json msgs = opts.include_prompt ? arith_prompt_messages(p, opts.prompt) : json::array();

  auto run = [&](const std::string& expression) {
    env::ToolResult r = calc.execute({{"expression", expression}});
    AGENTR1_CHECK(!r.info.value("error", true),
                  "expert_demonstration: calculator failed on '" << expression << "': " << r.text);
    return r.text;
  };

  std::string final_value;
  std::string summary;
  if (opts.style == DemoStyle::kSingleCall) {
    msgs.push_back(call_message(opts.call_preamble, p.expression));
    final_value = run(p.expression);
    msgs.push_back({{"role", "tool"}, {"content", final_value}});
    summary = p.expression + " = " + final_value;
  } else {
    // Each step is written with the numbers the calculator returned before (the
    // generator's step texts use the same values; they are checked to agree).
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const ArithStep& st = p.steps[i];
      msgs.push_back(call_message(i == 0 ? opts.call_preamble : "", st.expression));
      std::string out = run(st.expression);
      AGENTR1_CHECK(out == std::to_string(st.result),
                    "expert_demonstration: step '" << st.expression << "' gives " << out
                                                   << " but the generator recorded " << st.result);
      msgs.push_back({{"role", "tool"}, {"content", out}});
      summary += (summary.empty() ? "" : "\n") + st.expression + " = " + out;
      final_value = out;
    }
  }
  AGENTR1_CHECK(final_value == std::to_string(p.ground_truth),
                "expert_demonstration: the calculator gives " << final_value << " for '" << p.expression
                                                              << "' but the ground truth is " << p.ground_truth);
  const std::string final_text = opts.restate_expression ? summary + "\n#### " + final_value : "#### " + final_value;
  msgs.push_back({{"role", "assistant"}, {"content", final_text}});
  return {{"messages", msgs}, {"tools", tool_schema_list}};
}

}  // namespace agentr1::tasks
