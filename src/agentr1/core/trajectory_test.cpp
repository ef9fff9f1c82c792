#include "agentr1/core/trajectory.h"

#include <gtest/gtest.h>

#include <string>

#include "agentr1/core/error.h"

namespace agentr1 {
namespace {

TEST(SampleTest, ParsesAgentR1Row) {
  json row = json::parse(R"({"prompt":[{"role":"user","content":"2+2?"}],
    "agent_name":"tool","reward_model":{"style":"rule","ground_truth":"4"},
    "env_kwargs":{"max_turns":3},"data_source":"arith","extra_info":{"index":7}})");
  Sample s = Sample::from_json(row);
  EXPECT_EQ(s.prompt.size(), 1u);
  EXPECT_EQ(s.agent_name, "tool");
  EXPECT_EQ(s.ground_truth.get<std::string>(), "4");
  EXPECT_EQ(s.env_kwargs["max_turns"].get<int>(), 3);
  EXPECT_EQ(Sample::from_json(s.to_json()).to_json(), s.to_json());
}

TEST(SampleTest, MalformedRowNamesTheField) {
  try {
    Sample::from_json(json::parse(R"({"prompt":"hi"})"));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'prompt'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Sample::from_json(json::parse(R"({"x":1})")), Error);
  EXPECT_THROW(Sample::from_json(json::parse(R"({"prompt":[{"content":"a"}]})")), Error);
}

// Agent-R1's examples/data_preprocess/gsm8k_tool.py writes env_kwargs with
// json.dumps({...}): a string holding a JSON object. The row below is what that
// script's json.dumps produces for one GSM8K row (python3: json.dumps of the dict).
TEST(SampleTest, EnvKwargsAsJsonStringIsParsed) {
  json row = json::parse(R"({"prompt":[{"role":"user","content":"q"}],
    "agent_name":"agent_env_loop","reward_model":{"style":"rule","ground_truth":"72"},
    "env_kwargs":"{\"env_type\": \"tool\", \"tools\": [\"calc_gsm8k_reward\"], \"tool_format\": \"hermes\", \"tools_kwargs\": {\"ground_truth\": \"72\"}}"})");
  ASSERT_TRUE(row["env_kwargs"].is_string());
  Sample s = Sample::from_json(row);
  ASSERT_TRUE(s.env_kwargs.is_object());
  EXPECT_EQ(s.env_kwargs.size(), 4u);
  EXPECT_EQ(s.env_kwargs["env_type"], "tool");
  EXPECT_EQ(s.env_kwargs["tools"], json::array({"calc_gsm8k_reward"}));
  EXPECT_EQ(s.env_kwargs["tool_format"], "hermes");
  EXPECT_EQ(s.env_kwargs["tools_kwargs"]["ground_truth"], "72");
  // Written back as an object: the round trip goes through the object form.
  EXPECT_TRUE(s.to_json()["env_kwargs"].is_object());
  EXPECT_EQ(Sample::from_json(s.to_json()).env_kwargs, s.env_kwargs);
  // An empty object in a string is fine too.
  EXPECT_EQ(Sample::from_json(json::parse(R"({"prompt":[{"role":"user","content":"q"}],
    "env_kwargs":"{}"})")).env_kwargs, json::object());
}

std::string from_json_error(const std::string& row_text) {
  try {
    Sample::from_json(json::parse(row_text));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SampleTest, EnvKwargsStringThatIsNotAnObjectNamesFieldAndWhatWasFound) {
  // Not JSON at all.
  std::string e = from_json_error(
      R"({"prompt":[{"role":"user","content":"q"}],"env_kwargs":"{tools: [calc]}"})");
  EXPECT_NE(e.find("'env_kwargs'"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("{tools: [calc]}"), std::string::npos) << e;
  // JSON, but a list.
  e = from_json_error(
      R"({"prompt":[{"role":"user","content":"q"}],"env_kwargs":"[\"calc\"]"})");
  EXPECT_NE(e.find("'env_kwargs'"), std::string::npos) << e;
  EXPECT_NE(e.find("array"), std::string::npos) << e;
  EXPECT_NE(e.find("[\"calc\"]"), std::string::npos) << e;
  EXPECT_NE(e.find("must hold a JSON object"), std::string::npos) << e;
  // JSON, but a number; and a non-string non-object value.
  e = from_json_error(R"({"prompt":[{"role":"user","content":"q"}],"env_kwargs":"3"})");
  EXPECT_NE(e.find("'env_kwargs'"), std::string::npos) << e;
  EXPECT_NE(e.find("number 3"), std::string::npos) << e;
  e = from_json_error(R"({"prompt":[{"role":"user","content":"q"}],"env_kwargs":[1]})");
  EXPECT_NE(e.find("'env_kwargs' must be an object"), std::string::npos) << e;
  EXPECT_NE(e.find("array [1]"), std::string::npos) << e;
}

TEST(TrajectoryTest, RoundTripAndTotalReward) {
  Trajectory t;
  t.uid = "u1";
  t.group = "g";
  t.outcome_reward = 1.0f;
  Step s;
  s.prompt_ids = {1, 2, 3};
  s.response_ids = {4, 5};
  s.response_logprobs = {-0.5f, -0.25f};
  s.reward = 0.5f;
  s.done = true;
  t.steps.push_back(s);
  EXPECT_FLOAT_EQ(t.total_reward(), 1.5f);
  Trajectory back = Trajectory::from_json(t.to_json());
  EXPECT_EQ(back.steps[0].response_ids, s.response_ids);
  EXPECT_EQ(back.steps[0].response_logprobs, s.response_logprobs);
  EXPECT_EQ(back.to_json(), t.to_json());
}

}  // namespace
}  // namespace agentr1
