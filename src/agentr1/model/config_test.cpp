#include "agentr1/model/config.h"

#include <gtest/gtest.h>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"

namespace agentr1::model {
namespace {

// Trimmed from Qwen3-0.6B's config.json.
const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

std::string error_of(const json& j) {
  return agentr1::testing::error_of([&] { ModelConfig::from_json(j); });
}

TEST(ModelConfigTest, ParsesQwen3) {
  ModelConfig c = ModelConfig::from_json(json::parse(kQwen3));
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_EQ(c.head_dim, 128);  // != hidden/heads = 64
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.eos_token_id, 151645);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.num_parameters(), 596049920);  // Qwen3-0.6B: 0.6B with tied embeddings
  ModelConfig back = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(back.to_json(), c.to_json());
  EXPECT_EQ(c.to_json()["architectures"][0], "Qwen3ForCausalLM");
}

TEST(ModelConfigTest, Qwen2AlwaysHasQkvBiasAndLlamaReadsTheKey) {
  json j = json::parse(kQwen3);
  j["model_type"] = "qwen2";
  j.erase("head_dim");
  j["attention_bias"] = false;  // ignored by qwen2
  ModelConfig q2 = ModelConfig::from_json(j);
  EXPECT_TRUE(q2.attention_bias);
  EXPECT_FALSE(q2.qk_norm);
  EXPECT_EQ(q2.head_dim, 64);
  EXPECT_FALSE(q2.to_json().contains("head_dim"));
  j["model_type"] = "llama";
  j["attention_bias"] = true;
  j["eos_token_id"] = json::array({128001, 128009});
  j["bos_token_id"] = nullptr;
  ModelConfig ll = ModelConfig::from_json(j);
  EXPECT_TRUE(ll.attention_bias);
  EXPECT_EQ(ll.eos_token_id, 128001);  // list: first
  EXPECT_EQ(ll.bos_token_id, -1);
  j.erase("num_key_value_heads");
  EXPECT_EQ(ModelConfig::from_json(j).num_key_value_heads, 16);
}

TEST(ModelConfigTest, ErrorsNameTheKey) {
  json j = json::parse(kQwen3);
  auto with = [&](const char* key, json v) {
    json k = j;
    if (v.is_discarded()) k.erase(key); else k[key] = v;
    return error_of(k);
  };
  EXPECT_NE(with("hidden_act", "gelu").find("'hidden_act' must be \"silu\""), std::string::npos);
  EXPECT_NE(with("rope_scaling", json{{"type", "yarn"}, {"factor", 4}}).find("rope_scaling not supported"),
            std::string::npos);
  EXPECT_NE(with("hidden_size", json::value_t::discarded).find("'hidden_size'"), std::string::npos);
  EXPECT_NE(with("vocab_size", "many").find("'vocab_size' must be an integer"), std::string::npos);
  EXPECT_NE(with("model_type", "gpt2").find("'gpt2'"), std::string::npos);
  EXPECT_NE(with("num_key_value_heads", 5).find("'num_key_value_heads' (5) must divide"), std::string::npos);
  EXPECT_NE(with("num_hidden_layers", 0).find("'num_hidden_layers' must be > 0, got 0"), std::string::npos);
  EXPECT_NE(with("eos_token_id", 999999).find("'eos_token_id' 999999"), std::string::npos);
  EXPECT_NE(with("torch_dtype", "int8").find("'torch_dtype'"), std::string::npos);
  EXPECT_NE(with("head_dim", 63).find("'head_dim' must be even"), std::string::npos);
  EXPECT_THROW(ModelConfig::load("/nonexistent/config.json"), Error);
  EXPECT_THROW(arch_from_string("mistral"), Error);
}

}  // namespace
}  // namespace agentr1::model
