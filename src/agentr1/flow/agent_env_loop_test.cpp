// AgentEnvLoop over ToolEnv with a scripted Generator: token exactness, multi-turn tool
// use, tool failures as feedback, budgets, env_kwargs overrides.
#include "agentr1/flow/agent_env_loop.h"

#include <chrono>

#include "agentr1/core/testing.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/env/agent_env.h"
#include "agentr1/flow/test_support.h"
#include "agentr1/flow/trajectory_builder.h"
#include "agentr1/tasks/builtin.h"

namespace agentr1::flow {
namespace {

using namespace testing;

struct LoopTest : ::testing::Test {
  void SetUp() override { register_fakes(); }
  FlowOptions opts() {
    FlowOptions o;
    o.env_kwargs = {{"tools", {"adder"}}};
    return o;
  }
};

json adder_tools() { return json::array({AdderTool().schema()}); }

// (1) + (2): a call answered by the tool, then the final answer.
TEST_F(LoopTest, MultiTurnToolUseIsTokenExact) {
  const std::string think = "<think>\nhello there, add them\n</think>\n\n";
  const std::string call = call_text("adder", R"({"a": 2, "b": 3})");
  TokenIds r0 = byte_ids(think + call);  // non-canonical on purpose
  r0.push_back(special("<|im_end|>"));
  ASSERT_NE(tok().encode(tok().decode(r0), true), r0);
  const TokenIds r1 = turn_ids("<think>\nok\n</think>\n\nIt is 5.\n#### 5");
  ScriptedGenerator gen(ScriptedGenerator::queue({r0, r1}));
  FlowContext ctx = make_context(&gen);
  const Sample s = make_sample("What is 2+3?", "5");

  Trajectory t = AgentEnvLoop("tool").run(s, ctx, opts(), /*seed=*/11);
  ASSERT_EQ(t.steps.size(), 2u);
  const Step& a = t.steps[0];
  const Step& b = t.steps[1];
  // Exactly what was sampled, with its log-probs and version.
  EXPECT_EQ(a.response_ids, r0);
  EXPECT_EQ(a.response_logprobs.size(), r0.size());
  EXPECT_FLOAT_EQ(a.response_logprobs.back(), -0.01f * static_cast<float>(r0.size()));
  EXPECT_EQ(a.policy_version, 7);
  EXPECT_EQ(b.response_ids, r1);
  // The next prompt starts with the previous prompt + the response ids, verbatim.
  ASSERT_GT(b.prompt_ids.size(), a.prompt_ids.size() + r0.size());
  EXPECT_TRUE(std::equal(a.prompt_ids.begin(), a.prompt_ids.end(), b.prompt_ids.begin()));
  EXPECT_TRUE(std::equal(r0.begin(), r0.end(), b.prompt_ids.begin() + a.prompt_ids.size()));
  // And reads as the template renders the conversation (independent reference).
  json convo = s.prompt;
  EXPECT_EQ(tok().decode(a.prompt_ids), py_render(convo, adder_tools(), true));
  convo.push_back({{"role", "assistant"}, {"content", think + call}});
  convo.push_back({{"role", "tool"}, {"content", "5"}});
  EXPECT_EQ(tok().decode(b.prompt_ids), py_render(convo, adder_tools(), true));
  // The generator saw those exact prompts.
  const auto reqs = gen.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].prompt_ids, a.prompt_ids);
  EXPECT_EQ(reqs[1].prompt_ids, b.prompt_ids);

