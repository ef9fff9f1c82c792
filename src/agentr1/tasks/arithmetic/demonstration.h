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
// The tool messages carry the real output of the Calculator (it is called here), so a
// demonstration is exactly what a perfect policy would see. Messages follow the
// HF/Qwen chat-template convention (tool_calls with arguments as a JSON object).
//
//   // The assistant turns as the policy writes them (SFT replay "actions"), by
//   // assistant_action_text (tasks/game_demo.h):
//   std::string a = assistant_action_text(demo["messages"][2], "<|im_end|>");
//   // "I will use the calculator.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\":
//   //  {\"expression\": \"(1234 + 567) * 3\"}}\n</tool_call><|im_end|>"
#pragma once

#include <string>

#include "agentr1/core/json.h"
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
  DemoStyle style = DemoStyle::kSingleCall;  // how many calculator calls
  ArithPromptOptions prompt;                 // the prompt messages (as in the dataset)
  bool include_prompt = true;                // false: only the assistant/tool turns
  std::string call_preamble = "I will use the calculator.";  // content of the first call turn
  bool restate_expression = true;            // final turn "<expr> = <v>\n#### <v>"; false: "#### <v>"
};

// Returns {"messages": [...], "tools": tool_schema_list}. Throws Error when
// tool_schema_list (an array of OpenAI function schemas or bare {"name": ...} objects)
// has no "calculator", or when the calculator's result disagrees with the problem's
// ground truth (a generator bug).
json expert_demonstration(const ArithProblem& p, const json& tool_schema_list, const DemoOptions& opts = {});

}  // namespace agentr1::tasks
