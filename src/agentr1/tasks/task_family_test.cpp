// The task-family registry and the "arithmetic" family: kwargs parsing and errors,
// generated datasets (splits, levels, determinism, prompt options) and expert
// demonstrations (checked with the Calculator tool and the chat template).
#include "agentr1/tasks/task_family.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/env/python_tool.h"
#include "agentr1/tasks/arithmetic/arithmetic_family.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/calculator.h"
#include "agentr1/tasks/play.h"
#include "agentr1/text/jinja/chat_template.h"

namespace agentr1::tasks {
namespace {

const std::string kEot = "<|im_end|>";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The agentr1::Error message of fn(); a test failure when it throws none.
template <typename Fn>
std::string error_of(Fn&& fn) {
  const std::string e = agentr1::testing::error_of(std::forward<Fn>(fn));
  if (e.empty()) ADD_FAILURE() << "expected an Error";
  return e;
}

std::unique_ptr<TaskFamily> arithmetic(const json& kwargs = json::object()) {
  register_builtin_tasks();
  return make_task_family("arithmetic", kwargs);
}

// The JSON object inside the first <tool_call>...</tool_call> of an action text.
json first_tool_call(const std::string& action) {
  const std::string open = "<tool_call>\n", close = "\n</tool_call>";
  const size_t a = action.find(open);
  if (a == std::string::npos) return json();
  const size_t b = action.find(close, a);
  if (b == std::string::npos) return json();
  return json::parse(action.substr(a + open.size(), b - a - open.size()));
}

// ---------------------------------------------------------------- registry

TEST(TaskFamilyRegistry, BuiltinsAndUnknownNames) {
  register_builtin_tasks();
  register_builtin_tasks();  // idempotent
  EXPECT_TRUE(has_task_family("arithmetic"));
  EXPECT_FALSE(has_task_family("sudoku"));
  const std::vector<std::string> names = task_family_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "arithmetic"), names.end());

  const std::string e = error_of([] { make_task_family("sudoku"); });
  EXPECT_TRUE(contains(e, "unknown task family 'sudoku'")) << e;
  EXPECT_TRUE(contains(e, "known: ")) << e;
  EXPECT_TRUE(contains(e, "arithmetic")) << e;

  auto fam = make_task_family("arithmetic");
  ASSERT_NE(fam, nullptr);
  EXPECT_EQ(fam->name(), "arithmetic");
  EXPECT_TRUE(fam->recipe_defaults().empty());
  EXPECT_EQ(make_task_family("arithmetic", json())->name(), "arithmetic");  // null = defaults
}

