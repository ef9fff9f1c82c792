#include "agentr1/env/agent_env.h"

#include <gtest/gtest.h>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/env/tool.h"

namespace agentr1::env {
namespace {

class NullEnv : public AgentEnv {
 public:
  explicit NullEnv(json kw) : kw_(std::move(kw)) {}
  std::string name() const override { return "null_env"; }
  Observation reset(const Sample&) override { return Observation::from_text(kw_.dump()); }
  StepResult step(const Action&) override {
    StepResult r;
    r.done = true;
    return r;
  }

 private:
  json kw_;
};

class PingTool : public Tool {
 public:
  std::string name() const override { return "ping"; }
  std::string description() const override { return "Answers pong."; }
  json parameters() const override {
    return json::parse(R"({"type": "object", "properties": {}, "required": []})");
  }
  ToolResult execute(const json&) override { return {"pong", std::nullopt, json::object()}; }
};

using agentr1::testing::error_of;

TEST(EnvRegistry, CreatesRegisteredEnvsWithKwargs) {
  register_env("null_env", [](const EnvContext&, const json& kw) {
    return std::make_unique<NullEnv>(kw);
  });
  auto env = make_env("null_env", EnvContext{}, json{{"k", 1}});
  ASSERT_NE(env, nullptr);
  EXPECT_EQ(env->reset(Sample{}).text(), R"({"k":1})");
  const auto names = env_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "null_env"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "tool"), names.end()) << "ToolEnv is built in";
}

TEST(EnvRegistry, UnknownNameListsKnownOnes) {
  const std::string msg = error_of([] { make_env("nope", EnvContext{}, json::object()); });
  EXPECT_NE(msg.find("unknown AgentEnv 'nope'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tool"), std::string::npos) << msg;
}

TEST(EnvRegistry, RegisteringTwiceFails) {
  auto f = [](const EnvContext&, const json& kw) { return std::make_unique<NullEnv>(kw); };
  register_env("twice_env", f);
  const std::string msg = error_of([&] { register_env("twice_env", f); });
  EXPECT_NE(msg.find("'twice_env' is registered twice"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { register_env("tool", f); }), "");
}

TEST(ToolRegistry, MakesToolsAndSchemas) {
  register_tool("ping", [](const json&) { return std::make_unique<PingTool>(); });
  auto tool = make_tool("ping");
  EXPECT_EQ(tool->execute(json::object()).text, "pong");
  const json s = tool->schema();
  // The OpenAI function schema, in the key order chat templates print.
  EXPECT_EQ(s.dump(),
            R"({"type":"function","function":{"name":"ping","description":"Answers pong.",)"
            R"("parameters":{"type":"object","properties":{},"required":[]}}})");
  const auto names = tool_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "ping"), names.end());
}

TEST(ToolRegistry, UnknownTwiceAndMisnamed) {
  register_tool("ping2", [](const json&) { return std::make_unique<PingTool>(); });
  std::string msg = error_of([] { make_tool("pong"); });
  EXPECT_NE(msg.find("unknown tool 'pong'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ping2"), std::string::npos) << msg;
  msg = error_of([] { register_tool("ping2", [](const json&) { return std::make_unique<PingTool>(); }); });
  EXPECT_NE(msg.find("registered twice"), std::string::npos) << msg;
  // Registered as "ping2" but calls itself "ping": the model could never call it.
  msg = error_of([] { make_tool("ping2"); });
  EXPECT_NE(msg.find("reports name() 'ping'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace agentr1::env
