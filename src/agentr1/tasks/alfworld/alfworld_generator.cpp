#include "agentr1/tasks/alfworld/alfworld_generator.h"

#include <algorithm>
#include <map>

#include "agentr1/core/error.h"
#include "agentr1/core/hash.h"
#include "agentr1/core/rng.h"

namespace agentr1::tasks::alfworld {
namespace {

constexpr uint64_t kSeedAlfworld = 0x616c66776f726cULL;  // "alfworl": separates alfworld world seeds
constexpr int kMaxAttempts = 1000;                     // layout/goal redraws before giving up

struct RoomKind {
  std::string name;
  std::vector<std::string> core;      // always present, one each
  std::vector<std::string> surfaces;  // optional, not openable
  std::vector<std::string> closable;  // optional, openable (start closed)
  std::vector<std::string> objects;   // object types found in this room
};

const std::vector<RoomKind>& room_kinds() {
  static const std::vector<RoomKind> rooms = {
      {"kitchen",
       {"countertop", "fridge", "microwave", "sinkbasin"},
       {"countertop", "diningtable", "stoveburner", "shelf", "garbagecan", "coffeemachine", "toaster", "sidetable"},
       {"cabinet", "drawer"},
       {"apple", "bowl", "bread", "butterknife", "cup", "dishsponge", "egg", "fork", "glassbottle", "kettle", "knife",
        "ladle", "lettuce", "mug", "pan", "peppershaker", "plate", "pot", "potato", "saltshaker", "soapbottle",
        "spatula", "spoon", "tomato", "winebottle"}},
      {"livingroom",
       {"sofa", "coffeetable", "sidetable"},
       {"armchair", "sidetable", "shelf", "tvstand", "garbagecan", "diningtable", "ottoman"},
       {"cabinet", "drawer", "safe"},
       {"book", "candle", "cellphone", "creditcard", "keychain", "laptop", "newspaper", "pillow", "remotecontrol",
        "statue", "tissuebox", "vase", "watch"}},
      {"bedroom",
       {"bed", "desk", "sidetable"},
       {"dresser", "shelf", "garbagecan", "laundryhamper", "armchair", "sidetable"},
       {"drawer", "safe"},
       {"alarmclock", "baseballbat", "basketball", "book", "bowl", "cd", "cellphone", "cloth", "creditcard",
        "keychain", "laptop", "mug", "pen", "pencil", "pillow", "tennisracket", "tissuebox", "watch"}},
      {"bathroom",
       {"countertop", "sinkbasin", "toilet"},
       {"bathtubbasin", "garbagecan", "handtowelholder", "towelholder", "toiletpaperhanger", "shelf", "countertop"},
       {"cabinet", "drawer"},
       {"candle", "cloth", "dishsponge", "handtowel", "soapbar", "soapbottle", "spraybottle", "tissuebox",
        "toiletpaper", "towel"}},
  };
  return rooms;
}

// Rooms where each task type can happen (ALFWorld's GOALS_VALID).
std::vector<const RoomKind*> rooms_for(TaskType t) {
  std::vector<std::string> names;
  switch (t) {
    case TaskType::kPickAndPlace:
    case TaskType::kPickTwo: names = {"kitchen", "livingroom", "bedroom", "bathroom"}; break;
    case TaskType::kLookAtInLight: names = {"livingroom", "bedroom"}; break;
    case TaskType::kClean: names = {"kitchen", "bathroom"}; break;
    case TaskType::kHeat:
    case TaskType::kCool: names = {"kitchen"}; break;
  }
  std::vector<const RoomKind*> out;
  for (const RoomKind& r : room_kinds()) {
    if (std::find(names.begin(), names.end(), r.name) != names.end()) out.push_back(&r);
  }
  return out;
}

struct LevelParams {
  int min_receptacles, max_receptacles;
  int min_distractors, max_distractors;
  double closable_prob;  // chance that an optional receptacle is a cabinet/drawer/safe
};

LevelParams level_params(int level) {
  switch (level) {
    case 1: return {4, 5, 1, 2, 0.0};
    case 2: return {6, 8, 3, 5, 0.3};
    case 3: return {9, 12, 6, 9, 0.45};
    default: return {13, 18, 10, 14, 0.55};
  }
}

// The appliance a task needs ("" for none): never the goal receptacle.
std::string appliance_for(TaskType t) {
  switch (t) {
    case TaskType::kClean: return "sinkbasin";
    case TaskType::kHeat: return "microwave";
    case TaskType::kCool: return "fridge";
    default: return "";
  }
}

bool has_property(TaskType t, const std::string& obj) {
  switch (t) {
    case TaskType::kClean: return is_cleanable(obj);
    case TaskType::kHeat: return is_heatable(obj);
    case TaskType::kCool: return is_coolable(obj);
    default: return true;
  }
}

bool is_lamp_holder(const std::string& r) { return r == "desk" || r == "sidetable" || r == "dresser"; }

template <class T>
const T& pick(Rng& rng, const std::vector<T>& v) {
  return v[rng.choice(v.size())];
}

// Receptacles of the room: core plus optional ones up to the level's count, numbered per
// type and in listing order (type ascending, number descending).
std::vector<Receptacle> draw_receptacles(Rng& rng, const RoomKind& room, const LevelParams& lp) {
  std::vector<std::string> types = room.core;
  const int n = static_cast<int>(rng.uniform_int(lp.min_receptacles, lp.max_receptacles));
  while (static_cast<int>(types.size()) < n) {
    const bool closable = lp.closable_prob > 0 && rng.bernoulli(lp.closable_prob);
    types.push_back(pick(rng, closable ? room.closable : room.surfaces));
  }
  std::map<std::string, int> count;
  std::vector<Receptacle> recs;
  for (const std::string& t : types) recs.push_back({t, ++count[t], false});
  std::sort(recs.begin(), recs.end(), [](const Receptacle& a, const Receptacle& b) {
    return a.type != b.type ? a.type < b.type : a.number > b.number;
  });
  return recs;
}

// Receptacle indices where an object of type `obj` may start.
std::vector<int> start_spots(const World& w, const std::string& obj, const std::string& not_type, bool open_only) {
  std::vector<int> out;
  for (size_t i = 0; i < w.receptacles.size(); ++i) {
    const Receptacle& r = w.receptacles[i];
    if (r.type == not_type || !can_contain(r.type, obj)) continue;
    if (open_only && is_openable(r.type)) continue;
    out.push_back(static_cast<int>(i));
  }
  return out;
}

// Chooses the goal (object type, receptacle type); false when the room has none.
bool draw_goal(Rng& rng, const WorldSpec& spec, const RoomKind& room, World& w) {
  const bool open_only = spec.level == 1;
  Goal g;
  g.type = spec.task_type;
  g.template_index = static_cast<int>(rng.below(2));
  if (spec.task_type == TaskType::kLookAtInLight) {
    std::vector<std::string> objs;
    for (const std::string& o : room.objects) {
      if (!start_spots(w, o, "", open_only).empty()) objs.push_back(o);
    }
    if (objs.empty()) return false;
    g.object_type = pick(rng, objs);
    g.receptacle_type = "desklamp";
    w.goal = g;
    return true;
  }
  std::vector<std::string> rtypes;
  for (const Receptacle& r : w.receptacles) {
    if (rtypes.empty() || rtypes.back() != r.type) rtypes.push_back(r.type);
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  const std::string appliance = appliance_for(spec.task_type);
  for (const std::string& o : room.objects) {
    if (!has_property(spec.task_type, o)) continue;
    for (const std::string& r : rtypes) {
      if (r == appliance || !can_contain(r, o)) continue;
      if (start_spots(w, o, r, open_only).empty()) continue;
      pairs.emplace_back(o, r);
    }
  }
  if (pairs.empty()) return false;
  const auto& [o, r] = pick(rng, pairs);
  g.object_type = o;
  g.receptacle_type = r;
  w.goal = g;
  return true;
}

void place(Rng& rng, World& w, const std::string& type, const std::vector<int>& spots) {
  Object obj;
  obj.type = type;
  obj.receptacle = spots[rng.choice(spots.size())];
  w.objects.push_back(obj);
}

// The goal's objects, the lamp and the distractors; false when something cannot be placed.
bool place_objects(Rng& rng, const WorldSpec& spec, const RoomKind& room, const LevelParams& lp, World& w) {
  const Goal& g = w.goal;
  const bool open_only = spec.level == 1;
  const bool look = g.type == TaskType::kLookAtInLight;
  int copies = 1;
  if (g.type == TaskType::kPickTwo) {
    copies = spec.level <= 2 ? 2 : static_cast<int>(rng.uniform_int(2, 3));
  } else if (spec.level >= 2) {
    copies = static_cast<int>(rng.uniform_int(1, 2));
  }
  const std::vector<int> spots = start_spots(w, g.object_type, look ? "" : g.receptacle_type, open_only);
  if (spots.empty()) return false;
  for (int i = 0; i < copies; ++i) place(rng, w, g.object_type, spots);
  if (look) {
    std::vector<int> holders;
    for (size_t i = 0; i < w.receptacles.size(); ++i) {
      if (is_lamp_holder(w.receptacles[i].type)) holders.push_back(static_cast<int>(i));
    }
    if (holders.empty()) return false;
    place(rng, w, "desklamp", holders);
  }
  std::vector<std::string> others;
  for (const std::string& o : room.objects) {
    if (o != g.object_type && !start_spots(w, o, "", false).empty()) others.push_back(o);
  }
  const int d = static_cast<int>(rng.uniform_int(lp.min_distractors, lp.max_distractors));
  for (int i = 0; i < d && !others.empty(); ++i) {
    const std::string& t = pick(rng, others);
    place(rng, w, t, start_spots(w, t, "", false));
  }
  return true;
}

// Numbers each type's instances 1..k in random order, then shuffles the listing order.
void number_objects(Rng& rng, World& w) {
  std::map<std::string, std::vector<size_t>> by_type;
  for (size_t i = 0; i < w.objects.size(); ++i) by_type[w.objects[i].type].push_back(i);
  for (auto& [type, idx] : by_type) {
    const std::vector<size_t> perm = rng.permutation(idx.size());
    for (size_t k = 0; k < idx.size(); ++k) w.objects[idx[k]].number = static_cast<int>(perm[k]) + 1;
  }
  rng.shuffle(w.objects.begin(), w.objects.end());
}

}  // namespace

void WorldSpec::validate() const {
  AGENTR1_CHECK(level >= kMinLevel && level <= kMaxLevel,
                "alfworld world.level must be an integer in " << kMinLevel << ".." << kMaxLevel << ", got " << level);
  AGENTR1_CHECK(index >= 0, "alfworld world.index must be >= 0, got " << index);
}

json WorldSpec::to_json() const {
  return {{"seed", seed},
          {"index", index},
          {"level", level},
          {"split", data_split_name(split)},
          {"task_type", task_type_name(task_type)}};
}

WorldSpec WorldSpec::from_json(const json& j) {
  AGENTR1_CHECK(j.is_object(), "alfworld extra_info.world must be an object {seed, index, level, split, task_type}, got "
                                   << j.dump().substr(0, 120));
  for (const char* k : {"seed", "index", "level", "split", "task_type"}) {
    AGENTR1_CHECK(j.contains(k), "alfworld extra_info.world has no '" << k
                                     << "' (expected {seed, index, level, split, task_type}); HINT: make the "
                                        "samples with the alfworld task family");
  }
  WorldSpec s;
  AGENTR1_CHECK(j["seed"].is_number_unsigned() || (j["seed"].is_number_integer() && j["seed"].get<int64_t>() >= 0),
                "alfworld world.seed must be a non-negative integer, got " << j["seed"].dump());
  s.seed = j["seed"].get<uint64_t>();
  AGENTR1_CHECK(j["index"].is_number_integer(), "alfworld world.index must be an integer, got " << j["index"].dump());
  s.index = j["index"].get<int64_t>();
  AGENTR1_CHECK(j["level"].is_number_integer(), "alfworld world.level must be an integer, got " << j["level"].dump());
  const int64_t level = j["level"].get<int64_t>();
  AGENTR1_CHECK(level >= kMinLevel && level <= kMaxLevel,
                "alfworld world.level must be in " << kMinLevel << ".." << kMaxLevel << ", got " << level);
  s.level = static_cast<int>(level);
  AGENTR1_CHECK(j["split"].is_string(), "alfworld world.split must be a string, got " << j["split"].dump());
  s.split = with_context("alfworld world.split", [&] { return parse_data_split(j["split"].get<std::string>()); });
  AGENTR1_CHECK(j["task_type"].is_string(), "alfworld world.task_type must be a string, got " << j["task_type"].dump());
  s.task_type = with_context("alfworld world.task_type", [&] { return parse_task_type(j["task_type"].get<std::string>()); });
  s.validate();
  return s;
}

std::string layout_signature(const World& w) {
  std::map<std::string, int> count;
  for (const Receptacle& r : w.receptacles) ++count[r.type];
  std::string sig = w.room + "|";
  bool first = true;
  for (const auto& [type, n] : count) {
    sig += (first ? "" : ",") + type + "*" + std::to_string(n);
    first = false;
  }
  return sig;
}

bool is_test_layout(const std::string& signature) { return (mix64(fnv1a64(signature)) & 1ULL) != 0; }

World generate_world(const WorldSpec& spec) {
  spec.validate();
  const LevelParams lp = level_params(spec.level);
  const std::vector<const RoomKind*> rooms = rooms_for(spec.task_type);
  const uint64_t split_id = static_cast<uint64_t>(spec.split) + 1;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    Rng rng(derive_seed(spec.seed, {kSeedAlfworld, split_id, static_cast<uint64_t>(spec.index),
                                    static_cast<uint64_t>(spec.level), static_cast<uint64_t>(spec.task_type),
                                    static_cast<uint64_t>(attempt)}));
    const RoomKind& room = *pick(rng, rooms);
    World w;
    w.room = room.name;
    w.receptacles = draw_receptacles(rng, room, lp);
    if (spec.split != DataSplit::kAny && is_test_layout(layout_signature(w)) != (spec.split == DataSplit::kTest)) {
      continue;
    }
    if (!draw_goal(rng, spec, room, w)) continue;
    if (!place_objects(rng, spec, room, lp, w)) continue;
    number_objects(rng, w);
    if (goal_met(w)) continue;  // cannot happen by construction; kept as a guard
    return w;
  }
  throw Error("alfworld: no world found for " + spec.to_json().dump() + " within " + std::to_string(kMaxAttempts) +
              " attempts (a generator bug)");
}

}  // namespace agentr1::tasks::alfworld
