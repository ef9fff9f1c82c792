#include "agentr1/tasks/arithmetic/arithmetic.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/tasks/calculator.h"
#include "agentr1/tasks/reward.h"

namespace agentr1::tasks {
namespace {

std::vector<int64_t> literals(const std::string& expr) {
  std::vector<int64_t> out;
  std::regex num("[0-9]+");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), num); it != std::sregex_iterator(); ++it) {
    out.push_back(std::stoll(it->str()));
  }
  return out;
}

TEST(Arithmetic, DeterministicForSeedAndIndex) {
  ArithmeticOptions o;
  for (int64_t i = 0; i < 20; ++i) {
    ArithProblem a = generate_problem(11, i, o);
    ArithProblem b = generate_problem(11, i, o);
    EXPECT_EQ(a.question, b.question);
    EXPECT_EQ(a.expression, b.expression);
    EXPECT_EQ(a.ground_truth, b.ground_truth);
    EXPECT_EQ(a.index, i);
    EXPECT_EQ(a.seed, 11u);
  }
  EXPECT_NE(generate_problem(11, 0, o).question, generate_problem(12, 0, o).question);
  EXPECT_NE(generate_problem(11, 0, o).question, generate_problem(11, 1, o).question);
}

TEST(Arithmetic, ProblemsAreWellFormed) {
  ArithmeticOptions o;
  std::map<int, int> per_level;
  std::set<std::string> scenarios, questions;
  int repeated_sentence = 0;
  for (int64_t i = 0; i < 600; ++i) {
    ArithProblem p = generate_problem(3, i, o);
    ASSERT_GE(p.level, 1);
    ASSERT_LE(p.level, 4);
    per_level[p.level]++;
    scenarios.insert(p.scenario);
    questions.insert(p.question);
    EXPECT_EQ(static_cast<int>(p.steps.size()), p.level) << p.expression;
    EXPECT_GT(p.ground_truth, 0) << p.expression;
    for (const auto& st : p.steps) EXPECT_GT(st.result, 0) << p.expression << " step " << st.expression;
    EXPECT_EQ(p.steps.back().result, p.ground_truth);
    // The calculator (independently tested) agrees, and the result is an exact integer.
    CalcResult r = evaluate_expression(p.expression);
    ASSERT_TRUE(r.ok) << p.expression << ": " << r.text;
    EXPECT_EQ(r.text, std::to_string(p.ground_truth)) << p.expression;
    // Every number of the expression is stated in the question; operands are not tiny.
    for (int64_t v : literals(p.expression)) {
      EXPECT_NE(p.question.find(std::to_string(v)), std::string::npos) << v << " missing in: " << p.question;
      EXPECT_GE(v, 3) << p.expression;
      EXPECT_LT(v, 10000) << p.expression;
    }
    // GSM8K answer convention, scored correct by the reward.
    EXPECT_EQ(p.answer.substr(p.answer.rfind('\n') + 1), "#### " + std::to_string(p.ground_truth));
    EXPECT_EQ(gsm8k_score(p.answer, json(std::to_string(p.ground_truth))), 1.0f);
    EXPECT_EQ(p.question.find('{'), std::string::npos) << "unfilled placeholder: " << p.question;
    // The same sentence skeleton (numbers masked) twice in one problem reads badly.
    std::string masked = std::regex_replace(p.question, std::regex("[0-9]+"), "#");
    std::set<std::string> seen;
    size_t start = 0;
    bool repeat = false;
    while (start < masked.size()) {
      size_t end = masked.find_first_of(".?", start);
      if (end == std::string::npos) end = masked.size();
      std::string sentence = masked.substr(start, end - start);
      if (!seen.insert(sentence).second) repeat = true;
      start = end + 1;
    }
    repeated_sentence += repeat ? 1 : 0;
  }
  for (int l = 1; l <= 4; ++l) EXPECT_GT(per_level[l], 100) << "level " << l;
  EXPECT_EQ(repeated_sentence, 0) << "a clause template repeated inside one problem";
  EXPECT_GE(scenarios.size(), 7u);
  EXPECT_GT(questions.size(), 590u);
}

