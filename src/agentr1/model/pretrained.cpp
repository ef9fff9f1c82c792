// Weights in and out of a Transformer: HF-style random init, load/save in the
// HuggingFace directory layout (config.json + safetensors).
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "agentr1/core/error.h"
#include "agentr1/core/strings.h"
#include "agentr1/core/json.h"
#include "agentr1/core/log.h"
#include "agentr1/model/safetensors.h"
#include "agentr1/model/transformer.h"

namespace agentr1::model {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_str(at::IntArrayRef s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// "model.layers.0.self_attn.q_proj.lora_A" -> true.
bool is_adapter_name(const std::string& name) {
  return ends_with(name, ".lora_A") || ends_with(name, ".lora_B");
}

constexpr const char* kPeftPrefix = "base_model.model.";

}  // namespace

at::ScalarType parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "float32") return at::kFloat;
  if (name == "bf16" || name == "bfloat16") return at::kBFloat16;
  if (name == "fp16" || name == "float16") return at::kHalf;
  throw Error("unknown dtype '" + name + "': expected fp32, bf16 or fp16 (or float32, bfloat16, float16)");
}

const char* hf_dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: break;
  }
  throw Error(std::string("model dtype ") + c10::toString(dtype) + " is not supported; use fp32, bf16 or fp16");
}

Transformer init_random(const ModelConfig& cfg, uint64_t seed) {
  Transformer m(cfg);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::NoGradGuard no_grad;
  for (auto& p : m->named_parameters()) {
    const std::string& name = p.key();
    at::Tensor& t = p.value();
    if (ends_with(name, "norm.weight")) {
      t.fill_(1.0);
    } else if (ends_with(name, ".bias")) {
      t.zero_();
    } else {
      t.normal_(/*mean=*/0.0, /*std=*/0.02, gen);
    }
  }
  return m;
}

Transformer load_pretrained(const std::string& dir, at::ScalarType dtype, at::Device device) {
  hf_dtype_name(dtype);  // validates
  const ModelConfig cfg = ModelConfig::load((fs::path(dir) / "config.json").string());
  Transformer m(cfg);
  m->to(dtype);
  TensorList tensors = read_safetensors_dir(dir);
  auto params = m->named_parameters();
  std::map<std::string, at::Tensor> found;
  for (auto& [name, t] : tensors) {
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;  // HF buffer, recomputed here
    found[name] = t;
  }
  at::NoGradGuard no_grad;
  for (auto& p : params) {
    auto it = found.find(p.key());
    AGENTR1_CHECK(it != found.end(), dir << ": missing tensor '" << p.key() << "' (expected shape "
                                         << shape_str(p.value().sizes()) << " for " << arch_name(cfg.arch)
                                         << "); the checkpoint does not match config.json");
    const at::Tensor& t = it->second;
    AGENTR1_CHECK(t.sizes() == p.value().sizes(), dir << ": tensor '" << p.key() << "': expected "
                                                      << shape_str(p.value().sizes()) << ", found "
                                                      << shape_str(t.sizes()) << " (check config.json sizes)");
    AGENTR1_CHECK(at::isFloatingType(t.scalar_type()),
                  dir << ": tensor '" << p.key() << "' has non-float dtype " << t.scalar_type());
    p.value().copy_(t);
    found.erase(it);
  }
  if (cfg.tie_word_embeddings) {
    // Some exporters store the tied head anyway; accept it only if it really is tied.
    auto it = found.find("lm_head.weight");
    if (it != found.end()) {
      const at::Tensor& emb = *params.find("model.embed_tokens.weight");
      AGENTR1_CHECK(it->second.sizes() == emb.sizes() && it->second.to(emb.scalar_type()).equal(emb),
                    dir << ": config.json says tie_word_embeddings=true but tensor 'lm_head.weight' differs "
                           "from model.embed_tokens.weight; set tie_word_embeddings to false");
      found.erase(it);
    }
  }
  AGENTR1_CHECK(found.empty(), dir << ": unexpected tensor '" << found.begin()->first << "' (shape "
                                   << shape_str(found.begin()->second.sizes()) << ") not used by a "
                                   << arch_name(cfg.arch) << " model with this config.json");
  m->to(device);
  m->eval();
  return m;
}

void save_pretrained(Transformer& model, const std::string& dir, at::ScalarType dtype, int64_t max_shard_bytes) {
  ModelConfig cfg = model->config();
  cfg.torch_dtype = hf_dtype_name(dtype);
  fs::create_directories(dir);
  TensorList tensors;
  // With adapters: a plain model, each adapted weight merged (W + scaling B A, in fp32).
  for (const auto& p : model->named_parameters()) {
    if (is_adapter_name(p.key())) continue;
    const at::Tensor delta = model->lora_delta(p.key());
    const at::Tensor w = p.value().detach();
    tensors.emplace_back(p.key(), delta.defined() ? (w.to(at::kFloat) + delta.to(w.device())).to(dtype) : w.to(dtype));
  }
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  write_safetensors_dir(dir, tensors, max_shard_bytes);
  cfg.save((fs::path(dir) / "config.json").string());
}

