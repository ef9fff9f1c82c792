// agentr1/tasks/alfworld/alfworld_world.h — the state and rules of one ALFWorld-style room: numbered
// receptacles, objects with states, the commands and their observations (TextWorld's
// ALFRED grammar, alfworld/data/alfred.twl2 + alfred.pddl), and the goal test.
//
//   World w = generate_world({...});                  // alfworld_generator.h
//   std::string intro = intro_text(w);                // "You are in the middle of a room. ..."
//   CommandResult r = apply_command(w, "go to countertop 1");
//   // r.valid, r.observation "You arrive at countertop 1. On the countertop 1, you see a mug 2, and a knife 1."
//   apply_command(w, "take mug 2 from countertop 1");  // "You pick up the mug 2 from the countertop 1."
//   apply_command(w, "fly away");                      // !valid, "Nothing happens."
//   std::vector<std::string> cmds = admissible_commands(w);   // sorted, like TextWorld's
//   bool won = goal_met(w);
//
// Rules (ALFWorld's PDDL preconditions):
//   go to R        any receptacle but the one the agent already faces
//   open/close R   R openable, the agent at R, R closed/open
//   take O from R  the agent at R, O in R, R open (or not openable), hands empty (one
//                  object at a time), O pickupable (lamps are not)
//   move O to R    holding O, at R, R open (or not openable), R can contain O's type
//                  (ALFWorld's canContain table); also typed "put O in R", "put O on R",
//                  "put O in/on R" (older ALFWorld phrasing)
//   examine R      at R; examine O: holding O, or O in R at the agent's place and R open
//   use O          O toggleable (desklamp), in the receptacle the agent is at; turns it on
//   clean O with R holding O, O cleanable, at R, R a sinkbasin
//   heat O with R  holding O, O heatable, at R, R a microwave (need not be open); clears cool
//   cool O with R  holding O, O coolable, at R, R a fridge (need not be open); clears hot
//   slice O with K holding a knife/butterknife K, O sliceable and visible at the agent's place
//   inventory, look  always
//   anything else (unknown words, objects that do not exist or are elsewhere, closed
//   receptacles, ...) -> "Nothing happens." and no change.
// Commands are matched case-insensitively with runs of spaces collapsed.
//
// Goals (ALFWorld's goal_library.py, type level: any instance of the type counts):
//   pick_and_place_simple         some object of type T in some receptacle of type R
//   pick_clean/heat/cool_then_place_in_recep  the same with the object clean/hot/cool
//   pick_two_obj_and_place        two distinct objects of type T in one receptacle of type R
//   look_at_obj_in_light          holding a T while at the receptacle of a desklamp that is on
//
// Deviations from ALFWorld: one lamp type (desklamp), no movable receptacles (nothing goes
// inside a mug or a bowl; "examine mug 1" shows its state only), no floor objects, the
// indefinite article is always "a" as in ALFWorld's generated games.
#pragma once

#include <string>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::tasks::alfworld {

// The six ALFWorld task types (names as in ALFWorld's goal_library.py).
enum class TaskType { kPickAndPlace, kLookAtInLight, kClean, kHeat, kCool, kPickTwo };
// "pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
// "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place".
std::string task_type_name(TaskType t);
// The inverse; throws Error listing the names.
TaskType parse_task_type(const std::string& name);
// All six, in the order above.
const std::vector<TaskType>& all_task_types();

// Catalogue facts (ALFWorld's constants.py): types are lower-case, one word ("sinkbasin").
bool is_openable(const std::string& receptacle_type);     // fridge cabinet microwave drawer safe
bool can_contain(const std::string& receptacle_type, const std::string& object_type);
bool is_cleanable(const std::string& object_type);
bool is_heatable(const std::string& object_type);
bool is_coolable(const std::string& object_type);
bool is_sliceable(const std::string& object_type);
bool is_toggleable(const std::string& object_type);        // desklamp
bool is_pickupable(const std::string& object_type);        // everything but lamps

struct Receptacle {
  std::string type;     // "cabinet"
  int number = 1;       // 1.. per type
  bool opened = false;  // only meaningful when is_openable(type); all start closed
  std::string name() const { return type + " " + std::to_string(number); }
};

struct Object {
  std::string type;     // "mug"
  int number = 1;       // 1.. per type
  int receptacle = -1;  // index into World::receptacles; -1 while held
  bool clean = false;
  bool hot = false;
  bool cool = false;
  bool sliced = false;
  bool on = false;      // toggled (lamps)
  std::string name() const { return type + " " + std::to_string(number); }
};

struct Goal {
  TaskType type = TaskType::kPickAndPlace;
  std::string object_type;      // T
  std::string receptacle_type;  // R (place tasks); "desklamp" for look_at_obj_in_light
  int template_index = 0;       // which of ALFWorld's two phrasings (0 or 1)
  // "put a clean mug in cabinet", "look at book under the desklamp", ... (no final period)
  std::string text() const;
};

struct World {
  std::string room;                     // kitchen, livingroom, bedroom, bathroom
  std::vector<Receptacle> receptacles;  // listing order: type ascending, number descending
  std::vector<Object> objects;          // listing order inside a receptacle
  Goal goal;
  int agent_at = -1;                    // receptacle the agent faces; -1 = middle of the room
  int held = -1;                        // object in hand; -1 = none

  json to_json() const;                 // the whole state, for summaries and debugging
};

struct CommandResult {
  bool valid = false;        // false: "Nothing happens.", the world is unchanged
  std::string observation;
};

// "You are in the middle of a room. Looking quickly around you, you see a cabinet 2, ...,
// and a toaster 1.\n\nYour task is to: <goal>."
std::string intro_text(const World& w);
// Lower-case, trimmed, runs of whitespace collapsed to one space (bytes >= 0x80 kept).
std::string normalize_command(const std::string& command);
// Applies one command (any text; never throws for player input).
CommandResult apply_command(World& w, const std::string& command);
// Every command apply_command accepts now (canonical phrasing), sorted.
std::vector<std::string> admissible_commands(const World& w);
// The goal holds in the current state.
bool goal_met(const World& w);

// Lookups: index or -1.
int find_receptacle(const World& w, const std::string& name);
int find_object(const World& w, const std::string& name);

}  // namespace agentr1::tasks::alfworld
