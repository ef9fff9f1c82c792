// agentr1/model/transformer.h — decoder-only transformer for Qwen2, Qwen3 and Llama.
//
//   Transformer m = load_pretrained(dir, torch::kFloat32, device);  // HF layout
//   auto logits = m->forward(ids);                  // ids [B,T] -> [B,T,V] (fp32)
//   auto lp = token_logprobs(m, ids);               // [B,T-1]: log p(ids[t+1] | ids[..t])
//   save_pretrained(m, out_dir, torch::kBFloat16);  // config.json + model.safetensors
//
// Parameter names follow HF exactly (model.embed_tokens.weight,
// model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight),
// so a state dict maps one to one onto safetensors tensors.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "agentr1/model/config.h"
#include "agentr1/model/kv_cache.h"
#include "agentr1/model/lora.h"
#include "agentr1/model/spin_pool.h"

namespace agentr1::model {

class DecodeLayout;  // decode_layout.h

// Keys beyond which the learner's attention runs in tiles (set_attention_block).
inline constexpr int64_t kDefaultAttentionBlock = 256;

class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const ModelConfig& cfg);

  const ModelConfig& config() const { return cfg_; }

  // Full causal forward (training, scoring).
  //   ids:         [B,T] int64
  //   positions:   [B,T] int64 position ids; undefined = 0..T-1 in every row
  //   segment_ids: [B,T] int64; undefined = one segment per row. A token attends
  //                only to earlier tokens of the same segment id (packing); ids < 0
  //                mark padding (their outputs are garbage and must be masked).
  //   prefix_ids:  [P] int64; undefined/empty = none. Shared-prefix form: every row
  //                is prefix_ids followed by ids[b]; the prefix is computed ONCE (not
  //                B times) and every token of ids sees all of it. positions then
  //                default to P..P+T-1. Outputs (and gradients) equal those of the
  //                full rows at the positions of ids; the prefix's own outputs are
  //                not returned. Learners use it for the system prompt + tools block
  //                that every row of a batch starts with.
  //   attn_mask:   [B|1,T,T] bool; undefined = causal (within segments). When given it
  //                replaces the causal and segment masks: token t attends to token j
  //                iff attn_mask[b,t,j] (a token must see itself). Tree packing uses it
  //                (each token sees its ancestors in a prefix tree); positions must be
  //                given, prefix_ids must not.
  // Returns logits [B,T,V] in fp32.
  at::Tensor forward(const at::Tensor& ids, const at::Tensor& positions = {},
                     const at::Tensor& segment_ids = {}, const at::Tensor& prefix_ids = {},
                     const at::Tensor& attn_mask = {});
  // Same as forward but returns the final normed hidden states [B,T,H] (value heads).
  at::Tensor hidden_states(const at::Tensor& ids, const at::Tensor& positions = {},
                           const at::Tensor& segment_ids = {}, const at::Tensor& prefix_ids = {},
                           const at::Tensor& attn_mask = {});
  // Prefix-tree form (tree packing): N distinct tokens ("nodes") shared by B rows.
  //   ids, positions: [N] int64, node tokens and depths (a node's position in its rows)
  //   paths:          [B,L] int64, row b's nodes in order (padding: any node, masked)
  //   own, own_mask:  [B,Q] int64 / [B,Q,L] bool: the nodes row b computes (each node
  //                   exactly one row's, padding = N) and, for each, the path positions
  //                   it sees (keys at positions <= its own, on row b's path)
  // Every node's projections and MLP run once; its attention runs once, in the row that
  // owns it, over that row's path. Returns the final normed hidden states [N,H]: equal
  // (and with equal gradients) to those of the B rows forwarded one by one.
  at::Tensor hidden_states_tree(const at::Tensor& ids, const at::Tensor& positions, const at::Tensor& paths,
                                const at::Tensor& own, const at::Tensor& own_mask);
  // Projects hidden states [...,H] to fp32 logits [...,V] (tied or lm_head).
  at::Tensor logits_from_hidden(const at::Tensor& hidden);
  // The LM head's weight [V,H]: lm_head.weight, or embed_tokens.weight when tied.
  const at::Tensor& lm_head_weight() const;

  // Activation checkpointing per decoder layer (actor.gradient_checkpointing): while
  // gradients are recorded, each layer of forward/hidden_states keeps only its input and
  // is recomputed in the backward pass, so training memory holds one layer's activations
  // instead of every layer's (about a third more compute). Gradients equal those without
  // it (the recomputation runs the same operations; LoRA dropout draws the same masks).
  // The tree-packed form (hidden_states_tree) does not checkpoint.
  void set_gradient_checkpointing(bool on);
  bool gradient_checkpointing() const;

  // Attention over more than `tokens` keys (a row of the learner, a tree path) runs in
  // tiles of tokens x tokens with an online softmax, forward and backward
  // (blocked_attention.h): no [heads, T, S] scores in memory, and tiles a causal or
  // segment mask hides entirely are skipped. Up to `tokens` keys, and with 0 always, the
  // dense softmax. Results equal the dense path's to fp32 rounding (not bit for bit).
  // The engine's cached forward has its own kernels and ignores this.
  void set_attention_block(int64_t tokens);
  int64_t attention_block() const;

  // LoRA (lora.h). add_lora adds adapters to the targeted projections of every layer
  // (A drawn from a private generator seeded with `seed`, B zero: the model's outputs
  // are unchanged) and freezes every base parameter; once per model. Every forward,
  // forward_cached included, then applies them, except on a thread inside a BaseOnly.
  void add_lora(const LoraOptions& opts, uint64_t seed);
  // The adapters' options; nullptr without adapters.
  const LoraOptions* lora() const;
  // The adapters as ("model.layers.N.self_attn.q_proj.lora_A", [r,in]) and (".lora_B",
  // [out,r]) pairs, layer by layer in PEFT's projection order, then the modules_to_save
  // ("model.embed_tokens" [V,H], "lm_head" [V,H]): everything a LoRA run trains, what an
  // adapter file holds; empty without adapters.
  std::vector<std::pair<std::string, at::Tensor>> lora_parameters() const;
  // What an optimiser trains: the parameters with requires_grad (the adapters only
  // under LoRA; all of them otherwise).
  std::vector<at::Tensor> trainable_parameters();
  // scaling * B A [out,in] (fp32) of the adapter on weight `weight_name` (HF name, e.g.
  // "model.layers.0.mlp.up_proj.weight"); undefined when it has none.
  at::Tensor lora_delta(const std::string& weight_name) const;

  // Incremental forward over a paged KV cache (inference: runs under NoGradGuard).
  //   ids:  [N] int64, the new tokens of every row concatenated in row order
  //         (N = sum of rows[b].n_new)
  //   rows: row b appends its n_new tokens at positions start.. start+n_new-1 of its
  //         block table (see CachedRow); rows may share blocks holding positions they
  //         only read, never blocks they write
  // Writes the new keys/values into their blocks and attends causally over each row's
  // positions 0..pos. Returns fp32 logits of each row's last new token: [B,V]. Throws
  // Error (before writing anything) on inconsistent rows, a block table too short,
  // block ids out of range, two rows writing one block, or positions past
  // max_position_embeddings. CPU caches use the fused kernels of paged_attention.h
  // unless cache.fused_attention is false. With `pool` (optional) the fused path's
  // products and attention run on its threads instead of OpenMP (see spin_pool.h).
  // `packed` (optional, model/decode_layout.h): copies of decode_weights() in the decode
  // layout; the batch-invariant path's one-row products read those current there (the
  // same bits, faster at batch 1).
  at::Tensor forward_cached(const at::Tensor& ids, const std::vector<CachedRow>& rows, KVCache& cache,
                            SpinPool* pool = nullptr, const DecodeLayout* packed = nullptr);
  // The weights forward_cached's products read, in the order it reads them: per layer
  // q, k, v, o, gate, up, down (the base weights under LoRA), then the LM head.
  std::vector<at::Tensor> decode_weights() const;

 private:
  // fp32 RoPE tables [>= n, hd] (cos, sin) for positions 0.., computed once and grown.
  std::pair<at::Tensor, at::Tensor> rope_table(int64_t n);
  ModelConfig cfg_;
  struct Impl;                          // layers, rope tables (defined in .cpp)
  std::shared_ptr<Impl> impl_;
};
TORCH_MODULE(Transformer);

