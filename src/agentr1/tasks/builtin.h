// agentr1/tasks/builtin.h — registers the tasks layer's tools, reward functions and
// task families.
//
//   agentr1::tasks::register_builtin_tasks();   // once at start-up (idempotent)
//   auto calc = env::make_tool("calculator");
//   auto reward = tasks::make_reward_fn("arith_calc");
//   auto family = tasks::make_task_family("arithmetic", {{"max_level", 2}});
//
// Static libraries drop unreferenced self-registering objects, so registration is an
// explicit call rather than a static initialiser.
//
// Registers:
//   tool "calculator"            kwargs {"max_length", "max_depth", "significant_digits",
//                                "max_abs"} (CalcOptions; unknown keys -> Error)
//   reward "arith_calc"          gsm8k scorer, strict by default
//   reward "gsm8k"               gsm8k scorer, strict by default
//   reward "openai/gsm8k"        the same (verl's data_source name)
//   reward kwargs: {"method": "strict"|"flexible", "score", "format_score", "clip_chars"}
//   task family "arithmetic"     kwargs {"min_level", "max_level", "use_system_prompt",
//                                "tools_in_prompt", "restate_expression", "demo_style"}
//                                (ArithmeticFamilyOptions; unknown keys -> Error)
//   task family "hotpotqa"       with tools "search", "open" and reward fns "em", "f1"
//                                (register_hotpotqa_family, hotpotqa_family.h)
//   task family "alfworld"       with the game env "alfworld" (alfworld_family.h)
//   task family "webshop"        with the game env "webshop" (webshop_family.h)
#pragma once

#include "agentr1/core/json.h"
#include "agentr1/tasks/calculator.h"

namespace agentr1::tasks {

// Thread-safe and idempotent (std::call_once). Throws Error if another component
// already registered one of these names.
void register_builtin_tasks();

// CalcOptions from tool kwargs; unknown keys or wrong types throw Error listing the keys.
CalcOptions calc_options_from_json(const json& kwargs);

}  // namespace agentr1::tasks
