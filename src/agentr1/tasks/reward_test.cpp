#include "agentr1/tasks/reward.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/rng.h"
#include "agentr1/core/testing.h"

namespace agentr1::tasks {
namespace {

using agentr1::testing::error_of;

std::string strict(const std::string& s) {
  auto a = extract_answer(s, AnswerMethod::kStrict);
  return a ? *a : "<none>";
}
std::string flexible(const std::string& s) {
  auto a = extract_answer(s, AnswerMethod::kFlexible);
  return a ? *a : "<none>";
}

TEST(Reward, StrictExtraction) {
  EXPECT_EQ(strict("so the total is 72.\n#### 72"), "72");
  EXPECT_EQ(strict("#### 1,234"), "1234");
  EXPECT_EQ(strict("#### 5 but wait\n#### 7"), "7");  // the last one
  EXPECT_EQ(strict("#### -15"), "-15");
  EXPECT_EQ(strict("#### 12.50"), "12.50");
  EXPECT_EQ(strict("#### 72."), "72.");       // trailing period is part of the match
  EXPECT_EQ(strict("The answer is 72"), "<none>");
  EXPECT_EQ(strict("####72"), "<none>");      // the regex needs exactly "#### "
  EXPECT_EQ(strict("####  72"), "<none>");
  EXPECT_EQ(strict("#### $72"), "<none>");    // '$' is not in the class
  EXPECT_EQ(strict("#### -"), "<none>");
  EXPECT_EQ(strict("#### , then"), "");       // matched "," -> "" after removing commas
  EXPECT_EQ(strict("##### 72"), "72");        // "#### 72" inside "##### 72"
  EXPECT_EQ(strict("#### 3-4"), "3");         // match stops at '-'
  EXPECT_EQ(strict(""), "<none>");
}

TEST(Reward, FlexibleExtraction) {
  EXPECT_EQ(flexible("I think 3 apples, then 5."), "5.");
  EXPECT_EQ(flexible("The answer is 1,234 apples"), "1234");
  EXPECT_EQ(flexible("between 3-5"), "-5");
  EXPECT_EQ(flexible("x - 5"), "5");
  EXPECT_EQ(flexible("Hi, there."), "<none>");  // verl would return "." -> skipped -> ","
  EXPECT_EQ(flexible("no numbers"), "<none>");
  EXPECT_EQ(flexible("#### 72"), "72");
  EXPECT_EQ(flexible("12 then ..."), "12");
}

TEST(Reward, ClipToLast300Bytes) {
  std::string text = "#### 72\n" + std::string(400, 'x');
  EXPECT_EQ(strict(text), "<none>");  // verl only looks at the last 300 characters
  EXPECT_EQ(*extract_answer(text, AnswerMethod::kStrict, /*clip_chars=*/0), "72");
  std::string near_end = std::string(400, 'x') + "#### 72";
  EXPECT_EQ(strict(near_end), "72");
  // A cut through "#### 1234": the clipped text starts at "# 1234".
  std::string cut = "#### 1234" + std::string(296, 'y');  // 305 bytes; clip keeps the last 300
  EXPECT_EQ(strict(cut), "<none>");
  EXPECT_EQ(flexible(cut), "1234");    // the clipped text starts with "1234yyy..."
}

TEST(Reward, NormalizeNumber) {
  EXPECT_EQ(*normalize_number("1,234"), "1234");
  EXPECT_EQ(*normalize_number("12.0"), "12");
  EXPECT_EQ(*normalize_number("12.50"), "12.5");
  EXPECT_EQ(*normalize_number("72."), "72");
  EXPECT_EQ(*normalize_number(".5"), "0.5");
  EXPECT_EQ(*normalize_number("007"), "7");
  EXPECT_EQ(*normalize_number("-0"), "0");
  EXPECT_EQ(*normalize_number("-0.0"), "0");
  EXPECT_EQ(*normalize_number("-3.10"), "-3.1");
  EXPECT_EQ(*normalize_number("$1,000"), "1000");
  EXPECT_FALSE(normalize_number("1.2.3"));
  EXPECT_FALSE(normalize_number(","));
  EXPECT_FALSE(normalize_number("."));
  EXPECT_FALSE(normalize_number(""));
  EXPECT_FALSE(normalize_number("1e5"));
  EXPECT_FALSE(normalize_number("abc"));
  EXPECT_FALSE(normalize_number("--5"));
}

TEST(Reward, Gsm8kScore) {
  EXPECT_EQ(gsm8k_score("so 72\n#### 72", json("72")), 1.0f);
  EXPECT_EQ(gsm8k_score("#### 1,234", json("1234")), 1.0f);
  EXPECT_EQ(gsm8k_score("#### 1234", json("1,234")), 1.0f);
  EXPECT_EQ(gsm8k_score("#### 12.0", json(12)), 1.0f);
  EXPECT_EQ(gsm8k_score("#### 12.5", json(12.5)), 1.0f);
  EXPECT_EQ(gsm8k_score("#### 72.", json("72")), 1.0f);  // verl: 0 (string compare)
  EXPECT_EQ(gsm8k_score("#### -15", json("-15")), 1.0f);
  EXPECT_EQ(gsm8k_score("#### 15", json("-15")), 0.0f);
  EXPECT_EQ(gsm8k_score("#### 73", json("72")), 0.0f);
  EXPECT_EQ(gsm8k_score("no answer here", json("72")), 0.0f);
  EXPECT_EQ(gsm8k_score("#### 5\n#### 72", json("72")), 1.0f);
  EXPECT_EQ(gsm8k_score("#### 72\n#### 5", json("72")), 0.0f);

  Gsm8kScoreOptions o;
  o.format_score = 0.1f;
  EXPECT_FLOAT_EQ(gsm8k_score("#### 73", json("72"), o), 0.1f);   // found but wrong
  EXPECT_FLOAT_EQ(gsm8k_score("72", json("72"), o), 0.0f);        // none found (strict)
  EXPECT_FLOAT_EQ(gsm8k_score("#### ,", json("72"), o), 0.1f);    // found (""), not a number
  o.method = AnswerMethod::kFlexible;
  EXPECT_FLOAT_EQ(gsm8k_score("The answer is 72.", json("72"), o), 1.0f);
  EXPECT_FLOAT_EQ(gsm8k_score("The answer is 71.", json("72"), o), 0.1f);
  EXPECT_FLOAT_EQ(gsm8k_score("No idea.", json("72"), o), 0.0f);

  EXPECT_THROW(gsm8k_score("#### 1", json("seventy")), Error);
  EXPECT_THROW(gsm8k_score("#### 1", json(nullptr)), Error);
}

TEST(Reward, OptionsFromJson) {
  Gsm8kScoreOptions o = Gsm8kScoreOptions::from_json(
      {{"method", "flexible"}, {"format_score", 0.2}, {"score", 2}, {"clip_chars", 0}});
  EXPECT_EQ(o.method, AnswerMethod::kFlexible);
  EXPECT_FLOAT_EQ(o.format_score, 0.2f);
  EXPECT_FLOAT_EQ(o.score, 2.0f);
  EXPECT_EQ(o.clip_chars, 0u);
  // Defaults are Gsm8kScoreOptions'; null is the defaults; integer-valued floats fill
  // clip_chars (bind_into's rule).
  const Gsm8kScoreOptions d = Gsm8kScoreOptions::from_json(json());
  EXPECT_EQ(d.method, AnswerMethod::kStrict);
  EXPECT_FLOAT_EQ(d.score, 1.0f);
  EXPECT_FLOAT_EQ(d.format_score, 0.0f);
  EXPECT_EQ(d.clip_chars, 300u);
  EXPECT_EQ(Gsm8kScoreOptions::from_json({{"clip_chars", 100.0}}).clip_chars, 100u);
  // Errors come from core/config.h's bind_into, the keys named reward_kwargs.<key>.
  std::string e = error_of([] { Gsm8kScoreOptions::from_json({{"mthod", "strict"}}); });
  EXPECT_NE(e.find("unknown config key 'reward_kwargs.mthod'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'reward_kwargs.method'?"), std::string::npos) << e;
  EXPECT_NE(e.find("Valid keys under 'reward_kwargs': method, score, format_score, clip_chars."), std::string::npos)
      << e;
  e = error_of([] { Gsm8kScoreOptions::from_json({{"method", "lenient"}}); });
  EXPECT_NE(e.find("reward_kwargs: 'method': unknown answer extraction method 'lenient'; known: strict, flexible"),
            std::string::npos)
      << e;
  e = error_of([] { Gsm8kScoreOptions::from_json({{"score", "1"}}); });
  EXPECT_NE(e.find("reward_kwargs.score: expected a number, got \"1\""), std::string::npos) << e;
  e = error_of([] { Gsm8kScoreOptions::from_json({{"clip_chars", -1}}); });
  EXPECT_NE(e.find("reward_kwargs: 'clip_chars' must be >= 0 (0 = search the whole response), got -1"),
            std::string::npos)
      << e;
  e = error_of([] { Gsm8kScoreOptions::from_json({{"method", 1}}); });
  EXPECT_NE(e.find("reward_kwargs.method: expected a string, got 1"), std::string::npos) << e;
  EXPECT_THROW(parse_answer_method("exact"), Error);
  // The kwargs struct round-trips the options.
  Gsm8kScoreOptions f;
  f.method = AnswerMethod::kFlexible;
  f.clip_chars = 7;
  EXPECT_EQ(Gsm8kScoreKwargs(f).options().method, AnswerMethod::kFlexible);
  EXPECT_EQ(Gsm8kScoreKwargs(f).options().clip_chars, 7u);
}

TEST(Reward, Registry) {
  register_reward_fn("test_always_half", [](const json&) -> RewardFn {
    return [](const std::string&, const json&, const json&) { return 0.5f; };
  });
  EXPECT_TRUE(has_reward_fn("test_always_half"));
  EXPECT_FLOAT_EQ(make_reward_fn("test_always_half")("x", json("1"), json::object()), 0.5f);
  EXPECT_THROW(register_reward_fn("test_always_half", [](const json&) -> RewardFn { return nullptr; }),
               Error);
  try {
    make_reward_fn("no_such_reward");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown reward function 'no_such_reward'; known: "), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_always_half"), std::string::npos) << msg;
  }
  EXPECT_THROW(register_reward_fn("", [](const json&) -> RewardFn { return nullptr; }), Error);
  EXPECT_THROW(register_reward_fn("test_empty_factory", RewardFnFactory()), Error);
  EXPECT_FALSE(has_reward_fn("test_empty_factory"));
  const std::vector<std::string> names = reward_fn_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "test_always_half"), names.end());
  // A factory's errors name the function.
  register_reward_fn("test_no_options", [](const json& kw) -> RewardFn {
    AGENTR1_CHECK(kw.empty(), "takes no options");
    return [](const std::string&, const json&, const json&) { return 1.0f; };
  });
  EXPECT_NE(error_of([] { make_reward_fn("test_no_options", {{"x", 1}}); }).find("reward function 'test_no_options': takes no options"),
            std::string::npos);
}