  // Rewards, flags, info, metrics.
  EXPECT_FLOAT_EQ(a.reward, 0.25f);
  EXPECT_FALSE(a.done);
  EXPECT_FALSE(a.truncated);
  EXPECT_TRUE(b.done);
  EXPECT_FALSE(b.truncated);
  EXPECT_EQ(a.info["tool_calls"], 1);
  EXPECT_EQ(a.finish, FinishReason::kStopToken);
  EXPECT_EQ(a.kind, StepKind::kAction);
  EXPECT_EQ(b.info["turn"], 1);
  // The response decoded once, without <|im_end|>: what the env parsed and the reward read.
  EXPECT_EQ(a.response_text, think + call);
  EXPECT_EQ(b.response_text, "<think>\nok\n</think>\n\nIt is 5.\n#### 5");
  // ToolEnv's anchor: "<start>", then the previous turn's tool responses.
  EXPECT_EQ(a.anchor, "<start>");
  EXPECT_EQ(b.anchor, "5");
  EXPECT_FALSE(a.game_reward.has_value());
  // The dump keeps the typed fields under info with their old keys.
  const json dumped = a.to_json();
  EXPECT_EQ(dumped["info"]["finish_reason"], "stop_token");
  EXPECT_EQ(dumped["info"]["anchor"], "<start>");
  EXPECT_FALSE(dumped["info"].contains("kind"));
  EXPECT_FALSE(a.info.contains("finish_reason"));
  EXPECT_FALSE(a.info.contains("anchor"));
  EXPECT_FLOAT_EQ(t.outcome_reward, 1.0f);
  EXPECT_FLOAT_EQ(t.total_reward(), 1.25f);
  EXPECT_EQ(t.metrics["num_turns"], 2);
  EXPECT_EQ(t.metrics["tool_calls"], 1);
  EXPECT_EQ(t.metrics["tool_errors"], 0);
  EXPECT_EQ(t.metrics["response_length"], static_cast<int>(r0.size() + r1.size()));
  EXPECT_EQ(t.metrics["success"], 1);
  EXPECT_EQ(t.metrics["truncated"], 0);
  EXPECT_EQ(t.metrics["finish/stop_token"], 2);
  // Seeds differ per turn and come from the trajectory seed.
  EXPECT_EQ(reqs[0].sampling.seed, turn_seed(11, 0));
  EXPECT_EQ(reqs[1].sampling.seed, turn_seed(11, 1));
  EXPECT_NE(reqs[0].sampling.seed, reqs[1].sampling.seed);
  // Stop ids: <|im_end|> (also the eos) and <|endoftext|>.
  EXPECT_EQ(reqs[0].sampling.stop_token_ids,
            (TokenIds{special("<|im_end|>"), special("<|endoftext|>")}));
}

TEST_F(LoopTest, WrongAnswerGetsNoOutcomeReward) {
  ScriptedGenerator gen(ScriptedGenerator::queue({turn_ids("#### 6")}));
  FlowContext ctx = make_context(&gen);
  Trajectory t = AgentEnvLoop("tool").run(make_sample("2+3?", "5"), ctx, opts(), 1);
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_TRUE(t.steps[0].done);
  EXPECT_FLOAT_EQ(t.outcome_reward, 0.0f);
  EXPECT_EQ(t.metrics["success"], 0);
}

// A tool whose infrastructure failed (ToolInfraError): the model is told, as for any
// failure, the episode goes on, and the trajectory is marked (the trainer leaves it out
// of its group) with the first failure's message; a plain tool error marks nothing.
TEST_F(LoopTest, InfrastructureFailureOfAToolMarksTheTrajectory) {
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), new ThreadPool(2)}) {
    std::unique_ptr<ThreadPool> own(pool);
    const std::string text = call_text("offline", "{}") + "\n" + call_text("broken", "{}");
    ScriptedGenerator gen(ScriptedGenerator::queue({turn_ids(text), turn_ids("#### 5")}));
    FlowContext ctx = make_context(&gen, pool);
    FlowOptions o = opts();
    o.env_kwargs = {{"tools", {"offline", "broken"}}};
    Trajectory t = AgentEnvLoop("tool").run(make_sample("2+3?", "5"), ctx, o, 3);
    ASSERT_EQ(t.steps.size(), 2u);
    const std::string next = tok().decode(t.steps[1].prompt_ids);
    EXPECT_TRUE(contains(next, "Error: tool 'offline' is unavailable (server 'offline' exited with status 1)"))
        << next;
    EXPECT_EQ(t.metrics["infra_failures"], 1);
    EXPECT_EQ(t.metrics["tool_errors"], 2);
    EXPECT_EQ(t.steps[0].info["calls"][0]["status"], "infra_error");
    EXPECT_EQ(t.steps[0].info["calls"][1]["status"], "error");
    EXPECT_EQ(t.infra_failure, "tool 'offline': server 'offline' exited with status 1");
    EXPECT_FLOAT_EQ(t.outcome_reward, 1.0f);  // scored as usual; the mark decides its use
  }
  // Only a plain failure: no mark.
  const std::string text = call_text("broken", "{}");
  ScriptedGenerator gen(ScriptedGenerator::queue({turn_ids(text), turn_ids("#### 5")}));
  FlowContext ctx = make_context(&gen);
  FlowOptions o = opts();
  o.env_kwargs = {{"tools", {"broken"}}};
  Trajectory t = AgentEnvLoop("tool").run(make_sample("2+3?", "5"), ctx, o, 3);
  EXPECT_EQ(t.metrics["infra_failures"], 0);
  EXPECT_EQ(t.infra_failure, "");
}