// Independent check of the arithmetic with Python's exact Fractions: the canonical
// expression and every step evaluate to the recorded integers.
TEST(Arithmetic, MatchesPythonReference) {
  ArithmeticOptions o;
  std::vector<ArithProblem> ps;
  for (int64_t i = 0; i < 300; ++i) ps.push_back(generate_problem(99, i, o));
  std::string dir = ::testing::TempDir();
  std::string in_path = dir + "/arith_exprs.json", py_path = dir + "/arith_ref.py",
              out_path = dir + "/arith_ref.json";
  json rows = json::array();
  for (const auto& p : ps) {
    json steps = json::array();
    for (const auto& s : p.steps) steps.push_back(s.expression);
    rows.push_back({{"expr", p.expression}, {"steps", steps}});
  }
  std::ofstream(in_path) << rows.dump();
  {
    std::ofstream py(py_path);
    py << "import json, re, sys\n"
          "from fractions import Fraction\n"
          "def ev(e):\n"
          "    v = eval(re.sub(r'(\\d+)', r'Fraction(\\1)', e), {'Fraction': Fraction, '__builtins__': {}})\n"
          "    return str(v.numerator) if v.denominator == 1 else 'frac %s' % v\n"
          "rows = json.load(open(sys.argv[1]))\n"
          "json.dump([[ev(r['expr']), [ev(s) for s in r['steps']]] for r in rows], open(sys.argv[2], 'w'))\n";
  }
  std::string cmd = std::string(AGENTR1_PYTHON) + " " + py_path + " " + in_path + " " + out_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  json ref;
  std::ifstream(out_path) >> ref;
  ASSERT_EQ(ref.size(), ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(ref[i][0].get<std::string>(), std::to_string(ps[i].ground_truth)) << ps[i].expression;
    for (size_t k = 0; k < ps[i].steps.size(); ++k) {
      EXPECT_EQ(ref[i][1][k].get<std::string>(), std::to_string(ps[i].steps[k].result))
          << ps[i].steps[k].expression;
    }
  }
}

TEST(Arithmetic, LevelAndDigitOptions) {
  ArithmeticOptions o;
  o.min_level = o.max_level = 1;
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(generate_problem(5, i, o).steps.size(), 1u);
  o.min_level = o.max_level = 4;
  for (int64_t i = 0; i < 50; ++i) {
    ArithProblem p = generate_problem(5, i, o);
    EXPECT_EQ(p.level, 4);
    EXPECT_EQ(p.steps.size(), 4u);
  }
  // Bigger numbers: every literal has at least 3 digits except divisors and counts.
  o = ArithmeticOptions();
  o.min_digits = o.max_digits = 4;
  o.start_min_digits = o.start_max_digits = 5;
  int64_t max_lit = 0;
  for (int64_t i = 0; i < 50; ++i) {
    for (int64_t v : literals(generate_problem(5, i, o).expression)) max_lit = std::max(max_lit, v);
  }
  EXPECT_GE(max_lit, 10000);
  EXPECT_LT(max_lit, 100000);
}

TEST(Arithmetic, TrainAndTestAreDisjoint) {
  ArithDatasetOptions train_o, test_o;
  test_o.problem.split = DataSplit::kTest;
  std::vector<Sample> train = make_arith_dataset(3000, 42, train_o);
  std::vector<Sample> test = make_arith_dataset(1000, 42, test_o);
  std::set<std::string> train_exprs, train_questions;
  for (const auto& s : train) {
    train_exprs.insert(s.extra_info["expression"].get<std::string>());
    train_questions.insert(s.prompt.back()["content"].get<std::string>());
  }
  int overlap = 0;
  for (const auto& s : test) {
    overlap += train_exprs.count(s.extra_info["expression"].get<std::string>());
    overlap += train_questions.count(s.prompt.back()["content"].get<std::string>());
    EXPECT_EQ(s.extra_info["split"], "test");
  }
  EXPECT_EQ(overlap, 0);
  // Level-1 problems with small numbers collide easily by chance; the hash partition
  // still keeps the splits apart.
  ArithmeticOptions small;
  small.min_level = small.max_level = 1;
  small.min_digits = small.max_digits = 1;
  small.start_min_digits = small.start_max_digits = 1;
  small.count_min_digits = small.count_max_digits = 1;
  small.min_divisor = 2;
  small.max_divisor = 9;
  std::set<std::string> a;
  for (int64_t i = 0; i < 400; ++i) a.insert(generate_problem(1, i, small).expression);
  small.split = DataSplit::kTest;
  int collisions = 0;
  for (int64_t i = 0; i < 400; ++i) collisions += a.count(generate_problem(1, i, small).expression);
  EXPECT_EQ(collisions, 0);
  EXPECT_LT(a.size(), 400u);  // the space is small: repeats within one split do happen
}

