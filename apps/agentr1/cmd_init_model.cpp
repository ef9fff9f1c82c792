// agentr1 init-model — a randomly initialised model in HuggingFace layout.
//
//   agentr1 init-model --arch qwen3 --tokenizer models/tok --out models/tiny
//   agentr1 init-model --arch llama --vocab-size 32000 --hidden-size 512 --layers 8 --out m
//
// Writes config.json + model.safetensors (weights drawn like HF's _init_weights from
// --seed, std --init-std) into --out; with --tokenizer, the vocab size and bos/eos ids
// come from its tokenizer.json / tokenizer_config.json, which are copied next to the
// weights.
// Prints one JSON line {"out", "arch", "parameters"} on stdout.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/core/log.h"
#include "agentr1/model/transformer.h"
#include "command.h"

namespace {

namespace fs = std::filesystem;
using agentr1::Error;
using agentr1::json;

struct InitModelOpts {
  std::string arch;                   // qwen2 | qwen3 | llama
  int64_t vocab_size = 0;             // 0 = take it from --tokenizer
  std::string tokenizer;              // HF tokenizer dir (tokenizer.json [+ tokenizer_config.json])
  int64_t hidden_size = 256;          // model width
  int64_t intermediate_size = 768;    // SwiGLU inner width
  int64_t layers = 4;                 // decoder layers
  int64_t heads = 4;                  // query heads
  int64_t kv_heads = 2;               // key/value heads (GQA); must divide heads
  int64_t head_dim = 0;               // 0 = hidden_size / heads
  double rope_theta = 1000000.0;      // RoPE base
  bool tie_embeddings = false;        // lm_head shares embed_tokens
  int64_t max_position_embeddings = 4096;
  std::string dtype = "fp32";         // storage dtype: fp32 | bf16 | fp16
  uint64_t seed = 0;                  // weight-init seed
  double init_std = 0.02;             // std of the random weights (HF's initializer_range)
  std::string out;                    // output directory
  bool overwrite = false;             // replace a model already in --out
};

// nlohmann's std::map-backed json: agentr1::json (ordered) inserts each key with a linear
// search, and a 151k-token tokenizer.json then took 14 s to read instead of 0.5 s.
nlohmann::json read_json_file(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw Error("cannot open " + p.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(p.string() + ": invalid JSON: " + e.what());
  }
}

struct TokenizerInfo {
  int64_t vocab_size = 0;  // max id + 1 over model.vocab and added_tokens
  int64_t bos = -1, eos = -1;
};

// Reads the tokenizer files directly (the text layer's Tokenizer class is not needed
// for three numbers).
TokenizerInfo read_tokenizer_info(const std::string& dir) {
  const nlohmann::json tok = read_json_file(fs::path(dir) / "tokenizer.json");
  std::map<std::string, int64_t> ids;
  int64_t max_id = -1;
  if (tok.contains("model") && tok["model"].contains("vocab") && tok["model"]["vocab"].is_object()) {
    for (const auto& kv : tok["model"]["vocab"].items()) {
      const int64_t id = kv.value().get<int64_t>();
      ids[kv.key()] = id;
      max_id = std::max(max_id, id);
    }
  }
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const auto& t : tok["added_tokens"]) {
      const int64_t id = t.at("id").get<int64_t>();
      ids[t.at("content").get<std::string>()] = id;
      max_id = std::max(max_id, id);
    }
  }
  if (max_id < 0) throw Error(dir + "/tokenizer.json: no model.vocab or added_tokens ids found");
  TokenizerInfo info;
  info.vocab_size = max_id + 1;
  const fs::path cfg_path = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(cfg_path)) {
    const nlohmann::json cfg = read_json_file(cfg_path);
    auto lookup = [&](const char* key) -> int64_t {
      if (!cfg.contains(key) || cfg[key].is_null()) return -1;
      const nlohmann::json& v = cfg[key];
      const std::string content = v.is_string() ? v.get<std::string>() : v.value("content", std::string());
      auto it = ids.find(content);
      if (it == ids.end())
        throw Error(cfg_path.string() + ": " + key + " '" + content + "' is not a token of tokenizer.json");
      return it->second;
    };
    info.bos = lookup("bos_token");
    info.eos = lookup("eos_token");
  } else {
    AGENTR1_LOG(WARN) << "no tokenizer_config.json in " << dir << ": the model gets no bos/eos ids";
  }
  return info;
}