// A reward service that failed (InfraError from the reward function): outcome 0 and the
// trajectory marked, not a wrong answer.
TEST_F(LoopTest, InfrastructureFailureOfTheRewardMarksTheTrajectory) {
  ScriptedGenerator gen(ScriptedGenerator::queue({turn_ids("#### 5")}));
  FlowContext ctx = make_context(&gen);
  FlowOptions o = opts();
  o.reward_fn = "flow_test_down";
  Trajectory t = AgentEnvLoop("tool").run(make_sample("2+3?", "5"), ctx, o, 3);
  EXPECT_EQ(t.infra_failure, "reward function 'flow_test_down': judge at 127.0.0.1:9 did not answer");
  EXPECT_FLOAT_EQ(t.outcome_reward, 0.0f);
}

// (3) malformed JSON, unknown tool, a throwing tool, a timed-out tool.
TEST_F(LoopTest, ToolFailuresAreVisibleCountedAndTheEpisodeContinues) {
  ThreadPool tools(2);
  const std::string text = call_text("adder", R"({"a": 1,})") + "\n" + call_text("calc", "{}") +
                           "\n" + call_text("broken", "{}") + "\n" + call_text("slow", "{}");
  ScriptedGenerator gen(ScriptedGenerator::queue({turn_ids(text), turn_ids("#### 5")}));
  FlowContext ctx = make_context(&gen, &tools);
  FlowOptions o = opts();
  o.env_kwargs = {{"tools", {"adder", "broken", "slow"}}, {"tool_timeout_s", 0.1}};
  Trajectory t = AgentEnvLoop("tool").run(make_sample("2+3?", "5"), ctx, o, 3);
  ASSERT_EQ(t.steps.size(), 2u);
  const std::string next = tok().decode(t.steps[1].prompt_ids);
  EXPECT_TRUE(contains(next, "Error: malformed tool call")) << next;
  EXPECT_TRUE(contains(next, "Error: unknown tool 'calc'; available tools: adder, broken, slow"))
      << next;
  EXPECT_TRUE(contains(next, "Error: tool 'broken' failed: boom")) << next;
  EXPECT_TRUE(contains(next, "Error: tool 'slow' timed out after 0.1 s")) << next;
  EXPECT_EQ(t.metrics["tool_calls"], 4);
  EXPECT_EQ(t.metrics["tool_errors"], 4);
  EXPECT_EQ(t.metrics["malformed_calls"], 1);
  EXPECT_EQ(t.metrics["unknown_tools"], 1);
  EXPECT_EQ(t.metrics["tool_timeouts"], 1);
  EXPECT_TRUE(t.steps[1].done);
  EXPECT_FLOAT_EQ(t.outcome_reward, 1.0f);
}