// "fp32"|"float32" -> kFloat, "bf16"|"bfloat16" -> kBFloat16, "fp16"|"float16" -> kHalf;
// throws Error listing the accepted names.
at::ScalarType parse_dtype(const std::string& name);
// HF config.json torch_dtype name: "float32", "bfloat16", "float16" (throws for others).
const char* hf_dtype_name(at::ScalarType dtype);

// Log-prob of each next token: ids [B,T] -> [B,T-1] fp32, lp[b,t] = log p(ids[b,t+1] | ids[b,..t]).
at::Tensor token_logprobs(Transformer& model, const at::Tensor& ids);

// New fp32 CPU model with weights initialised like HF's _init_weights: normal(0, 0.02)
// for linear and embedding weights, zero biases, ones for norms; drawn from a private
// generator seeded with `seed` (the global RNG is untouched). Same seed, same weights.
Transformer init_random(const ModelConfig& cfg, uint64_t seed);

// Loads config.json + model.safetensors (or the sharded model.safetensors.index.json)
// from dir, casting weights to `dtype`. Throws Error naming the file, tensor and
// problem (missing/unexpected tensor, wrong shape, bad header).
Transformer load_pretrained(const std::string& dir, at::ScalarType dtype, at::Device device);
// Writes config.json (torch_dtype = dtype) and model.safetensors in HF layout (tensor
// names sorted; a tied model stores no lm_head.weight). A model with LoRA adapters is
// written merged (W + scaling B A per adapted weight): a plain HF model.
// max_shard_bytes > 0 splits into model-0000i-of-0000n.safetensors + index.json.
void save_pretrained(Transformer& model, const std::string& dir, at::ScalarType dtype,
                     int64_t max_shard_bytes = 0);

// LoRA adapters in PEFT's format (lora.h). save_lora_adapter writes adapter_config.json
// (r, lora_alpha, lora_dropout, target_modules resolved to names, peft_type LORA,
// task_type CAUSAL_LM, base_model_name_or_path = base_model) and adapter_model.safetensors
// (base_model.model.<name>.lora_A.weight [r,in] / .lora_B.weight [out,r], in the
// adapters' dtype). load_lora_adapter reads them into `model`, adding adapters when it
// has none (else the rank, scaling and targets must match); bias, DoRA, per-module ranks,
// modules_to_save and layer subsets are refused by name. Throws Error naming the file.
void save_lora_adapter(Transformer& model, const std::string& dir, const std::string& base_model);
void load_lora_adapter(Transformer& model, const std::string& dir);
// A model directory, or a LoRA adapter directory over the local base its
// adapter_config.json names (base_model_name_or_path; a run's checkpoints name the run's
// model.path): base + adapter, unmerged. Throws Error naming a base that is not local.
Transformer load_model_dir(const std::string& dir, at::ScalarType dtype, at::Device device);
// adapter_config.json's options (use_rslora folded into alpha: scaling alpha/sqrt(r)).
LoraOptions read_lora_adapter_config(const std::string& dir);

}  // namespace agentr1::model