TEST(Arithmetic, SampleSchema) {
  ArithDatasetOptions o;
  std::vector<Sample> ds = make_arith_dataset(5, 8, o, /*first_index=*/10);
  ASSERT_EQ(ds.size(), 5u);
  const Sample& s = ds[0];
  ASSERT_EQ(s.prompt.size(), 2u);
  EXPECT_EQ(s.prompt[0]["role"], "system");
  EXPECT_EQ(s.prompt[0]["content"], kDefaultArithSystemPrompt);
  EXPECT_EQ(s.prompt[1]["role"], "user");
  EXPECT_EQ(s.agent_name, "tool");
  EXPECT_EQ(s.reward_style, "rule");
  EXPECT_TRUE(s.ground_truth.is_string());
  EXPECT_EQ(s.env_kwargs, json({{"tools", json::array({"calculator"})}}));
  EXPECT_EQ(s.data_source, "arith_calc");
  EXPECT_EQ(s.extra_info["index"], 10);
  for (const char* k : {"level", "expression", "answer", "question", "split"}) {
    EXPECT_TRUE(s.extra_info.contains(k)) << k;
  }
  ArithProblem p = generate_problem(8, 10, o.problem);
  EXPECT_EQ(s.prompt[1]["content"], p.question);
  EXPECT_EQ(s.ground_truth, std::to_string(p.ground_truth));
  // Round trip through the schema.
  Sample back = Sample::from_json(s.to_json());
  EXPECT_EQ(back.to_json(), s.to_json());

  o.prompt.use_system_prompt = false;
  o.prompt.user_suffix = "Use the calculator.";
  Sample t = make_arith_dataset(1, 8, o, 10)[0];
  ASSERT_EQ(t.prompt.size(), 1u);
  EXPECT_EQ(t.prompt[0]["content"], p.question + " Use the calculator.");
}

// The python variant: the same problems and reward, the python tool offered instead of
// the calculator.
TEST(Arithmetic, PythonToolSamples) {
  ArithDatasetOptions calc;
  ArithDatasetOptions py;
  py.tool = ArithTool::kPython;
  py.prompt.system_prompt = kPythonArithSystemPrompt;
  const std::vector<Sample> a = make_arith_dataset(20, 8, calc);
  const std::vector<Sample> b = make_arith_dataset(20, 8, py);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i].env_kwargs, json({{"tools", json::array({"python"})}}));
    EXPECT_EQ(a[i].env_kwargs, json({{"tools", json::array({"calculator"})}}));
    EXPECT_EQ(b[i].prompt[0]["content"], kPythonArithSystemPrompt);
    EXPECT_EQ(b[i].prompt[1], a[i].prompt[1]);
    EXPECT_EQ(b[i].ground_truth, a[i].ground_truth);
    EXPECT_EQ(b[i].data_source, a[i].data_source);
    EXPECT_EQ(b[i].extra_info, a[i].extra_info);
  }
  EXPECT_EQ(parse_arith_tool("python"), ArithTool::kPython);
  EXPECT_EQ(parse_arith_tool("calculator"), ArithTool::kCalculator);
  EXPECT_STREQ(arith_tool_name(ArithTool::kPython), "python");
  try {
    parse_arith_tool("Python3");
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'Python3'"), std::string::npos) << m;
    EXPECT_NE(m.find("calculator, python"), std::string::npos) << m;
  }
}

TEST(Arithmetic, OptionErrors) {
  ArithmeticOptions o;
  o.max_level = 5;
  EXPECT_THROW(generate_problem(1, 0, o), Error);
  o = ArithmeticOptions();
  o.min_digits = 4;
  o.max_digits = 3;
  try {
    generate_problem(1, 0, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("min_digits <= max_digits"), std::string::npos) << e.what();
  }
  EXPECT_THROW(generate_problem(1, -1, ArithmeticOptions()), Error);
  EXPECT_THROW(make_arith_dataset(-1, 1), Error);
  EXPECT_THROW(parse_data_split("validation"), Error);
  EXPECT_EQ(parse_data_split("test"), DataSplit::kTest);
}

}  // namespace
}  // namespace agentr1::tasks
