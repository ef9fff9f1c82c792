// agentr1/tasks/arithmetic/arithmetic.h — seeded GSM8K-style arithmetic word problems meant to be
// solved with a tool: the calculator (default) or the python code interpreter.
//
//   ArithmeticOptions opts;                       // levels 1..4, 2-3 digit amounts
//   ArithProblem p = generate_problem(/*seed=*/7, /*index=*/0, opts);
//   // p.question   "A warehouse stores 3120 boxes. Then 14 trucks arrive, each carrying
//   //               215 boxes. ... How many boxes are in the warehouse now?"
//   // p.expression "3120 + 14 * 215", p.ground_truth 6130, p.level 2
//   // p.answer     "Step 1: 14 * 215 = 3010\n...\n#### 6130"
//
//   ArithDatasetOptions d;                        // prompt, agent_name "tool", data_source "arith_calc"
//   d.problem.split = DataSplit::kTest;
//   std::vector<Sample> test = make_arith_dataset(/*n=*/500, /*seed=*/7, d);
//
//   d.tool = ArithTool::kPython;                  // env_kwargs {"tools": ["python"]}
//   d.prompt.system_prompt = kPythonArithSystemPrompt;
//   python_expression("(3120 + 14 * 215) / 5")    // "(3120 + 14 * 215) // 5"
//
// Level = number of arithmetic operations (1..4). All intermediate values are positive
// integers; division appears only as the last operation and is always exact.
// Determinism: a problem depends only on (seed, index, options) — one generator per
// problem, seeded from them; no global state. Train and test problems never share a
// canonical expression: the expression's hash decides the split, and the generator
// redraws (deterministically) until the problem lands in the requested split.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/tasks/data_split.h"

namespace agentr1::tasks {

// The arithmetic partition: problems whose canonical expression hash is even are
// kTrain, odd ones kTest.

struct ArithmeticOptions {
  int min_level = 1;            // fewest operations per problem (>= 1)
  int max_level = 4;            // most operations per problem (<= 4)
  int min_digits = 2;           // digits of added/subtracted amounts and per-item sizes
  int max_digits = 3;
  int start_min_digits = 3;     // digits of the starting quantity
  int start_max_digits = 4;
  int count_min_digits = 2;     // digits of counts ("14 trucks", "each of 23 workers")
  int count_max_digits = 2;
  int min_divisor = 3;          // range of the divisor when the last operation divides
  int max_divisor = 99;
  DataSplit split = DataSplit::kTrain;  // which side of the train/test partition
  int max_attempts = 500;       // redraws before giving up (Error); never reached in practice

  // Throws Error naming the field, the rule and the value.
  void validate() const;
};

// One operation of the worked solution, with literal operands: "3120 + 3010" = 6130.
struct ArithStep {
  std::string expression;
  int64_t result = 0;
};

struct ArithProblem {
  std::string question;          // the word problem
  std::string answer;            // worked solution ending in "#### <ground_truth>"
  int64_t ground_truth = 0;      // the exact answer
  std::string expression;        // canonical one-line expression, e.g. "(1234 + 567) * 3"
  std::vector<ArithStep> steps;  // one per operation, in evaluation order (level of them)
  int level = 0;                 // number of operations
  std::string scenario;          // template family ("warehouse", "savings", ...)
  uint64_t seed = 0;
  int64_t index = 0;
};

// Deterministic for (seed, index, opts). Throws Error for invalid options or when no
// valid problem is found within opts.max_attempts draws.
ArithProblem generate_problem(uint64_t seed, int64_t index, const ArithmeticOptions& opts = {});

// The system prompt used by default: short, for small models.
extern const char* const kDefaultArithSystemPrompt;
// The system prompt of the python variant: compute with the python tool, print the result.
extern const char* const kPythonArithSystemPrompt;

// The tool the problems are solved with.
enum class ArithTool {
  kCalculator,  // "calculator": {"expression": "(1234 + 567) * 3"} -> "5403"
  kPython,      // "python" (env/python_tool.h): {"code": "print((1234 + 567) * 3)"} -> "5403\n"
};
// "calculator" | "python"; anything else throws Error naming the value and the choices.
ArithTool parse_arith_tool(const std::string& name);
// The registered tool name: "calculator" | "python".
const char* arith_tool_name(ArithTool tool);

// A problem expression (or step) as Python code computes it: the problems' division is
// exact integer division, so " / " becomes " // " (Python's "/" would print a float,
// "6130.0"). Everything else (integers, + - *, parentheses) reads the same in Python.
std::string python_expression(const std::string& expression);

struct ArithPromptOptions {
  bool use_system_prompt = true;                       // prepend a system message
  std::string system_prompt = kDefaultArithSystemPrompt;
  std::string user_suffix;                             // appended to the question (after a space)
};

// [{"role":"system",...}?, {"role":"user","content": question[ + " " + suffix]}]
json arith_prompt_messages(const ArithProblem& p, const ArithPromptOptions& opts = {});

struct ArithDatasetOptions {
  ArithmeticOptions problem;           // generator settings (levels, digits, split)
  ArithPromptOptions prompt;           // how the prompt is built
  std::string agent_name = "tool";     // the ToolEnv
  std::string data_source = "arith_calc";  // also selects the reward function
  ArithTool tool = ArithTool::kCalculator; // the tool the samples offer (env_kwargs.tools)
};

// The Agent-R1 sample: prompt, agent_name, reward_model {style "rule", ground_truth
// "<n>"}, env_kwargs {"tools": [arith_tool_name(opts.tool)]}, data_source, extra_info
// {index, level, expression, answer, question, scenario, split, seed}.
Sample arith_problem_to_sample(const ArithProblem& p, const ArithDatasetOptions& opts = {});

// Problems first_index .. first_index + n - 1 for `seed`. Throws Error if n < 0.
std::vector<Sample> make_arith_dataset(int64_t n, uint64_t seed, const ArithDatasetOptions& opts = {},
                                       int64_t first_index = 0);

}  // namespace agentr1::tasks
