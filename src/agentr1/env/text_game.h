// agentr1/env/text_game.h — text games (ALFWorld, WebShop, ...) as AgentEnvs: the game
// speaks plain text, GameEnv turns it into chat turns, prompts and rewards.
//
//   class MyGame : public TextGame {
//     std::string reset(const Sample& s) override { return "You are in a room ..."; }
//     GameStep step(const std::string& command) override { ... }     // "go to desk 1"
//     std::optional<std::string> expert_action() override { ... }    // for SFT demos, play
//   };
//   register_game_env("mygame", [](const json& game_kwargs) { return std::make_unique<MyGame>(...); });
//   // samples with agent_name "mygame" now run through AgentEnvLoop("mygame").
//
// GameEnv, one episode:
//   reset(sample): messages = sample.prompt (the family's instructions), then the game's
//     first observation (its intro) as one more user message; both are the head that no
//     context policy drops. Returns the rendered head + generation prompt as token ids.
//   step(action): the command is extracted from the response text (action.text:
//     trailing special tokens removed) by extract_command() below. A response without a readable command
//     is not sent to the game: the episode goes on with the feedback
//     kInvalidFormatFeedback as the observation (info "invalid_format" = 1). Otherwise
//     game->step(command) gives the observation, reward and done. The turn is recorded
//     as an assistant message (the response text) and a user message (the observation;
//     with show_admissible, followed by "\n\nAdmissible actions: a, b, c" while the game
//     lists any); the next prompt comes from the context policy (context_policy.h), so
//     append_only is token-exact and sliding_window keeps long episodes short.
//   Rewards: the game's reward goes to StepResult::game_reward (Step::game_reward, info
//     "game_reward" in dumps) and StepResult.reward stays 0; a sample whose reward style
//     is "env" gets as outcome reward the sum of its steps' game_reward
//     (flow/trajectory_builder.h), so success and GRPO see it once. StepResult::anchor is
//     the game's previous observation (the intro, or "<start>", at the first step).
//
// Registered envs' kwargs (the flow's env_kwargs merged with the sample's):
//   context         context policy spec (default "append_only")
//   show_admissible (bool, default false) list the game's admissible commands after each
//                   observation (and after the intro)
//   game            object passed to the game factory (the game's own options)
//   tools_in_prompt accepted and ignored (a game has no tools), so one rollout.env_kwargs
//                   serves tool and game tasks alike
// (GameEnvOptions). Unknown keys throw Error listing these.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/env/agent_env.h"
#include "agentr1/env/context_policy.h"

namespace agentr1::env {

// One game transition, in the game's own words.
struct GameStep {
  std::string observation;      // what the player sees next ("Nothing happens.")
  float reward = 0.0f;          // the game's reward for this command
  bool done = false;            // the game is over (won, bought, or its own step limit)
  json info = json::object();   // anything a reviewer needs (goal met, scores ...)
};

// A text game: one instance plays one episode at a time. Not thread-safe; the flow
// makes one per trajectory.
class TextGame {
 public:
  virtual ~TextGame() = default;
  // Starts the episode the sample describes (its extra_info / env_kwargs, as the family
  // writes them); returns the first observation. Throws Error for a sample the game
  // cannot play (a data error), naming the field.
  virtual std::string reset(const Sample& sample) = 0;
  // Applies one command. Never throws for anything a player can type: an invalid
  // command is an observation (e.g. ALFWorld's "Nothing happens.") with reward 0.
  virtual GameStep step(const std::string& command) = 0;
  // The commands valid now, in the game's order (empty when the game does not list
  // them, e.g. after the episode ended).
  virtual std::vector<std::string> admissible_commands() const { return {}; }
  // The expert's next command from the true state (nullopt when it has none: the
  // episode is over or the game has no expert). The expert solves every task the
  // family generates.
  virtual std::optional<std::string> expert_action() { return std::nullopt; }
  // What the final play/dump line shows a reviewer to check the reward (goal, target,
  // what was done). Default: {}.
  virtual json summary() const { return json::object(); }
};

// game kwargs (GameEnv kwarg "game") -> a game. Throws Error for unknown keys / bad values.
using GameFactory = std::function<std::unique_ptr<TextGame>(const json& game_kwargs)>;

// The observation shown for a response without a readable command.
extern const char* const kInvalidFormatFeedback;

// The command in a response: the text inside the LAST <action>...</action> (trimmed);
// without such a pair, the last non-empty line of the text (trimmed) unless it contains
// '<' (unfinished markup); nullopt when that leaves nothing. Commands are one line:
// internal newlines become spaces.
std::optional<std::string> extract_command(const std::string& response_text);

struct GameEnvOptions {
  json context = "append_only";   // context policy spec: a name or {"type": name, ...options}
  bool show_admissible = false;   // list admissible commands after each observation
  json game = json::object();     // passed to the game factory (null = {})
  bool tools_in_prompt = true;    // accepted and ignored: a game has no tools to list

  template <class V>
  void visit(V& v) {
    v.field("context", context, "context policy: a name or {type: ..., options}");
    v.field("show_admissible", show_admissible, "list the admissible commands after each observation");
    v.field("game", game, "the game's own options (passed to the game factory)");
    v.field("tools_in_prompt", tools_in_prompt,
            "accepted and ignored (a game has no tools), so one env_kwargs serves tool and game tasks");
  }
  // Throws Error naming the field, the rule and the value.
  void validate() const;

  // From env kwargs (null = defaults) with bind_into, the keys named env_kwargs.<key>:
  // an unknown key fails with the nearest and the valid keys, a wrong type with the key.
  static GameEnvOptions from_json(const json& kwargs);
};

class GameEnv : public AgentEnv {
 public:
  // ctx.tokenizer and ctx.chat_template must be set. The context policy is built here
  // (its errors name the option 'context').
  GameEnv(std::string name, const EnvContext& ctx, std::unique_ptr<TextGame> game,
          GameEnvOptions options);
  std::string name() const override { return name_; }
  Observation reset(const Sample& sample) override;
  StepResult step(const Action& action) override;

  TextGame& game() { return *game_; }
  const json& messages() const { return messages_; }

 private:
  std::string with_admissible(std::string observation) const;

  std::string name_;
  EnvContext ctx_;
  std::unique_ptr<TextGame> game_;
  GameEnvOptions options_;
  text::RenderOptions render_options_;
  std::unique_ptr<ContextPolicy> policy_;
  json messages_ = json::array();
  TokenIds prompt_ids_;
  size_t head_size_ = 0;
  size_t turn_index_ = 0;
  bool started_ = false;
  bool finished_ = false;
  std::string anchor_;  // the game's last observation (StepResult::anchor of the next step)
};

// Registers game `name` and AgentEnv `name` as a GameEnv over the games `factory`
// makes (the factory gets the "game" kwarg). Throws Error if the name is taken.
void register_game_env(const std::string& name, GameFactory factory);
// A game by its registered name (for agentr1 play and experts, no tokenizer needed).
// Throws Error listing the known games when `name` is unknown.
std::unique_ptr<TextGame> make_game(const std::string& name, const json& game_kwargs = json::object());
bool has_game(const std::string& name);

}  // namespace agentr1::env
