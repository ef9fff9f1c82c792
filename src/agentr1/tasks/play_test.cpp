// Play episodes (tool and game) and expert demonstrations of games, without a model:
// the arithmetic family's expert solves its problems through the real calculator,
// malformed and unknown calls are observations, wrong answers score 0; a toy game's
// expert demonstration has the documented actions and rendering.
#include "agentr1/tasks/play.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/env/tool.h"
#include "agentr1/tasks/arithmetic/arithmetic_family.h"
#include "agentr1/tasks/calculator.h"
#include "agentr1/tasks/game_demo.h"
#include "agentr1/tasks/reward.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::tasks {
namespace {

void register_arith_pieces() {
  static bool done = false;
  if (done) return;
  done = true;
  env::register_tool("calculator", [](const json&) -> std::unique_ptr<env::Tool> {
    return std::make_unique<Calculator>();
  });
  register_reward_fn("arith_calc", [](const json&) -> RewardFn {
    return [](const std::string& r, const json& gt, const json&) { return gsm8k_score(r, gt); };
  });
}

TEST(ToolEpisode, ArithmeticExpertSolvesEveryLevel) {
  register_arith_pieces();
  for (const char* style : {"single", "per_step"}) {
    ArithmeticFamily fam(ArithmeticFamilyOptions::from_json(json{{"min_level", 1}, {"max_level", 4}, {"demo_style", style}}));
    for (const Sample& s : fam.make_dataset(DataSplit::kTest, 40, 11)) {
      auto ep = fam.play_episode(s);
      json first = ep->reset();
      EXPECT_EQ(first["observation"], s.prompt.back()["content"]);
      json last;
      int steps = 0;
      while (!ep->done()) {
        std::optional<std::string> a = ep->expert_action();
        ASSERT_TRUE(a.has_value()) << s.extra_info.dump();
        last = ep->step(*a);
        ASSERT_LT(++steps, 10);
      }
      EXPECT_EQ(last["reward"], 1.0) << s.extra_info.dump() << " " << last.dump();
      EXPECT_EQ(last["info"]["ground_truth"], s.ground_truth);
      EXPECT_EQ(steps, std::string(style) == "single" ? 2 : s.extra_info["level"].get<int>() + 1);
    }
  }
}

TEST(ToolEpisode, MalformedUnknownAndWrongAnswers) {
  register_arith_pieces();
  ArithmeticFamily fam;
  const Sample s = fam.make_dataset(DataSplit::kTrain, 1, 3)[0];
  auto ep = fam.play_episode(s);
  EXPECT_THROW(ep->step("x"), Error);  // before reset
  ep->reset();
  json r = ep->step(R"({"name": "calculator", "arguments": {"expression": "2 + 3"}})");
  EXPECT_EQ(r["observation"], "5");
  EXPECT_EQ(r["done"], false);
  r = ep->step("<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2 * 4\"}}\n</tool_call>");
  EXPECT_EQ(r["observation"], "8");
  r = ep->step(R"({"name": "calc", "arguments": {}})");
  EXPECT_EQ(r["observation"], "Error: unknown tool 'calc'; available tools: calculator");
  r = ep->step(R"({"name": "calculator", "arguments": "2+2"})");
  EXPECT_NE(r["observation"].get<std::string>().find("\"arguments\" (an object)"), std::string::npos);
  r = ep->step("<tool_call>{not json}</tool_call>");
  EXPECT_NE(r["observation"].get<std::string>().find("malformed tool call"), std::string::npos);
  r = ep->step(R"({"name": "calculator", "arguments": {"expression": "1/0"}})");
  EXPECT_EQ(r["observation"].get<std::string>().rfind("Error", 0), 0u) << r.dump();  // the tool's error text
  r = ep->step("#### -1");
  EXPECT_EQ(r["done"], true);
  EXPECT_EQ(r["reward"], 0.0);
  EXPECT_EQ(r["info"]["answer"], "#### -1");
  EXPECT_THROW(ep->step("#### 1"), Error);  // after the end
}

// Without env_kwargs.tool_format (or with "auto") play has no chat template to pick a
// format from, so an action in any registered format's markup is a call; info says which
// format read it. The calls are each format's documented syntax (text/tool_format/tool_format.h),
// the expected outputs hand-computed.
TEST(ToolEpisode, CallsInEveryToolFormatWhenAuto) {
  register_arith_pieces();
  ArithmeticFamily fam;
  Sample s = fam.make_dataset(DataSplit::kTrain, 1, 3)[0];
  ASSERT_FALSE(s.env_kwargs.contains("tool_format"));
  struct Case {
    const char* format;
    std::string action;
    const char* observation;
  };
  const std::vector<Case> cases = {
      {"hermes", "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2 * 4\"}}\n</tool_call>", "8"},
      {"mistral",
       "[TOOL_CALLS][{\"name\": \"calculator\", \"arguments\": {\"expression\": \"6 * 7\"}, \"id\": \"abc123XYZ\"}, "
       "{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1 + 1\"}, \"id\": \"abc123XY2\"}]",
       "42\n2"},
      {"deepseek_v3",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>calculator\n```json\n"
       "{\"expression\": \"10 - 4\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "6"},
      {"gpt_oss",
       "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.calculator <|constrain|>json<|message|>{\"expression\": \"5 + 6\"}<|call|>",
       "11"},
      {"llama3_json", "<|python_tag|>{\"name\": \"calculator\", \"parameters\": {\"expression\": \"3 + 4\"}}", "7"},
      {"llama3_json", "Let me add. {\"name\": \"calculator\", \"parameters\": {\"expression\": \"20 + 1\"}}", "21"},
  };
  for (const char* tf : {"", "auto"}) {
    if (*tf != '\0') s.env_kwargs["tool_format"] = tf;
    auto ep = fam.play_episode(s);
    ep->reset();
    for (const Case& c : cases) {
      const json r = ep->step(c.action);
      EXPECT_EQ(r["observation"], c.observation) << c.action;
      EXPECT_EQ(r["done"], false);
      EXPECT_EQ(r["info"]["tool_format"], c.format) << c.action;
    }
    // Malformed markup of a format is that format's feedback, not the answer.
    json r = ep->step("[TOOL_CALLS]nope");
    EXPECT_EQ(r["done"], false);
    EXPECT_EQ(r["info"]["tool_format"], "mistral");
    EXPECT_EQ(r["observation"].get<std::string>().rfind("Error: malformed tool call: tool call 1: expected a "
                                                        "JSON array of calls after [TOOL_CALLS]", 0),
              0u) << r.dump();
    r = ep->step("#### 7");  // no markup of any format: the answer
    EXPECT_EQ(r["done"], true);
    EXPECT_FALSE(r["info"].contains("tool_format"));
  }
}

// env_kwargs.tool_format names the one format ToolEnv would use: other formats' markup
// is plain text there (here: the final answer).
TEST(ToolEpisode, PinnedToolFormatReadsOnlyThatFormat) {
  register_arith_pieces();
  ArithmeticFamily fam;
  Sample s = fam.make_dataset(DataSplit::kTrain, 1, 3)[0];
  s.env_kwargs["tool_format"] = "mistral";
  auto ep = fam.play_episode(s);
  ep->reset();
  json r = ep->step("[TOOL_CALLS][{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2 + 3\"}}]");
  EXPECT_EQ(r["observation"], "5");
  EXPECT_EQ(r["info"]["tool_format"], "mistral");
  r = ep->step(R"({"name": "calculator", "arguments": {"expression": "1 + 3"}})");  // plain JSON: any format
  EXPECT_EQ(r["observation"], "4");
  const std::string hermes = "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2 * 4\"}}\n</tool_call>";
  r = ep->step(hermes);
  EXPECT_EQ(r["done"], true);
  EXPECT_EQ(r["info"]["answer"], hermes);
}

std::string play_error(const json& tool_format) {
  register_arith_pieces();
  ArithmeticFamily fam;
  Sample s = fam.make_dataset(DataSplit::kTrain, 1, 3)[0];
  s.env_kwargs["tool_format"] = tool_format;
  try {
    fam.play_episode(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ToolEpisode, UnknownToolFormatNamesItAndTheKnownOnes) {
  std::string e = play_error("qwen");
  EXPECT_NE(e.find("env_kwargs.tool_format is 'qwen'"), std::string::npos) << e;
  EXPECT_NE(e.find("known: deepseek_v3, gpt_oss, hermes, llama3_json, mistral"), std::string::npos) << e;
  EXPECT_NE(e.find("or auto"), std::string::npos) << e;
  e = play_error(3);
  EXPECT_NE(e.find("env_kwargs.tool_format must be a string"), std::string::npos) << e;
  EXPECT_NE(e.find("got 3"), std::string::npos) << e;
}

// One room, one key: "take key" then "open door" wins.
class DoorGame : public env::TextGame {
 public:
  std::string reset(const Sample&) override {
    have_ = won_ = false;
    return "A locked door. A key on the floor.";
  }
  env::GameStep step(const std::string& c) override {
    env::GameStep g;
    if (c == "take key" && !have_) {
      have_ = true;
      g.observation = "You take the key.";
    } else if (c == "open door" && have_) {
      won_ = g.done = true;
      g.reward = 1;
      g.observation = "The door opens.";
    } else {
      g.observation = "Nothing happens.";
    }
    return g;
  }
  std::vector<std::string> admissible_commands() const override {
    if (won_) return {};
    return have_ ? std::vector<std::string>{"open door"} : std::vector<std::string>{"take key"};
  }
  std::optional<std::string> expert_action() override {
    if (won_) return std::nullopt;
    return std::string(have_ ? "open door" : "take key");
  }
  json summary() const override { return json{{"won", won_}}; }

 private:
  bool have_ = false, won_ = false;
};

Sample door_sample() {
  Sample s;
  s.prompt = json::array({{{"role", "system"}, {"content", "Escape."}}});
  s.agent_name = "door";
  s.reward_style = "env";
  s.data_source = "door";
  s.env_kwargs = {{"show_admissible", true}};
  return s;
}

TEST(GameEpisode, StepsRewardsSummaryAndExpert) {
  auto ep = make_game_episode(std::make_unique<DoorGame>(), door_sample());
  json first = ep->reset();
  EXPECT_EQ(first["observation"], "A locked door. A key on the floor.");
  EXPECT_EQ(first["info"]["admissible_commands"], json::array({"take key"}));
  json r = ep->step("open door");
  EXPECT_EQ(r["observation"], "Nothing happens.");
  EXPECT_EQ(r["reward"], 0.0);
  EXPECT_EQ(*ep->expert_action(), "take key");
  ep->step("take key");
  r = ep->step(*ep->expert_action());
  EXPECT_EQ(r["done"], true);
  EXPECT_EQ(r["reward"], 1.0);
  EXPECT_EQ(r["info"]["summary"]["won"], true);
  EXPECT_TRUE(ep->done());
  EXPECT_FALSE(ep->expert_action().has_value());
}

TEST(GameDemo, ActionsAndRenderingFollowGameEnv) {
  const text::Tokenizer tok =
      text::Tokenizer::load(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3");
  const text::ChatTemplate tmpl = text::ChatTemplate::from_template_text(tok.chat_template());
  DoorGame game;
  std::vector<std::string> rendered;
  const json demo = game_expert_demonstration(game, door_sample(), tmpl, "<|im_end|>", &rendered, 5);
  EXPECT_EQ(demo["actions"],
            json::array({"<action>take key</action><|im_end|>", "<action>open door</action><|im_end|>"}));
  EXPECT_EQ(Sample::from_json(demo["sample"]).agent_name, "door");
  json msgs = door_sample().prompt;
  msgs.push_back({{"role", "user"}, {"content", "A locked door. A key on the floor.\n\nAdmissible actions: take key"}});
  msgs.push_back({{"role", "assistant"}, {"content", "<action>take key</action>"}});
  msgs.push_back({{"role", "user"}, {"content", "You take the key.\n\nAdmissible actions: open door"}});
  msgs.push_back({{"role", "assistant"}, {"content", "<action>open door</action>"}});
  text::RenderOptions ro;
  ro.enable_thinking = false;
  ASSERT_EQ(rendered.size(), 1u);
  EXPECT_EQ(rendered[0], tmpl.render(msgs, json(), false, ro));
  DoorGame g2;
  EXPECT_THROW(game_expert_demonstration(g2, door_sample(), tmpl, "<|im_end|>", nullptr, 1), Error);
}

}  // namespace
}  // namespace agentr1::tasks
