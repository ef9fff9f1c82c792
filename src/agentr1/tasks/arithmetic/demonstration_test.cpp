#include "agentr1/tasks/arithmetic/demonstration.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/env/python_tool.h"
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

json python_tools() { return json::array({env::PythonTool().schema()}); }

// The python expert on every level: the call is print(<expression>) with "//" for the
// exact division, the tool message is what the real sandboxed tool printed ("<n>\n"),
// and that value is the ground truth. 8 problems per level, single calls, plus per-step
// episodes on two problems (each call starts an interpreter: ~0.1 s).
TEST(Demonstration, PythonToolEpisodeOnEveryLevel) {
  DemoOptions d;
  d.tool = ArithTool::kPython;
  d.restate_expression = false;
  int divisions = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int level = 1; level <= 4; ++level) {
    ArithmeticOptions o;
    o.min_level = o.max_level = level;
    for (int64_t i = 0; i < 8; ++i) {
      const ArithProblem p = generate_problem(31, i, o);
      const json demo = expert_demonstration(p, python_tools(), d);
      const json& m = demo["messages"];
      ASSERT_EQ(m.size(), 5u) << p.expression;  // system, user, assistant(call), tool, assistant(final)
      EXPECT_EQ(m[2]["content"], "I will compute it in python.");
      const json& call = m[2]["tool_calls"][0]["function"];
      EXPECT_EQ(call["name"], "python");
      const std::string code = call["arguments"]["code"];
      EXPECT_EQ(code, "print(" + python_expression(p.expression) + ")");
      if (p.expression.find('/') != std::string::npos) {
        ++divisions;
        EXPECT_NE(code.find(" // "), std::string::npos) << code;
      }
      EXPECT_EQ(m[3]["role"], "tool");
      EXPECT_EQ(m[3]["content"], std::to_string(p.ground_truth) + "\n") << code;  // the real tool's output
      EXPECT_EQ(m[4]["content"], "#### " + std::to_string(p.ground_truth));
      EXPECT_EQ(gsm8k_score(m[4]["content"], json(std::to_string(p.ground_truth))), 1.0f);
      EXPECT_EQ(demo["tools"], python_tools());
    }
  }
  EXPECT_GT(divisions, 0) << "no problem with a division: the // rewrite went untested";

  d.style = DemoStyle::kPerStep;
  d.include_prompt = false;
  d.restate_expression = true;
  ArithmeticOptions o4;
  o4.min_level = o4.max_level = 4;
  for (int64_t i = 0; i < 2; ++i) {
    const ArithProblem p = generate_problem(32, i, o4);
    const json m = expert_demonstration(p, python_tools(), d)["messages"];
    ASSERT_EQ(m.size(), 2u * 4 + 1);
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(m[2 * k]["tool_calls"][0]["function"]["arguments"]["code"],
                "print(" + python_expression(p.steps[k].expression) + ")");
      EXPECT_EQ(m[2 * k + 1]["content"], std::to_string(p.steps[k].result) + "\n");
    }
    const std::string last = m.back()["content"];
    EXPECT_EQ(last.substr(last.rfind('\n') + 1), "#### " + std::to_string(p.ground_truth)) << last;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 30.0) << "40 sandboxed python calls took " << secs << " s";
}

// One session interpreter shared by a batch of demonstrations (as
// ArithmeticFamily::demonstrations does) gives the same demonstrations as a fresh
// interpreter per call, and it is the one interpreter all along: a variable set before
// the batch is still there after it (no restart, no other process).
TEST(Demonstration, SharedInterpreterGivesTheFreshDemonstrations) {
  env::PythonToolOptions so;
  so.mode = "session";
  auto shared = std::make_shared<env::PythonTool>(so);
  ASSERT_FALSE(shared->execute({{"code", "marker = 41"}}).info.value("error", true));
  DemoOptions fresh;
  fresh.tool = ArithTool::kPython;
  DemoOptions reuse = fresh;
  reuse.python_interpreter = shared;
  for (int level = 1; level <= 4; ++level) {
    ArithmeticOptions o;
    o.min_level = o.max_level = level;
    for (int64_t i = 0; i < 3; ++i) {
      const ArithProblem p = generate_problem(33, i, o);
      EXPECT_EQ(expert_demonstration(p, python_tools(), reuse), expert_demonstration(p, python_tools(), fresh))
          << p.expression;
      reuse.style = fresh.style = (i % 2 == 0) ? DemoStyle::kPerStep : DemoStyle::kSingleCall;
    }
  }
  EXPECT_EQ(shared->execute({{"code", "print(marker + 1)"}}).text, "42\n");

  // The calls really go to the shared interpreter: one whose print() was replaced
  // prints nothing, and the expert refuses the demonstration.
  ASSERT_FALSE(shared->execute({{"code", "print = lambda *a, **k: None"}}).info.value("error", true));
  ArithmeticOptions o;
  reuse.style = DemoStyle::kSingleCall;
  try {
    expert_demonstration(generate_problem(33, 0, o), python_tools(), reuse);
    ADD_FAILURE() << "a shared interpreter that prints nothing gave a demonstration";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("but the ground truth is"), std::string::npos) << e.what();
  }
}

TEST(Demonstration, PythonExpressionUsesIntegerDivision) {
  EXPECT_EQ(python_expression("(3120 + 14 * 215) / 5"), "(3120 + 14 * 215) // 5");
  EXPECT_EQ(python_expression("12 * 34 - 5"), "12 * 34 - 5");
}

TEST(Demonstration, Errors) {
  ArithProblem p = generate_problem(1, 0);
  EXPECT_THROW(expert_demonstration(p, json::array()), Error);
  EXPECT_THROW(expert_demonstration(p, json::array({{{"name", "search"}}})), Error);
  EXPECT_NO_THROW(expert_demonstration(p, json::array({{{"name", "calculator"}}})));
  ArithProblem broken = p;
  broken.ground_truth += 1;  // the calculator disagrees -> generator bug surfaces
  EXPECT_THROW(expert_demonstration(broken, calculator_tools()), Error);
  // The python expert needs "python" in the list, and the calculator expert "calculator".
  DemoOptions py;
  py.tool = ArithTool::kPython;
  EXPECT_THROW(expert_demonstration(p, calculator_tools(), py), Error);
  EXPECT_THROW(expert_demonstration(p, python_tools()), Error);
  EXPECT_THROW(expert_demonstration(broken, python_tools(), py), Error);  // python disagrees too
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
