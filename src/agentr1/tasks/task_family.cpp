#include "agentr1/tasks/task_family.h"

#include "agentr1/core/error.h"
#include "agentr1/core/registry.h"

namespace agentr1::tasks {
namespace {

using TaskFamilyRegistry = Registry<TaskFamily, const json&>;
constexpr const char* kWhat = "task family";

}  // namespace

void register_task_family(const std::string& name, TaskFamilyFactory factory) {
  AGENTR1_CHECK(factory != nullptr, "register_task_family('" << name << "'): the factory is empty");
  TaskFamilyRegistry::instance().add(name, std::move(factory), kWhat);
}

std::unique_ptr<TaskFamily> make_task_family(const std::string& name, const json& kwargs) {
  const TaskFamilyRegistry& r = TaskFamilyRegistry::instance();
  if (!r.contains(name)) {
    std::string known;
    for (const std::string& n : r.names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown task family '" + name + "'; known: " +
                (known.empty() ? "(none registered). HINT: call agentr1::tasks::register_builtin_tasks() first"
                               : known));
  }
  AGENTR1_CHECK(kwargs.is_null() || kwargs.is_object(),
                "data.task_kwargs of task family '" << name << "' must be a map of its options (or empty), got "
                                                     << kwargs.type_name() << " " << kwargs.dump());
  std::unique_ptr<TaskFamily> family =
      with_context("task family '" + name + "'", [&] { return r.create(name, kwargs, kWhat); });
  AGENTR1_CHECK(family != nullptr, "the factory of task family '" << name << "' returned null");
  AGENTR1_CHECK(family->name() == name, "task family registered as '" << name << "' reports name() '"
                                                                       << family->name() << "'; they must match");
  return family;
}

std::vector<std::string> task_family_names() { return TaskFamilyRegistry::instance().names(); }

bool has_task_family(const std::string& name) { return TaskFamilyRegistry::instance().contains(name); }

}  // namespace agentr1::tasks
