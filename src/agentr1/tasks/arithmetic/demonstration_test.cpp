#include "agentr1/tasks/arithmetic/demonstration.h"

#include <gtest/gtest.h>

#include <string>

#include "agentr1/core/error.h"
#include "agentr1/tasks/calculator.h"
#include "agentr1/tasks/reward.h"

namespace agentr1::tasks {
namespace {

json calculator_tools() {
  Calculator c;
  // The OpenAI function form (what Tool::schema() returns), built here from the parts.
  return json::array({{{"type", "function"},
                       {"function", {{"name", c.name()}, {"description", c.description()},
                                     {"parameters", c.parameters()}}}}});
}

TEST(Demonstration, SingleCallEpisode) {
  ArithmeticOptions o;
  for (int64_t i = 0; i < 100; ++i) {
    ArithProblem p = generate_problem(21, i, o);
    json demo = expert_demonstration(p, calculator_tools());
    const json& m = demo["messages"];
    ASSERT_EQ(m.size(), 5u);  // system, user, assistant(call), tool, assistant(final)
    EXPECT_EQ(m[0]["role"], "system");
    EXPECT_EQ(m[1]["role"], "user");
    EXPECT_EQ(m[1]["content"], p.question);
    EXPECT_EQ(m[2]["role"], "assistant");
    const json& call = m[2]["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "calculator");
    EXPECT_EQ(call["function"]["arguments"]["expression"], p.expression);
    EXPECT_EQ(m[3]["role"], "tool");
    // The tool output is the real calculator output for that call.
    EXPECT_EQ(m[3]["content"], evaluate_expression(p.expression).text);
    EXPECT_EQ(m[4]["role"], "assistant");
    EXPECT_FALSE(m[4].contains("tool_calls"));
    const std::string final_text = m[4]["content"];
    EXPECT_EQ(*extract_answer(final_text, AnswerMethod::kStrict), std::to_string(p.ground_truth));
    EXPECT_EQ(gsm8k_score(final_text, json(std::to_string(p.ground_truth))), 1.0f);
    EXPECT_EQ(demo["tools"], calculator_tools());
  }
}

TEST(Demonstration, PerStepEpisode) {
  ArithmeticOptions o;
  o.min_level = o.max_level = 3;
  DemoOptions d;
  d.style = DemoStyle::kPerStep;
  d.include_prompt = false;
  ArithProblem p = generate_problem(4, 2, o);
  json m = expert_demonstration(p, calculator_tools(), d)["messages"];
  ASSERT_EQ(m.size(), 2u * 3 + 1);
  int64_t prev = -1;
  for (size_t k = 0; k < 3; ++k) {
    const json& call = m[2 * k];
    const json& tool = m[2 * k + 1];
    ASSERT_EQ(call["role"], "assistant");
    ASSERT_EQ(tool["role"], "tool");
    std::string expr = call["tool_calls"][0]["function"]["arguments"]["expression"];
    EXPECT_EQ(tool["content"], evaluate_expression(expr).text) << expr;
    int64_t out = std::stoll(tool["content"].get<std::string>());
    prev = out;
  }
  EXPECT_EQ(prev, p.ground_truth);
  EXPECT_EQ(gsm8k_score(m.back()["content"], json(std::to_string(p.ground_truth))), 1.0f);
}

TEST(Demonstration, Errors) {
  ArithProblem p = generate_problem(1, 0);
  EXPECT_THROW(expert_demonstration(p, json::array()), Error);
  EXPECT_THROW(expert_demonstration(p, json::array({{{"name", "search"}}})), Error);
  EXPECT_NO_THROW(expert_demonstration(p, json::array({{{"name", "calculator"}}})));
  ArithProblem broken = p;
  broken.ground_truth += 1;  // the calculator disagrees -> generator bug surfaces
  EXPECT_THROW(expert_demonstration(broken, calculator_tools()), Error);
  EXPECT_THROW(parse_demo_style("two_calls"), Error);
  EXPECT_EQ(parse_demo_style("per_step"), DemoStyle::kPerStep);
}

// assistant_action_text: the hermes text of an assistant turn, as the policy writes it.
TEST(Demonstration, ActionTextIsHermes) {
  json msg = json::parse(R"({"role": "assistant", "content": "Let me compute.",
    "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": {"expression": "2 + 3"}}}]})");
  EXPECT_EQ(assistant_action_text(msg, "<|im_end|>"),
            "Let me compute.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2 + 3\"}}\n"
            "</tool_call><|im_end|>");
}

TEST(Demonstration, ActionTextEdgeCases) {
  // Plain text turn: content then end of turn.
  EXPECT_EQ(assistant_action_text({{"role", "assistant"}, {"content", "#### 5"}}, "<|im_end|>"), "#### 5<|im_end|>");
  // No content: the call starts the text (no leading newline); bare {name, arguments}
  // calls (without "function") and string arguments (copied as they are) work too.
  json two = json::parse(R"({"role": "assistant", "content": "",
    "tool_calls": [{"name": "calculator", "arguments": "{\"expression\": \"1+1\"}"},
                   {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "7 / 2", "n": 1.5}}}]})");
  EXPECT_EQ(assistant_action_text(two, "</s>"),
            "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1+1\"}}\n</tool_call>\n"
            "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"7 / 2\", \"n\": 1.5}}\n"
            "</tool_call></s>");
  // A call without a name is an error, not a silent empty call.
  json bad = {{"role", "assistant"}, {"tool_calls", json::array({{{"function", {{"arguments", json::object()}}}}})}};
  EXPECT_ANY_THROW(assistant_action_text(bad, "<|im_end|>"));
}

}  // namespace
}  // namespace agentr1::tasks
