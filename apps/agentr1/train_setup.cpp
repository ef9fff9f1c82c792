#include "train_setup.h"

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/train/default_recipe.h"
#include "agentr1/train/train_config.h"
#include "command.h"

namespace agentr1::cli {
namespace {

json layered_tree(const std::string& config_file, const std::vector<std::string>& base_overrides,
                  const std::vector<std::string>& overrides) {
  json tree = train::default_train_tree();
  for (const auto& o : base_overrides) apply_override(tree, o);
  if (!config_file.empty()) {
    json file = with_context("--config " + config_file, [&] { return load_yaml_file(config_file); });
    // Unknown keys of the file are reported like overrides (when the tree is bound).
    merge_json(tree, file);
  }
  for (const auto& o : overrides) apply_override(tree, o);  // its errors name the override
  return tree;
}

}  // namespace

TrainTree resolve_train_tree(const std::string& config_file, const std::vector<std::string>& overrides,
                             const std::string& chat_template_file) {
  TrainTree t;
  t.tree = layered_tree(config_file, {}, overrides);
  const train::TrainConfig cfg = train::load_train_config(t.tree);  // fail fast, before any build
  set_threads(cfg.trainer.threads);
  if (!cfg.model.path.empty()) return t;
  train::DefaultModelOptions dm;
  dm.chat_template_file = chat_template_file;
  const std::string path = train::ensure_default_model(dm);
  const std::vector<std::string> prompt_format = train::default_model_train_overrides(dm);
  std::string joined;
  for (const auto& o : prompt_format) joined += " " + o;
  AGENTR1_LOG(INFO) << "built-in default model: prompts as it was trained:" << joined;
  t.tree = layered_tree(config_file, prompt_format, overrides);
  t.tree["model"]["path"] = path;
  t.builtin_model = true;
  return t;
}

}  // namespace agentr1::cli
