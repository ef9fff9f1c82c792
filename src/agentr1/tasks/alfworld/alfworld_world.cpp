#include "agentr1/tasks/alfworld/alfworld_world.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "agentr1/core/error.h"

namespace agentr1::tasks::alfworld {
namespace {

// Which object types each receptacle type can hold: ALFWorld's VAL_RECEPTACLE_OBJECTS
// (constants.py), restricted to the object types this generator uses.
const std::map<std::string, std::set<std::string>>& contain_table() {
  static const std::map<std::string, std::set<std::string>> table = [] {
    const std::vector<std::pair<const char*, const char*>> rows = {
        {"countertop", "alarmclock apple baseballbat basketball book bowl bread butterknife candle cd cellphone cloth "
                       "creditcard cup dishsponge egg fork glassbottle handtowel kettle keychain knife ladle laptop "
                       "lettuce mug newspaper pan pen pencil peppershaker plate pot potato remotecontrol saltshaker "
                       "soapbar soapbottle spatula spoon spraybottle statue tennisracket tissuebox toiletpaper tomato "
                       "vase watch winebottle"},
        {"fridge", "apple bowl bread cup egg glassbottle lettuce mug pan plate pot potato tomato winebottle"},
        {"microwave", "apple bowl bread cup egg glassbottle mug plate potato tomato"},
        {"sinkbasin", "apple bowl butterknife cloth cup dishsponge egg fork glassbottle handtowel kettle knife ladle "
                      "lettuce mug pan plate pot potato soapbar spatula spoon tomato"},
        {"stoveburner", "kettle pan pot"},
        {"shelf", "alarmclock book bowl candle cd cellphone cloth creditcard cup dishsponge glassbottle handtowel kettle "
                  "keychain mug newspaper pen pencil peppershaker plate pot remotecontrol saltshaker soapbar "
                  "soapbottle spraybottle statue tissuebox toiletpaper vase watch winebottle"},
        {"garbagecan", "apple bread cd cloth dishsponge egg handtowel lettuce newspaper pen pencil potato soapbar "
                       "soapbottle spraybottle tissuebox toiletpaper tomato winebottle"},
        {"coffeemachine", "mug"},
        {"toaster", ""},
        {"cabinet", "book bowl candle cd cloth cup dishsponge glassbottle handtowel kettle ladle mug newspaper pan "
                    "peppershaker plate pot saltshaker soapbar soapbottle spraybottle tissuebox toiletpaper vase "
                    "winebottle"},
        {"drawer", "book butterknife candle cd cellphone cloth creditcard dishsponge fork handtowel keychain knife "
                   "ladle newspaper pen pencil peppershaker remotecontrol saltshaker soapbar soapbottle spatula spoon "
                   "spraybottle tissuebox toiletpaper watch"},
        {"sofa", "basketball book cellphone cloth creditcard keychain laptop newspaper pillow remotecontrol"},
        {"armchair", "basketball book cellphone cloth creditcard keychain laptop newspaper pillow remotecontrol"},
        {"ottoman", "basketball book cellphone cloth creditcard keychain laptop newspaper pillow remotecontrol"},
        {"tvstand", "tissuebox"},
        {"bed", "baseballbat basketball book cellphone laptop newspaper pillow tennisracket"},
        {"desk", "alarmclock basketball book bowl candle cd cellphone cloth creditcard cup glassbottle keychain laptop "
                 "mug newspaper pen pencil plate remotecontrol soapbottle spraybottle statue tennisracket tissuebox "
                 "toiletpaper vase watch winebottle"},
        {"dresser", "alarmclock basketball book bowl candle cd cellphone cloth creditcard cup glassbottle keychain "
                    "laptop mug newspaper pen pencil plate remotecontrol spraybottle statue tennisracket tissuebox "
                    "toiletpaper vase watch winebottle"},
        {"laundryhamper", "cloth"},
        {"safe", "cd cellphone creditcard keychain statue vase watch"},
        {"toilet", "candle cloth dishsponge handtowel newspaper soapbar soapbottle spraybottle tissuebox toiletpaper"},
        {"bathtubbasin", "cloth dishsponge handtowel soapbar"},
        {"handtowelholder", "handtowel"},
        {"towelholder", "towel"},
        {"toiletpaperhanger", "toiletpaper"},
    };
    std::map<std::string, std::set<std::string>> t;
    for (const auto& [rec, objs] : rows) {
      std::istringstream is(objs);
      std::set<std::string>& s = t[rec];
      for (std::string o; is >> o;) s.insert(o);
    }
    // Tables and side tables hold what countertops hold.
    t["diningtable"] = t["countertop"];
    t["coffeetable"] = t["countertop"];
    t["sidetable"] = t["countertop"];
    return t;
  }();
  return table;
}

bool in_set(const std::set<std::string>& s, const std::string& x) { return s.count(x) > 0; }

// ALFWorld's VAL_ACTION_OBJECTS (constants.py), restricted to the types used here.
const std::set<std::string> kCleanable = {"apple",  "bowl",  "butterknife", "cloth",  "cup",   "dishsponge",
                                          "egg",    "fork",  "kettle",      "knife",  "ladle", "lettuce",
                                          "mug",    "pan",   "plate",       "pot",    "potato", "soapbar",
                                          "spatula", "spoon", "tomato"};
const std::set<std::string> kHeatable = {"apple", "bread", "cup", "egg", "mug", "plate", "potato", "tomato"};
const std::set<std::string> kCoolable = {"apple", "bowl", "bread", "cup", "egg", "lettuce", "mug", "pan",
                                         "plate", "pot",  "potato", "tomato", "winebottle"};
const std::set<std::string> kSliceable = {"apple", "bread", "egg", "lettuce", "potato", "tomato"};
const std::set<std::string> kOpenable = {"fridge", "cabinet", "microwave", "drawer", "safe"};

std::string with_article(const std::string& name) { return "a " + name; }

// "nothing" | "a x" | "a x, and a y" | "a x, a y, and a z" (TextWorld's list separators).
std::string list_text(const std::vector<std::string>& names) {
  if (names.empty()) return "nothing";
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += (i + 1 == names.size()) ? ", and " : ", ";
    out += with_article(names[i]);
  }
  return out;
}

std::vector<std::string> contents(const World& w, int r) {
  std::vector<std::string> names;
  for (const Object& o : w.objects) {
    if (o.receptacle == r) names.push_back(o.name());
  }
  return names;
}

bool is_accessible(const World& w, int r) {
  return !is_openable(w.receptacles[static_cast<size_t>(r)].type) || w.receptacles[static_cast<size_t>(r)].opened;
}

std::string examine_receptacle_text(const World& w, int r) {
  const Receptacle& rec = w.receptacles[static_cast<size_t>(r)];
  if (is_openable(rec.type)) {
    if (!rec.opened) return "The " + rec.name() + " is closed.";
    return "The " + rec.name() + " is open. In it, you see " + list_text(contents(w, r)) + ".";
  }
  return "On the " + rec.name() + ", you see " + list_text(contents(w, r)) + ".";
}

// alfred.twl2's examineObject.feedback, in its order of conditions.
std::string examine_object_text(const Object& o) {
  const std::string n = o.name();
  if (o.clean && o.hot && o.sliced) return "This is a hot and clean sliced " + n + ".";
  if (o.clean && o.cool && o.sliced) return "This is a cool and clean sliced " + n + ".";
  if (o.clean && o.sliced) return "This is a clean sliced " + n + ".";
  if (o.hot && o.sliced) return "This is a hot sliced " + n + ".";
  if (o.cool && o.sliced) return "This is a cool sliced " + n + ".";
  if (o.clean && o.hot) return "This is a hot and clean " + n + ".";
  if (o.clean && o.cool) return "This is a cool and clean " + n + ".";
  if (o.hot) return "This is a hot " + n + ".";
  if (o.clean) return "This is a clean " + n + ".";
  if (o.cool) return "This is a cold " + n + ".";
  if (is_toggleable(o.type)) return "This " + n + (o.on ? " is on." : " is off.");
  if (o.sliced) return "This is a sliced " + n + ".";
  return "There's nothing special about " + n + ".";
}

std::string look_text(const World& w) {
  if (w.agent_at >= 0) {
    return "You are facing the " + w.receptacles[static_cast<size_t>(w.agent_at)].name() +
           ". Next to it, you see nothing.";
  }
  std::vector<std::string> names;
  for (const Receptacle& r : w.receptacles) names.push_back(r.name());
  return "You are in the middle of a room. Looking quickly around you, you see " + list_text(names) + ".";
}

std::string inventory_text(const World& w) {
  if (w.held < 0) return "You are not carrying anything.";
  return "You are carrying: " + with_article(w.objects[static_cast<size_t>(w.held)].name()) + ".";
}

enum class Verb { kGoTo, kOpen, kClose, kTake, kMove, kExamineR, kExamineO, kUse, kClean, kHeat, kCool, kSlice,
                  kInventory, kLook };

// One valid command: its canonical text and its arguments (object / receptacle indices).
struct Action {
  std::string text;
  Verb verb;
  int object = -1;
  int receptacle = -1;
  int tool = -1;  // the knife for slice
};

// The objects the agent can see where it stands (in its receptacle, if open).
std::vector<int> visible_objects(const World& w) {
  std::vector<int> out;
  if (w.agent_at < 0 || !is_accessible(w, w.agent_at)) return out;
  for (size_t i = 0; i < w.objects.size(); ++i) {
    if (w.objects[i].receptacle == w.agent_at) out.push_back(static_cast<int>(i));
  }
  return out;
}

void add_appliance_actions(const World& w, std::vector<Action>& out) {
  if (w.held < 0 || w.agent_at < 0) return;
  const Object& h = w.objects[static_cast<size_t>(w.held)];
  const Receptacle& r = w.receptacles[static_cast<size_t>(w.agent_at)];
  const std::string suffix = h.name() + " with " + r.name();
  if (r.type == "sinkbasin" && is_cleanable(h.type)) out.push_back({"clean " + suffix, Verb::kClean, w.held, w.agent_at});
  if (r.type == "microwave" && is_heatable(h.type)) out.push_back({"heat " + suffix, Verb::kHeat, w.held, w.agent_at});
  if (r.type == "fridge" && is_coolable(h.type)) out.push_back({"cool " + suffix, Verb::kCool, w.held, w.agent_at});
}

std::vector<Action> valid_actions(const World& w) {
  std::vector<Action> out;
  for (size_t i = 0; i < w.receptacles.size(); ++i) {
    if (static_cast<int>(i) != w.agent_at) out.push_back({"go to " + w.receptacles[i].name(), Verb::kGoTo, -1, static_cast<int>(i)});
  }
  out.push_back({"inventory", Verb::kInventory});
  out.push_back({"look", Verb::kLook});
  if (w.held >= 0) {
    out.push_back({"examine " + w.objects[static_cast<size_t>(w.held)].name(), Verb::kExamineO, w.held});
  }
  if (w.agent_at < 0) return out;
  const int at = w.agent_at;
  const Receptacle& rec = w.receptacles[static_cast<size_t>(at)];
  out.push_back({"examine " + rec.name(), Verb::kExamineR, -1, at});
  if (is_openable(rec.type)) {
    out.push_back({(rec.opened ? "close " : "open ") + rec.name(), rec.opened ? Verb::kClose : Verb::kOpen, -1, at});
  }
  const bool accessible = is_accessible(w, at);
  for (int o : visible_objects(w)) {
    const Object& obj = w.objects[static_cast<size_t>(o)];
    out.push_back({"examine " + obj.name(), Verb::kExamineO, o});
    if (w.held < 0 && is_pickupable(obj.type)) {
      out.push_back({"take " + obj.name() + " from " + rec.name(), Verb::kTake, o, at});
    }
    if (is_toggleable(obj.type)) out.push_back({"use " + obj.name(), Verb::kUse, o, at});
    if (w.held >= 0 && is_sliceable(obj.type) && !obj.sliced) {
      const std::string& k = w.objects[static_cast<size_t>(w.held)].type;
      if (k == "knife" || k == "butterknife") {
        out.push_back({"slice " + obj.name() + " with " + w.objects[static_cast<size_t>(w.held)].name(), Verb::kSlice,
                       o, at, w.held});
      }
    }
  }
  // A lamp in a closed receptacle can still be switched on (ToggleObject needs no open).
  if (!accessible) {
    for (size_t i = 0; i < w.objects.size(); ++i) {
      if (w.objects[i].receptacle == at && is_toggleable(w.objects[i].type)) {
        out.push_back({"use " + w.objects[i].name(), Verb::kUse, static_cast<int>(i), at});
      }
    }
  }
  if (w.held >= 0 && accessible && can_contain(rec.type, w.objects[static_cast<size_t>(w.held)].type)) {
    out.push_back({"move " + w.objects[static_cast<size_t>(w.held)].name() + " to " + rec.name(), Verb::kMove, w.held, at});
  }
  add_appliance_actions(w, out);
  return out;
}

// "put X in Y" / "put X on Y" / "put X in/on Y" -> "move X to Y"; anything else unchanged.
std::string canonical_phrasing(const std::string& cmd) {
  if (cmd.rfind("put ", 0) != 0) return cmd;
  for (const char* sep : {" in/on ", " in ", " on "}) {
    const size_t p = cmd.find(sep, 4);
    if (p != std::string::npos) return "move " + cmd.substr(4, p - 4) + " to " + cmd.substr(p + std::string(sep).size());
  }
  return cmd;
}

std::string execute(World& w, const Action& a) {
  switch (a.verb) {
    case Verb::kGoTo:
      w.agent_at = a.receptacle;
      return "You arrive at " + w.receptacles[static_cast<size_t>(a.receptacle)].name() + ". " +
             examine_receptacle_text(w, a.receptacle);
    case Verb::kOpen:
      w.receptacles[static_cast<size_t>(a.receptacle)].opened = true;
      return "You open the " + w.receptacles[static_cast<size_t>(a.receptacle)].name() + ". " +
             examine_receptacle_text(w, a.receptacle);
    case Verb::kClose:
      w.receptacles[static_cast<size_t>(a.receptacle)].opened = false;
      return "You close the " + w.receptacles[static_cast<size_t>(a.receptacle)].name() + ".";
    case Verb::kTake:
      w.objects[static_cast<size_t>(a.object)].receptacle = -1;
      w.held = a.object;
      return "You pick up the " + w.objects[static_cast<size_t>(a.object)].name() + " from the " +
             w.receptacles[static_cast<size_t>(a.receptacle)].name() + ".";
    case Verb::kMove:
      w.objects[static_cast<size_t>(a.object)].receptacle = a.receptacle;
      w.held = -1;
      return "You move the " + w.objects[static_cast<size_t>(a.object)].name() + " to the " +
             w.receptacles[static_cast<size_t>(a.receptacle)].name() + ".";
    case Verb::kExamineR:
      return examine_receptacle_text(w, a.receptacle);
    case Verb::kExamineO:
      return examine_object_text(w.objects[static_cast<size_t>(a.object)]);
    case Verb::kUse:
      w.objects[static_cast<size_t>(a.object)].on = true;
      return "You turn on the " + w.objects[static_cast<size_t>(a.object)].name() + ".";
    case Verb::kClean:
      w.objects[static_cast<size_t>(a.object)].clean = true;
      return "You clean the " + w.objects[static_cast<size_t>(a.object)].name() + " using the " +
             w.receptacles[static_cast<size_t>(a.receptacle)].name() + ".";
    case Verb::kHeat: {
      Object& o = w.objects[static_cast<size_t>(a.object)];
      o.hot = true;
      o.cool = false;
      return "You heat the " + o.name() + " using the " + w.receptacles[static_cast<size_t>(a.receptacle)].name() + ".";
    }
    case Verb::kCool: {
      Object& o = w.objects[static_cast<size_t>(a.object)];
      o.cool = true;
      o.hot = false;
      return "You cool the " + o.name() + " using the " + w.receptacles[static_cast<size_t>(a.receptacle)].name() + ".";
    }
    case Verb::kSlice:
      w.objects[static_cast<size_t>(a.object)].sliced = true;
      return "You sliced the " + w.objects[static_cast<size_t>(a.object)].name() + " with the " +
             w.objects[static_cast<size_t>(a.tool)].name() + ".";
    case Verb::kInventory:
      return inventory_text(w);
    case Verb::kLook:
      return look_text(w);
  }
  return "Nothing happens.";
}

}  // namespace

