// agentr1/tasks/arithmetic/arithmetic_family.h — the "arithmetic" task family: word problems
// (arithmetic.h) solved with the calculator or the python tool, with expert
// demonstrations (demonstration.h).
//
//   // as the trainer builds it, from data.task = arithmetic, data.task_kwargs = {...}:
//   auto fam = make_task_family("arithmetic", {{"min_level", 1}, {"max_level", 2}});
//   // or directly:
//   ArithmeticFamilyOptions o;
//   o.max_level = 2;
//   o.tools_in_prompt = false;
//   ArithmeticFamily fam(o);
//   std::vector<Sample> val = fam.make_dataset(DataSplit::kTest, 64, /*seed=*/1000004);
//   // val[i].env_kwargs == {"tools": ["calculator"], "tools_in_prompt": false}
//
// task_kwargs keys (all optional; unknown keys, wrong types and out-of-range values
// throw Error naming the key and the rule):
//   min_level (int 1..4, default 1)       fewest operations per problem
//   max_level (int 1..4, default 1)       most operations per problem (>= min_level)
//   use_system_prompt (bool, true)        prompts start with kDefaultArithSystemPrompt
//   tools_in_prompt (bool, true)          false: samples carry env_kwargs.tools_in_prompt
//                                         = false (the ToolEnv leaves the tool schema out
//                                         of the prompt; the calculator still runs)
//   restate_expression (bool, false)      demonstrations end "<expr> = <v>\n#### <v>"
//                                         (true) or "#### <v>" (false)
//   demo_style ("single" | "per_step",    how the expert uses the calculator: one call
//               default "single")         with the whole expression, or one call per
//                                         operation on literal numbers (level calls, each
//                                         using the results the calculator returned
//                                         before: the multi-step variant, whose history
//                                         grows by one turn per operation). The prompts
//                                         and the reward are the same either way.
//   tool ("calculator" | "python",         the tool the samples offer and the expert
//         default "calculator")            calls. python: env_kwargs.tools ["python"],
//                                         the system prompt kPythonArithSystemPrompt
//                                         (compute with python, print the result), the
//                                         expert calls python with {"code":
//                                         "print(<expression>)"} ("//" for the exact
//                                         division) and answers from what it printed;
//                                         recipe_defaults set the tool's kwargs. The
//                                         problems and the reward (#### <n>) are the same.
//
// The multi-step variant of the context experiment is
//   data.task_kwargs={min_level: 4, max_level: 4, demo_style: per_step}
// and rollout.max_steps >= level + 1 (the recipe_defaults below set it).
//
// Samples use agent "tool", env_kwargs.tools ["calculator"] (or ["python"]) and
// data_source "arith_calc" (the gsm8k scorer); all are registered by
// register_builtin_tasks(). The python variant:
//   data.task=arithmetic ++data.task_kwargs.tool=python
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/tasks/arithmetic/demonstration.h"
#include "agentr1/tasks/task_family.h"

namespace agentr1::tasks {

struct ArithmeticFamilyOptions {
  int min_level = 1;                // fewest operations per problem (1..4)
  int max_level = 1;                // most operations per problem (min_level..4)
  bool use_system_prompt = true;    // prompts start with the task's system prompt
  bool tools_in_prompt = true;      // false: every sample (datasets and demonstrations) gets
                                    // env_kwargs.tools_in_prompt = false, and rendered
                                    // demonstrations omit the tools block
  bool restate_expression = false;  // demonstrations' final turn "<expr> = <v>\n#### <v>"
                                    // (true) or "#### <v>" (false)
  DemoStyle demo_style = DemoStyle::kSingleCall;  // one call, or one per operation
  ArithTool tool = ArithTool::kCalculator;        // the tool offered and demonstrated

