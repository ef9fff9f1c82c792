#include "agentr1/core/trajectory.h"

#include <gtest/gtest.h>

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
