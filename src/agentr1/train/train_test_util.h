// agentr1/train/train_test_util.h — fixtures shared by the train layer's end-to-end
// tests (header-only, tests only).
//
//   const std::string dir = testing::make_tiny_model_dir("rl");   // /tmp/agentr1_rl_XXXXXX
//   // dir/model: the tiny Qwen3 tokenizer fixture + a random 2-layer Qwen3 model
#pragma once

#include <cstdlib>
#include <string>

#include "agentr1/model/transformer.h"
#include "agentr1/text/tokenizer.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/train/run_dir.h"

namespace agentr1::train::testing {

// A fresh temporary directory holding model/: an HF model directory with the tiny
// Qwen3 tokenizer (tests/fixtures/flow/tiny_qwen3) and random weights (seed 5).
inline std::string make_tiny_model_dir(const std::string& tag) {
  std::string tmpl = "/tmp/agentr1_" + tag + "_XXXXXX";
  const char* made = mkdtemp(tmpl.data());
  AGENTR1_CHECK(made != nullptr, "mkdtemp failed for " << tmpl);
  const std::string dir = made;
  const std::string model_dir = dir + "/model";
  make_dirs(model_dir);
  copy_tokenizer_files(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3", model_dir);
  const text::Tokenizer tok = text::Tokenizer::load(model_dir);
  model::ModelConfig c;
  c.arch = model::Arch::kQwen3;
  c.vocab_size = tok.vocab_size();
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.qk_norm = true;
  c.tie_word_embeddings = true;
  c.max_position_embeddings = 4096;
  model::Transformer m = model::init_random(c, 5);
  model::save_pretrained(m, model_dir, at::kFloat);
  return dir;
}

}  // namespace agentr1::train::testing
