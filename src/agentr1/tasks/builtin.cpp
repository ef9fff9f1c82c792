#include "agentr1/tasks/builtin.h"

#include <mutex>

#include "agentr1/core/error.h"
#include "agentr1/env/tool.h"
#include "agentr1/tasks/alfworld/alfworld_family.h"
#include "agentr1/tasks/arithmetic/arithmetic_family.h"
#include "agentr1/tasks/hotpotqa/hotpotqa_family.h"
#include "agentr1/tasks/reward.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/tasks/webshop/webshop_family.h"

namespace agentr1::tasks {

CalcOptions calc_options_from_json(const json& kw) {
  CalcOptions o;
  if (kw.is_null()) return o;
  AGENTR1_CHECK(kw.is_object(), "calculator kwargs must be an object, got " << kw.type_name());
  for (auto it = kw.begin(); it != kw.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "max_length" || k == "max_depth" || k == "significant_digits") {
      AGENTR1_CHECK(v.is_number_integer() && v.get<int64_t>() > 0,
                    "calculator '" << k << "' must be a positive integer, got " << v.dump());
      if (k == "max_length") o.max_length = static_cast<size_t>(v.get<int64_t>());
      if (k == "max_depth") o.max_depth = static_cast<int>(v.get<int64_t>());
      if (k == "significant_digits") o.significant_digits = static_cast<int>(v.get<int64_t>());
    } else if (k == "max_abs") {
      AGENTR1_CHECK(v.is_number(), "calculator 'max_abs' must be a number, got " << v.dump());
      o.max_abs = v.get<double>();
    } else {
      throw Error("unknown calculator option '" + k +
                  "'; known: max_length, max_depth, significant_digits, max_abs");
    }
  }
  return o;
}

void register_builtin_tasks() {
  static std::once_flag once;
  std::call_once(once, [] {
    env::register_tool("calculator", [](const json& kwargs) -> std::unique_ptr<env::Tool> {
      return std::make_unique<Calculator>(calc_options_from_json(kwargs));
    });
    RewardFnFactory gsm8k = [](const json& kwargs) -> RewardFn {
      Gsm8kScoreOptions o = Gsm8kScoreOptions::from_json(kwargs);
      return [o](const std::string& response, const json& ground_truth, const json&) {
        return gsm8k_score(response, ground_truth, o);
      };
    };
    register_reward_fn("arith_calc", gsm8k);
    register_reward_fn("gsm8k", gsm8k);
    register_reward_fn("openai/gsm8k", gsm8k);
    register_task_family("arithmetic", [](const json& kwargs) -> std::unique_ptr<TaskFamily> {
      return std::make_unique<ArithmeticFamily>(ArithmeticFamilyOptions::from_json(kwargs));
    });
    register_hotpotqa_family();
    register_alfworld_family();
    register_webshop_family();
  });
}

}  // namespace agentr1::tasks
