// apps/agentr1/prompt_format.h — the built-in model's prompt format against a run's.
//
//   json recipe = json::parse(read_text_file(model_dir + "/recipe.json"));
//   for (const std::string& w : prompt_format_mismatches(tree, recipe, model_dir))
//     AGENTR1_LOG(WARN) << w;
//
// The built-in default model fixes its prompt format when it is built
// (DefaultModelOptions::use_system_prompt / tools_in_prompt, recorded in recipe.json);
// configs/builtin.yaml sets the train config to match. A run whose config differs is
// legal but almost certainly a mistake: the model never saw such prompts.
#pragma once

#include <string>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::cli {

// One message per setting where the train config tree differs from the model's
// recipe.json: data.task_kwargs.use_system_prompt against "use_system_prompt" and
// rollout.env_kwargs.tools_in_prompt against "tools_in_prompt". Each names both values,
// model_dir and the key to set. A key unset in the tree counts as its default (true for
// both); a setting missing from the recipe (or not a bool) is not compared.
std::vector<std::string> prompt_format_mismatches(const json& tree, const json& model_recipe,
                                                  const std::string& model_dir);

}  // namespace agentr1::cli