  // Names every key once (core/config.h: binding, to_json, describe_config).
  template <class V>
  void visit(V& v) {
    v.field("min_level", min_level, "fewest operations per problem (1..4)");
    v.field("max_level", max_level, "most operations per problem (min_level..4)");
    v.field("use_system_prompt", use_system_prompt, "prompts start with the task's system prompt");
    v.field("tools_in_prompt", tools_in_prompt, "false: samples ask the ToolEnv to leave the tool schema out");
    v.field("restate_expression", restate_expression, "demonstrations end \"<expr> = <v>\" before \"#### <v>\"");
    v.field("demo_style", demo_style, "expert tool use: single (one call) | per_step (one per operation)");
    v.field("tool", tool, "the tool the problems are solved with: calculator | python (sandboxed code interpreter)");
  }
  // Throws Error naming the key, the rule and the value.
  void validate() const;
  // From task_kwargs (null or {} = defaults), bound with bind_config at "data.task_kwargs":
  // throws one Error listing unknown keys (with the valid ones), wrong types and invalid
  // values, each with its dotted key.
  static ArithmeticFamilyOptions from_json(const json& kwargs);
  // Every key, as from_json reads them.
  json to_json() const;
};

class ArithmeticFamily : public TaskFamily {
 public:
  // Validates opts (throws Error as ArithmeticFamilyOptions::validate).
  explicit ArithmeticFamily(ArithmeticFamilyOptions opts = {});

  std::string name() const override { return "arithmetic"; }
  const ArithmeticFamilyOptions& options() const { return opts_; }

  // make_arith_dataset(n, seed) with the levels, split, tool and prompt of the options
  // (problem i is generate_problem(seed, i)), plus env_kwargs.tools_in_prompt = false when
  // !options().tools_in_prompt. Throws Error if n < 0.
  std::vector<Sample> make_dataset(DataSplit split, int64_t n, uint64_t seed) const override;

  // For i in 0..n-1 the train-split problem generate_problem(seed, i): the sample as
  // make_dataset(kTrain, n, seed) makes it, and the actions of its expert demonstration
  // (expert_demonstration with the tool's schema, demo_style and tool), each turned into
  // text by assistant_action_text(_, end_of_turn). rendered (if non-null) gets the whole
  // episode rendered with tmpl (no generation prompt, enable_thinking = false; the tools
  // block only when tools_in_prompt). Throws Error if n < 0. With the python tool each
  // demonstration runs the real tool (python_tool_kwargs()) once per call: ~0.1 s each;
  // env::ToolInfraError when the sandbox cannot start.
  std::vector<json> demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                   const std::string& end_of_turn,
                                   std::vector<std::string>* rendered = nullptr) const override;

  // With demo_style per_step: "rollout.max_steps=<max_level + 1>" (one turn per
  // operation and one for the answer). With the python tool:
  // "++rollout.env_kwargs.tool_kwargs={python: python_tool_kwargs()}" and
  // "++rollout.env_kwargs.tool_timeout_s=3" (a second above the sandbox's own timeout,
  // so the model sees the tool's timeout message). None for single calculator calls.
  std::vector<std::string> recipe_defaults() const override;

  // The python tool's kwargs of this task: {"mode": "fresh", "timeout_s": 2, "cpu_s": 2}
  // (one fresh interpreter per call: the code is one print; a runaway loop costs at most
  // 2 s of a rollout).
  static json python_tool_kwargs();

  // A tool episode (tasks/play.h) whose expert is the demonstration's: the calls as
  // JSON {"name": "calculator" | "python", "arguments": {...}}, then the answer text. The problem
  // is regenerated from extra_info (seed, index, split); a sample that does not match
  // (e.g. from a file) gets no expert.
  std::unique_ptr<PlayEpisode> play_episode(const Sample& sample) const override;

 private:
  ArithDatasetOptions dataset_options(DataSplit split) const;
  DemoOptions demo_options(const ArithDatasetOptions& dso) const;  // the expert's, from opts_
  ArithmeticFamilyOptions opts_;
};

}  // namespace agentr1::tasks

// DemoStyle binds by name ("single" | "per_step"), ArithTool by its tool name
// ("calculator" | "python"); core/config.h has no enum fields.
namespace agentr1::config_detail {
template <>
struct Codec<tasks::DemoStyle> {
  static std::string type_name() { return "string"; }
  static void read(const json& v, tasks::DemoStyle& out, const std::string& key, BindContext& ctx);
  static json write(const tasks::DemoStyle& x);
};
template <>
struct Codec<tasks::ArithTool> {
  static std::string type_name() { return "string"; }
  static void read(const json& v, tasks::ArithTool& out, const std::string& key, BindContext& ctx);
  static json write(const tasks::ArithTool& x);
};
}  // namespace agentr1::config_detail
