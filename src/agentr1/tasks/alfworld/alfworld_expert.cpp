#include "agentr1/tasks/alfworld/alfworld_expert.h"

namespace agentr1::tasks::alfworld {
namespace {

const Receptacle& rec(const World& w, int r) { return w.receptacles[static_cast<size_t>(r)]; }
const Object& obj(const World& w, int o) { return w.objects[static_cast<size_t>(o)]; }

// Go to r, open it if it is closed, then `then`.
std::string at_then(const World& w, int r, const std::string& then) {
  if (w.agent_at != r) return "go to " + rec(w, r).name();
  if (is_openable(rec(w, r).type) && !rec(w, r).opened) return "open " + rec(w, r).name();
  return then;
}

int first_of_type(const World& w, const std::string& type) {
  for (size_t i = 0; i < w.receptacles.size(); ++i) {
    if (w.receptacles[i].type == type) return static_cast<int>(i);
  }
  return -1;
}

// Puts the held object down: here if it fits, else in the first receptacle that holds it.
std::optional<std::string> put_down(const World& w) {
  const Object& h = obj(w, w.held);
  const std::string move = "move " + h.name() + " to ";
  if (w.agent_at >= 0 && can_contain(rec(w, w.agent_at).type, h.type)) {
    return at_then(w, w.agent_at, move + rec(w, w.agent_at).name());
  }
  for (size_t i = 0; i < w.receptacles.size(); ++i) {
    if (can_contain(w.receptacles[i].type, h.type)) {
      return at_then(w, static_cast<int>(i), move + w.receptacles[i].name());
    }
  }
  return std::nullopt;
}

bool has_goal_state(const Goal& g, const Object& o) {
  switch (g.type) {
    case TaskType::kClean: return o.clean;
    case TaskType::kHeat: return o.hot;
    case TaskType::kCool: return o.cool;
    default: return true;
  }
}

std::string appliance_verb(TaskType t) {
  switch (t) {
    case TaskType::kClean: return "clean";
    case TaskType::kHeat: return "heat";
    default: return "cool";
  }
}

std::string appliance_type(TaskType t) {
  switch (t) {
    case TaskType::kClean: return "sinkbasin";
    case TaskType::kHeat: return "microwave";
    default: return "fridge";
  }
}

// The receptacle the place tasks fill: for pick two the one with most goal objects
// already, else the first of the goal type.
int target_receptacle(const World& w) {
  const Goal& g = w.goal;
  int best = first_of_type(w, g.receptacle_type);
  int best_count = 0;
  if (g.type != TaskType::kPickTwo) return best;
  for (size_t i = 0; i < w.receptacles.size(); ++i) {
    if (w.receptacles[i].type != g.receptacle_type) continue;
    int c = 0;
    for (const Object& o : w.objects) c += (o.type == g.object_type && o.receptacle == static_cast<int>(i)) ? 1 : 0;
    if (c > best_count) {
      best = static_cast<int>(i);
      best_count = c;
    }
  }
  return best;
}

// A goal object still to fetch, or -1: one in the current receptacle first.
int object_to_fetch(const World& w, int target) {
  const Goal& g = w.goal;
  int first = -1;
  for (size_t i = 0; i < w.objects.size(); ++i) {
    const Object& o = w.objects[i];
    if (o.type != g.object_type || o.receptacle < 0) continue;
    if (g.type == TaskType::kPickTwo && o.receptacle == target) continue;
    if (g.type != TaskType::kPickTwo && g.type != TaskType::kLookAtInLight &&
        rec(w, o.receptacle).type == g.receptacle_type && has_goal_state(g, o)) {
      continue;
    }
    if (o.receptacle == w.agent_at) return static_cast<int>(i);
    if (first < 0) first = static_cast<int>(i);
  }
  return first;
}

std::optional<std::string> fetch(const World& w, int target) {
  const int o = object_to_fetch(w, target);
  if (o < 0) return std::nullopt;
  const int r = obj(w, o).receptacle;
  return at_then(w, r, "take " + obj(w, o).name() + " from " + rec(w, r).name());
}

std::optional<std::string> look_step(const World& w) {
  const Goal& g = w.goal;
  if (w.held >= 0 && obj(w, w.held).type != g.object_type) return put_down(w);
  if (w.held < 0) return fetch(w, -1);
  for (const Object& lamp : w.objects) {
    if (lamp.type != g.receptacle_type || lamp.receptacle < 0) continue;
    if (w.agent_at != lamp.receptacle) return "go to " + rec(w, lamp.receptacle).name();
    return "use " + lamp.name();
  }
  return std::nullopt;
}

std::optional<std::string> place_step(const World& w) {
  const Goal& g = w.goal;
  const int target = target_receptacle(w);
  if (target < 0) return std::nullopt;
  if (w.held < 0) return fetch(w, target);
  const Object& h = obj(w, w.held);
  if (h.type != g.object_type) return put_down(w);
  if (!has_goal_state(g, h)) {
    const int a = first_of_type(w, appliance_type(g.type));
    if (a < 0) return std::nullopt;
    if (w.agent_at != a) return "go to " + rec(w, a).name();
    return appliance_verb(g.type) + " " + h.name() + " with " + rec(w, a).name();
  }
  return at_then(w, target, "move " + h.name() + " to " + rec(w, target).name());
}

}  // namespace

std::optional<std::string> expert_command(const World& w) {
  if (goal_met(w)) return std::nullopt;
  return w.goal.type == TaskType::kLookAtInLight ? look_step(w) : place_step(w);
}

}  // namespace agentr1::tasks::alfworld