// (4) budgets.
TEST_F(LoopTest, PerTurnCapAndResponseBudget) {
  const TokenIds call = turn_ids(call_text("adder", R"({"a": 2, "b": 3})"));
  ASSERT_GT(call.size(), 20u);
  // Every turn calls the tool; two turns use the whole budget.
  ScriptedGenerator gen([&](const GenRequest&) { return call; });
  FlowContext ctx = make_context(&gen);
  FlowOptions o = opts();
  o.max_steps = 10;
  o.max_new_tokens = 1000;
  const int n = static_cast<int>(call.size());
  o.max_response_tokens = 2 * n;
  Trajectory t = AgentEnvLoop("tool").run(make_sample("q", "5"), ctx, o, 5);
  const auto reqs = gen.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].sampling.max_new_tokens, 2 * n) << "min(max_new_tokens, budget left)";
  EXPECT_EQ(reqs[1].sampling.max_new_tokens, n);
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_FALSE(t.steps[0].truncated);
  EXPECT_TRUE(t.steps[1].truncated);
  EXPECT_FALSE(t.steps[1].done);
  EXPECT_EQ(t.steps[1].info["truncated_by"], "response_budget");
  EXPECT_EQ(t.metrics["response_budget_exhausted"], 1);
  EXPECT_EQ(t.metrics["truncated"], 1);
  EXPECT_EQ(t.metrics["response_length"], 2 * n);
}

TEST_F(LoopTest, MaxNewTokensCapsEachTurn) {
  ScriptedGenerator gen([&](const GenRequest&) { return turn_ids("#### 5"); });
  FlowContext ctx = make_context(&gen);
  FlowOptions o = opts();
  o.max_new_tokens = 3;
  Trajectory t = AgentEnvLoop("tool").run(make_sample("q", "5"), ctx, o, 5);
  ASSERT_GE(gen.requests().size(), 1u);
  EXPECT_EQ(gen.requests()[0].sampling.max_new_tokens, 3);
  EXPECT_EQ(t.steps[0].response_ids.size(), 3u);
  // A cut answer without tool markup still ends the episode (the env decides).
  EXPECT_TRUE(t.steps[0].done);
}

TEST_F(LoopTest, MaxStepsTruncates) {
  const TokenIds call = turn_ids(call_text("adder", R"({"a": 2, "b": 3})"));
  ScriptedGenerator gen([&](const GenRequest&) { return call; });
  FlowContext ctx = make_context(&gen);
  FlowOptions o = opts();
  o.max_steps = 3;
  Trajectory t = AgentEnvLoop("tool").run(make_sample("q", "5"), ctx, o, 5);
  ASSERT_EQ(t.steps.size(), 3u);
  EXPECT_TRUE(t.steps.back().truncated);
  EXPECT_FALSE(t.steps.back().done);
  EXPECT_EQ(t.steps.back().info["truncated_by"], "max_steps");
  EXPECT_EQ(t.metrics["max_steps_reached"], 1);
  EXPECT_EQ(t.metrics["tool_calls"], 3);
  EXPECT_FLOAT_EQ(t.outcome_reward, 0.0f);
  for (size_t i = 0; i + 1 < t.steps.size(); ++i) EXPECT_FALSE(t.steps[i].truncated);
}