class EchoFamily : public TaskFamily {
 public:
  explicit EchoFamily(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::vector<Sample> make_dataset(DataSplit, int64_t n, uint64_t) const override {
    return std::vector<Sample>(static_cast<size_t>(n));
  }
  std::vector<json> demonstrations(int64_t, uint64_t, const text::ChatTemplate&, const std::string&,
                                   std::vector<std::string>*) const override {
    return {};
  }

 private:
  std::string name_;
};

TEST(TaskFamilyRegistry, RegisteringTwiceFailsAndFactoriesRun) {
  register_builtin_tasks();
  std::string e = error_of([] {
    register_task_family("arithmetic", [](const json&) { return std::make_unique<EchoFamily>("arithmetic"); });
  });
  EXPECT_TRUE(contains(e, "task family 'arithmetic' is registered twice")) << e;

  json seen;
  register_task_family("test_echo", [&seen](const json& kw) {
    seen = kw;
    return std::make_unique<EchoFamily>("test_echo");
  });
  EXPECT_TRUE(has_task_family("test_echo"));
  auto fam = make_task_family("test_echo", {{"k", 3}});
  EXPECT_EQ(fam->name(), "test_echo");
  EXPECT_EQ(seen, json({{"k", 3}}));
  EXPECT_EQ(fam->make_dataset(DataSplit::kTrain, 3, 1).size(), 3u);
  e = error_of([] {
    register_task_family("test_echo", [](const json&) { return std::make_unique<EchoFamily>("test_echo"); });
  });
  EXPECT_TRUE(contains(e, "registered twice")) << e;

  // A factory whose family reports another name, an empty factory, an empty name.
  register_task_family("test_misnamed", [](const json&) { return std::make_unique<EchoFamily>("other"); });
  e = error_of([] { make_task_family("test_misnamed"); });
  EXPECT_TRUE(contains(e, "'test_misnamed'") && contains(e, "'other'")) << e;
  EXPECT_THROW(register_task_family("test_empty", nullptr), Error);
  EXPECT_THROW(register_task_family("", [](const json&) { return std::make_unique<EchoFamily>(""); }), Error);
}

// ---------------------------------------------------------------- kwargs

TEST(ArithmeticFamilyKwargs, ErrorsNameTheKeyAndTheRule) {
  std::string e = error_of([] { arithmetic({{"max_levl", 2}}); });
  EXPECT_TRUE(contains(e, "task family 'arithmetic'")) << e;  // context added by the registry
  EXPECT_TRUE(contains(e, "'max_levl'")) << e;
  for (const char* k :
       {"min_level", "max_level", "use_system_prompt", "tools_in_prompt", "restate_expression", "demo_style", "tool"})
    EXPECT_TRUE(contains(e, k)) << "known keys must list " << k << ": " << e;
  e = error_of([] { arithmetic({{"tool", "calc"}}); });
  EXPECT_TRUE(contains(e, "data.task_kwargs.tool: ") && contains(e, "'calc'") && contains(e, "calculator, python"))
      << e;
  e = error_of([] { arithmetic({{"tool", 1}}); });
  EXPECT_TRUE(contains(e, "data.task_kwargs.tool: ") && contains(e, "\"python\"") && contains(e, "got 1")) << e;
  e = error_of([] { arithmetic({{"demo_style", "chained"}}); });
  EXPECT_TRUE(contains(e, "data.task_kwargs.demo_style: ") && contains(e, "chained") && contains(e, "per_step")) << e;
  e = error_of([] { arithmetic({{"demo_style", 2}}); });
  EXPECT_TRUE(contains(e, "data.task_kwargs.demo_style: ") && contains(e, "got 2")) << e;

  e = error_of([] { arithmetic({{"max_level", 5}}); });
  EXPECT_TRUE(contains(e, "'max_level'") && contains(e, "1..4") && contains(e, "got 5")) << e;
  e = error_of([] { arithmetic({{"min_level", 0}}); });
  EXPECT_TRUE(contains(e, "'min_level'") && contains(e, "1..4") && contains(e, "got 0")) << e;

  e = error_of([] { arithmetic({{"min_level", 3}, {"max_level", 2}}); });
  EXPECT_TRUE(contains(e, "min_level") && contains(e, "<= max_level") && contains(e, "3") && contains(e, "2"))
      << e;
  e = error_of([] { arithmetic({{"min_level", 2}}); });  // max_level defaults to 1
  EXPECT_TRUE(contains(e, "<= max_level")) << e;

  e = error_of([] { arithmetic({{"max_level", "2"}}); });
  EXPECT_TRUE(contains(e, "data.task_kwargs.max_level: ") && contains(e, "integer") && contains(e, "\"2\"")) << e;
  e = error_of([] { arithmetic({{"max_level", 2.5}}); });
  EXPECT_TRUE(contains(e, "data.task_kwargs.max_level: ") && contains(e, "integer") &&
              contains(e, "not a whole number"))
      << e;
  e = error_of([] { arithmetic({{"tools_in_prompt", 0}}); });
  EXPECT_TRUE(contains(e, "data.task_kwargs.tools_in_prompt: ") && contains(e, "true or false") &&
              contains(e, "got 0"))
      << e;
  e = error_of([] { arithmetic({{"use_system_prompt", "no"}}); });
  EXPECT_TRUE(contains(e, "data.task_kwargs.use_system_prompt: ") && contains(e, "true or false")) << e;

  e = error_of([] { arithmetic(json::array({1, 2})); });
  EXPECT_TRUE(contains(e, "data.task_kwargs") && contains(e, "arithmetic") && contains(e, "array")) << e;

  // Direct construction validates too.
  ArithmeticFamilyOptions bad;
  bad.max_level = 7;
  EXPECT_THROW({ ArithmeticFamily f(bad); }, Error);
}

TEST(ArithmeticFamilyKwargs, ParsesEveryKey) {
  const json kw = {{"min_level", 2},
                   {"max_level", 4},
                   {"use_system_prompt", false},
                   {"tools_in_prompt", false},
                   {"restate_expression", true},
                   {"demo_style", "per_step"},
                   {"tool", "python"}};
  const ArithmeticFamilyOptions o = ArithmeticFamilyOptions::from_json(kw);
  EXPECT_EQ(o.demo_style, DemoStyle::kPerStep);
  EXPECT_EQ(o.tool, ArithTool::kPython);
  EXPECT_EQ(o.min_level, 2);
  EXPECT_EQ(o.max_level, 4);
  EXPECT_FALSE(o.use_system_prompt);
  EXPECT_FALSE(o.tools_in_prompt);
  EXPECT_TRUE(o.restate_expression);
  EXPECT_EQ(o.to_json(), kw);
  const ArithmeticFamilyOptions d = ArithmeticFamilyOptions::from_json(json::object());
  EXPECT_EQ(d.min_level, 1);
  EXPECT_EQ(d.max_level, 1);
  EXPECT_TRUE(d.use_system_prompt);
  EXPECT_TRUE(d.tools_in_prompt);
  EXPECT_FALSE(d.restate_expression);
  EXPECT_EQ(d.demo_style, DemoStyle::kSingleCall);
  EXPECT_EQ(d.tool, ArithTool::kCalculator);
}

// ---------------------------------------------------------------- datasets

TEST(ArithmeticFamilyDataset, TrainAndTestSplitsAreDisjoint) {
  auto fam = arithmetic({{"min_level", 1}, {"max_level", 2}});
  const std::vector<Sample> train = fam->make_dataset(DataSplit::kTrain, 200, 5);
  const std::vector<Sample> test = fam->make_dataset(DataSplit::kTest, 200, 5);
  ASSERT_EQ(train.size(), 200u);
  ASSERT_EQ(test.size(), 200u);
  std::set<std::string> train_exprs;
  for (const Sample& s : train) train_exprs.insert(s.extra_info.at("expression").get<std::string>());
  for (const Sample& s : test) {
    const std::string expr = s.extra_info.at("expression").get<std::string>();
    EXPECT_EQ(train_exprs.count(expr), 0u) << "test problem also in train: " << expr;
    EXPECT_EQ(s.extra_info.at("split"), "test");
  }
  for (const Sample& s : train) EXPECT_EQ(s.extra_info.at("split"), "train");
  EXPECT_GT(train_exprs.size(), 150u);  // not a handful of problems repeated
}

TEST(ArithmeticFamilyDataset, LevelsRespected) {
  std::set<int> seen;
  for (auto [lo, hi] : {std::pair{1, 1}, std::pair{2, 3}, std::pair{4, 4}}) {
    auto fam = arithmetic({{"min_level", lo}, {"max_level", hi}});
    for (const Sample& s : fam->make_dataset(DataSplit::kTrain, 100, 9)) {
      const int level = s.extra_info.at("level").get<int>();
      EXPECT_GE(level, lo);
      EXPECT_LE(level, hi);
      seen.insert(level);
    }
  }
  EXPECT_EQ(seen, (std::set<int>{1, 2, 3, 4}));  // every allowed level occurs
  for (const Sample& s : arithmetic()->make_dataset(DataSplit::kTest, 50, 9))  // default: level 1
    EXPECT_EQ(s.extra_info.at("level"), 1);
}

TEST(ArithmeticFamilyDataset, DeterministicInSeed) {
  auto fam = arithmetic({{"max_level", 3}});
  auto dump = [](const std::vector<Sample>& v) {
    json a = json::array();
    for (const Sample& s : v) a.push_back(s.to_json());
    return a.dump();
  };
  const std::string a = dump(fam->make_dataset(DataSplit::kTrain, 40, 17));
  EXPECT_EQ(a, dump(arithmetic({{"max_level", 3}})->make_dataset(DataSplit::kTrain, 40, 17)));
  EXPECT_NE(a, dump(fam->make_dataset(DataSplit::kTrain, 40, 18)));
  EXPECT_TRUE(fam->make_dataset(DataSplit::kTrain, 0, 17).empty());
  EXPECT_THROW(fam->make_dataset(DataSplit::kTrain, -1, 17), Error);
}

TEST(ArithmeticFamilyDataset, SamplesAreToolEpisodesScoredByTheirDataSource) {
  for (const Sample& s : arithmetic()->make_dataset(DataSplit::kTrain, 20, 3)) {
    EXPECT_EQ(s.agent_name, "tool");
    EXPECT_EQ(s.data_source, "arith_calc");
    EXPECT_EQ(s.env_kwargs, json({{"tools", json::array({"calculator"})}}));  // no tools_in_prompt by default
    ASSERT_EQ(s.prompt.size(), 2u);
    EXPECT_EQ(s.prompt[0]["role"], "system");
    EXPECT_EQ(s.prompt[1]["role"], "user");
    EXPECT_EQ(s.prompt[1]["content"], s.extra_info.at("question"));
  }
}

TEST(ArithmeticFamilyDataset, PromptOptions) {
  for (const Sample& s : arithmetic({{"use_system_prompt", false}})->make_dataset(DataSplit::kTest, 20, 3)) {
    ASSERT_EQ(s.prompt.size(), 1u);
    EXPECT_EQ(s.prompt[0]["role"], "user");
    EXPECT_FALSE(s.env_kwargs.contains("tools_in_prompt"));
  }
  for (const Sample& s : arithmetic({{"tools_in_prompt", false}})->make_dataset(DataSplit::kTest, 20, 3)) {
    ASSERT_TRUE(s.env_kwargs.contains("tools_in_prompt"));
    EXPECT_EQ(s.env_kwargs["tools_in_prompt"], false);
    EXPECT_EQ(s.env_kwargs["tools"], json::array({"calculator"}));  // the tool still runs
    EXPECT_EQ(s.prompt[0]["role"], "system");
  }
}

// The python variant: the same problems offering the python tool, with its system
// prompt; the recipe defaults give the tool its kwargs (bound as ToolEnv and the tool
// bind them); the calculator default keeps no recipe defaults.
TEST(ArithmeticFamilyDataset, PythonToolVariant) {
  auto calc = arithmetic({{"max_level", 4}});
  auto py = arithmetic({{"max_level", 4}, {"tool", "python"}});
  const std::vector<Sample> a = calc->make_dataset(DataSplit::kTest, 30, 3);
  const std::vector<Sample> b = py->make_dataset(DataSplit::kTest, 30, 3);
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i].env_kwargs, json({{"tools", json::array({"python"})}}));
    EXPECT_EQ(b[i].prompt[0]["content"], kPythonArithSystemPrompt);
    EXPECT_EQ(b[i].prompt[1], a[i].prompt[1]);
    EXPECT_EQ(b[i].ground_truth, a[i].ground_truth);
    EXPECT_EQ(b[i].data_source, "arith_calc");
  }
  for (const Sample& s : arithmetic({{"tool", "python"}, {"tools_in_prompt", false}})->make_dataset(DataSplit::kTrain, 5, 3))
    EXPECT_EQ(s.env_kwargs, json({{"tools", json::array({"python"})}, {"tools_in_prompt", false}}));

  EXPECT_TRUE(calc->recipe_defaults().empty());
  json tree = {{"rollout", {{"env_kwargs", json::object()}}}};
  apply_overrides(tree, py->recipe_defaults());
  const json& ek = tree["rollout"]["env_kwargs"];
  EXPECT_EQ(ek["tool_kwargs"], json({{"python", ArithmeticFamily::python_tool_kwargs()}})) << ek.dump();
  EXPECT_EQ(ek["tool_timeout_s"], 3);
  const env::PythonToolOptions po = env::PythonToolOptions::from_json(ek["tool_kwargs"]["python"]);
  EXPECT_EQ(po.mode, "fresh");
  EXPECT_LT(po.timeout_s, ek["tool_timeout_s"].get<double>()) << "the sandbox's timeout must come first";
  // The user's overrides (layered above) still win over the recipe's.
  apply_overrides(tree, {"++rollout.env_kwargs.tool_kwargs.python.timeout_s=1"});
  EXPECT_EQ(tree["rollout"]["env_kwargs"]["tool_kwargs"]["python"]["mode"], "fresh");
  EXPECT_EQ(tree["rollout"]["env_kwargs"]["tool_kwargs"]["python"]["timeout_s"], 1);
  const std::vector<std::string> per_step =
      arithmetic({{"tool", "python"}, {"max_level", 2}, {"demo_style", "per_step"}})->recipe_defaults();
  ASSERT_EQ(per_step.size(), 3u);
  EXPECT_EQ(per_step[0], "rollout.max_steps=3");
}

