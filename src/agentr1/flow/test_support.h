// agentr1/flow/test_support.h — shared by the flow tests only: the tiny Qwen3-style
// tokenizer fixture, a reference renderer (Python jinja2), a scripted fake Generator,
// fake tools and a test reward function.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/core/generator.h"
#include "agentr1/env/tool.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/tasks/reward.h"
#include "agentr1/text/tokenizer/byte_level.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::flow::testing {

inline const std::string& fixtures() {
  static const std::string d = std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow";
  return d;
}

inline const text::Tokenizer& tok() {
  static const text::Tokenizer t = text::Tokenizer::load(fixtures() + "/tiny_qwen3");
  return t;
}
inline const text::ChatTemplate& tmpl() {
  static const text::ChatTemplate c = text::ChatTemplate::from_template_text(tok().chat_template());
  return c;
}

inline TokenId special(const std::string& s) {
  auto id = tok().token_to_id(s);
  EXPECT_TRUE(id.has_value()) << s;
  return id.value_or(0);
}

// One token per byte: a valid but non-canonical tokenisation wherever merges apply.
inline TokenIds byte_ids(const std::string& s) {
  TokenIds ids;
  for (unsigned char c : s)
    ids.push_back(*tok().token_to_id(text::bytes_to_byte_level(std::string(1, static_cast<char>(c)))));
  return ids;
}

// Canonical ids of `text` followed by <|im_end|>.
inline TokenIds turn_ids(const std::string& text) {
  TokenIds ids = tok().encode(text, true);
  ids.push_back(special("<|im_end|>"));
  return ids;
}

// The reference: the template rendered by jinja2 in /usr/bin/python3 as HF does.
inline std::string py_render(const json& messages, const json& tools, bool add_generation_prompt) {
  static std::atomic<int> counter{0};
  const std::string base = ::testing::TempDir() + "/agentr1_flow_" + std::to_string(::getpid()) +
                           "_" + std::to_string(counter++);
  json req = json::object();
  req["messages"] = messages;
  req["tools"] = tools;
  req["add_generation_prompt"] = add_generation_prompt;
  {
    std::ofstream f(base + ".json");
    f << req.dump();
  }
  const std::string cmd = std::string(AGENTR1_PYTHON) + " " + fixtures() + "/render_chat.py " +
                          fixtures() + "/tiny_qwen3/tokenizer_config.json " + base + ".json " +
                          base + ".txt";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(base + ".txt");
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove((base + ".json").c_str());
  std::remove((base + ".txt").c_str());
  return ss.str();
}

// A Generator whose answers come from a function of the request. It enforces what a
// real engine does: non-empty prompt within the context window (else Error), output
// cut at max_new_tokens (finish length) or after a stop token (finish stop_token).
// Log-probs are a deterministic function of the position (-0.01 * (i + 1)).
class ScriptedGenerator : public Generator {
 public:
  using Script = std::function<TokenIds(const GenRequest&)>;
  explicit ScriptedGenerator(Script script, int max_context = 4096, int64_t version = 7)
      : script_(std::move(script)), max_context_(max_context), version_(version) {}

  // Answers requests in order from a list (single-trajectory tests).
  static Script queue(std::vector<TokenIds> responses) {
    auto q = std::make_shared<std::deque<TokenIds>>(responses.begin(), responses.end());
    auto mu = std::make_shared<std::mutex>();
    return [q, mu](const GenRequest&) {
      std::lock_guard<std::mutex> lock(*mu);
      if (q->empty()) throw Error("ScriptedGenerator: no scripted response left");
      TokenIds r = q->front();
      q->pop_front();
      return r;
    };
  }

  std::future<GenResult> submit(GenRequest request) override {
    AGENTR1_CHECK(!request.prompt_ids.empty(), "empty prompt");
    AGENTR1_CHECK(static_cast<int>(request.prompt_ids.size()) < max_context_,
                  "prompt of " << request.prompt_ids.size() << " tokens exceeds the context");
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
    }
    const TokenIds full = script_(request);
    GenResult r;
    r.policy_version = version_;
    r.finish = FinishReason::kLength;
    const auto& stops = request.sampling.stop_token_ids;
    for (TokenId id : full) {
      if (static_cast<int>(r.token_ids.size()) >= request.sampling.max_new_tokens) break;
      r.token_ids.push_back(id);
      r.logprobs.push_back(-0.01f * static_cast<float>(r.token_ids.size()));
      if (std::find(stops.begin(), stops.end(), id) != stops.end()) {
        r.finish = FinishReason::kStopToken;
        break;
      }
    }
    std::promise<GenResult> p;
    p.set_value(std::move(r));
    return p.get_future();
  }
  int max_context() const override { return max_context_; }

  std::vector<GenRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  Script script_;
  int max_context_;
  int64_t version_;
  mutable std::mutex mu_;
  std::vector<GenRequest> requests_;
};

