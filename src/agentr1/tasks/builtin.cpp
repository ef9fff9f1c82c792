#include "agentr1/tasks/builtin.h"

#include <mutex>

#include "agentr1/core/error.h"
#include "agentr1/env/python_tool.h"
#include "agentr1/env/tool.h"
#include "agentr1/tasks/alfworld/alfworld_family.h"
#include "agentr1/tasks/arithmetic/arithmetic_family.h"
#include "agentr1/tasks/hotpotqa/hotpotqa_family.h"
#include "agentr1/tasks/paper_search/paper_family.h"
#include "agentr1/tasks/reward.h"
#include "agentr1/tasks/reward_service.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/tasks/webshop/webshop_family.h"

namespace agentr1::tasks {

void register_builtin_tasks() {
  static std::once_flag once;
  std::call_once(once, [] {
    env::register_tool("calculator", [](const json& kwargs) -> std::unique_ptr<env::Tool> {
      return std::make_unique<Calculator>(CalcOptions::from_json(kwargs));
    });
    env::register_python_tool();  // the sandboxed code interpreter (docs/sandbox.md)
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
    register_paper_search_family();
    register_reward_service();  // "remote": a judge model behind an OpenAI-compatible endpoint
    register_alfworld_family();
    register_webshop_family();
  });
}

}  // namespace agentr1::tasks