// ---------------------------------------------------------------- demonstrations

// The python expert as SFT replays it: print(<expression>) with "//" for the exact
// division, run here through a real sandboxed python tool, prints the ground truth; the
// answer turn is "#### <n>"; the rendered episode lists the python tool and its system
// prompt. play's expert makes the same calls. The batch's calls share one session
// interpreter (demonstration_test checks that it prints what fresh ones would).
TEST(ArithmeticFamilyDemonstrations, PythonExpertPrintsTheGroundTruth) {
  const text::ChatTemplate tmpl = text::ChatTemplate::for_family(text::ChatFamily::kQwen3);
  auto fam = arithmetic({{"min_level", 1}, {"max_level", 4}, {"tool", "python"}});
  env::PythonTool python(env::PythonToolOptions::from_json(ArithmeticFamily::python_tool_kwargs()));
  std::vector<std::string> rendered;
  const std::vector<json> demos = fam->demonstrations(6, 13, tmpl, kEot, &rendered);
  ASSERT_EQ(demos.size(), 6u);
  for (size_t i = 0; i < demos.size(); ++i) {
    const Sample s = Sample::from_json(demos[i].at("sample"));
    const std::string gt = s.ground_truth.get<std::string>();
    EXPECT_EQ(s.env_kwargs["tools"], json::array({"python"}));
    const json& actions = demos[i].at("actions");
    ASSERT_EQ(actions.size(), 2u);
    const json call = first_tool_call(actions[0].get<std::string>());
    ASSERT_TRUE(call.is_object()) << actions[0];
    EXPECT_EQ(call.at("name"), "python");
    const std::string code = call.at("arguments").at("code").get<std::string>();
    EXPECT_EQ(code, "print(" + python_expression(s.extra_info.at("expression").get<std::string>()) + ")");
    EXPECT_EQ(python.execute(call.at("arguments")).text, gt + "\n") << code;
    EXPECT_EQ(actions[1].get<std::string>(), "#### " + gt + kEot);
    EXPECT_TRUE(contains(rendered[i], kPythonArithSystemPrompt)) << rendered[i];
    EXPECT_TRUE(contains(rendered[i], "\"name\": \"python\"")) << rendered[i];  // the tools block
    EXPECT_TRUE(contains(rendered[i], gt + "\n")) << "the tool turn shows what python printed";
    EXPECT_FALSE(contains(rendered[i], "calculator")) << rendered[i];
  }
  const Sample first = fam->make_dataset(DataSplit::kTest, 1, 13)[0];
  auto ep = fam->play_episode(first);
  ep->reset();
  const std::optional<std::string> a = ep->expert_action();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(json::parse(*a).at("name"), "python") << *a;
  const json r = ep->step(*a);
  EXPECT_EQ(r.at("observation"), first.ground_truth.get<std::string>() + "\n") << r.dump();
  const json fin = ep->step(*ep->expert_action());
  EXPECT_TRUE(fin.at("done").get<bool>());
  EXPECT_EQ(fin.at("reward"), 1.0);
}

