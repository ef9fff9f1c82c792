#include "agentr1/core/trajectory.h"

#include <gtest/gtest.h>

#include <string>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"

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
  EXPECT_FALSE(t.to_json().contains("data_source"));  // "" is not written
  t.data_source = "arith";
  EXPECT_EQ(t.to_json()["data_source"], "arith");
  EXPECT_EQ(Trajectory::from_json(t.to_json()).data_source, "arith");
}

// infra_failure is on disk only when set; take_infra_failures moves the marked
// trajectories out, and a member left alone in its group with them.
TEST(TrajectoryTest, InfraFailureRoundTripsAndIsTakenOut) {
  // Groups: a = {t0, t1, t2} loses t1; b = {t3, t4} loses t4, leaving t3 alone; c = {t5}
  // (a group of one, as with rollout.n=1) stays.
  std::vector<Trajectory> ts(6);
  const char* groups[] = {"a", "a", "a", "b", "b", "c"};
  for (size_t i = 0; i < ts.size(); ++i) {
    ts[i].uid = "t" + std::to_string(i);
    ts[i].group = groups[i];
  }
  ts[1].infra_failure = "tool 'python': the sandbox could not start";
  ts[4].infra_failure = "reward function 'judge': timed out";
  // On disk only when set, and read back.
  EXPECT_FALSE(ts[0].to_json().contains("infra_failure"));
  EXPECT_EQ(Trajectory::from_json(ts[1].to_json()).infra_failure, ts[1].infra_failure);
  const InfraSplit split = take_infra_failures(ts);
  auto uids = [](const std::vector<Trajectory>& v) {
    std::vector<std::string> u;
    for (const auto& t : v) u.push_back(t.uid);
    return u;
  };
  EXPECT_EQ(uids(split.failed), (std::vector<std::string>{"t1", "t4"}));
  EXPECT_EQ(uids(split.orphaned), (std::vector<std::string>{"t3"}));
  EXPECT_EQ(uids(ts), (std::vector<std::string>{"t0", "t2", "t5"}));
}

// The typed fields are written into "info" under the keys they had as info entries,
// first and in a fixed order, and read back out of it; info keeps only what is logged.
TEST(StepTest, TypedFieldsRoundTripUnderInfoWithTheirKeys) {
  Step s;
  s.prompt_ids = {1, 2};
  s.response_ids = {3};
  s.response_logprobs = {-0.5f};
  s.finish = FinishReason::kStopToken;
  s.anchor = "You are in a room.";
  s.game_reward = 0.1f;  // not a double: stored and read back as the float it is
  s.info["turn"] = 2;
  s.info["tool_calls"] = 1;
  s.response_text = "in memory only";
  const json j = s.to_json();
  EXPECT_EQ(j["info"].dump(),
            json::parse(R"({"finish_reason":"stop_token","anchor":"You are in a room.",)"
                        R"("game_reward":0.10000000149011612,"turn":2,"tool_calls":1})")
                .dump());
  EXPECT_FALSE(j.contains("response_text"));
  const Step back = Step::from_json(j);
  EXPECT_EQ(back.kind, StepKind::kAction);
  EXPECT_EQ(back.finish, FinishReason::kStopToken);
  EXPECT_EQ(back.anchor, s.anchor);
  ASSERT_TRUE(back.game_reward.has_value());
  EXPECT_EQ(*back.game_reward, 0.1f);
  EXPECT_EQ(back.info, s.info) << "the typed keys leave info";
  EXPECT_EQ(back.response_text, "");
  EXPECT_EQ(back.to_json(), j);

  // A summary step: "kind" then "finish_reason", as the summarize policy wrote them.
  Step sum;
  sum.kind = StepKind::kSummary;
  sum.finish = FinishReason::kLength;
  sum.info["summarized_turns"] = 3;
  EXPECT_EQ(sum.to_json()["info"].dump(),
            R"({"kind":"summary","finish_reason":"length","summarized_turns":3})");
  EXPECT_EQ(Step::from_json(sum.to_json()).kind, StepKind::kSummary);

  // Unset fields write nothing: a hand-built step's info is what it holds.
  Step plain;
  EXPECT_EQ(plain.to_json()["info"], json::object());
  const Step plain_back = Step::from_json(plain.to_json());
  EXPECT_FALSE(plain_back.finish.has_value());
  EXPECT_FALSE(plain_back.game_reward.has_value());
  EXPECT_EQ(plain_back.anchor, "");
}

// A dump written when these were info entries (key order as the flow wrote them) loads
// into the typed fields.
TEST(StepTest, OldDumpsLoad) {
  const json old = json::parse(R"({"prompt_ids":[1],"response_ids":[2,3],"response_logprobs":[-1,-2],
    "reward":0.0,"done":true,"truncated":false,"info":{"turn":0,"finish_reason":"aborted",
    "max_new_tokens":8,"anchor":"<start>","invalid_format":0,"game_reward":1.0,
    "truncated_by":"aborted"},"policy_version":3})");
  const Step s = Step::from_json(old);
  EXPECT_EQ(s.finish, FinishReason::kAborted);
  EXPECT_EQ(s.anchor, "<start>");
  EXPECT_EQ(s.game_reward, 1.0f);
  EXPECT_EQ(s.info, json::parse(R"({"turn":0,"max_new_tokens":8,"invalid_format":0,"truncated_by":"aborted"})"));
  // Same keys and values; the typed ones now come first.
  EXPECT_EQ(s.to_json()["info"].dump(),
            R"({"finish_reason":"aborted","anchor":"<start>","game_reward":1.0,"turn":0,)"
            R"("max_new_tokens":8,"invalid_format":0,"truncated_by":"aborted"})");
}

TEST(StepTest, TypedKeysAreCheckedBothWays) {
  using testing::error_of;
  Step s;
  s.info["anchor"] = "x";  // must be Step::anchor
  std::string e = error_of([&] { s.to_json(); });
  EXPECT_NE(e.find("Step::info holds 'anchor'"), std::string::npos) << e;
  EXPECT_TRUE(is_step_field_info_key("finish_reason"));
  EXPECT_TRUE(is_step_field_info_key("kind"));
  EXPECT_TRUE(is_step_field_info_key("game_reward"));
  EXPECT_FALSE(is_step_field_info_key("turn"));

  json j = Step().to_json();
  j["info"]["finish_reason"] = "timeout";
  e = error_of([&] { Step::from_json(j); });
  EXPECT_NE(e.find("'finish_reason' must be one of stop_token, stop_string, length, context_full, aborted, "
                   "got \"timeout\""),
            std::string::npos)
      << e;
  j = Step().to_json();
  j["info"]["kind"] = "tool";
  e = error_of([&] { Step::from_json(j); });
  EXPECT_NE(e.find("'kind' must be \"action\" or \"summary\", got \"tool\""), std::string::npos) << e;
  j = Step().to_json();
  j["info"]["anchor"] = 3;
  EXPECT_NE(error_of([&] { Step::from_json(j); }).find("'anchor' must be a string"), std::string::npos);
  j = Step().to_json();
  j["info"]["game_reward"] = "1";
  EXPECT_NE(error_of([&] { Step::from_json(j); }).find("'game_reward' must be a number"), std::string::npos);
}

}  // namespace
}  // namespace agentr1
