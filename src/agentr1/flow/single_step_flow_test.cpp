// SingleStepFlow: render the prompt, one generation, outcome reward.
#include "agentr1/flow/single_step_flow.h"

#include "agentr1/flow/test_support.h"
#include "agentr1/flow/trajectory_builder.h"

namespace agentr1::flow {
namespace {

using namespace testing;

TEST(SingleStepFlow, OneGenerationAndReward) {
  register_fakes();
  const TokenIds r = byte_ids("hello, it is 5.\n#### 5");
  TokenIds response = r;
  response.push_back(special("<|im_end|>"));
  ScriptedGenerator gen(ScriptedGenerator::queue({response}));
  FlowContext ctx = make_context(&gen);
  FlowOptions o;
  o.max_new_tokens = 64;
  Sample s = make_sample("What is 2+3?", "5");
  s.prompt.insert(s.prompt.begin(), json{{"role", "system"}, {"content", "Be brief."}});

  Trajectory t = SingleStepFlow().run(s, ctx, o, 42);
  ASSERT_EQ(t.steps.size(), 1u);
  const Step& st = t.steps[0];
  // The prompt is the template's rendering (no tools block) with a generation prompt.
  const std::string want = py_render(s.prompt, json(), true);
  EXPECT_EQ(tok().decode(st.prompt_ids), want);
  EXPECT_EQ(st.prompt_ids, tok().encode(want, true));
  EXPECT_EQ(st.response_ids, response);
  EXPECT_TRUE(st.done);
  EXPECT_FALSE(st.truncated);
  EXPECT_FLOAT_EQ(st.reward, 0.0f);
  EXPECT_FLOAT_EQ(t.outcome_reward, 1.0f);
  EXPECT_EQ(t.metrics["num_turns"], 1);
  EXPECT_EQ(t.metrics["success"], 1);
  EXPECT_EQ(t.metrics["tool_calls"], 0);
  const auto reqs = gen.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].sampling.max_new_tokens, 64);
  EXPECT_EQ(reqs[0].sampling.seed, turn_seed(42, 0));
}

TEST(SingleStepFlow, BudgetsAndOverflow) {
  register_fakes();
  ScriptedGenerator gen([](const GenRequest&) { return turn_ids("#### 5 and more words"); });
  FlowContext ctx = make_context(&gen);
  FlowOptions o;
  o.max_new_tokens = 100;
  o.max_response_tokens = 4;  // the trajectory budget caps the single turn
  Trajectory t = SingleStepFlow().run(make_sample("q", "5"), ctx, o, 1);
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(gen.requests()[0].sampling.max_new_tokens, 4);
  EXPECT_EQ(t.steps[0].response_ids.size(), 4u);
  EXPECT_EQ(t.steps[0].finish, FinishReason::kLength);
  EXPECT_EQ(t.steps[0].to_json()["info"]["finish_reason"], "length");
  EXPECT_EQ(t.metrics["finish/length"], 1);

  o.max_prompt_tokens = 3;
  Trajectory over = SingleStepFlow().run(make_sample("q", "5"), ctx, o, 1);
  EXPECT_TRUE(over.steps.empty());
  EXPECT_EQ(over.metrics["context_overflow"], 1);
  EXPECT_EQ(over.metrics["truncated"], 1);
}

TEST(SingleStepFlow, RegisteredByName) {
  EXPECT_EQ(make_flow("single_step")->name(), "single_step");
  const auto names = flow_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "single_step"), names.end());
  try {
    register_flow("single_step", [] { return std::make_unique<SingleStepFlow>(); });
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "registered twice")) << e.what();
  }
  try {
    make_flow("nope");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "unknown AgentFlow 'nope'; known: single_step")) << e.what();
  }
}

TEST(FlowOptions, ValidateNamesTheField) {
  FlowOptions o;
  o.max_steps = 0;
  try {
    o.validate();
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "max_steps must be >= 1, got 0")) << e.what();
  }
  o = FlowOptions();
  o.sampling.top_p = 0;
  EXPECT_THROW(o.validate(), Error);
  EXPECT_EQ(merge_env_kwargs(json{{"a", 1}, {"b", 2}}, json{{"b", 3}}), (json{{"a", 1}, {"b", 3}}));
}

TEST(ObservationToPromptIds, AllThreeKinds) {
  const text::RenderOptions ro;
  EXPECT_EQ(observation_to_prompt_ids(env::Observation::from_tokens({5, 6}), tok(), tmpl(), ro),
            (TokenIds{5, 6}));
  EXPECT_EQ(observation_to_prompt_ids(env::Observation::from_text("<|im_start|>hello"), tok(),
                                      tmpl(), ro),
            tok().encode("<|im_start|>hello", true));
  EXPECT_EQ(observation_to_prompt_ids(env::Observation::from_text("<|im_start|>hello"), tok(),
                                      tmpl(), ro)
                .front(),
            special("<|im_start|>"));
  const json msgs = json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(observation_to_prompt_ids(env::Observation::from_messages(msgs), tok(), tmpl(), ro),
            tok().encode(py_render(msgs, json(), true), true));
}

}  // namespace
}  // namespace agentr1::flow
