// LoRA options and shapes (the adapter math lives in transformer.cpp; PEFT files in
// lora_io.cpp).
#include "agentr1/model/lora.h"

#include <algorithm>
#include <cmath>

#include "agentr1/core/error.h"
#include "agentr1/core/strings.h"

namespace agentr1::model {

namespace {
thread_local bool t_base_only = false;
}  // namespace

BaseOnly::BaseOnly() : prev_(t_base_only) { t_base_only = true; }
BaseOnly::~BaseOnly() { t_base_only = prev_; }
bool adapters_active() { return !t_base_only; }

const std::vector<std::string>& lora_projection_names() {
  static const std::vector<std::string> names{"q_proj", "k_proj", "v_proj", "o_proj",
                                              "gate_proj", "up_proj", "down_proj"};
  return names;
}

bool LoraOptions::targets(const std::string& proj) const {
  for (const auto& t : target_modules)
    if (t == proj || t == "all-linear") return true;
  return false;
}

std::vector<std::string> LoraOptions::target_list() const {
  std::vector<std::string> out;
  for (const auto& p : lora_projection_names())
    if (targets(p)) out.push_back(p);
  return out;
}

void LoraOptions::validate(const std::string& prefix) const {
  AGENTR1_CHECK(rank >= 0, prefix << ".rank must be >= 0 (0 = no adapters), got " << rank);
  if (rank == 0) return;
  AGENTR1_CHECK(alpha > 0 && std::isfinite(alpha), prefix << ".alpha must be a positive number, got " << alpha);
  AGENTR1_CHECK(dropout >= 0 && dropout < 1, prefix << ".dropout must be in [0, 1), got " << dropout);
  AGENTR1_CHECK(!target_modules.empty(), prefix << ".target_modules is empty; HINT: [all-linear] or PEFT names ("
                                                << join(lora_projection_names(), ", ") << ")");
  const auto& names = lora_projection_names();
  for (const auto& t : target_modules)
    AGENTR1_CHECK(t == "all-linear" || std::find(names.begin(), names.end(), t) != names.end(),
                  prefix << ".target_modules: unknown module '" << t << "'; valid: all-linear, "
                         << join(names, ", ") << " (PEFT's names; the LM head is not adapted)");
  for (const auto& m : modules_to_save)
    AGENTR1_CHECK(m == "embed_tokens" || m == "lm_head",
                  prefix << ".modules_to_save: unknown module '" << m
                         << "'; valid: embed_tokens, lm_head (trained whole beside the adapters)");
}

std::pair<int64_t, int64_t> projection_shape(const ModelConfig& c, const std::string& proj) {
  const int64_t H = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  if (proj == "q_proj") return {H, q};
  if (proj == "k_proj" || proj == "v_proj") return {H, kv};
  if (proj == "o_proj") return {q, H};
  if (proj == "gate_proj" || proj == "up_proj") return {H, c.intermediate_size};
  if (proj == "down_proj") return {c.intermediate_size, H};
  throw Error("projection_shape: unknown projection '" + proj + "'");
}

int64_t lora_parameter_count(const ModelConfig& cfg, const LoraOptions& o) {
  if (!o.enabled()) return 0;
  int64_t per_layer = 0;
  for (const auto& p : o.target_list()) {
    const auto [in, out] = projection_shape(cfg, p);
    per_layer += static_cast<int64_t>(o.rank) * (in + out);
  }
  return per_layer * cfg.num_hidden_layers;
}

int64_t saved_module_parameter_count(const ModelConfig& cfg, const LoraOptions& o) {
  if (!o.enabled()) return 0;
  int64_t n = 0;
  for (const auto& m : o.modules_to_save)
    if (m == "embed_tokens" || (m == "lm_head" && !cfg.tie_word_embeddings)) n += cfg.vocab_size * cfg.hidden_size;
  return n;
}

}  // namespace agentr1::model