TEST(ArithmeticFamilyDemonstrations, ActionsSolveTheSampleWithTheCalculator) {
  const text::ChatTemplate tmpl = text::ChatTemplate::for_family(text::ChatFamily::kQwen3);
  Calculator calc;
  for (bool restate : {false, true}) {
    auto fam = arithmetic({{"min_level", 1}, {"max_level", 3}, {"restate_expression", restate}});
    const int64_t n = 60;
    std::vector<std::string> rendered;
    const std::vector<json> demos = fam->demonstrations(n, 11, tmpl, kEot, &rendered);
    ASSERT_EQ(demos.size(), static_cast<size_t>(n));
    EXPECT_EQ(rendered.size(), static_cast<size_t>(n));
    const std::vector<Sample> train = fam->make_dataset(DataSplit::kTrain, n, 11);
    for (int64_t i = 0; i < n; ++i) {
      const json& d = demos[i];
      const Sample s = Sample::from_json(d.at("sample"));
      EXPECT_EQ(d["sample"], train[i].to_json()) << "demo " << i << ": the sample is the train-split problem i";
      const std::string gt = s.ground_truth.get<std::string>();
      const json& actions = d.at("actions");
      ASSERT_EQ(actions.size(), 2u) << "a call turn and a final turn";
      for (const auto& a : actions) {
        const std::string t = a.get<std::string>();
        ASSERT_GE(t.size(), kEot.size());
        EXPECT_EQ(t.substr(t.size() - kEot.size()), kEot);
        EXPECT_TRUE(contains(rendered[i], t)) << "the action is what the template renders:\n" << t;
      }
      const std::string last = actions.back().get<std::string>();
      EXPECT_TRUE(contains(last, "#### " + gt + kEot)) << last;
      const std::string expr = s.extra_info.at("expression").get<std::string>();
      if (restate)
        EXPECT_EQ(last, expr + " = " + gt + "\n#### " + gt + kEot);
      else
        EXPECT_EQ(last, "#### " + gt + kEot);

      const json call = first_tool_call(actions[0].get<std::string>());
      ASSERT_TRUE(call.is_object()) << actions[0];
      EXPECT_EQ(call.at("name"), "calculator");
      const env::ToolResult r = calc.execute(call.at("arguments"));
      EXPECT_EQ(r.text, gt) << call.dump();
      EXPECT_FALSE(contains(last, "<tool_call>"));
    }
  }
}

