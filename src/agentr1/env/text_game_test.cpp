// GameEnv over a toy game, on the tiny Qwen3-style tokenizer fixture: the head (prompt
// + intro), command extraction, the invalid-format feedback, admissible lists, rewards
// in info, the done step, and the context policies (append-only exact, sliding window).
// Expected prompts are the chat template's rendering of the messages the header says
// GameEnv builds (the template itself is checked against jinja2 in the text tests).
#include "agentr1/env/text_game.h"

#include <gtest/gtest.h>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::env {
namespace {

using agentr1::testing::error_of;

const std::string kFixtures = std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow";

const text::Tokenizer& tok() {
  static const text::Tokenizer t = text::Tokenizer::load(kFixtures + "/tiny_qwen3");
  return t;
}
const text::ChatTemplate& tmpl() {
  static const text::ChatTemplate c = text::ChatTemplate::from_template_text(tok().chat_template());
  return c;
}

// Count to `target` with "inc"; "reset" goes back to 0; anything else: "Nothing happens."
class CounterGame : public TextGame {
 public:
  explicit CounterGame(int target) : target_(target) {}
  std::string reset(const Sample& s) override {
    n_ = 0;
    if (s.extra_info.contains("start")) n_ = s.extra_info["start"].get<int>();
    return "Count to " + std::to_string(target_) + ". Now at " + std::to_string(n_) + ".";
  }
  GameStep step(const std::string& cmd) override {
    commands.push_back(cmd);
    GameStep g;
    if (cmd == "inc") {
      ++n_;
      g.observation = "Now at " + std::to_string(n_) + ".";
    } else if (cmd == "reset") {
      n_ = 0;
      g.observation = "Now at 0.";
    } else {
      g.observation = "Nothing happens.";
    }
    g.done = n_ == target_;
    g.reward = g.done ? 1.0f : 0.0f;
    g.info["n"] = n_;
    return g;
  }
  std::vector<std::string> admissible_commands() const override { return {"inc", "reset"}; }
  std::optional<std::string> expert_action() override { return std::string("inc"); }
  json summary() const override { return json{{"reached", n_}}; }
  std::vector<std::string> commands;