// --- fake tools --------------------------------------------------------------------
class AdderTool : public env::Tool {
 public:
  std::string name() const override { return "adder"; }
  std::string description() const override { return "Adds a and b."; }
  json parameters() const override {
    return json::parse(R"({"type": "object", "properties": {"a": {"type": "number"},)"
                       R"( "b": {"type": "number"}}, "required": ["a", "b"]})");
  }
  env::ToolResult execute(const json& args) override {
    env::ToolResult r;
    r.text = std::to_string(args.at("a").get<int>() + args.at("b").get<int>());
    r.reward = 0.25f;
    return r;
  }
};
class BrokenTool : public env::Tool {
 public:
  std::string name() const override { return "broken"; }
  std::string description() const override { return "Always fails."; }
  json parameters() const override { return json::parse(R"({"type": "object"})"); }
  env::ToolResult execute(const json&) override { throw std::runtime_error("boom"); }
};
// A tool whose server is down: every call is an infrastructure failure.
class OfflineTool : public env::Tool {
 public:
  std::string name() const override { return "offline"; }
  std::string description() const override { return "Its server is down."; }
  json parameters() const override { return json::parse(R"({"type": "object"})"); }
  env::ToolResult execute(const json&) override {
    throw env::ToolInfraError("server 'offline' exited with status 1");
  }
};
class SlowTool : public env::Tool {
 public:
  std::string name() const override { return "slow"; }
  std::string description() const override { return "Takes half a second."; }
  json parameters() const override { return json::parse(R"({"type": "object"})"); }
  env::ToolResult execute(const json&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return {"late", std::nullopt, json::object()};
  }
};
class EchoTool : public env::Tool {
 public:
  std::string name() const override { return "echo"; }
  std::string description() const override { return "Echoes text."; }
  json parameters() const override { return json::parse(R"({"type": "object"})"); }
  env::ToolResult execute(const json& args) override {
    return {args.value("text", std::string()), std::nullopt, json::object()};
  }
};

// Registers the fake tools and the reward functions "flow_test" (1 when the response
// contains "#### <ground truth>", else 0) and "flow_test_down" (throws InfraError) once
// per process.
inline void register_fakes() {
  static std::once_flag once;
  std::call_once(once, [] {
    env::register_tool("adder", [](const json&) { return std::make_unique<AdderTool>(); });
    env::register_tool("broken", [](const json&) { return std::make_unique<BrokenTool>(); });
    env::register_tool("slow", [](const json&) { return std::make_unique<SlowTool>(); });
    env::register_tool("echo", [](const json&) { return std::make_unique<EchoTool>(); });
    env::register_tool("offline", [](const json&) { return std::make_unique<OfflineTool>(); });
    // A reward service that does not answer.
    tasks::register_reward_fn("flow_test_down", [](const json&) -> tasks::RewardFn {
      return [](const std::string&, const json&, const json&) -> float {
        throw InfraError("judge at 127.0.0.1:9 did not answer");
      };
    });
    tasks::register_reward_fn("flow_test", [](const json&) -> tasks::RewardFn {
      return [](const std::string& text, const json& gt, const json&) {
        const std::string want = "#### " + (gt.is_string() ? gt.get<std::string>() : gt.dump());
        return text.find(want) != std::string::npos ? 1.0f : 0.0f;
      };
    });
  });
}

inline Sample make_sample(const std::string& question, const std::string& answer,
                          json env_kwargs = json::object()) {
  Sample s;
  s.prompt = json::array({json{{"role", "user"}, {"content", question}}});
  s.ground_truth = answer;
  s.data_source = "flow_test";
  s.env_kwargs = std::move(env_kwargs);
  return s;
}

inline FlowContext make_context(Generator* gen, ThreadPool* tools = nullptr) {
  FlowContext c;
  c.generator = gen;
  c.tokenizer = &tok();
  c.chat_template = &tmpl();
  c.tool_pool = tools;
  c.stop_token_ids = default_stop_token_ids(tok());
  return c;
}

inline std::string call_text(const std::string& name, const std::string& args_json) {
  return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args_json + "}\n</tool_call>";
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace agentr1::flow::testing