// The multi-step variant: one call per operation, each on the numbers the calculator
// returned before, the last result the answer; rollout.max_steps leaves room for all.
TEST(ArithmeticFamilyDemonstrations, PerStepDemonstrationsChainTheCalculatorsResults) {
  const text::ChatTemplate tmpl = text::ChatTemplate::for_family(text::ChatFamily::kQwen3);
  Calculator calc;
  auto fam = arithmetic({{"min_level", 4}, {"max_level", 4}, {"demo_style", "per_step"}});
  EXPECT_EQ(fam->recipe_defaults(), std::vector<std::string>{"rollout.max_steps=5"});
  EXPECT_TRUE(arithmetic({{"max_level", 4}})->recipe_defaults().empty());
  const std::vector<json> demos = fam->demonstrations(30, 5, tmpl, kEot);
  for (const json& d : demos) {
    const Sample s = Sample::from_json(d.at("sample"));
    EXPECT_EQ(s.extra_info.at("level"), 4);
    const json& actions = d.at("actions");
    ASSERT_EQ(actions.size(), 5u) << "four call turns and a final turn";
    const std::string question = s.extra_info.at("question").get<std::string>();
    std::vector<std::string> results;  // the calculator's outputs so far
    std::vector<std::string> exprs;
    for (size_t k = 0; k < 4; ++k) {
      const json call = first_tool_call(actions[k].get<std::string>());
      ASSERT_TRUE(call.is_object()) << actions[k];
      const std::string expr = call.at("arguments").at("expression").get<std::string>();
      // One operation on two literal numbers, each from the question or an earlier
      // result of the calculator.
      const size_t sp1 = expr.find(' '), sp2 = expr.rfind(' ');
      ASSERT_TRUE(sp1 != std::string::npos && sp2 == sp1 + 2) << expr;
      EXPECT_NE(std::string("+-*/").find(expr[sp1 + 1]), std::string::npos) << expr;
      for (const std::string operand : {expr.substr(0, sp1), expr.substr(sp2 + 1)}) {
        const bool earlier = std::find(results.begin(), results.end(), operand) != results.end();
        EXPECT_TRUE(earlier || contains(question, operand)) << operand << " in " << expr;
      }
      exprs.push_back(expr);
      results.push_back(calc.execute(call.at("arguments")).text);
    }
    // Dependent calls: every result but the last is an operand of a later call.
    for (size_t k = 0; k + 1 < results.size(); ++k) {
      bool used = false;
      for (size_t j = k + 1; j < exprs.size(); ++j) used = used || contains(" " + exprs[j] + " ", " " + results[k] + " ");
      EXPECT_TRUE(used) << "result " << results[k] << " of call " << k;
    }
    EXPECT_EQ(results.back(), s.ground_truth.get<std::string>());
    EXPECT_EQ(actions[4].get<std::string>(), "#### " + results.back() + kEot);
  }
}

