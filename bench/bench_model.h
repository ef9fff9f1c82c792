// bench/bench_model.h — the model shapes the benches share:
//   bench_config()   ~4.2M-parameter Qwen3 config of the generation benches (vocab 4096,
//                    hidden 256, 4 layers, 4/2 heads, head_dim 64, intermediate 768, tied)
//   builtin_shape()  the built-in default model's shape (sft/default_recipe.h), for
//                    the learner benches
//   qwen3_06b_shape() Qwen3-0.6B's shape (596M parameters), the real-size case
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

inline model::ModelConfig qwen3_06b_shape() {
  model::ModelConfig c;
  c.arch = model::Arch::kQwen3;
  c.vocab_size = 151936;
  c.hidden_size = 1024;
  c.intermediate_size = 3072;
  c.num_hidden_layers = 28;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.qk_norm = true;
  c.tie_word_embeddings = true;
  c.max_position_embeddings = 40960;
  c.rope_theta = 1000000.0;
  return c;
}

}  // namespace agentr1::bench
