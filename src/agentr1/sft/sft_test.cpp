// SFT data: expert demonstrations replayed through the real ToolEnv must be clean
// tool-using episodes (the call parses, the calculator answers, the final answer
// scores 1) -- with a tokenizer trained by our BPE trainer, as the built-in recipe does.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "agentr1/core/config.h"
#include "agentr1/core/testing.h"

#include "agentr1/core/thread_pool.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/model/model_test_util.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/text/bpe_trainer/bpe_trainer.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/sft/default_recipe.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/sft/sft.h"

namespace agentr1::train {
namespace {

// The SFT step against a direct computation: the token-mean NLL of the action tokens,
// each row forwarded alone, and AdamW's first step, lr * g / (|g| + eps) per weight,
// with g the gradient of that direct loss. Micro-batches of 1 on the learner path must
// not change either.
TEST(SftTest, StepEqualsTheDirectNllAndAdamWsFirstStep) {
  model::Transformer policy = model::testing::spicy_model(model::testing::tiny_config(model::Arch::kQwen3), 41);
  std::vector<Trajectory> trajs(3);
  for (int i = 0; i < 3; ++i) {
    Step s;
    s.prompt_ids = {5, 6, 7, 8, 9, 10, static_cast<TokenId>(20 + i)};
    for (int k = 0; k <= i + 1; ++k) s.response_ids.push_back(static_cast<TokenId>(30 + 7 * i + k));
    s.response_logprobs.assign(s.response_ids.size(), 0.0f);
    trajs[i].steps.push_back(s);
    trajs[i].uid = trajs[i].group = "d" + std::to_string(i);
  }
  const std::vector<PackedRow> rows = pack_trajectories(trajs, std::vector<float>(3, 0.0f), true);
  // Direct: each row alone, sum of -log p(action token), divided by the token count.
  model::Transformer ref = model::testing::spicy_model(policy->config(), 41);  // same weights
  at::Tensor nll = at::zeros({}, at::kDouble);
  int64_t n = 0;
  for (const auto& r : rows) {
    const int64_t len = static_cast<int64_t>(r.tokens.size());
    at::Tensor ids = at::empty({1, len}, at::kLong);
    for (int64_t t = 0; t < len; ++t) ids[0][t] = r.tokens[static_cast<size_t>(t)];
    const at::Tensor logp = at::log_softmax(ref->forward(ids)[0], /*dim=*/-1);  // [len,V]
    for (int64_t t = 1; t < len; ++t)
      if (r.action[static_cast<size_t>(t)]) {
        nll = nll - logp[t - 1][r.tokens[static_cast<size_t>(t)]].to(at::kDouble);
        n++;
      }
  }
  const at::Tensor direct = nll / static_cast<double>(n);
  direct.backward();
  SftOptions so;
  so.optim.lr = 1e-3;
  so.optim.eps = 1e-3;      // keeps lr * g / (|g| + eps) smooth in g (tiny gradients)
  so.optim.grad_clip = 0;   // no clipping: the step is exactly AdamW's
  so.micro_batch_size = 1;  // three micro-batches
  std::vector<at::Tensor> before;
  for (auto& p : policy->parameters()) before.push_back(p.detach().clone());
  SftLearner learner(policy, so);
  Metrics m = learner.step(rows);
  EXPECT_NEAR(m["sft/loss"], direct.item<double>(), 1e-5);
  EXPECT_EQ(m["sft/tokens"], static_cast<double>(n));
  EXPECT_EQ(learner.optimizer().steps(), 1);
  auto params = policy->parameters();
  auto ref_params = ref->parameters();
  double max_diff = 0, max_move = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor g = ref_params[i].grad();
    const at::Tensor want = -so.optim.lr * g / (g.abs() + so.optim.eps);
    const at::Tensor got = params[i].detach() - before[i];
    max_diff = std::max(max_diff, (want - got).abs().max().item<double>());
    max_move = std::max(max_move, got.abs().max().item<double>());
  }
  EXPECT_GT(max_move, 1e-4);
  EXPECT_LT(max_diff, 1e-6);
}

// Demonstrations replay cleanly through the real ToolEnv with the prompt format they were
// rendered in (with and without the tools block and system prompt): every episode calls
// the calculator once, succeeds, and its first prompt is the start of the text the
// tokenizer was trained on.
TEST(SftTest, DemonstrationsReplayCleanlyThroughToolEnv) {
  const std::string tmpl_text = read_chat_template_file(
      std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3/tokenizer_config.json");
  const text::ChatTemplate tmpl = text::ChatTemplate::from_template_text(tmpl_text);
  tasks::register_builtin_tasks();
  for (bool in_prompt : {true, false}) {
    const auto family = tasks::make_task_family(
        "arithmetic", {{"min_level", 1}, {"max_level", 2}, {"restate_expression", in_prompt},
                       {"use_system_prompt", in_prompt}, {"tools_in_prompt", in_prompt}});
    std::vector<std::string> corpus;
    std::vector<json> demos = family->demonstrations(40, 3, tmpl, "<|im_end|>", &corpus);
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


// The shipped recipes' builtin_model sections, bound by apply_json, against the same
// files read independently (PyYAML, dumped as JSON): the built-in default job's model
// (benchmark.yaml tasks.arithmetic, runs/_builtin/model) is exactly DefaultModelOptions().
TEST(DefaultRecipeTest, ShippedRecipesBindToTheValuesInTheirYaml) {
  const std::string src = AGENTR1_SOURCE_DIR;
  const std::string out = ::testing::TempDir() + "/agentr1_recipes_" + std::to_string(::getpid()) + ".json";
  const std::string cmd = std::string(AGENTR1_PYTHON) +
                          " -c \"import json, sys, yaml; json.dump([yaml.safe_load(open(p)) for p in sys.argv[2:]], "
                          "open(sys.argv[1], 'w'))\" " +
                          out + " " + src + "/configs/benchmark.yaml " + src + "/configs/contexts.yaml";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  json files;
  std::ifstream(out) >> files;
  const json& bench = files[0];
  const json& contexts = files[1]["builtin_model"];

  const json& arith = bench["tasks"]["arithmetic"]["builtin_model"];
  DefaultModelOptions a;
  a.apply_json(load_yaml_file(src + "/configs/benchmark.yaml")["tasks"]["arithmetic"]["builtin_model"]);
  EXPECT_EQ(a.to_json(), DefaultModelOptions().to_json()) << "the default job's model is reused as built";
  EXPECT_EQ(a.dir, arith["dir"].get<std::string>());
  EXPECT_EQ(a.vocab_size, arith["vocab_size"].get<int>());
  EXPECT_EQ(a.corpus_problems, arith["corpus_problems"].get<int>());
  EXPECT_EQ(a.sft.optim.lr, arith["sft_lr"].get<double>());
  EXPECT_EQ(a.sft.epochs, arith["sft_epochs"].get<int>());
  EXPECT_EQ(a.sft.batch_size, 16);
  EXPECT_EQ(a.sft.micro_batch_size, 16);

  DefaultModelOptions c;
  c.apply_json(load_yaml_file(src + "/configs/contexts.yaml")["builtin_model"]);
  EXPECT_EQ(c.dir, contexts["dir"].get<std::string>());
  EXPECT_EQ(c.init_from, contexts["init_from"].get<std::string>());
  EXPECT_EQ(c.sft.optim.lr, contexts["sft_lr"].get<double>());
  EXPECT_EQ(c.sft.epochs, contexts["sft_epochs"].get<int>());
  EXPECT_EQ(c.demo_style, contexts["demo_style"].get<std::string>());
  EXPECT_EQ(c.min_level, contexts["min_level"].get<int>());
  EXPECT_EQ(c.max_level, contexts["max_level"].get<int>());
  EXPECT_EQ(c.demos, contexts["demos"].get<int>());
  EXPECT_EQ(c.demo_contexts, contexts["demo_contexts"]);

  // A family's model: its tasks map as written, and a base stage (init_from map).
  const json& hot = bench["tasks"]["hotpotqa"]["builtin_model"];
  DefaultModelOptions h;
  h.apply_json(load_yaml_file(src + "/configs/benchmark.yaml")["tasks"]["hotpotqa"]["builtin_model"]);
  EXPECT_EQ(h.seed, hot["seed"].get<int>());
  EXPECT_EQ(h.tasks, hot["tasks"]);
  EXPECT_TRUE(h.init_from.empty());
  const DefaultModelOptions base = h.base_options();
  EXPECT_EQ(base.dir, hot["init_from"]["dir"].get<std::string>());
  EXPECT_EQ(base.vocab_size, hot["init_from"]["vocab_size"].get<int>());
  EXPECT_EQ(base.sft.optim.lr, hot["init_from"]["sft_lr"].get<double>());
  EXPECT_EQ(h.to_json().at("base_recipe"), base.to_json());
}

// apply_json binds through a visit() struct: errors name builtin_model.<key>, the rule
// and the value; a key not given keeps its value.
TEST(DefaultRecipeTest, ApplyJsonErrorsNameTheKey) {
  using agentr1::testing::error_of;
  DefaultModelOptions o;
  std::string e = error_of([&] { o.apply_json({{"demoz", 3}}); });
  EXPECT_NE(e.find("unknown config key 'builtin_model.demoz'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'builtin_model.demos'?"), std::string::npos) << e;
  EXPECT_NE(e.find("Valid keys under 'builtin_model': dir, vocab_size,"), std::string::npos) << e;
  e = error_of([&] { o.apply_json({{"init_from", {{"dir", "a"}, {"sft_epochz", 2}}}}); });
  EXPECT_NE(e.find("unknown config key 'builtin_model.init_from.sft_epochz'"), std::string::npos) << e;
  e = error_of([&] { o.apply_json({{"vocab_size", "2304"}}); });
  EXPECT_NE(e.find("builtin_model.vocab_size: expected an integer"), std::string::npos) << e;
  e = error_of([&] { o.apply_json({{"demos", 0}}); });
  EXPECT_NE(e.find("builtin_model: 'demos' must be a positive integer, got 0"), std::string::npos) << e;
  e = error_of([&] { o.apply_json({{"digits_per_token", 4}}); });
  EXPECT_NE(e.find("'digits_per_token' must be 1..3 (digits per number token), got 4"), std::string::npos) << e;
  e = error_of([&] { o.apply_json({{"tasks", {{"hotpotqa", {{"kwargs", json::object()}}}}}}); });
  EXPECT_NE(e.find("'tasks.hotpotqa.demos' is required"), std::string::npos) << e;
  e = error_of([&] { o.apply_json({{"tasks", {{"hotpotqa", {{"demos", 5}, {"kwarg", 1}}}}}}); });
  EXPECT_NE(e.find("unknown config key 'builtin_model.tasks.hotpotqa.kwarg'"), std::string::npos) << e;
  e = error_of([&] { o.apply_json({{"tasks", {{"hotpotqa", {{"demos", -1}}}}}}); });
  EXPECT_NE(e.find("builtin_model.tasks.hotpotqa: 'demos' must be an integer >= 0, got -1"), std::string::npos) << e;
  e = error_of([&] { o.apply_json({{"sft_epochz", 2}}, "tasks.hotpotqa.builtin_model"); });
  EXPECT_NE(e.find("unknown config key 'tasks.hotpotqa.builtin_model.sft_epochz'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'tasks.hotpotqa.builtin_model.sft_epochs'?"), std::string::npos) << e;
  e = error_of([&] { o.apply_json(json::array()); });
  EXPECT_NE(e.find("builtin_model: expected a map"), std::string::npos) << e;
  EXPECT_EQ(o.to_json(), DefaultModelOptions().to_json()) << "nothing was applied";

  // A key not given keeps its value; the micro-batch shrinks with a smaller batch.
  o.apply_json({{"sft_batch_size", 8}});
  o.apply_json({{"demos", 64.0}});  // an integer-valued float fills an int (bind_into's rule)
  EXPECT_EQ(o.sft.batch_size, 8);
  EXPECT_EQ(o.sft.micro_batch_size, 8);
  EXPECT_EQ(o.demos, 64);
  o.apply_json(json());
  EXPECT_EQ(o.demos, 64);
}

}  // namespace
}  // namespace agentr1::train
