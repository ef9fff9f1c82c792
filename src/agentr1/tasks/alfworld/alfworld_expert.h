// agentr1/tasks/alfworld/alfworld_expert.h — the ALFWorld expert: a planner over the true state
// (ALFWorld's handcoded expert, which also reads the game's facts), for SFT
// demonstrations and `agentr1 play`.
//
//   World w = generate_world(spec);
//   while (std::optional<std::string> cmd = expert_command(w)) apply_command(w, *cmd);
//   // goal_met(w) == true, in at most ~16 commands for every generated world
//
// Plan, one command per call, recomputed from the state each time (so it also finishes an
// episode a person started by hand):
//   place tasks: holding a goal object -> (clean/heat/cool task and not yet done: go to
//     the first sinkbasin/microwave/fridge, "clean/heat/cool O with A") -> go to the
//     target receptacle (pick two: the one already holding a goal object, else the first
//     of the type), open it if closed, "move O to R". Hands empty -> go to a goal object
//     that is not already placed (one in the current receptacle first, else the first in
//     listing order), open its receptacle if closed, take it. Holding anything else ->
//     put it down (here if it fits, else in the first receptacle that holds it).
//   look_at_obj_in_light: take a goal object as above, go to the desklamp's receptacle,
//     "use desklamp N".
// Every command it returns is one of admissible_commands(w).
#pragma once

#include <optional>
#include <string>

#include "agentr1/tasks/alfworld/alfworld_world.h"

namespace agentr1::tasks::alfworld {

// The next command, or nullopt when the goal is already met (or, for states the
// generator never makes, when no plan exists).
std::optional<std::string> expert_command(const World& w);

}  // namespace agentr1::tasks::alfworld
