#include "agentr1/model/config.h"

#include <fstream>
#include <sstream>

#include "agentr1/core/error.h"

namespace agentr1::model {

Arch arch_from_string(const std::string& name) {
  if (name == "qwen2") return Arch::kQwen2;
  if (name == "qwen3") return Arch::kQwen3;
  if (name == "llama") return Arch::kLlama;
  throw Error("unknown model arch '" + name + "': expected one of qwen2, qwen3, llama");
}

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::kQwen2: return "qwen2";
    case Arch::kQwen3: return "qwen3";
    case Arch::kLlama: return "llama";
  }
  return "?";
}

namespace {

const char* architecture_class(Arch a) {
  switch (a) {
    case Arch::kQwen2: return "Qwen2ForCausalLM";
    case Arch::kQwen3: return "Qwen3ForCausalLM";
    case Arch::kLlama: return "LlamaForCausalLM";
  }
  return "?";
}

bool present(const json& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

int64_t get_int(const json& j, const char* key) {
  AGENTR1_CHECK(present(j, key), "config.json: missing required key '" << key << "'");
  const json& v = j.at(key);
  AGENTR1_CHECK(v.is_number_integer(),
                "config.json: key '" << key << "' must be an integer, got " << v.dump());
  return v.get<int64_t>();
}

int64_t get_int(const json& j, const char* key, int64_t def) {
  return present(j, key) ? get_int(j, key) : def;
}

double get_double(const json& j, const char* key, double def) {
  if (!present(j, key)) return def;
  const json& v = j.at(key);
  AGENTR1_CHECK(v.is_number(), "config.json: key '" << key << "' must be a number, got " << v.dump());
  return v.get<double>();
}

bool get_bool(const json& j, const char* key, bool def) {
  if (!present(j, key)) return def;
  const json& v = j.at(key);
  AGENTR1_CHECK(v.is_boolean(), "config.json: key '" << key << "' must be true or false, got " << v.dump());
  return v.get<bool>();
}

// bos/eos ids are an int, a list of ints (the first is used) or null.
int64_t get_token_id(const json& j, const char* key) {
  if (!present(j, key)) return -1;
  const json& v = j.at(key);
  if (v.is_array()) {
    if (v.empty()) return -1;
    AGENTR1_CHECK(v.at(0).is_number_integer(),
                  "config.json: key '" << key << "' must hold integer token ids, got " << v.dump());
    return v.at(0).get<int64_t>();
  }
  AGENTR1_CHECK(v.is_number_integer(),
                "config.json: key '" << key << "' must be a token id or a list of ids, got " << v.dump());
  return v.get<int64_t>();
}

}  // namespace

ModelConfig ModelConfig::from_json(const json& j) {
  AGENTR1_CHECK(j.is_object(), "config.json: expected a JSON object, got " << j.type_name());
  AGENTR1_CHECK(present(j, "model_type") && j.at("model_type").is_string(),
                "config.json: missing string key 'model_type' (expected qwen2, qwen3 or llama)");
  ModelConfig c;
  c.arch = with_context("config.json: key 'model_type'",
                        [&] { return arch_from_string(j.at("model_type").get<std::string>()); });
  if (present(j, "hidden_act")) {
    AGENTR1_CHECK(j.at("hidden_act").is_string() && j.at("hidden_act").get<std::string>() == "silu",
                  "config.json: key 'hidden_act' must be \"silu\" (SwiGLU), got "
                      << j.at("hidden_act").dump());
  }
  AGENTR1_CHECK(!present(j, "rope_scaling"),
                "config.json: rope_scaling not supported (key 'rope_scaling' = "
                    << j.at("rope_scaling").dump() << "); set it to null or remove it");
  AGENTR1_CHECK(!get_bool(j, "mlp_bias", false), "config.json: key 'mlp_bias' = true is not supported");
  AGENTR1_CHECK(!get_bool(j, "use_sliding_window", false),
                "config.json: key 'use_sliding_window' = true is not supported; set it to false");

  c.vocab_size = get_int(j, "vocab_size");
  c.hidden_size = get_int(j, "hidden_size");
  c.intermediate_size = get_int(j, "intermediate_size");
  c.num_hidden_layers = get_int(j, "num_hidden_layers");
  c.num_attention_heads = get_int(j, "num_attention_heads");
  c.num_key_value_heads = get_int(j, "num_key_value_heads", c.num_attention_heads);
  // Qwen3Config's head_dim defaults to 128 when the key is absent; the others derive it.
  int64_t derived = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  c.head_dim = get_int(j, "head_dim", c.arch == Arch::kQwen3 ? 128 : derived);
  c.max_position_embeddings =
      get_int(j, "max_position_embeddings", c.arch == Arch::kLlama ? 2048 : 32768);
  c.rope_theta = get_double(j, "rope_theta", 10000.0);
  c.rms_norm_eps = get_double(j, "rms_norm_eps", 1e-6);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", false);
  // Qwen2 always has q/k/v bias (and no o_proj bias); Qwen3 and Llama read 'attention_bias'.
  c.attention_bias = c.arch == Arch::kQwen2 ? true : get_bool(j, "attention_bias", false);
  c.qk_norm = c.arch == Arch::kQwen3;
  c.bos_token_id = get_token_id(j, "bos_token_id");
  c.eos_token_id = get_token_id(j, "eos_token_id");
  const char* dtype_key = present(j, "torch_dtype") ? "torch_dtype" : (present(j, "dtype") ? "dtype" : nullptr);
  if (dtype_key) {
    AGENTR1_CHECK(j.at(dtype_key).is_string(),
                  "config.json: key '" << dtype_key << "' must be a string, got " << j.at(dtype_key).dump());
    c.torch_dtype = j.at(dtype_key).get<std::string>();
  }
  c.validate();
  return c;
}

ModelConfig ModelConfig::load(const std::string& path) {
  std::ifstream in(path);
  AGENTR1_CHECK(in.good(), "cannot open model config '" << path << "'; a model directory needs config.json");
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    throw Error(path + ": invalid JSON: " + e.what());
  }
  return with_context(path, [&] { return from_json(j); });
}

