// agentr1 sft — supervised warm start on expert demonstrations.
//
//   agentr1 sft                                           # the built-in default model (arithmetic)
//   agentr1 sft --model DIR --out OUT                     # fine-tune DIR on arithmetic demos
//   agentr1 sft --model DIR --out OUT --task alfworld --task-kwargs '{"max_level": 2}'
//   agentr1 sft --model DIR --out OUT --demos demos.jsonl
//
// With --task, the demonstrations come from that task family's expert and are replayed
// through its agent under its recipe defaults (e.g. alfworld's sliding-window context),
// so the SFT rows are what RL rollouts of that family will see.
#include <cstdlib>
#include <iostream>
#include <memory>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/model/transformer.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/dataset.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/sft/default_recipe.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/sft/sft.h"
#include "agentr1/train/train_config.h"
#include "command.h"
#include "train_setup.h"

namespace agentr1::cli {
namespace {

struct SftArgs {
  std::string model;
  std::string out;
  std::string demos_file;
  std::string chat_template;
  int num_demos = 0;
  int min_level = 0;
  int max_level = 0;
  int seed = 0;
  int vocab_size = 0;
  int digits_per_token = 0;
  bool restate_expression = false;
  bool use_system_prompt = false;
  bool tools_in_prompt = false;
  std::string demo_style;
  std::string demo_contexts;  // JSON list of context policies ("" = none)
  std::string options;        // built-in only: DefaultModelOptions::apply_json map as JSON
  std::string task;           // --model only: the task family whose expert demonstrates
  std::string task_kwargs;    // its data.task_kwargs as JSON ("" = {})
  int threads = 0;
  bool thinking = false;
  train::SftOptions sft;
};

int run_sft_cmd(SftArgs a) {
  using namespace agentr1::train;
  const char* world = std::getenv("WORLD_SIZE");
  AGENTR1_CHECK(world == nullptr || std::string(world).empty() || std::string(world) == "1",
                "sft is not data-parallel: launched as one of WORLD_SIZE=" << world
                    << " ranks, every rank would train and write the same model. HINT: run `agentr1 sft` in one "
                       "process (without agentr1 launch); `agentr1 train` under launch then reuses the model");
  set_threads(a.threads);
  if (a.model.empty()) {
    // The built-in recipe: tokenizer + fresh Qwen3 model + SFT, into --out.
    DefaultModelOptions dm;
    if (!a.out.empty()) dm.dir = a.out;
    dm.chat_template_file = builtin_chat_template_file(a.chat_template);
    dm.demos = a.num_demos;
    dm.min_level = a.min_level;
    dm.max_level = a.max_level;
    dm.seed = a.seed;
    dm.vocab_size = a.vocab_size;
    dm.digits_per_token = a.digits_per_token;
    dm.restate_expression = a.restate_expression;
    dm.use_system_prompt = a.use_system_prompt;
    dm.tools_in_prompt = a.tools_in_prompt;
    dm.sft = a.sft;
    json extra = {{"demo_style", a.demo_style}};
    if (!a.demo_contexts.empty()) {
      extra["demo_contexts"] = json::parse(a.demo_contexts, nullptr, false);
      AGENTR1_CHECK(!extra["demo_contexts"].is_discarded(),
                    "--demo-contexts must be a JSON list of context policies, e.g. "
                    "'[\"append_only\", {\"type\": \"sliding_window\", \"keep_last\": 2}]', got "
                        << a.demo_contexts);
    }
    if (!a.options.empty()) {
      const json more = json::parse(a.options, nullptr, false);
      AGENTR1_CHECK(more.is_object(), "--options must be a JSON map of built-in model options, e.g. "
                                      "'{\"dir\": \"runs/m\", \"tasks\": {\"alfworld\": {\"demos\": 500}}}', got "
                                          << a.options);
      for (auto it = more.begin(); it != more.end(); ++it) extra[it.key()] = it.value();
    }
    with_context("agentr1 sft", [&] {
      dm.apply_json(extra);
      return 0;
    });
    std::cout << ensure_default_model(dm) << "\n";
    return 0;
  }
  AGENTR1_CHECK(!a.out.empty(), "--out DIR is required with --model");
  tasks::register_builtin_tasks();
  text::Tokenizer tok = text::Tokenizer::load(a.model);
  text::ChatTemplate tmpl = text::ChatTemplate::from_tokenizer(tok);
  model::Transformer policy = model::load_pretrained(a.model, at::kFloat, at::kCPU);
  std::vector<json> demos;
  json env_kwargs = json::object();
  if (!a.demos_file.empty()) {
    demos = tasks::read_jsonl_rows(a.demos_file);
  } else if (!a.task.empty()) {
    json kw = json::object();
    if (!a.task_kwargs.empty()) {
      kw = json::parse(a.task_kwargs, nullptr, false);
      AGENTR1_CHECK(kw.is_object(), "--task-kwargs must be a JSON object such as '{\"max_level\": 2}', got "
                                        << a.task_kwargs);
    }
    const auto family = tasks::make_task_family(a.task, kw);
    demos = family->demonstrations(a.num_demos, static_cast<uint64_t>(a.seed), tmpl, "<|im_end|>");
    // Replay under the family's defaults for rollouts (context policy and other env kwargs).
    json tree = train::default_train_tree();
    apply_overrides(tree, family->recipe_defaults());
    env_kwargs = tree["rollout"].value("env_kwargs", json::object());
  } else {
    // Expert demonstrations from the arithmetic task family, in the asked-for format.
    DefaultModelOptions spec;
    spec.min_level = a.min_level;
    spec.max_level = a.max_level;
    spec.restate_expression = a.restate_expression;
    spec.use_system_prompt = a.use_system_prompt;
    spec.tools_in_prompt = a.tools_in_prompt;
    spec.apply_json({{"demo_style", a.demo_style}});
    const auto family = tasks::make_task_family("arithmetic", spec.task_kwargs());
    demos = family->demonstrations(a.num_demos, static_cast<uint64_t>(a.seed), tmpl, "<|im_end|>");
  }
  flow::FlowOptions fo;
  fo.enable_thinking = a.thinking;
  fo.max_new_tokens = 512;
  fo.max_prompt_tokens = 8192;
  fo.max_response_tokens = 1 << 20;
  fo.max_steps = 256;  // a demonstration ends when its actions do
  fo.env_kwargs = env_kwargs;
  ThreadPool tool_pool(2);
  flow::FlowContext ctx;
  ctx.tokenizer = &tok;
  ctx.chat_template = &tmpl;
  ctx.tool_pool = &tool_pool;
  ctx.stop_token_ids = flow::default_stop_token_ids(tok);
  auto trajs = demonstration_trajectories(demos, ctx, fo);
  RunDir out(a.out);
  SftResult r = run_sft(policy, trajs, a.sft, [&](const json& j) { out.append_jsonl("sft_metrics.jsonl", j); });
  model::save_pretrained(policy, a.out, at::kFloat);
  copy_tokenizer_files(a.model, a.out);
  AGENTR1_LOG(INFO) << "sft: " << r.steps << " steps in " << r.wall_s << " s, loss " << r.first_loss
                    << " -> " << r.final_loss << ", token acc " << r.final_token_acc;
  std::cout << a.out << "\n";
  return 0;
}

Registrar reg("sft", "supervised fine-tuning on expert tool-use demonstrations", [](CLI::App& app) {
  auto a = std::make_shared<SftArgs>();
  const train::DefaultModelOptions d;  // the built-in recipe's defaults
  a->num_demos = d.demos;
  a->min_level = d.min_level;
  a->max_level = d.max_level;
  a->seed = d.seed;
  a->vocab_size = d.vocab_size;
  a->digits_per_token = d.digits_per_token;
  a->restate_expression = d.restate_expression;
  a->use_system_prompt = d.use_system_prompt;
  a->tools_in_prompt = d.tools_in_prompt;
  a->demo_style = d.demo_style;
  a->sft = d.sft;
  app.add_option("--model", a->model, "HF model dir to fine-tune; omitted = build the built-in default model");
  app.add_option("--out", a->out, "output model dir (default for the built-in: runs/_builtin/model)");
  app.add_option("--demos", a->demos_file,
                 "JSONL of {\"sample\": <Agent-R1 sample>, \"actions\": [assistant texts]}; omitted = generated");
  app.add_option("--num-demos", a->num_demos, "generated demonstrations")->capture_default_str();
  app.add_option("--min-level", a->min_level, "generated problems: fewest operations")->capture_default_str();
  app.add_option("--max-level", a->max_level, "generated problems: most operations")->capture_default_str();
  app.add_option("--seed", a->seed, "demonstration seed")->capture_default_str();
  app.add_option("--restate-expression", a->restate_expression,
                 "demos end \"<expr> = <v>\\n#### <v>\" (true) or just \"#### <v>\" (false)")
      ->capture_default_str();
  app.add_option("--system-prompt", a->use_system_prompt, "generated demos: start with the task's system prompt")
      ->capture_default_str();
  app.add_option("--tools-in-prompt", a->tools_in_prompt,
                 "generated demos: the chat template lists the tool's schema (calculator, or python with --task-kwargs tool) (RL prompts must match: "
                 "rollout.env_kwargs.tools_in_prompt)")
      ->capture_default_str();
  app.add_option("--demo-style", a->demo_style,
                 "generated demos: single (one calculator call) or per_step (one call per operation)")
      ->capture_default_str();
  app.add_option("--demo-contexts", a->demo_contexts,
                 "built-in only: JSON list of context policies the demos are replayed under, round-robin "
                 "(e.g. '[\"append_only\", {\"type\": \"sliding_window\", \"keep_last\": 2}]')");
  app.add_option("--options", a->options,
                 "built-in only: more built-in model options as a JSON map (the builtin_model keys of "
                 "configs/*.yaml, e.g. dir, tasks, vocab_size, sft_epochs)");
  app.add_option("--task", a->task,
                 "with --model: the task family whose expert demonstrates (arithmetic, hotpotqa, alfworld, "
                 "webshop); the level flags above are arithmetic's");
  app.add_option("--task-kwargs", a->task_kwargs, "with --task: the family's options as a JSON object");
  app.add_option("--vocab-size", a->vocab_size, "built-in only: BPE vocabulary size")->capture_default_str();
  app.add_option("--digits-per-token", a->digits_per_token,
                 "built-in only: 1 = one digit per token (Qwen), 3 = numbers in chunks of up to 3 digits")
      ->capture_default_str()
      ->check(CLI::Range(1, 3));
  app.add_option("--epochs", a->sft.epochs, "passes over the demonstrations")->capture_default_str();
  app.add_option("--lr", a->sft.optim.lr, "peak learning rate")->capture_default_str();
  app.add_option("--warmup-steps", a->sft.optim.warmup_steps, "linear warm-up steps")->capture_default_str();
  app.add_option("--batch-size", a->sft.batch_size, "trajectories per step")->capture_default_str();
  app.add_option("--chat-template", a->chat_template,
                 "built-in only: tokenizer_config.json with the Qwen3 template (default: "
                 "qwen3_tokenizer_config.json in the data dir)");
  app.add_flag("--thinking", a->thinking, "render prompts with enable_thinking=true");
  app.add_option("--threads", a->threads, "torch threads (0 = all cores)")->capture_default_str();
  return [a]() { return run_sft_cmd(*a); };
});

}  // namespace
}  // namespace agentr1::cli
