// The built-in model's prompt format (recipe.json) against the run's config: a
// difference gives one message per setting naming both values and the key to set.
#include "prompt_format.h"

#include <gtest/gtest.h>

#include <string>

namespace agentr1::cli {
namespace {

json tree_with(const json& task_kwargs, const json& env_kwargs) {
  return {{"data", {{"task_kwargs", task_kwargs}}}, {"rollout", {{"env_kwargs", env_kwargs}}}};
}

const json kRecipe = {{"vocab_size", 2304}, {"use_system_prompt", false}, {"tools_in_prompt", false}};

TEST(PromptFormatTest, MatchingConfigGivesNoMessage) {
  EXPECT_TRUE(prompt_format_mismatches(tree_with({{"use_system_prompt", false}}, {{"tools_in_prompt", false}}),
                                       kRecipe, "runs/_builtin/model")
                  .empty());
}

TEST(PromptFormatTest, EachDifferenceNamesBothValuesAndTheKey) {
  const auto w = prompt_format_mismatches(tree_with({{"use_system_prompt", true}}, {{"tools_in_prompt", false}}),
                                          kRecipe, "runs/_builtin/model");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("data.task_kwargs.use_system_prompt is true but the model in runs/_builtin/model was "
                      "trained with use_system_prompt=false"),
            std::string::npos)
      << w[0];
  EXPECT_NE(w[0].find("HINT: set data.task_kwargs.use_system_prompt=false"), std::string::npos) << w[0];
}

TEST(PromptFormatTest, UnsetKeysCountAsTheirDefaults) {
  // Unset: system prompt and tools block on, so both differ from a model built without.
  const auto w = prompt_format_mismatches(json::object(), kRecipe, "m");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("data.task_kwargs.use_system_prompt is true (unset: the default)"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("rollout.env_kwargs.tools_in_prompt is true (unset: the default)"), std::string::npos) << w[1];
  EXPECT_TRUE(prompt_format_mismatches(json::object(), {{"use_system_prompt", true}, {"tools_in_prompt", true}}, "m")
                  .empty());
}

TEST(PromptFormatTest, SettingsMissingFromTheRecipeAreNotCompared) {
  EXPECT_TRUE(prompt_format_mismatches(json::object(), {{"vocab_size", 2304}}, "m").empty());
  EXPECT_TRUE(prompt_format_mismatches(json::object(), json::array(), "m").empty());
}

}  // namespace
}  // namespace agentr1::cli