json ModelConfig::to_json() const {
  json j;
  j["architectures"] = json::array({architecture_class(arch)});
  j["model_type"] = arch_name(arch);
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  if (arch != Arch::kQwen2) j["head_dim"] = head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = max_position_embeddings;
  j["rope_theta"] = rope_theta;
  j["rope_scaling"] = nullptr;
  j["rms_norm_eps"] = rms_norm_eps;
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (arch != Arch::kQwen2) j["attention_bias"] = attention_bias;
  j["attention_dropout"] = 0.0;
  if (arch == Arch::kQwen2) j["use_sliding_window"] = false;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  if (eos_token_id >= 0) j["eos_token_id"] = eos_token_id;
  j["torch_dtype"] = torch_dtype;
  return j;
}

void ModelConfig::save(const std::string& path) const {
  validate();
  std::ofstream out(path);
  AGENTR1_CHECK(out.good(), "cannot write model config '" << path << "'");
  out << to_json().dump(2) << "\n";
  AGENTR1_CHECK(out.good(), "error writing model config '" << path << "'");
}

void ModelConfig::validate() const {
  auto positive = [](const char* key, int64_t v) {
    AGENTR1_CHECK(v > 0, "model config: '" << key << "' must be > 0, got " << v);
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("intermediate_size", intermediate_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("head_dim", head_dim);
  positive("max_position_embeddings", max_position_embeddings);
  // Sizes beyond any real model (an extra digit, a corrupt config.json) fail here with
  // the key, not later as a failed allocation or an overflowing byte count.
  auto at_most = [](const char* key, int64_t v, int64_t limit) {
    AGENTR1_CHECK(v <= limit, "model config: '" << key << "' is " << v << ", more than " << limit
                                                << " (larger than any model this loader supports); check the value");
  };
  at_most("vocab_size", vocab_size, int64_t{1} << 24);
  at_most("hidden_size", hidden_size, int64_t{1} << 17);
  at_most("intermediate_size", intermediate_size, int64_t{1} << 19);
  at_most("num_hidden_layers", num_hidden_layers, 1024);
  at_most("num_attention_heads", num_attention_heads, 1024);
  at_most("num_key_value_heads", num_key_value_heads, 1024);
  at_most("head_dim", head_dim, int64_t{1} << 14);
  at_most("max_position_embeddings", max_position_embeddings, int64_t{1} << 24);
  AGENTR1_CHECK(num_attention_heads % num_key_value_heads == 0,
                "model config: 'num_key_value_heads' (" << num_key_value_heads
                    << ") must divide 'num_attention_heads' (" << num_attention_heads << ")");
  AGENTR1_CHECK(head_dim % 2 == 0, "model config: 'head_dim' must be even for RoPE, got " << head_dim);
  if (arch == Arch::kQwen2) {
    AGENTR1_CHECK(head_dim * num_attention_heads == hidden_size,
                  "model config: qwen2 needs 'hidden_size' (" << hidden_size
                      << ") = num_attention_heads (" << num_attention_heads << ") * head_dim ("
                      << head_dim << ")");
  }
  AGENTR1_CHECK(rope_theta > 0, "model config: 'rope_theta' must be > 0, got " << rope_theta);
  AGENTR1_CHECK(rms_norm_eps > 0, "model config: 'rms_norm_eps' must be > 0, got " << rms_norm_eps);
  AGENTR1_CHECK(bos_token_id < vocab_size,
                "model config: 'bos_token_id' " << bos_token_id << " is outside vocab_size " << vocab_size);
  AGENTR1_CHECK(eos_token_id < vocab_size,
                "model config: 'eos_token_id' " << eos_token_id << " is outside vocab_size " << vocab_size);
  AGENTR1_CHECK(torch_dtype == "float32" || torch_dtype == "bfloat16" || torch_dtype == "float16",
                "model config: 'torch_dtype' must be float32, bfloat16 or float16, got '" << torch_dtype << "'");
  AGENTR1_CHECK(!(qk_norm && arch != Arch::kQwen3), "model config: qk_norm is only used by qwen3");
}

int64_t ModelConfig::num_parameters() const {
  const int64_t H = hidden_size, q = num_attention_heads * head_dim, kv = num_key_value_heads * head_dim;
  int64_t attn = H * q + 2 * H * kv + q * H;
  if (attention_bias) attn += q + 2 * kv;
  if (qk_norm) attn += 2 * head_dim;
  const int64_t mlp = 3 * H * intermediate_size;
  const int64_t layer = attn + mlp + 2 * H;
  int64_t n = vocab_size * H + num_hidden_layers * layer + H;
  if (!tie_word_embeddings) n += vocab_size * H;
  return n;
}

}  // namespace agentr1::model
