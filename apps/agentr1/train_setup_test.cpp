// Config layering of `train` / `compare`: the task family's recipe defaults sit under
// the user's config file and overrides.
#include "train_setup.h"

#include <gtest/gtest.h>

#include "agentr1/core/error.h"
#include "agentr1/tasks/task_family.h"

namespace agentr1::cli {
namespace {

// A family whose only job is to carry recipe defaults.
class ProbeFamily : public tasks::TaskFamily {
 public:
  std::string name() const override { return "probe_defaults"; }
  std::vector<Sample> make_dataset(tasks::DataSplit, int64_t, uint64_t) const override { return {}; }
  std::vector<json> demonstrations(int64_t, uint64_t, const text::ChatTemplate&, const std::string&,
                                   std::vector<std::string>*) const override {
    return {};
  }
  std::vector<std::string> recipe_defaults() const override { return {"rollout.n=3", "trainer.total_steps=7"}; }
};

TEST(TrainSetupTest, TaskFamilyRecipeDefaultsApplyUnderTheUsersSettings) {
  tasks::register_task_family("probe_defaults", [](const json&) { return std::make_unique<ProbeFamily>(); });
  const TrainTree t = resolve_train_tree(
      "", {"model.path=/nonexistent/model", "data.task=probe_defaults", "trainer.total_steps=9"}, "");
  EXPECT_FALSE(t.builtin_model);
  EXPECT_EQ(t.tree["rollout"]["n"], 3);               // the family's default
  EXPECT_EQ(t.tree["trainer"]["total_steps"], 9);     // the override wins
  // Without the family selected, its defaults do not apply.
  const TrainTree plain = resolve_train_tree("", {"model.path=/nonexistent/model"}, "");
  EXPECT_EQ(plain.tree["rollout"]["n"], 8);
  // An unknown family fails in the config, before anything is built, listing the known.
  try {
    resolve_train_tree("", {"model.path=/nonexistent/model", "data.task=sudoku"}, "");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("probe_defaults"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("data.task"), std::string::npos) << e.what();
  }
}

// A command's recipe layer (compare --contexts) sits over the defaults and the family's
// recipe defaults, which it may select (data.task_kwargs), and under the user's
// overrides.
TEST(TrainSetupTest, RecipeLayerSitsBetweenTheFamilyDefaultsAndTheUser) {
  RecipeLayer layer;
  layer.name = "test layer";
  layer.tree = {{"data", {{"task_kwargs", {{"max_level", 4}, {"demo_style", "per_step"}}}}},
                {"trainer", {{"total_steps", 11}, {"test_freq", 3}}}};
  const TrainTree t = resolve_train_tree("", {"model.path=/nonexistent/model", "trainer.test_freq=5"}, "", layer);
  EXPECT_EQ(t.tree["trainer"]["total_steps"], 11);  // the layer over the defaults
  EXPECT_EQ(t.tree["trainer"]["test_freq"], 5);     // the user's override over the layer
  // The layer chose the per-step variant, whose family default gives 4 + 1 turns.
  EXPECT_EQ(t.tree["rollout"]["max_steps"], 5);
  const TrainTree plain = resolve_train_tree("", {"model.path=/nonexistent/model"}, "");
  EXPECT_EQ(plain.tree["rollout"]["max_steps"], 4);
  // A bad key of the layer is reported like any config key.
  layer.tree = {{"trainer", {{"total_stepz", 1}}}};
  try {
    resolve_train_tree("", {"model.path=/nonexistent/model"}, "", layer);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("total_stepz"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace agentr1::cli
