#include "agentr1/env/text_game.h"

#include <utility>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/registry.h"
#include "agentr1/core/strings.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::env {
namespace {

using GameRegistry = Registry<TextGame, const json&>;

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return trim(s);
}

json message(const char* role, std::string content) {
  json m = json::object();
  m["role"] = role;
  m["content"] = std::move(content);
  return m;
}

}  // namespace

const char* const kInvalidFormatFeedback =
    "Invalid action format. Write exactly one command inside <action>...</action>, for "
    "example <action>look</action>.";

std::optional<std::string> extract_command(const std::string& text) {
  const std::string open = "<action>", close = "</action>";
  const size_t c = text.rfind(close);
  if (c != std::string::npos) {
    const size_t o = text.rfind(open, c);
    if (o != std::string::npos) {
      std::string cmd = one_line(text.substr(o + open.size(), c - o - open.size()));
      if (cmd.empty()) return std::nullopt;
      return cmd;
    }
  }
  // No complete tag pair: the last non-empty line, unless it is unfinished markup.
  size_t end = text.size();
  while (end > 0) {
    const size_t nl = text.rfind('\n', end - 1);
    const size_t begin = nl == std::string::npos ? 0 : nl + 1;
    std::string line = trim(text.substr(begin, end - begin));
    if (!line.empty()) {
      if (line.find('<') != std::string::npos) return std::nullopt;
      return one_line(line);
    }
    if (nl == std::string::npos) break;
    end = nl;
  }
  return std::nullopt;
}

void GameEnvOptions::validate() const {
  AGENTR1_CHECK(context.is_string() || context.is_object(),
                "'context' must be a policy name or {type: name, ...options}, got " << context.dump());
  AGENTR1_CHECK(game.is_object() || game.is_null(),
                "'game' must be a map of the game's options, got " << game.dump().substr(0, 80));
}

GameEnvOptions GameEnvOptions::from_json(const json& kwargs) {
  json tree = json::object();
  tree["env_kwargs"] = kwargs;
  GameEnvOptions o;
  bind_into(o, tree, "env_kwargs");  // unknown keys, types, then validate()
  if (o.game.is_null()) o.game = json::object();
  return o;
}

GameEnv::GameEnv(std::string name, const EnvContext& ctx, std::unique_ptr<TextGame> game,
                 GameEnvOptions options)
    : name_(std::move(name)), ctx_(ctx), game_(std::move(game)), options_(std::move(options)) {
  AGENTR1_CHECK(ctx_.tokenizer != nullptr && ctx_.chat_template != nullptr,
                "GameEnv '" << name_ << "' needs EnvContext.tokenizer and EnvContext.chat_template (got null)");
  AGENTR1_CHECK(game_ != nullptr, "GameEnv '" << name_ << "': the game is null");
  if (ctx_.render_options != nullptr) render_options_ = *ctx_.render_options;
  policy_ = make_env_context_policy(options_.context, ctx_, render_options_, "game");
}

std::string GameEnv::with_admissible(std::string observation) const {
  if (!options_.show_admissible) return observation;
  const std::vector<std::string> cmds = game_->admissible_commands();
  if (cmds.empty()) return observation;
  observation += "\n\nAdmissible actions: ";
  for (size_t i = 0; i < cmds.size(); ++i) observation += (i ? ", " : "") + cmds[i];
  return observation;
}

Observation GameEnv::reset(const Sample& sample) {
  AGENTR1_CHECK(sample.prompt.is_array(),
                "GameEnv '" << name_ << "': the sample's prompt must be a list of chat messages");
  const std::string intro = with_context("game '" + name_ + "' reset", [&] { return game_->reset(sample); });
  messages_ = sample.prompt;
  if (!intro.empty()) messages_.push_back(message("user", with_admissible(intro)));
  AGENTR1_CHECK(!messages_.empty(), "GameEnv '" << name_ << "': the sample has no prompt and the game no intro");
  head_size_ = messages_.size();
  turn_index_ = 0;
  anchor_ = intro.empty() ? "<start>" : intro;
  const std::string text = ctx_.chat_template->render(messages_, json(), /*add_generation_prompt=*/true,
                                                      render_options_);
  prompt_ids_ = ctx_.tokenizer->encode(text, /*allow_special=*/true);
  started_ = true;
  finished_ = false;
  return Observation::from_tokens(prompt_ids_);
}

StepResult GameEnv::step(const Action& action) {
  AGENTR1_CHECK(started_, "GameEnv::step called before reset()");
  AGENTR1_CHECK(!finished_, "GameEnv::step called after the episode ended; call reset() first");
  const std::string& text = action.text;  // without its trailing special tokens

  StepResult result;
  result.anchor = anchor_;
  json info = json::object();
  const std::optional<std::string> command = extract_command(text);
  GameStep g;
  if (!command) {
    g.observation = kInvalidFormatFeedback;
    info["invalid_format"] = 1;
  } else {
    g = game_->step(*command);
    info["invalid_format"] = 0;
    info["command"] = *command;
    if (g.info.is_object())
      for (auto it = g.info.begin(); it != g.info.end(); ++it) info["game/" + it.key()] = it.value();
  }
  result.game_reward = g.reward;
  anchor_ = g.observation;

  const size_t assistant_index = messages_.size();
  messages_.push_back(message("assistant", text));
  if (g.done) {
    finished_ = true;
    result.done = true;
    info["observation"] = g.observation;
    info["game_summary"] = game_->summary();
    result.info = std::move(info);
    return result;
  }
  messages_.push_back(message("user", with_admissible(g.observation)));

  ContextReport report;
  const json no_tools;
  const ContextTurn turn{prompt_ids_, action, messages_, assistant_index, no_tools, head_size_, turn_index_, &report};
  ++turn_index_;
  Observation next = policy_->next(turn);
  info["context_omitted_turns"] = static_cast<int64_t>(report.omitted_turns);
  result.side_steps = std::move(report.side_steps);
  prompt_ids_ = next_prompt_ids(next, *policy_, *ctx_.tokenizer);
  result.observation = std::move(next);
  result.info = std::move(info);
  return result;
}

void register_game_env(const std::string& name, GameFactory factory) {
  AGENTR1_CHECK(factory != nullptr, "register_game_env('" << name << "'): the factory is empty");
  GameRegistry::instance().add(name, factory, "game");
  register_env(name, [name, factory](const EnvContext& ctx, const json& kwargs) -> std::unique_ptr<AgentEnv> {
    GameEnvOptions o = GameEnvOptions::from_json(kwargs);
    std::unique_ptr<TextGame> game = with_context("game env option 'game'", [&] { return factory(o.game); });
    AGENTR1_CHECK(game != nullptr, "the factory of game '" << name << "' returned null");
    return std::make_unique<GameEnv>(name, ctx, std::move(game), std::move(o));
  });
}

std::unique_ptr<TextGame> make_game(const std::string& name, const json& game_kwargs) {
  auto g = GameRegistry::instance().create(name, game_kwargs, "game");
  AGENTR1_CHECK(g != nullptr, "the factory of game '" << name << "' returned null");
  return g;
}

bool has_game(const std::string& name) { return GameRegistry::instance().contains(name); }

}  // namespace agentr1::env
