// agentr1/tasks/arithmetic/demonstration.h — expert tool-using episodes for SFT warm start.
//
//   ArithProblem p = generate_problem(seed, i);
//   json tools = json::array({Calculator().schema()});
//   json demo = expert_demonstration(p, tools);      // single calculator call
//   // demo = {"messages": [system, user,
//   //           {"role":"assistant","content":"...","tool_calls":[{"type":"function",
//   //             "function":{"name":"calculator","arguments":{"expression":"(1234 + 567) * 3"}}}]},
//   //           {"role":"tool","content":"5403"},
//   //           {"role":"assistant","content":"(1234 + 567) * 3 = 5403\n#### 5403"}],
//   //         "tools": tools}
//
//   // With the python tool (DemoOptions.tool = ArithTool::kPython; tools lists "python"):
//   //   {"role":"assistant","content":"I will compute it in python.","tool_calls":[{"type":
//   //     "function","function":{"name":"python","arguments":{"code":"print((1234 + 567) * 3)"}}}]},
//   //   {"role":"tool","content":"5403\n"},                  // what the tool printed, newline included
//   //   {"role":"assistant","content":"#### 5403"}           // restate_expression false
//   // Division is written "//" (python_expression): the problems divide exactly.
//
// The tool messages carry the real output of the tool (the Calculator, or the python
// tool in its sandbox: it is run here), so a demonstration is exactly what a perfect
// policy would see. Messages follow the
// HF/Qwen chat-template convention (tool_calls with arguments as a JSON object).
//
//   // The assistant turns as the policy writes them (SFT replay "actions"), by
//   // assistant_action_text (tasks/game_demo.h):
//   std::string a = assistant_action_text(demo["messages"][2], "<|im_end|>");
//   // "I will use the calculator.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\":
//   //  {\"expression\": \"(1234 + 567) * 3\"}}\n</tool_call><|im_end|>"
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "agentr1/core/json.h"
#include "agentr1/env/python_tool.h"
#include "agentr1/tasks/arithmetic/arithmetic.h"
#include "agentr1/tasks/game_demo.h"

namespace agentr1::tasks {

enum class DemoStyle {
  kSingleCall,  // one calculator call with the full canonical expression
  kPerStep,     // one call per operation, each on literal numbers (level calls)
};
// "single" | "per_step"; anything else throws Error listing them.
DemoStyle parse_demo_style(const std::string& name);

struct DemoOptions {
  DemoStyle style = DemoStyle::kSingleCall;  // how many tool calls
  ArithTool tool = ArithTool::kCalculator;   // calculator {"expression"} or python {"code": "print(...)"}
  ArithPromptOptions prompt;                 // the prompt messages (as in the dataset)
  bool include_prompt = true;                // false: only the assistant/tool turns
  std::optional<std::string> call_preamble;  // content of the first call turn; unset: the
                                             // tool's ("I will use the calculator." |
                                             // "I will compute it in python.")
  bool restate_expression = true;            // final turn "<expr> = <v>\n#### <v>"; false: "#### <v>"
  env::PythonToolOptions python;             // the python tool the demonstration runs (its
                                             // defaults: a fresh sandboxed interpreter per call)
  // Or an interpreter shared by many demonstrations (one session-mode tool for a whole
  // batch: ArithmeticFamily::demonstrations), instead of a tool made from `python` per
  // demonstration. The expert's cells only print an expression, so a shared interpreter
  // prints what a fresh one would; it saves a sandbox start per call. Calls through one
  // session tool run one at a time, and its whole life has the session's CPU limit
  // (PythonToolOptions::session_cpu_s: ~10k calls use a few seconds of it). If it dies,
  // the next call's note makes the output disagree and the demonstration throws.
  std::shared_ptr<env::PythonTool> python_interpreter;
};

// Returns {"messages": [...], "tools": tool_schema_list}. Throws Error when
// tool_schema_list (an array of OpenAI function schemas or bare {"name": ...} objects)
// does not list opts.tool, when a call fails, or when the tool's result disagrees with
// the problem's ground truth (a generator bug). With the python tool every call starts
// a sandboxed interpreter (~0.02-0.1 s) unless opts.python_interpreter is set;
// env::ToolInfraError passes through when the sandbox cannot start.
json expert_demonstration(const ArithProblem& p, const json& tool_schema_list, const DemoOptions& opts = {});

}  // namespace agentr1::tasks
