// agentr1/tasks/alfworld/alfworld_game.h — ALFWorld as a TextGame (env/text_game.h): one generated
// room and task per episode, played with ALFWorld's commands.
//
//   AlfworldGame game(AlfworldGameOptions::from_json({{"step_limit", 50}}));
//   std::string intro = game.reset(sample);   // "You are in the middle of a room. ...\n\n
//                                             //  Your task is to: put a hot apple in countertop."
//   env::GameStep s = game.step("go to fridge 1");
//   // s.observation "You arrive at fridge 1. The fridge 1 is closed.", reward 0, done false
//   game.step("Fly to the moon");             // "Nothing happens.", reward 0, info valid false
//   game.admissible_commands();               // ["examine fridge 1", "go to countertop 1", ...]
//   game.expert_action();                     // "open fridge 1"
//
// reset(sample) rebuilds the world from sample.extra_info.world (WorldSpec JSON, see
// alfworld_generator.h); everything the episode needs is in the sample, so a sample read
// back from JSONL plays identically. Throws Error naming the field for a sample without a
// valid extra_info.world, or whose ground_truth (the goal text) differs from the goal of
// the regenerated world (a dataset made by another generator version: regenerate it).
//
// step(command): any text (empty, unicode, kilobytes); matched after normalize_command
// against the valid commands (alfworld_world.h). Reward 1 on the step the goal becomes
// true, else 0; done when the goal is met or after step_limit commands (valid or not).
// info: {"won": bool, "valid": bool (false for "Nothing happens."), "steps": n,
// "step_limit": k}, plus "step_limit_reached": true when the limit ended the episode.
// Steps after the end answer "Nothing happens." with done true and reward 0.
//
// Game kwargs (GameEnv kwarg "game", AlfworldGameOptions; unknown keys throw Error listing
// the valid ones):
//   step_limit (int >= 1, default 50): ALFWorld's evaluation budget (50 steps). Kept so
//   success rates compare with ALFWorld's; the expert needs <= ~16, a blind search of the
//   largest (level 4, 18-receptacle) rooms about 40.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/env/text_game.h"
#include "agentr1/tasks/alfworld/alfworld_generator.h"
#include "agentr1/tasks/alfworld/alfworld_world.h"

namespace agentr1::tasks::alfworld {

constexpr int kDefaultStepLimit = 50;

struct AlfworldGameOptions {
  int step_limit = kDefaultStepLimit;  // commands per episode before it ends unsolved

  // Names every key once (core/config.h).
  template <class V>
  void visit(V& v) {
    v.field("step_limit", step_limit, "commands per episode before it ends unsolved (1..100000)");
  }
  // Throws Error naming the key, the rule and the value.
  void validate() const;
  // From the game kwargs (null = defaults), bound with bind_config at "env_kwargs.game":
  // throws one Error listing unknown keys (with the valid ones), wrong types and invalid
  // values, each with its dotted key.
  static AlfworldGameOptions from_json(const json& kwargs);
  json to_json() const;
};

class AlfworldGame : public env::TextGame {
 public:
  explicit AlfworldGame(AlfworldGameOptions opts = {});

  std::string reset(const Sample& sample) override;
  env::GameStep step(const std::string& command) override;
  std::vector<std::string> admissible_commands() const override;
  std::optional<std::string> expert_action() override;
  // {"goal", "task_type", "won", "steps", "room", "level", "split", "layout",
  //  "holding" (name or null), "at" (receptacle or null)}
  json summary() const override;

  const World& world() const { return world_; }

 private:
  AlfworldGameOptions opts_;
  WorldSpec spec_;
  World world_;
  int steps_ = 0;
  bool started_ = false;
  bool won_ = false;
  bool done_ = false;
};

}  // namespace agentr1::tasks::alfworld
