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
  int vocab_size = 1024;            // BPE vocabulary incl. special tokens
  int corpus_problems = 2000;       // problems rendered into the tokenizer corpus
  int hidden_size = 128;
  int num_layers = 4;
  int num_heads = 4;
  int num_kv_heads = 2;
  int head_dim = 32;
  int intermediate_size = 384;
  int demos = 3000;                 // SFT demonstrations
  int min_level = 1;                // demonstration problems: fewest operations
  int max_level = 1;                // demonstration problems: most operations
  int seed = 11;                    // data and init seed (problems drawn from the train split)
  SftOptions sft;                   // epochs, batch, optimiser
  DefaultModelOptions();
  json to_json() const;             // recorded in recipe.json
};

// Returns the model directory, building it first if missing or built with other
// options. Throws Error (with a hint) if the chat template cannot be found.
std::string ensure_default_model(const DefaultModelOptions& opts);

// Expert demonstrations of arithmetic problems (train split) in run_sft's format
// {"sample": ..., "actions": [...]}; also returns each episode rendered as text in
// `rendered` (if non-null) for tokenizer training.
std::vector<json> generate_arith_demos(int n, int seed, int min_level, int max_level,
                                       const text::ChatTemplate& tmpl,
                                       std::vector<std::string>* rendered = nullptr);

// Reads the chat_template text from a tokenizer_config.json (or a raw template file).
std::string read_chat_template_file(const std::string& path);

}  // namespace agentr1::train
