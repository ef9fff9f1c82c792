// agentr1/sft/default_recipe.h — the built-in default model: a byte-level BPE
// tokenizer and a small Qwen3-architecture model trained from scratch by SFT on expert
// demonstrations of the calculator task (no download needed).
//
//   DefaultModelOptions o;                       // sizes, SFT budget, where to build
//   std::string dir = ensure_default_model(o);   // builds once, then reuses
//   // dir is an HF model directory: config.json, model.safetensors, tokenizer files
//
// Reuse: the directory holds recipe.json (the options it was built with); a directory
// built with other options is rebuilt (into the same place) with a log line saying so.
#pragma once

#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/sft/sft.h"

namespace agentr1::text {
class ChatTemplate;
}

namespace agentr1::train {

struct DefaultModelOptions {
  std::string dir = "runs/_builtin/model";  // where the model is built / found
  std::string chat_template_file;   // tokenizer_config.json or .jinja with the Qwen3 chat
                                    // template (required to build; the agentr1 app passes
                                    // --chat-template or its data dir's copy); nothing is
                                    // searched for
  int vocab_size = 2304;            // BPE vocabulary incl. special tokens (1,110 are numbers)
  int digits_per_token = 3;         // BPE numbers: 1 = one digit per token (Qwen), 3 = whole
                                    // chunks of up to 3 digits (see BpeTrainerOptions)
  int corpus_problems = 2000;       // problems rendered into the tokenizer corpus
  int hidden_size = 128;
  int num_layers = 4;
  int num_heads = 4;
  int num_kv_heads = 2;
  int head_dim = 32;
  int intermediate_size = 384;
  int demos = 9600;                 // SFT demonstrations (600 steps of 16)
  int min_level = 1;                // demonstration problems: fewest operations
  int max_level = 1;                // demonstration problems: most operations
  int seed = 11;                    // data and init seed (problems drawn from the train split)
  bool restate_expression = false;  // demos end "<expr> = <v>\n#### <v>" (true) or "#### <v>"
  std::string demo_style = "single";  // "single" (one calculator call) or "per_step" (one
                                      // call per operation: the multi-step variant)
  // Context policies the demonstrations are replayed under, assigned round-robin
  // (demonstration i gets env_kwargs.context = demo_contexts[i % size]), so that the
  // model has seen every prompt format the RL runs use. Empty = the environment's
  // default (append_only). Policies that call the model (summarize) cannot be replayed
  // from a script: building fails naming the demonstration.
  json demo_contexts = json::array();
  // Several task families in one model: {family: {demos: N, kwargs: {...}}}. Non-empty:
  // the tokenizer corpus (up to corpus_problems episodes per family) and the SFT
  // demonstrations (N per family) come from each family's expert, replayed with the env
  // defaults its RL rollouts get (its recipe_defaults' rollout.env_kwargs, e.g. the
  // sliding window of alfworld and webshop); kwargs are the family's data.task_kwargs
  // over use_system_prompt (and, for arithmetic, over the level/prompt options above).
  // Empty = the arithmetic model above.
  json tasks = json::object();
  // Where SFT starts: "" = a fresh tokenizer and random weights (the recipe above);
  // "builtin" = the default built-in model (DefaultModelOptions() with this chat
  // template, built first if missing), whose tokenizer and weights are copied and
  // fine-tuned on this recipe's demonstrations; anything else = an HF model directory
  // (tokenizer + weights) to start from. The architecture and tokenizer options are then
  // the base's (the ones above are ignored). A base model already knows the prompt
  // format and how to copy numbers into calls, which a fresh 1M-parameter model needs
  // thousands of steps to learn on long multi-step episodes.
  std::string init_from;
  // Or a map of these options (apply_json keys, its own dir): that model is built first
  // (or reused) and this one starts from it; recipe.json records its whole recipe as
  // base_recipe. Chains SFT stages, e.g. a second stage at a lower learning rate.
  json init_from_options = json::object();
  DefaultModelOptions base_options() const;  // init_from_options applied to the defaults
  // Prompt format the model is trained on, and that RL runs on it must keep (the app's
  // configs/builtin.yaml sets data.task_kwargs.use_system_prompt and
  // rollout.env_kwargs.tools_in_prompt to match, and warns if recipe.json differs).
  // Off by default: the calculator's schema block and the system prompt are ~220 of
  // ~320 tokens per episode; without them SFT runs ~3x more episodes per second and a
  // 1M-parameter model learns to copy operands (62% exact calls after 600 steps, versus
  // 0% with them).
  bool use_system_prompt = false;   // prompts start with the task's system prompt
  bool tools_in_prompt = false;     // the chat template lists the calculator's schema
  SftOptions sft;                   // epochs, batch, optimiser
  DefaultModelOptions();
  // Recorded in recipe.json. demo_style, demo_contexts and init_from appear only when
  // they differ from the defaults (so models built before they existed are still
  // reused); with init_from "builtin", base_recipe holds the base model's recipe.
  json to_json() const;
  // Overrides from a map (a recipe file's builtin_model: section; null = none), keys as
  // in to_json() (dir, vocab_size, ..., demos, min_level, max_level, seed, demo_style,
  // demo_contexts, tasks, init_from) plus sft_epochs, sft_lr, sft_batch_size for
  // SftOptions (the SFT budget is epochs x demos / batch_size steps); a key not given
  // keeps its value. Bound with core/config.h's bind_into, the keys named <key>.<name>
  // (an init_from map's <key>.init_from.<name>; `key` is where the caller's map lives,
  // e.g. "tasks.hotpotqa.builtin_model"): throws Error
  // for an unknown key (with the nearest and the valid keys), a wrong type, or a broken
  // rule (named with the value: sizes >= 1, digits_per_token 1..3, seed >= 0,
  // demo_style single or per_step, demo_contexts a list of context specs, tasks.<f>.demos
  // given and >= 0, sft_lr > 0, an init_from map with a dir of its own), then for task
  // options its families reject.
  void apply_json(const json& overrides, const std::string& key = "builtin_model");
  // The arithmetic family's data.task_kwargs these options describe (levels, prompt
  // format, final-turn style): the demonstrations come from that family.
  json task_kwargs() const;
  // The data.task_kwargs of `family` as the model is trained on it (see `tasks`).
  json family_kwargs(const std::string& family) const;
};

// Returns the model directory, building it first if missing or built with other
// options. Building needs opts.chat_template_file: throws Error (with a hint) when it is
// empty or names no file. Reusing a built model does not read it.
std::string ensure_default_model(const DefaultModelOptions& opts);

// True when opts.dir holds a complete model built with these options (what
// ensure_default_model reuses). Reads only the directory.
bool default_model_ready(const DefaultModelOptions& opts);

// Reads the chat_template text from a tokenizer_config.json (or a raw template file).
std::string read_chat_template_file(const std::string& path);

}  // namespace agentr1::train