std::string task_type_name(TaskType t) {
  switch (t) {
    case TaskType::kPickAndPlace: return "pick_and_place_simple";
    case TaskType::kLookAtInLight: return "look_at_obj_in_light";
    case TaskType::kClean: return "pick_clean_then_place_in_recep";
    case TaskType::kHeat: return "pick_heat_then_place_in_recep";
    case TaskType::kCool: return "pick_cool_then_place_in_recep";
    case TaskType::kPickTwo: return "pick_two_obj_and_place";
  }
  return "?";
}

const std::vector<TaskType>& all_task_types() {
  static const std::vector<TaskType> all = {TaskType::kPickAndPlace, TaskType::kLookAtInLight, TaskType::kClean,
                                            TaskType::kHeat,         TaskType::kCool,          TaskType::kPickTwo};
  return all;
}

TaskType parse_task_type(const std::string& name) {
  std::string known;
  for (TaskType t : all_task_types()) {
    if (task_type_name(t) == name) return t;
    known += (known.empty() ? "" : ", ") + task_type_name(t);
  }
  throw Error("unknown alfworld task type '" + name + "'; known: " + known);
}

bool is_openable(const std::string& t) { return in_set(kOpenable, t); }
bool can_contain(const std::string& r, const std::string& o) {
  const auto& t = contain_table();
  const auto it = t.find(r);
  return it != t.end() && in_set(it->second, o);
}
bool is_cleanable(const std::string& t) { return in_set(kCleanable, t); }
bool is_heatable(const std::string& t) { return in_set(kHeatable, t); }
bool is_coolable(const std::string& t) { return in_set(kCoolable, t); }
bool is_sliceable(const std::string& t) { return in_set(kSliceable, t); }
bool is_toggleable(const std::string& t) { return t == "desklamp"; }
bool is_pickupable(const std::string& t) { return !is_toggleable(t); }

