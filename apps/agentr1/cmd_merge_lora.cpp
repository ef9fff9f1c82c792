// agentr1 merge-lora — a LoRA adapter folded into its base: a plain HF model.
//
//   agentr1 merge-lora --base models/q06 --adapter runs/x/checkpoints/step_000030 --out models/q06-agent
//
// Reads the base (config.json + safetensors) and the adapter in PEFT's format
// (adapter_config.json + adapter_model.safetensors: ours, or PEFT's), writes --out with
// every adapted weight W + (lora_alpha / r) B A in --dtype (default: the base's
// torch_dtype), config.json, and the tokenizer files of the adapter directory (else the
// base's). Prints one JSON line {"out", "adapted_weights", "rank", "alpha"} on stdout.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/model/transformer.h"
#include "command.h"

namespace {

namespace fs = std::filesystem;

struct MergeLoraOpts {
  std::string base;     // base model directory
  std::string adapter;  // PEFT adapter directory
  std::string out;      // output model directory
  std::string dtype;    // "" = the base's torch_dtype
  bool overwrite = false;
};

int run_merge_lora(const MergeLoraOpts& o) {
  using namespace agentr1;
  AGENTR1_CHECK(o.overwrite || !fs::exists(fs::path(o.out) / "model.safetensors"),
                "--out '" << o.out << "' already holds a model; HINT: --overwrite, or another --out");
  AGENTR1_CHECK(fs::absolute(o.out).lexically_normal() != fs::absolute(o.base).lexically_normal(),
                "--out is the base directory '" << o.base << "'; write the merged model elsewhere");
  const model::ModelConfig base_cfg = model::ModelConfig::load((fs::path(o.base) / "config.json").string());
  const at::ScalarType dtype = model::parse_dtype(o.dtype.empty() ? base_cfg.torch_dtype : o.dtype);
  // The merge is computed in fp32 whatever the storage dtype (save_pretrained adds B A in fp32).
  model::Transformer m = with_context("loading the base model '" + o.base + "'",
                                      [&] { return model::load_pretrained(o.base, at::kFloat, at::kCPU); });
  model::load_lora_adapter(m, o.adapter);
  const model::LoraOptions lo = *m->lora();
  model::save_pretrained(m, o.out, dtype);
  // The tokenizer travels with the model: the adapter directory's (a checkpoint's), else the base's.
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    fs::path src = fs::path(o.adapter) / f;
    if (!fs::exists(src)) src = fs::path(o.base) / f;
    if (!fs::exists(src)) continue;
    std::error_code ec;
    fs::copy_file(src, fs::path(o.out) / f, fs::copy_options::overwrite_existing, ec);
    AGENTR1_CHECK(!ec, "copying " << src << " to " << o.out << ": " << ec.message());
  }
  json r;
  r["out"] = o.out;
  int64_t adapted = 0;
  for (const auto& [name, t] : m->lora_parameters())
    adapted += name.size() > 7 && name.compare(name.size() - 7, 7, ".lora_A") == 0 ? 1 : 0;
  r["adapted_weights"] = adapted;
  r["rank"] = lo.rank;
  r["alpha"] = lo.alpha;
  std::cout << r.dump() << std::endl;
  return 0;
}

agentr1::cli::Registrar reg("merge-lora", "Fold a LoRA adapter (PEFT format) into its base: a plain HF model",
                            [](CLI::App& app) {
  auto o = std::make_shared<MergeLoraOpts>();
  app.add_option("--base", o->base, "base model directory (config.json + safetensors)")->required();
  app.add_option("--adapter", o->adapter, "adapter directory (adapter_config.json + adapter_model.safetensors)")
      ->required();
  app.add_option("--out", o->out, "output model directory")->required();
  app.add_option("--dtype", o->dtype, "fp32 | bf16 | fp16 (default: the base's torch_dtype)");
  app.add_flag("--overwrite", o->overwrite, "replace a model already in --out");
  return [o]() { return run_merge_lora(*o); };
});

}  // namespace
