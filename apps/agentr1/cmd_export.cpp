// agentr1 export — a model directory as a file other runtimes load.
//
//   agentr1 export --gguf agent-q8_0.gguf --model models/agent --dtype q8_0
//   ollama create agent -f Modelfile        # Modelfile: FROM ./agent-q8_0.gguf
//   llama-cli -m agent-q8_0.gguf
//
// --model is a HuggingFace-layout directory (config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json): init-model's, a checkpoint of sft/train, a
// merge-lora output. The GGUF file holds the weights (--dtype for 2-D weights; norms
// and biases stay f32), the hyperparameters, the tokenizer and the chat template
// (model/gguf.h). Prints one JSON line {"out", "arch", "dtype", "tensors",
// "metadata_keys", "vocab_size", "tokenizer_pre", "bytes", "f16_fallback"} on stdout.
#include <iostream>
#include <memory>
#include <string>

#include "agentr1/core/json.h"
#include "agentr1/core/log.h"
#include "agentr1/model/gguf.h"
#include "command.h"

namespace {

struct ExportOpts {
  std::string gguf;           // output .gguf file
  std::string model_dir;      // HF-layout model directory
  std::string dtype = "f16";  // 2-D weights: f32 | f16 | bf16 | q8_0
  std::string name;           // general.name ("" = the model directory's name)
  bool overwrite = false;     // replace an existing --gguf file
};

int run_export(const ExportOpts& o) {
  namespace m = agentr1::model;
  m::GgufExportOptions eo;
  eo.dtype = m::gguf_dtype_from_string(o.dtype);
  eo.name = o.name;
  eo.overwrite = o.overwrite;
  const m::GgufExportSummary s = m::export_gguf(o.model_dir, o.gguf, eo);
  AGENTR1_LOG(INFO) << "wrote " << o.gguf << ": " << s.arch << ", " << s.tensors << " tensors (" << o.dtype << "), "
                    << s.vocab_size << " tokens (pre-tokenizer " << s.tokenizer_pre << "), " << s.file_bytes
                    << " bytes";
  agentr1::json r;
  r["out"] = o.gguf;
  r["arch"] = s.arch;
  r["dtype"] = o.dtype;
  r["tensors"] = s.tensors;
  r["metadata_keys"] = s.metadata_keys;
  r["vocab_size"] = s.vocab_size;
  r["tokenizer_pre"] = s.tokenizer_pre;
  r["bytes"] = s.file_bytes;
  r["f16_fallback"] = s.f16_fallback;
  std::cout << r.dump() << std::endl;
  return 0;
}

agentr1::cli::Registrar reg("export", "Write a model directory as a GGUF file (llama.cpp, Ollama, LM Studio)",
                            [](CLI::App& app) {
  auto o = std::make_shared<ExportOpts>();
  app.add_option("--gguf", o->gguf, "Output GGUF file")->required();
  app.add_option("--model", o->model_dir,
                 "Model directory (config.json, model.safetensors, tokenizer.json, tokenizer_config.json)")
      ->required();
  app.add_option("--dtype", o->dtype, "Type of the 2-D weights: f32 | f16 | bf16 | q8_0 (norms and biases stay f32)")
      ->capture_default_str();
  app.add_option("--name", o->name, "general.name in the file (default: the model directory's name)");
  app.add_flag("--overwrite", o->overwrite, "Replace an existing --gguf file");
  return [o]() -> int { return run_export(*o); };
});

}  // namespace