std::string Goal::text() const {
  const std::string& o = object_type;
  const std::string& r = receptacle_type;
  const bool alt = template_index != 0;
  switch (type) {
    case TaskType::kPickAndPlace: return alt ? "put some " + o + " on " + r : "put a " + o + " in " + r;
    case TaskType::kClean: return alt ? "clean some " + o + " and put it in " + r : "put a clean " + o + " in " + r;
    case TaskType::kHeat: return alt ? "heat some " + o + " and put it in " + r : "put a hot " + o + " in " + r;
    case TaskType::kCool: return alt ? "cool some " + o + " and put it in " + r : "put a cool " + o + " in " + r;
    case TaskType::kPickTwo: return alt ? "find two " + o + " and put them in " + r : "put two " + o + " in " + r;
    case TaskType::kLookAtInLight:
      return alt ? "examine the " + o + " with the " + r : "look at " + o + " under the " + r;
  }
  return "";
}

json World::to_json() const {
  json recs = json::array();
  for (const Receptacle& r : receptacles) {
    json j = {{"name", r.name()}};
    if (is_openable(r.type)) j["opened"] = r.opened;
    recs.push_back(std::move(j));
  }
  json objs = json::array();
  for (const Object& o : objects) {
    json j = {{"name", o.name()},
              {"in", o.receptacle >= 0 ? json(receptacles[static_cast<size_t>(o.receptacle)].name()) : json("held")}};
    for (const auto& [flag, key] : {std::pair{o.clean, "clean"}, {o.hot, "hot"}, {o.cool, "cool"},
                                    {o.sliced, "sliced"}, {o.on, "on"}}) {
      if (flag) j[key] = true;
    }
    objs.push_back(std::move(j));
  }
  return {{"room", room},
          {"goal", goal.text()},
          {"task_type", task_type_name(goal.type)},
          {"receptacles", recs},
          {"objects", objs},
          {"agent_at", agent_at >= 0 ? json(receptacles[static_cast<size_t>(agent_at)].name()) : json(nullptr)},
          {"held", held >= 0 ? json(objects[static_cast<size_t>(held)].name()) : json(nullptr)}};
}