json lora_adapter_config(const LoraOptions& o, const std::string& base_model) {
  json j;
  j["alpha_pattern"] = json::object();
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] = base_model;
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = nullptr;
  j["lora_alpha"] = o.alpha;
  j["lora_dropout"] = o.dropout;
  j["modules_to_save"] = o.modules_to_save.empty() ? json(nullptr) : json(o.modules_to_save);
  j["peft_type"] = "LORA";
  j["r"] = o.rank;
  j["rank_pattern"] = json::object();
  j["revision"] = nullptr;
  j["target_modules"] = o.target_list();  // resolved, as PEFT saves all-linear
  j["task_type"] = "CAUSAL_LM";
  j["use_dora"] = false;
  j["use_rslora"] = false;
  return j;
}

LoraOptions read_lora_adapter_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "adapter_config.json").string();
  std::ifstream in(path);
  AGENTR1_CHECK(in.good(), "cannot open '" << path << "'; a LoRA adapter directory (PEFT format) holds "
                                              "adapter_config.json and adapter_model.safetensors");
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    throw Error(path + ": invalid JSON: " + e.what());
  }
  AGENTR1_CHECK(j.is_object(), path << ": expected a JSON object");
  auto field_is = [&](const char* key, const json& want) { return !j.contains(key) || j[key].is_null() || j[key] == want; };
  AGENTR1_CHECK(j.value("peft_type", std::string("LORA")) == "LORA",
                path << ": peft_type is " << j["peft_type"] << "; only LORA adapters are supported");
  AGENTR1_CHECK(field_is("bias", "none"), path << ": bias is " << j["bias"]
                                               << "; only bias \"none\" is supported (trained biases are not)");
  AGENTR1_CHECK(field_is("use_dora", false), path << ": use_dora is true; DoRA adapters are not supported");
  AGENTR1_CHECK(field_is("fan_in_fan_out", false), path << ": fan_in_fan_out is true (GPT-2-style Conv1D "
                                                           "weights); not supported for qwen2/qwen3/llama");
  std::vector<std::string> saved;
  if (j.contains("modules_to_save") && !j["modules_to_save"].is_null()) {
    const json& m = j["modules_to_save"];
    AGENTR1_CHECK(m.is_array(), path << ": modules_to_save must be a list of module names, got " << m);
    for (const auto& e : m) {
      AGENTR1_CHECK(e.is_string() && (e == "embed_tokens" || e == "lm_head"),
                    path << ": modules_to_save entry " << e << " is not supported (embed_tokens and lm_head are)");
      saved.push_back(e.get<std::string>());
    }
  }
  for (const char* k : {"rank_pattern", "alpha_pattern"})
    AGENTR1_CHECK(!j.contains(k) || j[k].is_null() || j[k].empty(),
                  path << ": " << k << " " << j[k] << " is not supported (one rank and alpha for every module)");
  AGENTR1_CHECK(!j.contains("layers_to_transform") || j["layers_to_transform"].is_null(),
                path << ": layers_to_transform is not supported (adapters on every layer)");
  LoraOptions o;
  AGENTR1_CHECK(j.contains("r") && j["r"].is_number_integer() && j["r"].get<int>() > 0,
                path << ": r must be a positive integer, got " << (j.contains("r") ? j["r"].dump() : "nothing"));
  o.rank = j["r"].get<int>();
  AGENTR1_CHECK(j.contains("lora_alpha") && j["lora_alpha"].is_number(),
                path << ": lora_alpha must be a number, got "
                     << (j.contains("lora_alpha") ? j["lora_alpha"].dump() : "nothing"));
  o.alpha = j["lora_alpha"].get<double>();
  if (j.value("use_rslora", false)) o.alpha *= std::sqrt(static_cast<double>(o.rank));  // alpha/sqrt(r) = (alpha sqrt r)/r
  o.dropout = j.contains("lora_dropout") && j["lora_dropout"].is_number() ? j["lora_dropout"].get<double>() : 0.0;
  const json& t = j.contains("target_modules") ? j["target_modules"] : json();
  if (t.is_string()) {
    AGENTR1_CHECK(t == "all-linear", path << ": target_modules " << t
                                          << " is a pattern; expected a list of module names or \"all-linear\"");
    o.target_modules = {"all-linear"};
  } else {
    AGENTR1_CHECK(t.is_array() && !t.empty(), path << ": target_modules must be a list of module names, got " << t);
    o.target_modules.clear();
    for (const auto& m : t) {
      AGENTR1_CHECK(m.is_string(), path << ": target_modules entries must be strings, got " << m);
      o.target_modules.push_back(m.get<std::string>());
    }
  }
  o.modules_to_save = saved;
  with_context(path, [&] { o.validate("adapter_config"); });
  return o;
}

