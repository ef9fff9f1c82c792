#include "prompt_format.h"

#include "agentr1/env/tool_env.h"
#include "agentr1/tasks/arithmetic/arithmetic.h"

namespace agentr1::cli {
namespace {

// The value at a dotted key ("a.b.c"), or null when any part is missing.
json value_at(const json& tree, const std::string& dotted) {
  const json* node = &tree;
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    const std::string seg = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(seg)) return nullptr;
    node = &node->at(seg);
    if (dot == std::string::npos) return *node;
    start = dot + 1;
  }
}

const char* str(bool b) { return b ? "true" : "false"; }

}  // namespace

std::vector<std::string> prompt_format_mismatches(const json& tree, const json& model_recipe,
                                                  const std::string& model_dir) {
  struct Setting {
    const char* recipe_key;  // in recipe.json
    const char* tree_key;    // in the train config
    bool tree_default;       // what a run uses when tree_key is unset
  };
  const Setting settings[] = {
      {"use_system_prompt", "data.task_kwargs.use_system_prompt", tasks::ArithPromptOptions{}.use_system_prompt},
      {"tools_in_prompt", "rollout.env_kwargs.tools_in_prompt", env::ToolEnvOptions{}.tools_in_prompt},
  };
  std::vector<std::string> out;
  if (!model_recipe.is_object()) return out;
  for (const Setting& s : settings) {
    auto it = model_recipe.find(s.recipe_key);
    if (it == model_recipe.end() || !it->is_boolean()) continue;
    const bool built = it->get<bool>();
    const json v = value_at(tree, s.tree_key);
    const bool run = v.is_boolean() ? v.get<bool>() : s.tree_default;  // a wrong type fails at binding
    if (built == run) continue;
    out.push_back(std::string("built-in default model: ") + s.tree_key + " is " + str(run) +
                  (v.is_boolean() ? "" : " (unset: the default)") + " but the model in " + model_dir +
                  " was trained with " + s.recipe_key + "=" + str(built) + " (its recipe.json), so RL prompts " +
                  "will not look like its training prompts. HINT: set " + s.tree_key + "=" + str(built) +
                  " (in your --config or configs/builtin.yaml, or on the command line)");
  }
  return out;
}

}  // namespace agentr1::cli