TEST(ArithmeticFamilyDemonstrations, PromptFormatFollowsTheOptions) {
  const text::ChatTemplate tmpl = text::ChatTemplate::for_family(text::ChatFamily::kQwen3);
  for (bool in_prompt : {true, false}) {
    auto fam = arithmetic({{"tools_in_prompt", in_prompt}, {"use_system_prompt", in_prompt}});
    std::vector<std::string> rendered;
    const std::vector<json> demos = fam->demonstrations(10, 4, tmpl, kEot, &rendered);
    ASSERT_EQ(rendered.size(), 10u);
    for (size_t i = 0; i < demos.size(); ++i) {
      const json& env_kwargs = demos[i]["sample"]["env_kwargs"];
      EXPECT_EQ(env_kwargs.contains("tools_in_prompt"), !in_prompt);
      if (!in_prompt) EXPECT_EQ(env_kwargs["tools_in_prompt"], false);
      EXPECT_EQ(contains(rendered[i], "<tools>"), in_prompt) << rendered[i];
      EXPECT_EQ(contains(rendered[i], kDefaultArithSystemPrompt), in_prompt) << rendered[i];
      EXPECT_TRUE(contains(rendered[i], demos[i]["sample"]["extra_info"]["question"].get<std::string>()));
    }
  }
  // Without `rendered` the demonstrations are the same; n = 0 gives none; n < 0 throws.
  auto fam = arithmetic();
  std::vector<std::string> rendered;
  EXPECT_EQ(json(fam->demonstrations(5, 4, tmpl, kEot)), json(fam->demonstrations(5, 4, tmpl, kEot, &rendered)));
  EXPECT_TRUE(fam->demonstrations(0, 4, tmpl, kEot).empty());
  EXPECT_THROW(fam->demonstrations(-1, 4, tmpl, kEot), Error);
}

}  // namespace
}  // namespace agentr1::tasks
