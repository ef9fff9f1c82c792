#include "train_setup.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/sft/default_recipe.h"
#include "agentr1/train/distributed/distributed.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"
#include "command.h"
#include "data_dir.h"
#include "prompt_format.h"

namespace agentr1::cli {
namespace {

// defaults < the task family's recipe defaults < recipe (a YAML tree; {} = none) <
// --config file < overrides.
json layered_tree(const std::string& config_file, const std::vector<std::string>& family_defaults,
                  const json& recipe, const RecipeLayer& layer, const std::vector<std::string>& overrides) {
  json tree = train::default_train_tree();
  for (const auto& o : family_defaults) with_context("recipe default of data.task", [&] { apply_override(tree, o); });
  merge_json(tree, recipe);       // unknown keys are reported when the tree is bound
  merge_json(tree, layer.tree);
  if (!config_file.empty()) {
    json file = with_context("--config " + config_file, [&] { return load_yaml_file(config_file); });
    // Unknown keys of the file are reported like overrides (when the tree is bound).
    merge_json(tree, file);
  }
  for (const auto& o : overrides) apply_override(tree, o);  // its errors name the override
  return tree;
}

// The file and overrides over the defaults, only to decide which layers apply (model.path
// unset -> builtin.yaml; data.task -> its recipe defaults). Overrides that fail here are
// skipped (the real layering reports them), so that one that only works with the
// recipe's keys in place (e.g. rollout.env_kwargs.tools_in_prompt=true) is not rejected
// before the recipe is layered in.
json preliminary_tree(const std::string& config_file, const RecipeLayer& layer,
                      const std::vector<std::string>& overrides) {
  json tree = layered_tree(config_file, {}, json::object(), layer, {});
  for (const auto& o : overrides) {
    try {
      apply_override(tree, o);
    } catch (const Error&) {
    }
  }
  return tree;
}

bool model_path_unset(const json& tree) {
  const auto model = tree.find("model");
  if (model == tree.end() || !model->is_object()) return true;  // binding reports a bad type
  const auto path = model->find("path");
  return path == model->end() || path->is_null() || (path->is_string() && path->get<std::string>().empty());
}

// The selected task family's recipe_defaults() (data.task as the layers leave it). A bad
// name or options give nothing here; load_train_config reports them.
std::vector<std::string> family_recipe_defaults(const json& tree) {
  try {
    const json& data = tree.at("data");
    tasks::register_builtin_tasks();
    return tasks::make_task_family(data.at("task").get<std::string>(), data.value("task_kwargs", json::object()))
        ->recipe_defaults();
  } catch (const std::exception&) {
    return {};
  }
}

void warn_on_prompt_format_mismatch(const json& tree, const std::string& model_dir) {
  const std::string recipe_path = model_dir + "/recipe.json";
  const json recipe = json::parse(train::read_text_file(recipe_path), nullptr, false);
  if (recipe.is_discarded()) {
    AGENTR1_LOG(WARN) << "built-in default model: cannot parse " << recipe_path << "; prompt format not checked";
    return;
  }
  for (const std::string& w : prompt_format_mismatches(tree, recipe, model_dir)) AGENTR1_LOG(WARN) << w;
}


// Data parallel (WORLD_SIZE > 1): trainer.threads=0 means this rank's share of the cores
// (cores / LOCAL_WORLD_SIZE, at least 1), so that N local ranks do not oversubscribe.
int rank_threads(int configured) {
  const std::optional<train::DistEnv> env = train::dist_env_from_environment();
  if (configured != 0 || !env || env->local_world_size <= 1) return configured;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / env->local_world_size);
}

// Data parallel: rank 0 builds a missing built-in model; the other ranks wait for it
// (a directory is complete once its recipe.json, written last, matches), then reuse it.
void wait_for_rank0_model(const train::DefaultModelOptions& dm, double timeout_s) {
  const std::optional<train::DistEnv> env = train::dist_env_from_environment();
  if (!env || env->world_size <= 1 || env->rank == 0 || train::default_model_ready(dm)) return;
  AGENTR1_LOG(WARN) << "rank " << env->rank << ": waiting for rank 0 to build the built-in model in " << dm.dir;
  const auto t0 = std::chrono::steady_clock::now();
  while (!train::default_model_ready(dm)) {
    AGENTR1_CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < timeout_s,
                  "rank " << env->rank << ": rank 0 did not build the built-in model in " << dm.dir << " within "
                          << timeout_s << " s (trainer.dist.timeout_s); HINT: build it first with `agentr1 sft`, "
                          "or check rank 0's log");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}
}  // namespace

std::string builtin_chat_template_file(const std::string& chat_template_file) {
  return chat_template_file.empty() ? data_path("qwen3_tokenizer_config.json") : chat_template_file;
}

TrainTree resolve_train_tree_unhinted(const std::string& config_file, const std::vector<std::string>& overrides,
                                      const std::string& chat_template_file, const RecipeLayer& layer);

// Keys of earlier versions that moved into data.task_kwargs: an error about one of them
// gets a HINT saying where it went.
[[noreturn]] void rethrow_with_moved_key_hint(const Error& e) {
  const std::string what = e.what();
  for (const char* key : {"min_level", "max_level", "use_system_prompt"}) {
    if (what.find("'data' has no key '" + std::string(key) + "'") == std::string::npos) continue;
    throw Error(what + " HINT: data." + key + " moved to the task family's options: data.task_kwargs." + key +
                " (e.g. ++data.task_kwargs." + key + "=...)");
  }
  throw e;
}

TrainTree resolve_train_tree(const std::string& config_file, const std::vector<std::string>& overrides,
                             const std::string& chat_template_file, const RecipeLayer& layer) {
  try {
    return resolve_train_tree_unhinted(config_file, overrides, chat_template_file, layer);
  } catch (const Error& e) {
    rethrow_with_moved_key_hint(e);
  }
}

TrainTree resolve_train_tree_unhinted(const std::string& config_file, const std::vector<std::string>& overrides,
                                      const std::string& chat_template_file, const RecipeLayer& layer) {
  TrainTree t;
  json recipe = json::object();
  std::string recipe_file;
  const json first = preliminary_tree(config_file, layer, overrides);
  const std::vector<std::string> family_defaults = family_recipe_defaults(first);
  if (model_path_unset(first)) {
    recipe_file = data_file("configs/builtin.yaml");
    recipe = with_context("built-in recipe", [&] { return load_yaml_file(recipe_file); });
    t.builtin_model = true;
  }
  t.tree = layered_tree(config_file, family_defaults, recipe, layer, overrides);
  const train::TrainConfig cfg = train::load_train_config(t.tree);  // fail fast, before any build
  set_threads(rank_threads(cfg.trainer.threads));
  if (!t.builtin_model) return t;
  AGENTR1_LOG(INFO) << "built-in default model: recipe settings from " << recipe_file
                    << " (under --config and the overrides)";
  train::DefaultModelOptions dm;
  with_context(layer.name + ": builtin_model", [&] {
    dm.apply_json(layer.builtin_model);
    return 0;
  });
  dm.chat_template_file = builtin_chat_template_file(chat_template_file);
  wait_for_rank0_model(dm, cfg.trainer.dist.timeout_s);
  const std::string path = train::ensure_default_model(dm);
  warn_on_prompt_format_mismatch(t.tree, path);
  t.tree["model"]["path"] = path;
  return t;
}

train::CompareRecipe load_compare_recipe() {
  const std::string path = data_file("configs/compare.yaml");
  return with_context(path, [&] { return train::parse_compare_recipe(load_yaml_file(path)); });
}

}  // namespace agentr1::cli