std::string intro_text(const World& w) {
  World middle = w;
  middle.agent_at = -1;
  return look_text(middle) + "\n\nYour task is to: " + w.goal.text() + ".";
}

std::string normalize_command(const std::string& command) {
  std::string out;
  out.reserve(command.size());
  bool space = false;
  for (unsigned char c : command) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c < 0x80 ? static_cast<char>(std::tolower(c)) : static_cast<char>(c));
  }
  return out;
}

CommandResult apply_command(World& w, const std::string& command) {
  const std::string cmd = canonical_phrasing(normalize_command(command));
  for (const Action& a : valid_actions(w)) {
    if (a.text == cmd) return {true, execute(w, a)};
  }
  return {false, "Nothing happens."};
}

std::vector<std::string> admissible_commands(const World& w) {
  std::vector<std::string> out;
  for (const Action& a : valid_actions(w)) out.push_back(a.text);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool goal_met(const World& w) {
  const Goal& g = w.goal;
  if (g.type == TaskType::kLookAtInLight) {
    if (w.held < 0 || w.agent_at < 0 || w.objects[static_cast<size_t>(w.held)].type != g.object_type) return false;
    for (const Object& o : w.objects) {
      if (o.type == g.receptacle_type && o.on && o.receptacle == w.agent_at) return true;
    }
    return false;
  }
  std::vector<int> count(w.receptacles.size(), 0);
  for (const Object& o : w.objects) {
    if (o.type != g.object_type || o.receptacle < 0) continue;
    if (w.receptacles[static_cast<size_t>(o.receptacle)].type != g.receptacle_type) continue;
    if (g.type == TaskType::kClean && !o.clean) continue;
    if (g.type == TaskType::kHeat && !o.hot) continue;
    if (g.type == TaskType::kCool && !o.cool) continue;
    ++count[static_cast<size_t>(o.receptacle)];
  }
  const int need = g.type == TaskType::kPickTwo ? 2 : 1;
  return std::any_of(count.begin(), count.end(), [need](int c) { return c >= need; });
}

int find_receptacle(const World& w, const std::string& name) {
  for (size_t i = 0; i < w.receptacles.size(); ++i) {
    if (w.receptacles[i].name() == name) return static_cast<int>(i);
  }
  return -1;
}

int find_object(const World& w, const std::string& name) {
  for (size_t i = 0; i < w.objects.size(); ++i) {
    if (w.objects[i].name() == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace agentr1::tasks::alfworld
