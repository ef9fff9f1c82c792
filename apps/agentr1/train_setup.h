// apps/agentr1/train_setup.h — config handling shared by `train` and `compare`.
//
//   TrainTree t = resolve_train_tree(config_file, overrides, chat_template);
//   TrainConfig cfg = load_train_config(t.tree);   // typed + validated
//
// Layers, later wins: defaults < the built-in model's prompt format (only when
// model.path is unset) < the YAML file < the dotted overrides.
#pragma once

#include <string>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::cli {

struct TrainTree {
  json tree;
  bool builtin_model = false;  // model.path was unset: the built-in default is used
};

// Validates the user's config first (errors name the file or override), sets the torch
// threads from trainer.threads, then builds or reuses the built-in default model when
// model.path is empty (see train::ensure_default_model).
TrainTree resolve_train_tree(const std::string& config_file, const std::vector<std::string>& overrides,
                             const std::string& chat_template_file);

}  // namespace agentr1::cli
