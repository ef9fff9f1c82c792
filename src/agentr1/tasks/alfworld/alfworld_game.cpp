#include "agentr1/tasks/alfworld/alfworld_game.h"

#include "agentr1/core/error.h"
#include "agentr1/tasks/alfworld/alfworld_expert.h"

namespace agentr1::tasks::alfworld {

void AlfworldGameOptions::validate() const {
  AGENTR1_CHECK(step_limit >= 1 && step_limit <= 100000,
                "alfworld game option 'step_limit' must be in 1..100000 (commands per episode), got " << step_limit);
}

AlfworldGameOptions AlfworldGameOptions::from_json(const json& kw) {
  return bind_config<AlfworldGameOptions>(json{{"env_kwargs", {{"game", kw}}}}, "env_kwargs.game");
}

json AlfworldGameOptions::to_json() const { return config_to_json(*this); }

AlfworldGame::AlfworldGame(AlfworldGameOptions opts) : opts_(opts) {}

std::string AlfworldGame::reset(const Sample& sample) {
  AGENTR1_CHECK(sample.extra_info.is_object() && sample.extra_info.contains("world"),
                "alfworld sample has no extra_info.world (the generated room's {seed, index, level, split, "
                "task_type}); HINT: make the samples with the alfworld task family");
  spec_ = WorldSpec::from_json(sample.extra_info["world"]);
  World w = generate_world(spec_);
  if (sample.ground_truth.is_string() && !sample.ground_truth.get<std::string>().empty()) {
    AGENTR1_CHECK(sample.ground_truth.get<std::string>() == w.goal.text(),
                  "alfworld sample's ground_truth '" << sample.ground_truth.get<std::string>()
                                                     << "' differs from the goal of its world '" << w.goal.text()
                                                     << "' (" << spec_.to_json().dump()
                                                     << "); HINT: the dataset comes from another generator "
                                                        "version, regenerate it");
  }
  world_ = std::move(w);
  steps_ = 0;
  won_ = false;
  done_ = false;
  started_ = true;
  return intro_text(world_);
}

env::GameStep AlfworldGame::step(const std::string& command) {
  AGENTR1_CHECK(started_, "AlfworldGame::step called before reset (a caller bug)");
  env::GameStep out;
  if (done_) {
    out.observation = "Nothing happens.";
    out.done = true;
    out.info = {{"won", won_}, {"valid", false}, {"steps", steps_}, {"step_limit", opts_.step_limit}};
    return out;
  }
  ++steps_;
  const CommandResult r = apply_command(world_, command);
  const bool now = goal_met(world_);
  out.observation = r.observation;
  out.reward = (now && !won_) ? 1.0f : 0.0f;
  won_ = won_ || now;
  done_ = won_ || steps_ >= opts_.step_limit;
  out.done = done_;
  out.info = {{"won", won_}, {"valid", r.valid}, {"steps", steps_}, {"step_limit", opts_.step_limit}};
  if (done_ && !won_) out.info["step_limit_reached"] = true;
  return out;
}

std::vector<std::string> AlfworldGame::admissible_commands() const {
  if (!started_ || done_) return {};
  return alfworld::admissible_commands(world_);
}

std::optional<std::string> AlfworldGame::expert_action() {
  if (!started_ || done_) return std::nullopt;
  return expert_command(world_);
}

json AlfworldGame::summary() const {
  if (!started_) return json::object();
  return {{"goal", world_.goal.text()},
          {"task_type", task_type_name(world_.goal.type)},
          {"won", won_},
          {"steps", steps_},
          {"room", world_.room},
          {"level", spec_.level},
          {"split", data_split_name(spec_.split)},
          {"layout", layout_signature(world_)},
          {"holding", world_.held >= 0 ? json(world_.objects[static_cast<size_t>(world_.held)].name()) : json(nullptr)},
          {"at", world_.agent_at >= 0 ? json(world_.receptacles[static_cast<size_t>(world_.agent_at)].name())
                                      : json(nullptr)}};
}

}  // namespace agentr1::tasks::alfworld