void save_lora_adapter(Transformer& model, const std::string& dir, const std::string& base_model) {
  const LoraOptions* o = model->lora();
  AGENTR1_CHECK(o != nullptr, "save_lora_adapter: the model has no LoRA adapters");
  fs::create_directories(dir);
  TensorList tensors;
  for (const auto& [name, t] : model->lora_parameters())
    tensors.emplace_back(kPeftPrefix + name + ".weight", t.detach().to(at::kCPU));
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  write_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), tensors);
  std::ofstream out((fs::path(dir) / "adapter_config.json").string());
  out << lora_adapter_config(*o, base_model).dump(2) << "\n";
  AGENTR1_CHECK(out.good(), "cannot write " << (fs::path(dir) / "adapter_config.json"));
}

void load_lora_adapter(Transformer& model, const std::string& dir) {
  with_context("loading LoRA adapter '" + dir + "'", [&] {
    const LoraOptions o = read_lora_adapter_config(dir);
    if (const LoraOptions* have = model->lora()) {
      AGENTR1_CHECK(have->rank == o.rank && have->target_list() == o.target_list() &&
                        have->modules_to_save == o.modules_to_save &&
                        std::abs(have->scaling() - o.scaling()) <= 1e-12 * o.scaling(),
                    "the adapter (r " << o.rank << ", scaling " << o.scaling() << ", targets "
                        << o.target_list().size() << ", modules_to_save [" << join(o.modules_to_save, ", ")
                        << "]) differs from the model's (r " << have->rank << ", scaling " << have->scaling()
                        << ", targets " << have->target_list().size() << ", modules_to_save ["
                        << join(have->modules_to_save, ", ") << "]"
                        << "); HINT: set actor.lora to the adapter's adapter_config.json");
    } else {
      model->add_lora(o, /*seed=*/0);
    }
    const std::string file = (fs::path(dir) / "adapter_model.safetensors").string();
    AGENTR1_CHECK(fs::exists(file), "no adapter_model.safetensors in '" << dir << "'");
    std::map<std::string, at::Tensor> found;
    for (auto& [name, t] : read_safetensors(file)) {
      std::string n = name;
      if (n.rfind(kPeftPrefix, 0) == 0) n = n.substr(std::string(kPeftPrefix).size());
      // PEFT in memory names the adapter ("lora_A.default.weight"); saved files do not.
      for (const char* ab : {".lora_A", ".lora_B"})
        for (const std::string suffix : {std::string(ab) + ".weight", std::string(ab) + ".default.weight"})
          if (ends_with(n, suffix)) n = n.substr(0, n.size() - suffix.size()) + ab;
      // A saved module: PEFT's files name it plainly (model.embed_tokens.weight); in
      // memory it is model.embed_tokens.modules_to_save.default.weight.
      for (const char* suffix : {".modules_to_save.default.weight", ".weight"})
        if (ends_with(n, suffix)) {
          n = n.substr(0, n.size() - std::string(suffix).size());
          break;
        }
      found[n] = t;
    }
    at::NoGradGuard no_grad;
    for (auto& [name, p] : model->lora_parameters()) {
      auto it = found.find(name);
      AGENTR1_CHECK(it != found.end(), file << ": missing tensor '" << kPeftPrefix << name << ".weight' (shape "
                                            << shape_str(p.sizes()) << ")");
      AGENTR1_CHECK(it->second.sizes() == p.sizes(), file << ": tensor '" << kPeftPrefix << name << ".weight' is "
                                                          << shape_str(it->second.sizes()) << ", expected "
                                                          << shape_str(p.sizes())
                                                          << " (another base model or rank?)");
      p.copy_(it->second);
      found.erase(it);
    }
    AGENTR1_CHECK(found.empty(), file << ": unexpected tensor '" << found.begin()->first
                                      << "' (not a LoRA matrix of this model's targeted projections)");
  });
}

Transformer load_model_dir(const std::string& dir, at::ScalarType dtype, at::Device device) {
  if (!fs::exists(fs::path(dir) / "adapter_config.json")) return load_pretrained(dir, dtype, device);
  std::ifstream in((fs::path(dir) / "adapter_config.json").string());
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  const std::string base = j.is_object() && j.contains("base_model_name_or_path") &&
                                   j["base_model_name_or_path"].is_string()
                               ? j["base_model_name_or_path"].get<std::string>()
                               : "";
  AGENTR1_CHECK(!base.empty() && fs::is_directory(base),
                dir << " is a LoRA adapter whose base_model_name_or_path '" << base
                    << "' is not a local model directory; HINT: agentr1 merge-lora --base DIR --adapter " << dir
                    << " --out MERGED, or fix base_model_name_or_path in adapter_config.json");
  Transformer m = load_pretrained(base, dtype, device);
  load_lora_adapter(m, dir);
  return m;
}

}  // namespace agentr1::model
