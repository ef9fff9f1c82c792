// agentr1/train/default_recipe.h — the built-in default model: a byte-level BPE
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
#include "agentr1/train/sft.h"

namespace agentr1::text {
class ChatTemplate;
}

namespace agentr1::train {

struct DefaultModelOptions {
  std::string dir = "runs/_builtin/model";  // where the model is built / found
  std::string chat_template_file;   // tokenizer_config.json or .jinja with the Qwen3 chat
                                    // template; "" = search the npm reference package
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
  // Prompt format the model is trained on, and that RL runs on it must keep (see
  // default_model_train_overrides). Off by default: the calculator's schema block and
  // the system prompt are ~220 of ~320 tokens per episode; without them SFT runs ~3x
  // more episodes per second and a 1M-parameter model learns to copy operands (62% exact
  // calls after 600 steps, versus 0% with them).
  bool use_system_prompt = false;   // prompts start with the task's system prompt
  bool tools_in_prompt = false;     // the chat template lists the calculator's schema
  SftOptions sft;                   // epochs, batch, optimiser
  DefaultModelOptions();
  json to_json() const;             // recorded in recipe.json
};

// Returns the model directory, building it first if missing or built with other
// options. Throws Error (with a hint) if the chat template cannot be found.
std::string ensure_default_model(const DefaultModelOptions& opts);

// Train-config overrides for RL on the built-in model: prompts as it was trained on
// (data.use_system_prompt, rollout.env_kwargs.tools_in_prompt) and the recipe's RL
// settings for a 1M-parameter model (lr 3e-4 instead of the 1e-5 meant for real LLMs,
// groups of 16 sampled at temperature 0.7, two updates per step, 150 steps, 128
// held-out prompts). Callers apply them between the defaults and the user's config, so
// the user can still override any of them.
std::vector<std::string> default_model_train_overrides(const DefaultModelOptions& opts);

// Expert demonstrations of arithmetic problems (train split) in run_sft's format
// {"sample": ..., "actions": [...]}; also returns each episode rendered as text in
// `rendered` (if non-null) for tokenizer training.
struct DemoSpec {
  int n = 0;                        // demonstrations
  int seed = 0;                     // problems: generate_problem(seed, i), train split
  int min_level = 1, max_level = 1;
  bool restate_expression = false;  // see DefaultModelOptions
  bool use_system_prompt = false;
  bool tools_in_prompt = false;     // recorded in each sample's env_kwargs
};
std::vector<json> generate_arith_demos(const DemoSpec& spec, const text::ChatTemplate& tmpl,
                                       std::vector<std::string>* rendered = nullptr);

// Reads the chat_template text from a tokenizer_config.json (or a raw template file).
std::string read_chat_template_file(const std::string& path);

}  // namespace agentr1::train