TEST_F(LoopTest, ContextOverflowEndsTruncatedNotCrashing) {
  const TokenIds call = turn_ids(call_text("adder", R"({"a": 2, "b": 3})"));
  // First prompt fits, the second does not.
  {
    ScriptedGenerator gen([&](const GenRequest&) { return call; });
    FlowContext ctx = make_context(&gen);
    FlowOptions o = opts();
    Trajectory probe = AgentEnvLoop("tool").run(make_sample("q", "5"), ctx, o, 5);
    const int first = static_cast<int>(probe.steps[0].prompt_ids.size());

    ScriptedGenerator gen2([&](const GenRequest&) { return call; });
    FlowContext ctx2 = make_context(&gen2);
    o.max_prompt_tokens = first + 5;
    Trajectory t = AgentEnvLoop("tool").run(make_sample("q", "5"), ctx2, o, 5);
    ASSERT_EQ(t.steps.size(), 1u);
    EXPECT_TRUE(t.steps[0].truncated);
    EXPECT_EQ(t.steps[0].info["truncated_by"], "context_overflow");
    EXPECT_EQ(t.metrics["context_overflow"], 1);
    EXPECT_EQ(t.metrics["truncated"], 1);

    // The generator's own window counts too: prompt + 1 must fit.
    ScriptedGenerator gen3([&](const GenRequest&) { return call; }, /*max_context=*/first + 1);
    FlowContext ctx3 = make_context(&gen3);
    FlowOptions o3 = opts();
    Trajectory t3 = AgentEnvLoop("tool").run(make_sample("q", "5"), ctx3, o3, 5);
    ASSERT_EQ(t3.steps.size(), 1u);
    EXPECT_EQ(gen3.requests()[0].sampling.max_new_tokens, 1) << "capped by the context left";
    EXPECT_EQ(t3.steps[0].response_ids.size(), 1u);
    // One token of "<tool_call>": the env either ends the episode or the next prompt
    // overflows; either way the trajectory ends without a crash.
    EXPECT_TRUE(t3.steps[0].done || t3.steps[0].info.value("truncated_by", "") ==
                                        std::string("context_overflow"))
        << t3.steps[0].info.dump();
  }
  // The first prompt already too long: no steps, no crash.
  ScriptedGenerator gen([&](const GenRequest&) { return call; });
  FlowContext ctx = make_context(&gen);
  FlowOptions o = opts();
  o.max_prompt_tokens = 10;
  Trajectory t = AgentEnvLoop("tool").run(make_sample("q", "5"), ctx, o, 5);
  EXPECT_TRUE(t.steps.empty());
  EXPECT_TRUE(gen.requests().empty());
  EXPECT_EQ(t.metrics["context_overflow"], 1);
  EXPECT_EQ(t.metrics["truncated"], 1);
  EXPECT_FLOAT_EQ(t.outcome_reward, 0.0f);
}

// (5) per-sample env_kwargs override the flow defaults.
TEST_F(LoopTest, SampleEnvKwargsOverrideDefaults) {
  const std::string two = call_text("adder", R"({"a": 2, "b": 3})") + "\n" +
                          call_text("echo", R"({"text": "hi"})");
  ScriptedGenerator gen(ScriptedGenerator::queue({turn_ids(two), turn_ids("#### 5")}));
  FlowContext ctx = make_context(&gen);
  const Sample s = make_sample("q", "5",
                               json{{"tools", {"echo", "adder"}}, {"max_tool_calls_per_turn", 1}});
  Trajectory t = AgentEnvLoop("tool").run(s, ctx, opts(), 5);
  ASSERT_EQ(t.steps.size(), 2u);
  const std::string first = tok().decode(t.steps[0].prompt_ids);
  EXPECT_EQ(first, py_render(s.prompt, json::array({EchoTool().schema(), AdderTool().schema()}),
                             true));
  const std::string second = tok().decode(t.steps[1].prompt_ids);
  EXPECT_TRUE(contains(second, "<tool_response>\n5\n</tool_response>")) << second;
  EXPECT_TRUE(contains(second, "too many tool calls in one response (limit 1)")) << second;
  EXPECT_EQ(t.metrics["tool_errors"], 1);

  // Unknown kwargs are an Error naming the key, not a silent default.
  ScriptedGenerator gen2(ScriptedGenerator::queue({turn_ids("#### 5")}));
  FlowContext ctx2 = make_context(&gen2);
  const Sample bad = make_sample("q", "5", json{{"max_turns", 3}});
  try {
    AgentEnvLoop("tool").run(bad, ctx2, opts(), 5);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "unknown config key 'env_kwargs.max_turns'")) << e.what();
  }
}

TEST_F(LoopTest, AgentResolution) {
  FlowOptions o = opts();
  EXPECT_EQ(make_flow_for(make_sample("q", "5"), o)->name(), "env_loop:tool");
  Sample s = make_sample("q", "5");
  s.agent_name = "single_step";
  EXPECT_EQ(make_flow_for(s, o)->name(), "single_step");
  s.agent_name = "nope";
  try {
    make_flow_for(s, o);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "unknown agent 'nope'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "single_step")) << e.what();
    EXPECT_TRUE(contains(e.what(), "tool")) << e.what();
  }
}

