// agentr1/model/lora.h — low-rank adapters (LoRA) on the transformer's linear layers,
// in PEFT's conventions so its files, vLLM's LoRA serving and ours read each other.
//
//   LoraOptions lo;  lo.rank = 16;  lo.alpha = 32;  lo.target_modules = {"all-linear"};
//   policy->add_lora(lo, seed);                 // adapters on every targeted projection
//   { model::BaseOnly base; policy->forward(ids); }   // this thread: the base, no adapters
//   save_lora_adapter(policy, dir, base_dir);   // adapter_config.json + adapter_model.safetensors
//   load_lora_adapter(policy, dir);             // adds (if needed) and fills the adapters
//   merge_lora(policy);                         // W += (alpha/r) B A, adapters removed
//
// The adapted projection: y = x W^T (+ b) + (alpha / r) * (dropout(x) A^T) B^T, A [r,in]
// initialised like PEFT (kaiming-uniform, a = sqrt(5): U(-1/sqrt(in), 1/sqrt(in))), B
// [out,r] zero, so a new adapter changes nothing. With adapters the base weights are
// frozen (requires_grad false) and only A and B train. Adapters are fp32 whatever the
// base's dtype (a bf16 base keeps fp32 adapters and moments); their product is rounded
// once into the output's dtype. The engine applies them beside the base product in its
// own kernels: no merged copy of any weight is made to sample. Targets use PEFT's module names:
// q_proj k_proj v_proj o_proj gate_proj up_proj down_proj, or "all-linear" (all seven;
// the LM head is never adapted, as in PEFT). modules_to_save (embed_tokens, lm_head) are
// trained whole beside the adapters, as PEFT's modules_to_save: the saved adapter holds
// them under their plain names (base_model.model.model.embed_tokens.weight), and the
// base (BaseOnly) reads a frozen copy of the original. A tied head shares the trained
// embedding (HF's tying: one tensor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentr1/model/config.h"

namespace agentr1::model {

struct LoraOptions {
  int rank = 0;                       // r; 0 = no adapters (full fine-tuning)
  double alpha = 32;                  // lora_alpha; the update is scaled by alpha / r
  double dropout = 0.0;               // lora_dropout on the adapter's input (training only)
  std::vector<std::string> target_modules{"all-linear"};  // PEFT names, or all-linear
  std::vector<std::string> modules_to_save;  // PEFT's modules_to_save: whole modules trained
                                      // beside the adapters: embed_tokens (with a tied
                                      // head, the head too) and/or lm_head (untied). The
                                      // reference (BaseOnly) keeps a frozen copy of each

  bool enabled() const { return rank > 0; }
  double scaling() const { return rank > 0 ? alpha / rank : 0.0; }
  // True when `proj` (q_proj, ..., down_proj) is adapted.
  bool targets(const std::string& proj) const;
  // The targeted projections in PEFT's order (q k v o gate up down).
  std::vector<std::string> target_list() const;
  // Throws Error naming `prefix`.<key>: rank >= 0, alpha > 0, dropout in [0,1), targets
  // known (the message lists them).
  void validate(const std::string& prefix = "lora") const;
  template <class V>
  void visit(V& v) {
    v.field("rank", rank, "LoRA rank r; 0 = full fine-tuning (no adapters)");
    v.field("alpha", alpha, "LoRA alpha: the adapter's update is scaled by alpha / rank");
    v.field("dropout", dropout, "dropout on the adapter's input while training, in [0, 1)");
    v.field("target_modules", target_modules,
            "adapted projections (PEFT names): q_proj k_proj v_proj o_proj gate_proj up_proj down_proj, or all-linear");
    v.field("modules_to_save", modules_to_save,
            "whole modules trained beside the adapters (PEFT's modules_to_save): embed_tokens, lm_head");
  }
};

// While alive, every forward on this thread skips the adapters: the base model, which is
// a LoRA run's reference policy (no second copy of the weights). Nests. Other threads
// (an engine's worker, say) are unaffected.
class BaseOnly {
 public:
  BaseOnly();
  ~BaseOnly();
  BaseOnly(const BaseOnly&) = delete;
  BaseOnly& operator=(const BaseOnly&) = delete;

 private:
  bool prev_;
};
// False on a thread inside a BaseOnly.
bool adapters_active();

// The seven projection names, in PEFT's order.
const std::vector<std::string>& lora_projection_names();
// (in, out) features of projection `proj` in every layer of cfg.
std::pair<int64_t, int64_t> projection_shape(const ModelConfig& cfg, const std::string& proj);
// Parameters the adapters add to a model of shape cfg: layers x sum over targets of
// rank x (in + out).
int64_t lora_parameter_count(const ModelConfig& cfg, const LoraOptions& o);
// Parameters of the modules_to_save (trained whole; each also kept as a frozen copy).
int64_t saved_module_parameter_count(const ModelConfig& cfg, const LoraOptions& o);

}  // namespace agentr1::model
