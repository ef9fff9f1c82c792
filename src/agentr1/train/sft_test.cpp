// SFT data: expert demonstrations replayed through the real ToolEnv must be clean
// tool-using episodes (the call parses, the calculator answers, the final answer
// scores 1) -- with a tokenizer trained by our BPE trainer, as the built-in recipe does.
#include <gtest/gtest.h>

#include "agentr1/core/thread_pool.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/text/bpe_trainer.h"
#include "agentr1/text/chat_template.h"
#include "agentr1/text/tokenizer.h"
#include "agentr1/train/default_recipe.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/sft.h"

namespace agentr1::train {
namespace {

TEST(SftTest, ActionTextIsHermes) {
  json msg = json::parse(R"({"role": "assistant", "content": "Let me compute.",
    "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": {"expression": "2 + 3"}}}]})");
  EXPECT_EQ(assistant_action_text(msg, "<|im_end|>"),
            "Let me compute.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2 + 3\"}}\n"
            "</tool_call><|im_end|>");
}

// Demonstrations replay through the real ToolEnv with the prompt format they were
// rendered in (with and without the tools block and system prompt): every episode calls
// the calculator once, succeeds, and its first prompt is the start of the text the
// tokenizer was trained on.
TEST(SftTest, DemonstrationsReplayCleanlyThroughToolEnv) {
  const std::string tmpl_text = read_chat_template_file(
      std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3/tokenizer_config.json");
  const text::ChatTemplate tmpl = text::ChatTemplate::from_template_text(tmpl_text);
  for (bool in_prompt : {true, false}) {
    DemoSpec spec;
    spec.n = 40;
    spec.seed = 3;
    spec.min_level = 1;
    spec.max_level = 2;
    spec.restate_expression = in_prompt;
    spec.use_system_prompt = in_prompt;
    spec.tools_in_prompt = in_prompt;
    std::vector<std::string> corpus;
    std::vector<json> demos = generate_arith_demos(spec, tmpl, &corpus);
    text::BpeTrainerOptions bo;
    bo.vocab_size = 400;
    const json tok_json = text::train_bpe(corpus, bo);
    const text::Tokenizer tok =
        text::Tokenizer::from_json(tok_json, text::make_tokenizer_config(tmpl_text, "<|im_end|>", "<|endoftext|>"));
    ThreadPool pool(2);
    flow::FlowContext ctx;
    ctx.tokenizer = &tok;
    ctx.chat_template = &tmpl;
    ctx.tool_pool = &pool;
    ctx.stop_token_ids = flow::default_stop_token_ids(tok);
    flow::FlowOptions fo;
    fo.enable_thinking = false;
    auto trajs = demonstration_trajectories(demos, ctx, fo);
    ASSERT_EQ(trajs.size(), demos.size());
    for (size_t i = 0; i < trajs.size(); ++i) {
      const Trajectory& t = trajs[i];
      EXPECT_EQ(t.metrics["tool_calls"], 1) << t.to_json().dump();
      EXPECT_EQ(t.metrics["tool_errors"], 0) << tok.decode(t.steps.back().prompt_ids);
      EXPECT_EQ(t.metrics["num_turns"], 2);
      EXPECT_FLOAT_EQ(t.outcome_reward, 1.0f);
      // The SFT rows hold the demonstrated actions token for token.
      EXPECT_EQ(tok.decode(t.steps[0].response_ids), demos[i]["actions"][0].get<std::string>());
      const std::string first_prompt = tok.decode(t.steps[0].prompt_ids);
      EXPECT_EQ(first_prompt.find("<tools>") != std::string::npos, in_prompt) << first_prompt;
      EXPECT_EQ(first_prompt.find("careful math assistant") != std::string::npos, in_prompt) << first_prompt;
      // Rollout prompts render like the tokenizer corpus (minus the generation opener).
      const std::string opener = "<|im_start|>assistant\n";
      const std::string before_opener = first_prompt.substr(0, first_prompt.rfind(opener));
      EXPECT_EQ(corpus[i].rfind(before_opener, 0), 0u) << first_prompt << "\n---\n" << corpus[i];
    }
    const std::string last = demos[0]["actions"].back().get<std::string>();
    EXPECT_EQ(last.find(" = ") != std::string::npos, in_prompt) << last;  // restated expression or not
  }
}

}  // namespace
}  // namespace agentr1::train