// verl's extract_solution re-implemented in Python from its published description
// (verl/utils/reward_score/gsm8k.py): clip to the last 300 characters, strict = last
// findall of "#### (\-?[0-9\.\,]+)" with ',' and '$' removed, flexible = last findall of
// "(\-?[0-9\.\,]+)" not in ('', '.'). Compared on random ASCII strings, after applying
// our documented differences (flexible removes commas; digit-less matches are skipped).
TEST(Reward, MatchesVerlExtractionOnRandomStrings) {
  Rng rng(derive_seed(7, {2}));
  const std::vector<std::string> atoms = {"#### ", "####", "#", " ", "-", ".", ",", "$", "a", "\n",
                                          "0",     "7",    "12", "345", "x", "=", "1,000"};
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i) {
    std::string t;
    int n = static_cast<int>(rng.uniform_int(0, i % 4 == 0 ? 200 : 30));
    for (int k = 0; k < n; ++k) t += atoms[rng.choice(atoms.size())];
    texts.push_back(t);
  }
  std::string dir = ::testing::TempDir();
  std::string in_path = dir + "/reward_texts.json", out_path = dir + "/reward_ref.json",
              py_path = dir + "/reward_ref.py";
  {
    std::ofstream(in_path) << json(texts).dump();
    std::ofstream py(py_path);
    py << "import json, re, sys\n"
          "def extract(s, method):\n"
          "    if len(s) > 300: s = s[-300:]\n"
          "    if method == 'strict':\n"
          "        m = re.findall('#### (\\\\-?[0-9\\\\.\\\\,]+)', s)\n"
          "        return None if not m else m[-1].replace(',', '').replace('$', '')\n"
          "    m = re.findall('(\\\\-?[0-9\\\\.\\\\,]+)', s)\n"
          "    ans = None\n"
          "    for ans in reversed(m):\n"
          "        if ans not in ['', '.']: break\n"
          "    return ans\n"
          "texts = json.load(open(sys.argv[1]))\n"
          "json.dump([[extract(t, 'strict'), extract(t, 'flexible'),\n"
          "            [x for x in re.findall('(\\\\-?[0-9\\\\.\\\\,]+)', t[-300:]) if re.search('[0-9]', x)]]\n"
          "           for t in texts], open(sys.argv[2], 'w'))\n";
  }
  std::string cmd = std::string(AGENTR1_PYTHON) + " " + py_path + " " + in_path + " " + out_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  json ref;
  std::ifstream(out_path) >> ref;
  ASSERT_EQ(ref.size(), texts.size());
  int strict_found = 0, flex_found = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& t = texts[i];
    auto s = extract_answer(t, AnswerMethod::kStrict);
    if (ref[i][0].is_null()) {
      EXPECT_FALSE(s.has_value()) << json(t).dump();
    } else {
      ASSERT_TRUE(s.has_value()) << json(t).dump();
      EXPECT_EQ(*s, ref[i][0].get<std::string>()) << json(t).dump();
      ++strict_found;
    }
    // Flexible: ours = the last digit-bearing match with commas removed.
    auto f = extract_answer(t, AnswerMethod::kFlexible);
    const json& with_digits = ref[i][2];
    if (with_digits.empty()) {
      EXPECT_FALSE(f.has_value()) << json(t).dump();
    } else {
      std::string want = with_digits.back().get<std::string>();
      std::string want_nc;
      for (char c : want) {
        if (c != ',') want_nc += c;
      }
      ASSERT_TRUE(f.has_value()) << json(t).dump();
      EXPECT_EQ(*f, want_nc) << json(t).dump();
      // Where verl's own pick has a digit, it is the same match.
      if (!ref[i][1].is_null() && ref[i][1].get<std::string>().find_first_of("0123456789") != std::string::npos) {
        EXPECT_EQ(ref[i][1].get<std::string>(), want) << json(t).dump();
      }
      ++flex_found;
    }
  }
  EXPECT_GT(strict_found, 50);
  EXPECT_GT(flex_found, 200);
}

}  // namespace
}  // namespace agentr1::tasks