 private:
  int target_;
  int n_ = 0;
};

Sample sample() {
  Sample s;
  s.prompt = json::array({{{"role", "system"}, {"content", "Play the counter game."}}});
  s.agent_name = "counter";
  s.reward_style = "env";
  return s;
}

EnvContext ctx() {
  EnvContext c;
  c.tokenizer = &tok();
  c.chat_template = &tmpl();
  return c;
}

Action act(const std::string& text) {
  TokenIds ids = tok().encode(text, true);
  ids.push_back(*tok().token_to_id("<|im_end|>"));
  return {ids, text};  // Action::text: without the trailing <|im_end|>
}

json msg(const char* role, const std::string& content) { return json{{"role", role}, {"content", content}}; }

std::string render(const json& messages) { return tmpl().render(messages, json(), true); }

TEST(ExtractCommand, TagsLinesAndMalformed) {
  EXPECT_EQ(extract_command("<action>go to desk 1</action>"), "go to desk 1");
  EXPECT_EQ(extract_command("I think.\n<action> open\nfridge 1 </action>"), "open fridge 1");
  EXPECT_EQ(extract_command("<action>a</action> then <action>b</action>"), "b");
  EXPECT_EQ(extract_command("look around\n\ninventory\n"), "inventory");
  EXPECT_EQ(extract_command("search[red shoes]"), "search[red shoes]");
  EXPECT_EQ(extract_command(""), std::nullopt);
  EXPECT_EQ(extract_command("  \n \n"), std::nullopt);
  EXPECT_EQ(extract_command("<action></action>"), std::nullopt);
  EXPECT_EQ(extract_command("<action>go to"), std::nullopt);  // unfinished markup
}

TEST(GameEnvOptions, UnknownKeyAndTypes) {
  EXPECT_THROW(GameEnvOptions::from_json(json{{"contxt", "append_only"}}), Error);
  EXPECT_THROW(GameEnvOptions::from_json(json{{"show_admissible", "yes"}}), Error);
  EXPECT_THROW(GameEnvOptions::from_json(json{{"game", 3}}), Error);
  const GameEnvOptions o = GameEnvOptions::from_json(json{{"show_admissible", true}, {"game", {{"k", 1}}}});
  EXPECT_TRUE(o.show_admissible);
  EXPECT_EQ(o.game["k"], 1);
  // Errors come from core/config.h's bind_into, the keys named env_kwargs.<key>.
  std::string e = error_of([] { GameEnvOptions::from_json(json{{"contxt", 1}}); });
  EXPECT_NE(e.find("unknown config key 'env_kwargs.contxt'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'env_kwargs.context'?"), std::string::npos) << e;
  EXPECT_NE(e.find("Valid keys under 'env_kwargs': context, show_admissible, game, tools_in_prompt."),
            std::string::npos)
      << e;
  e = error_of([] { GameEnvOptions::from_json(json{{"show_admissible", "yes"}}); });
  EXPECT_NE(e.find("env_kwargs.show_admissible: expected a bool (true or false), got \"yes\""), std::string::npos) << e;
  e = error_of([] { GameEnvOptions::from_json(json{{"game", 3}}); });
  EXPECT_NE(e.find("env_kwargs: 'game' must be a map of the game's options, got 3"), std::string::npos) << e;
  e = error_of([] { GameEnvOptions::from_json(json{{"context", 3}}); });
  EXPECT_NE(e.find("env_kwargs: 'context' must be a policy name or {type: name, ...options}, got 3"), std::string::npos)
      << e;
  e = error_of([] { GameEnvOptions::from_json(json{{"tools_in_prompt", 0}}); });
  EXPECT_NE(e.find("env_kwargs.tools_in_prompt: expected a bool"), std::string::npos) << e;
  // Defaults; null game options are none; tools_in_prompt is accepted (and ignored).
  EXPECT_EQ(GameEnvOptions::from_json(json()).context, "append_only");
  EXPECT_EQ(GameEnvOptions::from_json(json{{"game", nullptr}}).game, json::object());
  EXPECT_NO_THROW(GameEnvOptions::from_json(json{{"tools_in_prompt", false}}));
}

TEST(GameEnv, AppendOnlyEpisodeIsTokenExactAndTheGameRewardIsTyped) {
  auto game = std::make_unique<CounterGame>(2);
  CounterGame* g = game.get();
  GameEnv env("counter", ctx(), std::move(game), GameEnvOptions{});
  const Sample s = sample();
  Observation o0 = env.reset(s);
  json msgs = s.prompt;
  msgs.push_back(msg("user", "Count to 2. Now at 0."));
  EXPECT_EQ(tok().decode(o0.tokens()), render(msgs));

  // A malformed response: feedback, nothing sent to the game.
  const Action bad = act("<action>inc");
  StepResult r1 = env.step(bad);
  EXPECT_FALSE(r1.done);
  EXPECT_EQ(r1.info["invalid_format"], 1);
  EXPECT_EQ(r1.game_reward, 0.0f);
  EXPECT_EQ(r1.anchor, "Count to 2. Now at 0.") << "the intro: the state the first action acted in";
  EXPECT_FALSE(r1.info.contains("game_reward"));
  EXPECT_FALSE(r1.info.contains("anchor"));
  EXPECT_TRUE(g->commands.empty());
  msgs.push_back(msg("assistant", "<action>inc"));
  msgs.push_back(msg("user", kInvalidFormatFeedback));
  // Append-only: the previous prompt and the sampled ids are kept verbatim.
  const TokenIds& p1 = r1.observation.tokens();
  TokenIds prefix = o0.tokens();
  prefix.insert(prefix.end(), bad.ids.begin(), bad.ids.end());
  ASSERT_GE(p1.size(), prefix.size());
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), p1.begin()));
  EXPECT_EQ(tok().decode(p1), render(msgs));

  StepResult r2 = env.step(act("<action>inc</action>"));
  EXPECT_EQ(r2.info["command"], "inc");
  EXPECT_EQ(r2.anchor, kInvalidFormatFeedback);
  EXPECT_EQ(r2.info["game/n"], 1);
  EXPECT_EQ(r2.reward, 0.0f);
  msgs.push_back(msg("assistant", "<action>inc</action>"));
  msgs.push_back(msg("user", "Now at 1."));
  EXPECT_EQ(tok().decode(r2.observation.tokens()), render(msgs));

  StepResult r3 = env.step(act("<action>INC</action>"));   // the game decides: not "inc"
  EXPECT_EQ(r3.info["game/n"], 1);
  EXPECT_EQ(r3.anchor, "Now at 1.");
  StepResult r4 = env.step(act("inc"));                     // a bare line is a command too
  EXPECT_TRUE(r4.done);
  EXPECT_EQ(r4.reward, 0.0f);                               // the outcome, not a step reward
  EXPECT_EQ(r4.game_reward, 1.0f);
  EXPECT_EQ(r4.info["observation"], "Now at 2.");
  EXPECT_EQ(r4.info["game_summary"]["reached"], 2);
  EXPECT_THROW(env.step(act("inc")), Error);
}

