#include "agentr1/tasks/builtin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/env/tool.h"
#include "agentr1/env/text_game.h"
#include "agentr1/tasks/reward.h"
#include "agentr1/tasks/task_family.h"

namespace agentr1::tasks {
namespace {

TEST(Builtin, RegistersCalculatorAndRewardsOnceFromManyThreads) {
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) ts.emplace_back([] { register_builtin_tasks(); });
  for (auto& t : ts) t.join();
  register_builtin_tasks();  // idempotent

  auto names = env::tool_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "calculator"), names.end());
  std::unique_ptr<env::Tool> calc = env::make_tool("calculator");
  EXPECT_EQ(calc->execute({{"expression", "(1234 + 567) * 3"}}).text, "5403");
  json schema = calc->schema();
  EXPECT_EQ(schema["function"]["name"], "calculator");
  EXPECT_EQ(schema["function"]["parameters"]["required"], json::array({"expression"}));

  auto small = env::make_tool("calculator", {{"max_length", 5}});
  EXPECT_EQ(small->execute({{"expression", "1 + 2 + 3"}}).info["error_kind"], "too_long");
  // Options are bound by name (core/config.h): a typo names the key and the nearest one,
  // a bad value the rule, both at creation (not when the model first calls the tool).
  auto calc_error = [](const json& kw) {
    try {
      env::make_tool("calculator", kw);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string e = calc_error({{"max_lenght", 5}});
  EXPECT_NE(e.find("unknown config key 'env_kwargs.tool_kwargs.calculator.max_lenght'"), std::string::npos) << e;
  EXPECT_NE(e.find("'env_kwargs.tool_kwargs.calculator.max_length'"), std::string::npos) << e;
  e = calc_error({{"significant_digits", 30}});
  EXPECT_NE(e.find("significant_digits must be in 1..18, got 30"), std::string::npos) << e;
  e = calc_error({{"max_depth", "deep"}});
  EXPECT_NE(e.find("env_kwargs.tool_kwargs.calculator.max_depth"), std::string::npos) << e;

  for (const char* n : {"arith_calc", "gsm8k", "openai/gsm8k"}) {
    ASSERT_TRUE(has_reward_fn(n)) << n;
    RewardFn fn = make_reward_fn(n);
    EXPECT_EQ(fn("so\n#### 1,801", json("1801"), json::object()), 1.0f);
    EXPECT_EQ(fn("1801", json("1801"), json::object()), 0.0f);  // strict by default
  }
  RewardFn flex = make_reward_fn("gsm8k", {{"method", "flexible"}});
  EXPECT_EQ(flex("it is 1801.", json("1801"), json::object()), 1.0f);
  try {
    make_reward_fn("gsm8k", {{"methd", "flexible"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reward function 'gsm8k': invalid config: unknown config key 'reward_kwargs.methd'"),
              std::string::npos)
        << e.what();
  }
  try {
    make_reward_fn("math");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("known: arith_calc, em, f1, gsm8k, openai/gsm8k"), std::string::npos)
        << e.what();
  }
  // Every family, its tools, game envs and reward functions are registered by the one call.
  EXPECT_EQ(task_family_names(),
            (std::vector<std::string>{"alfworld", "arithmetic", "hotpotqa", "paper_search", "webshop"}));
  const std::vector<std::string> tools = env::tool_names();
  for (const char* t : {"calculator", "search", "open"})
    EXPECT_NE(std::find(tools.begin(), tools.end(), t), tools.end()) << t;
  for (const char* g : {"alfworld", "webshop"}) EXPECT_TRUE(env::has_game(g)) << g;
  for (const char* r : {"em", "f1"}) EXPECT_TRUE(has_reward_fn(r)) << r;
}

}  // namespace
}  // namespace agentr1::tasks