TEST_F(LoopTest, MissingRewardFunctionIsAnError) {
  ScriptedGenerator gen(ScriptedGenerator::queue({turn_ids("#### 5")}));
  FlowContext ctx = make_context(&gen);
  Sample s = make_sample("q", "5");
  s.data_source = "no_such_source";
  s.reward_style = "no_such_style";
  try {
    AgentEnvLoop("tool").run(s, ctx, opts(), 5);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "no reward function for data_source 'no_such_source'"))
        << e.what();
  }
  // An explicit reward_fn wins over data_source.
  ScriptedGenerator gen2(ScriptedGenerator::queue({turn_ids("#### 5")}));
  FlowContext ctx2 = make_context(&gen2);
  FlowOptions o = opts();
  o.reward_fn = "flow_test";
  EXPECT_FLOAT_EQ(AgentEnvLoop("tool").run(s, ctx2, o, 5).outcome_reward, 1.0f);
}

// The real pieces: the tasks layer's calculator tool and its gsm8k-style reward.
TEST_F(LoopTest, BuiltinCalculatorAndReward) {
  tasks::register_builtin_tasks();
  const TokenIds r0 = turn_ids(call_text("calculator", R"({"expression": "(1234 + 567) * 3"})"));
  const TokenIds r1 = turn_ids("The product is 5403.\n#### 5403");
  ScriptedGenerator gen(ScriptedGenerator::queue({r0, r1}));
  ThreadPool tools(1);
  FlowContext ctx = make_context(&gen, &tools);
  Sample s = make_sample("What is (1234 + 567) * 3?", "5403", json{{"tools", {"calculator"}}});
  s.data_source = "arith_calc";
  Trajectory t = AgentEnvLoop("tool").run(s, ctx, FlowOptions(), 8);
  ASSERT_EQ(t.steps.size(), 2u);
  const std::string second = tok().decode(t.steps[1].prompt_ids);
  EXPECT_TRUE(contains(second, "<tool_response>\n5403\n</tool_response>")) << second;
  EXPECT_TRUE(contains(tok().decode(t.steps[0].prompt_ids), "\"name\": \"calculator\""));
  EXPECT_FLOAT_EQ(t.outcome_reward, 1.0f);
  EXPECT_EQ(t.metrics["tool_errors"], 0);
}

}  // namespace
}  // namespace agentr1::flow