int run_init_model(const InitModelOpts& o) {
  namespace m = agentr1::model;
  m::ModelConfig cfg;
  cfg.arch = m::arch_from_string(o.arch);
  if (!o.tokenizer.empty()) {
    const TokenizerInfo info = read_tokenizer_info(o.tokenizer);
    if (o.vocab_size > 0 && o.vocab_size < info.vocab_size)
      throw Error("--vocab-size " + std::to_string(o.vocab_size) + " is smaller than the tokenizer's " +
                  std::to_string(info.vocab_size) + " ids; drop --vocab-size or make it larger");
    cfg.vocab_size = o.vocab_size > 0 ? o.vocab_size : info.vocab_size;
    cfg.bos_token_id = info.bos;
    cfg.eos_token_id = info.eos;
  } else {
    if (o.vocab_size <= 0) throw Error("give --vocab-size N or --tokenizer DIR (the vocab size comes from it)");
    cfg.vocab_size = o.vocab_size;
  }
  cfg.hidden_size = o.hidden_size;
  cfg.intermediate_size = o.intermediate_size;
  cfg.num_hidden_layers = o.layers;
  cfg.num_attention_heads = o.heads;
  cfg.num_key_value_heads = o.kv_heads;
  if (o.heads <= 0) throw Error("--heads must be > 0, got " + std::to_string(o.heads));
  cfg.head_dim = o.head_dim > 0 ? o.head_dim : o.hidden_size / o.heads;
  cfg.rope_theta = o.rope_theta;
  cfg.tie_word_embeddings = o.tie_embeddings;
  cfg.max_position_embeddings = o.max_position_embeddings;
  cfg.attention_bias = cfg.arch == m::Arch::kQwen2;
  cfg.qk_norm = cfg.arch == m::Arch::kQwen3;
  const at::ScalarType dtype = m::parse_dtype(o.dtype);
  cfg.validate();
  if (!(o.init_std > 0.0) || !std::isfinite(o.init_std))
    throw Error("--init-std must be a positive number, got " + std::to_string(o.init_std));

  for (const char* f : {"config.json", "model.safetensors"})
    if (fs::exists(fs::path(o.out) / f) && !o.overwrite)
      throw Error("--out " + o.out + " already holds a model (" + f +
                  "); HINT: --overwrite to replace it (its tokenizer files too), or another --out");
  if (o.overwrite && o.tokenizer.empty()) {
    // A stale tokenizer next to new weights would not match their vocabulary.
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) fs::remove(fs::path(o.out) / f);
  }
  m::Transformer model = m::init_random(cfg, o.seed);
  if (o.init_std != 0.02) {
    // init_random draws N(0, 0.02); scaling by std / 0.02 draws N(0, std) from the same
    // generator. Norm weights (1) and biases (0) are left as they are.
    at::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) {
      const std::string& n = p.key();
      const bool norm = n.size() >= 11 && n.compare(n.size() - 11, 11, "norm.weight") == 0;
      const bool bias = n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
      if (!norm && !bias) p.value().mul_(o.init_std / 0.02);
    }
  }
  m::save_pretrained(model, o.out, dtype);
  if (!o.tokenizer.empty()) {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
      const fs::path src = fs::path(o.tokenizer) / f;
      if (fs::exists(src)) fs::copy_file(src, fs::path(o.out) / f, fs::copy_options::overwrite_existing);
    }
  }
  AGENTR1_LOG(INFO) << "wrote " << m::arch_name(cfg.arch) << " model (" << cfg.num_parameters()
                    << " parameters, " << o.dtype << ") to " << o.out;
  json r;
  r["out"] = o.out;
  r["arch"] = m::arch_name(cfg.arch);
  r["parameters"] = cfg.num_parameters();
  std::cout << r.dump() << std::endl;
  return 0;
}

agentr1::cli::Registrar reg("init-model", "Write a randomly initialised model (HF layout)", [](CLI::App& app) {
  auto o = std::make_shared<InitModelOpts>();
  app.add_option("--arch", o->arch, "qwen2 | qwen3 | llama")->required();
  app.add_option("--vocab-size", o->vocab_size, "vocabulary size (default: from --tokenizer)");
  app.add_option("--tokenizer", o->tokenizer, "HF tokenizer dir: vocab size and bos/eos from it, files copied");
  app.add_option("--hidden-size", o->hidden_size, "model width")->capture_default_str();
  app.add_option("--intermediate-size", o->intermediate_size, "MLP inner width")->capture_default_str();
  app.add_option("--layers", o->layers, "decoder layers")->capture_default_str();
  app.add_option("--heads", o->heads, "attention (query) heads")->capture_default_str();
  app.add_option("--kv-heads", o->kv_heads, "key/value heads (GQA)")->capture_default_str();
  app.add_option("--head-dim", o->head_dim, "per-head width (0 = hidden/heads)")->capture_default_str();
  app.add_option("--rope-theta", o->rope_theta, "RoPE base")->capture_default_str();
  app.add_flag("--tie-embeddings", o->tie_embeddings, "tie lm_head to embed_tokens");
  app.add_option("--max-position-embeddings", o->max_position_embeddings, "context length")->capture_default_str();
  app.add_option("--dtype", o->dtype, "fp32 | bf16 | fp16 (storage)")->capture_default_str();
  app.add_option("--seed", o->seed, "init seed")->capture_default_str();
  app.add_option("--init-std", o->init_std,
                 "std of the random weights (HF's 0.02 gives near-uniform outputs; e.g. 0.2 makes a tiny "
                 "model's outputs depend strongly on its inputs, as tests want)")
      ->capture_default_str();
  app.add_option("--out", o->out, "output directory")->required();
  app.add_flag("--overwrite", o->overwrite, "replace a model already in --out (and its tokenizer files)");
  return [o]() { return run_init_model(*o); };
});

}  // namespace
