// agentr1/model/gguf.h — a HuggingFace model directory written as one GGUF file, the
// format llama.cpp, Ollama and LM Studio load.
//
//   GgufExportOptions o;
//   o.dtype = gguf_dtype_from_string("q8_0");
//   GgufExportSummary s = export_gguf("models/agent", "agent-q8_0.gguf", o);
//
// Input: config.json (qwen2 | qwen3 | llama), model.safetensors (or the sharded index),
// tokenizer.json and tokenizer_config.json -- what `agentr1 init-model`, `sft`,
// `train` checkpoints and `merge-lora` write. Output: GGUF version 3, little-endian:
//
//   "GGUF" u32 version=3 | u64 tensor count | u64 metadata count
//   metadata:     key (u64 length + bytes), u32 value type, value
//                 (strings: u64 length + bytes; arrays: u32 element type, u64 count, elements)
//   tensor infos: name, u32 n_dims, u64 dims in ggml order (PyTorch's reversed),
//                 u32 ggml type, u64 offset from the start of the data section
//   zero padding to general.alignment (32), then each tensor's data, each padded to 32
//
// What goes in, the way llama.cpp's convert_hf_to_gguf.py writes these architectures
// (the reader is llama.cpp; the test reads the file back with an independent parser
// and runs it in llama.cpp):
//   tensors  token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
//            attn_q_norm, attn_k_norm (qwen3), ffn_norm, ffn_gate, ffn_up, ffn_down},
//            output_norm, output (absent when the embeddings are tied); qwen2's q/k/v
//            biases. llama's q/k rows are permuted per head from HF's rotate-half
//            layout to the interleaved pairs of llama.cpp's LLAMA rope (qwen2/qwen3
//            use the NEOX rope, which is HF's layout, and are written as they are).
//   types    dtype for 2-D weights; norms and other 1-D tensors stay f32. q8_0: blocks
//            of 32 along a row, an fp16 scale d = max|x| / 127 then 32 int8 round(x / d);
//            a weight whose rows are not a multiple of 32 long is written f16 instead
//            (the converter's fallback), listed in the summary.
//   metadata general.*, <arch>.* hyperparameters, and the tokenizer as a gpt2-style BPE:
//            tokens padded to config.json's vocab_size with "[PADn]" (type unused),
//            token types (normal, control for special added tokens, user-defined for
//            other added ones), merges as "a b", special token ids, add_bos/eos, the
//            chat template (gguf_vocab.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace agentr1::model {

// The type 2-D weights are stored in.
enum class GgufDtype { kF32, kF16, kBF16, kQ8_0 };

// "f32" | "f16" | "bf16" | "q8_0"; throws Error naming the value and the valid names.
GgufDtype gguf_dtype_from_string(const std::string& name);
const char* gguf_dtype_name(GgufDtype d);

struct GgufExportOptions {
  GgufDtype dtype = GgufDtype::kF16;  // 2-D weights' type; norms and biases stay f32
  std::string name;                   // general.name; "" = the model directory's name
  bool overwrite = false;             // replace an existing output file
};

struct GgufExportSummary {
  std::string arch;                        // general.architecture
  std::string tokenizer_pre;               // tokenizer.ggml.pre
  int64_t tensors = 0;                     // tensor infos written
  int64_t metadata_keys = 0;               // metadata entries written
  int64_t vocab_size = 0;                  // tokens written (config.json's vocab_size)
  int64_t file_bytes = 0;                  // size of the written file
  std::vector<std::string> f16_fallback;   // q8_0 asked, rows not a multiple of 32: written f16
};

// Writes the model directory model_dir as the GGUF file out_path: into a temporary
// file beside it, renamed onto out_path once complete (a failed export leaves no
// partial file). Reads every tensor into memory (one copy of the checkpoint).
// Throws Error naming the file, the value and the fix: out_path exists (without
// overwrite) or its directory does not; config.json invalid or its architecture not
// qwen2/qwen3/llama; a tensor missing, unexpected or of the wrong shape; no
// tokenizer.json, a tokenizer that is not byte-level BPE, a pre-tokenizer llama.cpp
// does not know by name, a token id at or beyond vocab_size.
GgufExportSummary export_gguf(const std::string& model_dir, const std::string& out_path,
                              const GgufExportOptions& options = {});

// ggml's q8_0 of n floats (n a multiple of 32): per block of 32, 2 bytes of fp16 d =
// max|x| / 127, then 32 int8 round-half-away(x / d) computed with the fp32 d (as
// ggml's reference quantize_row_q8_0). Returns n / 32 * 34 bytes.
std::string quantize_q8_0(const float* x, int64_t n);

}  // namespace agentr1::model