namespace agentr1::flow {
namespace {

// Start-up check: a bad context option (or tool, or agent) in the defaults or in one
// row fails before any rollout, naming the data set, the row, the key and the rule.
TEST_F(LoopTest, EnvSetupIsCheckedBeforeTheFirstRollout) {
  ScriptedGenerator gen(ScriptedGenerator::queue({}));
  FlowContext ctx = make_context(&gen);
  std::vector<Sample> rows = {make_sample("a", "1"), make_sample("b", "2"), make_sample("c", "3")};
  FlowOptions o = opts();
  o.env_kwargs["context"] = {{"type", "sliding_window"}, {"keep_last", 2}};
  EXPECT_NO_THROW(check_env_setup(rows, ctx, o, "the training set"));
  EXPECT_TRUE(gen.requests().empty()) << "nothing is generated";

  auto error_of = [&](const FlowOptions& fo) {
    try {
      check_env_setup(rows, ctx, fo, "the training set");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  FlowOptions bad = o;
  bad.env_kwargs["context"] = {{"type", "sliding_window"}, {"keep_last", 0}};
  std::string e = error_of(bad);
  EXPECT_NE(e.find("the training set sample 0"), std::string::npos) << e;
  EXPECT_NE(e.find("'keep_last'"), std::string::npos) << e;
  EXPECT_NE(e.find(">= 1"), std::string::npos) << e;
  bad.env_kwargs["context"] = {{"type", "sliding_window"}, {"keep_lats", 2}};
  e = error_of(bad);
  EXPECT_NE(e.find("keep_lats"), std::string::npos) << e;
  bad.env_kwargs["context"] = "sliding";
  e = error_of(bad);
  EXPECT_NE(e.find("sliding_window"), std::string::npos) << "unknown names list the known: " << e;

  // One bad row among good ones is named by its index.
  rows[2].env_kwargs = {{"context", {{"type", "token_budget"}, {"max_prompt_tokens", -5}}}};
  e = error_of(o);
  EXPECT_NE(e.find("sample 2"), std::string::npos) << e;
  EXPECT_NE(e.find("max_prompt_tokens"), std::string::npos) << e;
  rows[2].env_kwargs = {{"tools", {"nope"}}};
  e = error_of(o);
  EXPECT_NE(e.find("sample 2"), std::string::npos) << e;
  EXPECT_NE(e.find("nope"), std::string::npos) << e;
  rows[2].env_kwargs = json::object();
  rows[2].agent_name = "robot";
  e = error_of(o);
  EXPECT_NE(e.find("unknown agent 'robot'"), std::string::npos) << e;
  rows[2].agent_name = "";
  rows[2].data_source = "nope";
  rows[2].reward_style = "nope";
  e = error_of(o);
  EXPECT_NE(e.find("sample 2"), std::string::npos) << e;
  EXPECT_NE(e.find("no reward function for data_source 'nope'"), std::string::npos) << e;
}


// rollout.env_latency_ms: the loop sleeps after every env step (a slow environment),
// which changes nothing in the trajectory.
TEST_F(LoopTest, EnvLatencyDelaysEachStepAndChangesNothingElse) {
  const std::string call = call_text("adder", R"({"a": 2, "b": 3})");
  auto run = [&](std::vector<double> latency) {
    ScriptedGenerator gen(ScriptedGenerator::queue({turn_ids(call), turn_ids("#### 5")}));
    FlowContext ctx = make_context(&gen);
    FlowOptions o = opts();
    o.env_latency_ms = latency;
    const auto t0 = std::chrono::steady_clock::now();
    Trajectory t = AgentEnvLoop("tool").run(make_sample("2+3?", "5"), ctx, o, 1);
    return std::make_pair(t, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  const auto [plain, fast] = run({});
  const auto [slow, secs] = run({60, 80});
  ASSERT_EQ(slow.steps.size(), 2u);
  EXPECT_GE(secs, 0.119) << "two env steps of 60-80 ms";
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(slow.steps[i].prompt_ids, plain.steps[i].prompt_ids);
    EXPECT_EQ(slow.steps[i].response_ids, plain.steps[i].response_ids);
  }
  EXPECT_FLOAT_EQ(slow.outcome_reward, 1.0f);
  FlowOptions bad = opts();
  bad.env_latency_ms = {1, 2, 3};
  EXPECT_THROW(bad.validate(), Error);
  (void)fast;
}

// The reward reads the last turn without its trailing stop ids, the env reads it
// without its trailing special tokens: the text decoded once serves both where the two
// strip the same ids, and the reward's is decoded on its own where they do not.
TEST_F(LoopTest, RewardAndEnvTextsWhereTheirStripRulesDiffer) {
  static std::once_flag once;
  std::call_once(once, [] {
    // The outcome reward is the length of the text the reward function got.
    tasks::register_reward_fn("flow_test_text_length", [](const json&) -> tasks::RewardFn {
      return [](const std::string& text, const json&, const json&) { return static_cast<float>(text.size()); };
    });
  });
  auto run = [&](TokenIds response, TokenIds extra_stops) {
    ScriptedGenerator gen(ScriptedGenerator::queue({std::move(response)}));
    FlowContext ctx = make_context(&gen);
    FlowOptions o = opts();
    o.reward_fn = "flow_test_text_length";
    o.sampling.stop_token_ids = std::move(extra_stops);
    return AgentEnvLoop("tool").run(make_sample("2+3?", "5"), ctx, o, 1);
  };
  // Ends with <|im_end|>, a stop and a special token: both rules drop it.
  Trajectory t = run(turn_ids("#### 5"), {});
  EXPECT_EQ(t.steps[0].response_text, "#### 5");
  EXPECT_FLOAT_EQ(t.outcome_reward, 6.0f);
  // A special token that is no stop before <|im_end|>: the env drops both, the reward
  // only the stop.
  TokenIds r = tok().encode("#### 5", true);
  r.push_back(special("<|im_start|>"));
  r.push_back(special("<|im_end|>"));
  t = run(r, {});
  EXPECT_EQ(t.steps[0].response_text, "#### 5");
  EXPECT_FLOAT_EQ(t.outcome_reward, static_cast<float>(std::string("#### 5<|im_start|>").size()));
  // A stop id that is an ordinary token ("5"): the reward drops it, the env keeps it.
  const TokenIds five = byte_ids("5");
  t = run(byte_ids("#### 5"), five);
  EXPECT_EQ(t.steps[0].finish, FinishReason::kStopToken);
  EXPECT_EQ(t.steps[0].response_text, "#### 5");
  EXPECT_FLOAT_EQ(t.outcome_reward, 5.0f);
}

// An env's anchor and game reward reach the Step as typed fields; a typed field's key
// in StepResult::info is refused, naming the field to set.
class TypedFieldsEnv : public env::AgentEnv {
 public:
  explicit TypedFieldsEnv(json kwargs) : kwargs_(std::move(kwargs)) {}
  std::string name() const override { return "flow_test_typed"; }
  env::Observation reset(const Sample& sample) override {
    return env::Observation::from_messages(sample.prompt);
  }
  env::StepResult step(const env::Action& action) override {
    env::StepResult r;
    r.done = true;
    r.anchor = "state of " + action.text;
    r.game_reward = 0.75f;
    r.info["seen"] = action.text;
    if (kwargs_.contains("bad_key")) r.info[kwargs_["bad_key"].get<std::string>()] = 1;
    if (kwargs_.contains("metrics")) r.info["episode_metrics"] = kwargs_["metrics"];
    return r;
  }

 private:
  json kwargs_;
};

TEST_F(LoopTest, EnvAnchorAndGameRewardAreTypedFields) {
  static std::once_flag once;
  std::call_once(once, [] {
    env::register_env("flow_test_typed", [](const env::EnvContext&, const json& kwargs) {
      return std::make_unique<TypedFieldsEnv>(kwargs);
    });
  });
  auto run = [&](json env_kwargs) {
    ScriptedGenerator gen(ScriptedGenerator::queue({turn_ids("go north")}));
    FlowContext ctx = make_context(&gen);
    FlowOptions o;
    o.env_kwargs = std::move(env_kwargs);
    o.reward_fn = kEnvReward;
    return AgentEnvLoop("flow_test_typed").run(make_sample("q", "5"), ctx, o, 1);
  };
  const Trajectory t = run(json::object());
  ASSERT_EQ(t.steps.size(), 1u);
  const Step& s = t.steps[0];
  EXPECT_EQ(s.info["seen"], "go north") << "Action::text: without <|im_end|>";
  EXPECT_EQ(s.anchor, "state of go north");
  ASSERT_TRUE(s.game_reward.has_value());
  EXPECT_FLOAT_EQ(*s.game_reward, 0.75f);
  EXPECT_FLOAT_EQ(t.outcome_reward, 0.75f) << "the env reward sums the steps' game_reward";
  EXPECT_EQ(s.to_json()["info"]["game_reward"], 0.75);
  // An env's own episode metrics join the trajectory's (the built-in ones win).
  const Trajectory m = run({{"metrics", {{"paper/recall", 0.5}, {"num_turns", 99}, {"note", "text"}}}});
  EXPECT_DOUBLE_EQ(m.metrics.value("paper/recall", -1.0), 0.5);
  EXPECT_EQ(m.metrics["num_turns"], 1) << "a built-in metric is not overwritten";
  EXPECT_FALSE(m.metrics.contains("note")) << "only numbers";
  EXPECT_FALSE(t.metrics.contains("paper/recall"));
  for (const char* key : {"anchor", "game_reward", "finish_reason", "kind"}) {
    const std::string e = agentr1::testing::error_of([&] { run({{"bad_key", key}}); });
    EXPECT_NE(e.find("env 'flow_test_typed' returned StepResult::info['" + std::string(key) + "']"),
              std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace agentr1::flow
