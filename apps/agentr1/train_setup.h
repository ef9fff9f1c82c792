// apps/agentr1/train_setup.h — config handling shared by `train` and `compare`.
//
//   TrainTree t = resolve_train_tree(config_file, overrides, chat_template);
//   TrainConfig cfg = load_train_config(t.tree);   // typed + validated
//
// Layers, later wins: defaults < the task family's recipe_defaults() (data.task) <
// configs/builtin.yaml from the data dir (only when model.path is unset: the built-in
// model's prompt format and RL recipe) < a command's RecipeLayer tree (if any) < the
// YAML file < the dotted overrides.
#pragma once

#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/experiments/compare.h"

namespace agentr1::cli {

// A recipe layered by a command on top of the built-in one (e.g. `compare --contexts`
// with configs/contexts.yaml): a config tree placed after configs/builtin.yaml and under
// --config and the overrides, and the built-in model's options when model.path is
// unset (train::DefaultModelOptions::apply_json keys; {} = the default model).
struct RecipeLayer {
  std::string name;                        // for error messages, e.g. the file's path
  json tree = json::object();
  json builtin_model = json::object();
};

struct TrainTree {
  json tree;
  bool builtin_model = false;  // model.path was unset: the built-in default is used
};

// Validates the layered config first (errors name the file or override), sets the
// torch threads from trainer.threads, then, when model.path is unset, builds or reuses
// the built-in default model (train::ensure_default_model) with the chat template from
// chat_template_file or, when that is "", the data dir's qwen3_tokenizer_config.json,
// and sets model.path to it. Throws Error when model.path is unset and the data dir has
// no configs/builtin.yaml (see data_dir.h). Logs a WARN when the resolved
// data.task_kwargs.use_system_prompt or rollout.env_kwargs.tools_in_prompt differs from
// the built model's recipe.json.
TrainTree resolve_train_tree(const std::string& config_file, const std::vector<std::string>& overrides,
                             const std::string& chat_template_file, const RecipeLayer& layer = {});

// The chat template the built-in default model is built with: chat_template_file if
// non-empty, else the data dir's qwen3_tokenizer_config.json (which need not exist until
// a build reads it). For `train`, `compare` and `sft`.
std::string builtin_chat_template_file(const std::string& chat_template_file);

// configs/compare.yaml from the data dir (the method table of `compare` and
// `benchmark`); errors name the file.
train::CompareRecipe load_compare_recipe();

}  // namespace agentr1::cli
