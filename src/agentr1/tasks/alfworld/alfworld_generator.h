// agentr1/tasks/alfworld/alfworld_generator.h — seeded ALFWorld-style rooms with a task, by level,
// with held-out ("unseen") layouts for the test split.
//
//   WorldSpec spec{/*seed=*/7, /*index=*/0, /*level=*/2, DataSplit::kTrain, TaskType::kClean};
//   World w = generate_world(spec);          // deterministic in spec
//   w.goal.text();                           // "put a clean mug in countertop"
//   layout_signature(w);                     // "kitchen|cabinet*3,countertop*2,fridge*1,..."
//   json j = spec.to_json();                 // {"seed":7,"index":0,"level":2,"split":"train",
//                                            //  "task_type":"pick_clean_then_place_in_recep"}
//   WorldSpec back = WorldSpec::from_json(j);   // what samples store in extra_info.world
//
// Rooms (ALFWorld's scene kinds) and where each task type can happen (constants.py's
// GOALS_VALID): kitchen (all but look-at), livingroom and bedroom (pick and place, pick
// two, look at under the desklamp), bathroom (pick and place, pick two, clean).
// Every room has its core receptacles (a kitchen: countertop, fridge, microwave,
// sinkbasin; a living room: sofa, coffeetable, sidetable; a bedroom: bed, desk, sidetable;
// a bathroom: countertop, sinkbasin, toilet), then optional ones up to the level's count.
// Look-at rooms have one desklamp on a desk, side table or dresser.
//
// Levels (1..4) scale the room:
//   level  receptacles  distractor objects  optional openable receptacles (cabinet, drawer, safe)
//   1      4-5          1-2                 none (only the kitchen's fridge and microwave close);
//                                           task objects start on open surfaces
//   2      6-8          3-5                 allowed; task objects anywhere they fit
//   3      9-12         6-9                 more likely
//   4      13-18        10-14               most likely (ALFWorld's kitchens have ~20-30)
// Task objects: 1-2 instances of the goal type (pick two: 2-3), never already in a
// receptacle of the goal type, never clean/hot/cool at the start; distractors are other
// types. Openable receptacles all start closed (as in ALFWorld).
//
// Splits ("unseen" as ALFWorld's valid_unseen holds unseen rooms): a layout is the room
// kind plus how many receptacles of each type it has (layout_signature); the signature's
// hash decides the split (odd: test), and the generator redraws (deterministically, a
// new attempt stream) until the layout lands on the requested side. So no test layout
// ever occurs in train, at any level; object types, goals and placements can repeat.
// DataSplit::kAny ignores the partition.
#pragma once

#include <cstdint>
#include <string>

#include "agentr1/core/json.h"
#include "agentr1/tasks/alfworld/alfworld_world.h"
#include "agentr1/tasks/data_split.h"

namespace agentr1::tasks::alfworld {

constexpr int kMinLevel = 1;
constexpr int kMaxLevel = 4;

// Everything that determines one generated world.
struct WorldSpec {
  uint64_t seed = 0;
  int64_t index = 0;
  int level = 1;                               // 1..4
  DataSplit split = DataSplit::kTrain;
  TaskType task_type = TaskType::kPickAndPlace;

  // Throws Error naming the field and the rule.
  void validate() const;
  json to_json() const;
  // Throws Error naming the missing or malformed field ("world.level must be ...").
  static WorldSpec from_json(const json& j);
};

// The room and task of `spec`, agent in the middle of the room, hands empty, the goal not
// yet met. Throws Error for an invalid spec, or (never in practice) when no layout is
// found within the attempt budget.
World generate_world(const WorldSpec& spec);

// "room|type*count,..." with types sorted: what "unseen layout" refers to.
std::string layout_signature(const World& w);
// The split side of a layout: true = test.
bool is_test_layout(const std::string& signature);

}  // namespace agentr1::tasks::alfworld
