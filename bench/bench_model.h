// bench/bench_model.h — the model shapes the benches share:
//   bench_config()   ~4.2M-parameter Qwen3 config of the generation benches (vocab 4096,
//                    hidden 256, 4 layers, 4/2 heads, head_dim 64, intermediate 768, tied)
//   builtin_shape()  the built-in default model's shape (train/default_recipe.h), for
//                    the learner benches
#pragma once

#include "agentr1/model/config.h"

namespace agentr1::bench {

inline model::ModelConfig bench_config() {
  model::ModelConfig c;
  c.arch = model::Arch::kQwen3;
  c.vocab_size = 4096;
  c.hidden_size = 256;
  c.intermediate_size = 768;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.qk_norm = true;
  c.tie_word_embeddings = true;
  c.max_position_embeddings = 2048;
  c.rope_theta = 1000000.0;
  return c;
}

inline model::ModelConfig builtin_shape() {
  model::ModelConfig c;
  c.arch = model::Arch::kQwen3;
  c.vocab_size = 1024;
  c.hidden_size = 128;
  c.intermediate_size = 384;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 32;
  c.qk_norm = true;
  c.tie_word_embeddings = true;
  c.max_position_embeddings = 2048;
  return c;
}

}  // namespace agentr1::bench