TEST(GameEnv, AdmissibleListAndSlidingWindow) {
  GameEnvOptions o = GameEnvOptions::from_json(
      json{{"show_admissible", true}, {"context", {{"type", "sliding_window"}, {"keep_last", 1}}}});
  GameEnv env("counter", ctx(), std::make_unique<CounterGame>(9), o);
  const Sample s = sample();
  env.reset(s);
  env.step(act("<action>inc</action>"));
  StepResult r = env.step(act("<action>jump</action>"));
  EXPECT_EQ(r.info["context_omitted_turns"], 1);
  json msgs = s.prompt;
  msgs.push_back(msg("user", "Count to 9. Now at 0.\n\nAdmissible actions: inc, reset"));
  msgs.push_back(msg("user", "[1 earlier turn omitted]"));
  msgs.push_back(msg("assistant", "<action>jump</action>"));
  msgs.push_back(msg("user", "Nothing happens.\n\nAdmissible actions: inc, reset"));
  EXPECT_EQ(tok().decode(tok().encode(r.observation.text(), true)), render(msgs));
}

TEST(GameEnv, RegisteredGameBuildsEnvAndRejectsBadKwargs) {
  register_game_env("counter_test", [](const json& kw) -> std::unique_ptr<TextGame> {
    for (auto it = kw.begin(); it != kw.end(); ++it)
      if (it.key() != "target") throw Error("unknown counter option '" + it.key() + "'; known: target");
    return std::make_unique<CounterGame>(kw.value("target", 3));
  });
  EXPECT_TRUE(has_game("counter_test"));
  EXPECT_FALSE(has_game("nope"));
  auto env = make_env("counter_test", ctx(), json{{"game", {{"target", 1}}}});
  env->reset(sample());
  EXPECT_TRUE(env->step(act("<action>inc</action>")).done);
  try {
    make_env("counter_test", ctx(), json{{"game", {{"targt", 1}}}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("game env option 'game'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("targt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_env("counter_test", ctx(), json{{"context", "no_such_policy"}}), Error);
  EXPECT_THROW(register_game_env("counter_test", [](const json&) { return std::unique_ptr<TextGame>(); }), Error);
  auto g = make_game("counter_test", json{{"target", 2}});
  EXPECT_EQ(g->reset(sample()), "Count to 2. Now at 0.");
  EXPECT_THROW(make_game("nope"), Error);
}

}  // namespace
}  // namespace agentr1::env
