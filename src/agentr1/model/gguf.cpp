// GGUF export: the file format (metadata encoding, tensor infos, alignment), the
// HF -> llama.cpp tensor mapping and the f16/bf16/q8_0 conversions. Layout and names:
// see gguf.h; the tokenizer's part: gguf_vocab.cpp.
#include "agentr1/model/gguf.h"

#include <fcntl.h>
#include <unistd.h>

#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <utility>

#include <ATen/ATen.h>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/model/config.h"
#include "agentr1/model/gguf_vocab.h"
#include "agentr1/model/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF export writes the host's bytes and assumes a little-endian host"
#endif

namespace agentr1::model {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kGgufVersion = 3;
constexpr uint64_t kAlignment = 32;      // general.alignment
constexpr uint32_t kQuantVersion = 2;    // general.quantization_version (ggml's GGML_QNT_VERSION)
constexpr int64_t kQ8Block = 32;         // values per q8_0 block
constexpr int64_t kQ8BlockBytes = 2 + kQ8Block;  // fp16 scale + 32 int8

// GGUF metadata value types (the spec's enum gguf_type).
enum class ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// The ggml tensor types written here (enum ggml_type).
enum class GgmlType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };

// general.file_type (enum llama_ftype): what most weights are.
uint32_t file_type(GgufDtype d) {
  switch (d) {
    case GgufDtype::kF32: return 0;
    case GgufDtype::kF16: return 1;
    case GgufDtype::kQ8_0: return 7;
    case GgufDtype::kBF16: return 32;
  }
  return 0;
}

GgmlType weight_type(GgufDtype d) {
  switch (d) {
    case GgufDtype::kF32: return GgmlType::kF32;
    case GgufDtype::kF16: return GgmlType::kF16;
    case GgufDtype::kBF16: return GgmlType::kBF16;
    case GgufDtype::kQ8_0: return GgmlType::kQ8_0;
  }
  return GgmlType::kF32;
}

bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

uint64_t padded(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// Little-endian encoder of GGUF's primitive values.
class Bytes {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    data_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    data_ += s;
  }
  const std::string& data() const { return data_; }

 private:
  std::string data_;
};

// The metadata section: typed key/value pairs in insertion order.
class Metadata {
 public:
  void u32(const std::string& k, int64_t v) {
    AGENTR1_CHECK(v >= 0 && v <= int64_t{UINT32_MAX}, "GGUF key " << k << ": " << v << " does not fit a uint32");
    key(k, ValueType::kU32);
    b_.put<uint32_t>(static_cast<uint32_t>(v));
  }
  void f32(const std::string& k, double v) {
    key(k, ValueType::kF32);
    b_.put<float>(static_cast<float>(v));
  }
  void boolean(const std::string& k, bool v) {
    key(k, ValueType::kBool);
    b_.put<uint8_t>(v ? 1 : 0);
  }
  void str(const std::string& k, const std::string& v) {
    key(k, ValueType::kString);
    b_.str(v);
  }
  void str_array(const std::string& k, const std::vector<std::string>& v) {
    key(k, ValueType::kArray);
    b_.put<uint32_t>(static_cast<uint32_t>(ValueType::kString));
    b_.put<uint64_t>(v.size());
    for (const auto& s : v) b_.str(s);
  }
  void i32_array(const std::string& k, const std::vector<int32_t>& v) {
    key(k, ValueType::kArray);
    b_.put<uint32_t>(static_cast<uint32_t>(ValueType::kI32));
    b_.put<uint64_t>(v.size());
    for (int32_t x : v) b_.put<int32_t>(x);
  }
  int64_t count() const { return static_cast<int64_t>(keys_.size()); }
  const std::string& bytes() const { return b_.data(); }

 private:
  void key(const std::string& k, ValueType t) {
    AGENTR1_CHECK(keys_.insert(k).second, "GGUF key " << k << " written twice");
    b_.str(k);
    b_.put<uint32_t>(static_cast<uint32_t>(t));
  }
  std::set<std::string> keys_;
  Bytes b_;
};

// ------------------------------------------------------------------ tensors

struct TensorPlan {
  std::string name;       // GGUF name
  std::string source;     // HF name
  at::Tensor data;        // as read, PyTorch layout
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;    // from the start of the data section
  uint64_t nbytes = 0;
};

uint64_t type_bytes(GgmlType t, int64_t numel) {
  switch (t) {
    case GgmlType::kF32: return 4 * static_cast<uint64_t>(numel);
    case GgmlType::kF16:
    case GgmlType::kBF16: return 2 * static_cast<uint64_t>(numel);
    case GgmlType::kQ8_0: return static_cast<uint64_t>(numel / kQ8Block * kQ8BlockBytes);
  }
  return 0;
}

std::string shape_str(at::IntArrayRef s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// llama.cpp's LLAMA rope rotates adjacent pairs (x[2i], x[2i+1]); HF's Llama rotates
// halves (x[i], x[i + d/2]). Reordering each head's rows so that HF row j*d/2 + i lands
// on row 2i + j makes the two agree (the converter's LlamaModel.permute).
//   w: [n_head * d, ...] -> same shape
at::Tensor rope_pairs(const at::Tensor& w, int64_t n_head) {
  std::vector<int64_t> split = {n_head, 2, w.size(0) / n_head / 2};
  for (int64_t i = 1; i < w.dim(); ++i) split.push_back(w.size(i));
  return w.reshape(split).transpose(1, 2).reshape(w.sizes()).contiguous();
}

// The GGUF bytes of one tensor (row-major, PyTorch layout = ggml's with dims reversed).
std::string tensor_bytes(const at::Tensor& t, GgmlType type) {
  const at::Tensor f = t.to(at::kFloat).contiguous();
  at::Tensor out;
  switch (type) {
    case GgmlType::kF32: out = f; break;
    case GgmlType::kF16: out = f.to(at::kHalf); break;        // round to nearest even
    case GgmlType::kBF16: out = f.to(at::kBFloat16); break;   // round to nearest even
    case GgmlType::kQ8_0: return quantize_q8_0(f.data_ptr<float>(), f.numel());
  }
  return std::string(static_cast<const char*>(out.data_ptr()), out.nbytes());
}

// A new file beside the target (its name unique, created with O_EXCL and the default
// permissions, 0666 less the umask), removed unless released: a failed export leaves
// nothing behind.
class TempFile {
 public:
  explicit TempFile(const std::string& target) {
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      char suffix[32];
      std::snprintf(suffix, sizeof(suffix), ".tmp-%d-%08x", static_cast<int>(::getpid()), rd());
      const std::string p = target + suffix;
      const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
      if (fd >= 0) {
        ::close(fd);
        path_ = p;
        return;
      }
      AGENTR1_CHECK(errno == EEXIST, "cannot create " << p << ": " << std::strerror(errno));
    }
    throw Error("cannot create a temporary file beside " + target);
  }
  ~TempFile() {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

void write_all(std::ofstream& out, const std::string& bytes, const std::string& path) {
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  AGENTR1_CHECK(out.good(), "error writing " << path << " (disk full?)");
}

void write_padding(std::ofstream& out, uint64_t written, const std::string& path) {
  const uint64_t pad = padded(written) - written;
  if (pad) write_all(out, std::string(pad, '\0'), path);
}

}  // namespace

GgufDtype gguf_dtype_from_string(const std::string& name) {
  if (name == "f32") return GgufDtype::kF32;
  if (name == "f16") return GgufDtype::kF16;
  if (name == "bf16") return GgufDtype::kBF16;
  if (name == "q8_0") return GgufDtype::kQ8_0;
  throw Error("unknown GGUF dtype '" + name + "': expected f32, f16, bf16 or q8_0");
}

const char* gguf_dtype_name(GgufDtype d) {
  switch (d) {
    case GgufDtype::kF32: return "f32";
    case GgufDtype::kF16: return "f16";
    case GgufDtype::kBF16: return "bf16";
    case GgufDtype::kQ8_0: return "q8_0";
  }
  return "?";
}

std::string quantize_q8_0(const float* x, int64_t n) {
  AGENTR1_CHECK(n % kQ8Block == 0, "q8_0 needs a multiple of " << kQ8Block << " values, got " << n);
  std::string out(static_cast<size_t>(n / kQ8Block * kQ8BlockBytes), '\0');
  char* o = out.data();
  for (int64_t b = 0; b < n / kQ8Block; ++b, x += kQ8Block, o += kQ8BlockBytes) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t d16 = c10::Half(d).x;  // fp32 -> fp16, round to nearest even
    std::memcpy(o, &d16, 2);
    for (int64_t j = 0; j < kQ8Block; ++j) o[2 + j] = static_cast<char>(static_cast<int8_t>(std::round(x[j] * id)));
  }
  return out;
}

GgufExportSummary export_gguf(const std::string& model_dir, const std::string& out_path,
                              const GgufExportOptions& o) {
  const fs::path dir(model_dir);
  AGENTR1_CHECK(fs::is_directory(dir), "model directory '" << model_dir << "' does not exist");
  AGENTR1_CHECK(!fs::is_directory(out_path), "output '" << out_path << "' is a directory; give a file name such as "
                                                         << (fs::path(out_path) / "model.gguf").string());
  AGENTR1_CHECK(o.overwrite || !fs::exists(out_path),
                "output '" << out_path << "' already exists; HINT: --overwrite to replace it, or another path");
  const fs::path parent = fs::absolute(out_path).parent_path();
  AGENTR1_CHECK(fs::is_directory(parent), "the directory of output '" << out_path << "' (" << parent.string()
                                                                       << ") does not exist; create it first");

  const ModelConfig cfg = ModelConfig::load((dir / "config.json").string());
  const std::string arch = arch_name(cfg.arch);
  // The tokenizer first: its errors (a missing tokenizer.json) come before reading weights.
  const GgufVocab vocab = read_gguf_vocab(model_dir, cfg.vocab_size, cfg.arch);

  // ---- tensors: the expected set, in a fixed order, mapped and checked
  std::map<std::string, at::Tensor> found;
  for (auto& [name, t] : read_safetensors_dir(model_dir)) {
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;  // HF buffer, not a weight
    found[name] = t;
  }
  const int64_t H = cfg.hidden_size, hd = cfg.head_dim, q_rows = cfg.num_attention_heads * hd,
                kv_rows = cfg.num_key_value_heads * hd;
  std::vector<TensorPlan> plan;
  auto take = [&](const std::string& source, const std::string& name, std::vector<int64_t> shape) {
    auto it = found.find(source);
    AGENTR1_CHECK(it != found.end(), model_dir << ": missing tensor '" << source << "' (expected shape "
                                               << shape_str(shape) << " for " << arch
                                               << "); the checkpoint does not match config.json");
    AGENTR1_CHECK(it->second.sizes() == at::IntArrayRef(shape),
                  model_dir << ": tensor '" << source << "': expected " << shape_str(shape) << ", found "
                            << shape_str(it->second.sizes()) << " (check config.json sizes)");
    AGENTR1_CHECK(at::isFloatingType(it->second.scalar_type()),
                  model_dir << ": tensor '" << source << "' has non-float dtype " << it->second.scalar_type());
    plan.push_back({name, source, it->second});
    found.erase(it);
  };
  take("model.embed_tokens.weight", "token_embd.weight", {cfg.vocab_size, H});
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const std::string src = "model.layers." + std::to_string(l) + ".", blk = "blk." + std::to_string(l) + ".";
    take(src + "input_layernorm.weight", blk + "attn_norm.weight", {H});
    take(src + "self_attn.q_proj.weight", blk + "attn_q.weight", {q_rows, H});
    take(src + "self_attn.k_proj.weight", blk + "attn_k.weight", {kv_rows, H});
    take(src + "self_attn.v_proj.weight", blk + "attn_v.weight", {kv_rows, H});
    if (cfg.attention_bias) {
      take(src + "self_attn.q_proj.bias", blk + "attn_q.bias", {q_rows});
      take(src + "self_attn.k_proj.bias", blk + "attn_k.bias", {kv_rows});
      take(src + "self_attn.v_proj.bias", blk + "attn_v.bias", {kv_rows});
    }
    take(src + "self_attn.o_proj.weight", blk + "attn_output.weight", {H, q_rows});
    if (cfg.qk_norm) {
      take(src + "self_attn.q_norm.weight", blk + "attn_q_norm.weight", {hd});
      take(src + "self_attn.k_norm.weight", blk + "attn_k_norm.weight", {hd});
    }
    take(src + "post_attention_layernorm.weight", blk + "ffn_norm.weight", {H});
    take(src + "mlp.gate_proj.weight", blk + "ffn_gate.weight", {cfg.intermediate_size, H});
    take(src + "mlp.up_proj.weight", blk + "ffn_up.weight", {cfg.intermediate_size, H});
    take(src + "mlp.down_proj.weight", blk + "ffn_down.weight", {H, cfg.intermediate_size});
  }
  take("model.norm.weight", "output_norm.weight", {H});
  if (!cfg.tie_word_embeddings) {
    take("lm_head.weight", "output.weight", {cfg.vocab_size, H});
  } else if (auto it = found.find("lm_head.weight"); it != found.end()) {
    // A tied head stored anyway: llama.cpp reuses token_embd when output is absent.
    const at::Tensor& emb = plan.front().data;
    AGENTR1_CHECK(it->second.sizes() == emb.sizes() && it->second.to(emb.scalar_type()).equal(emb),
                  model_dir << ": config.json says tie_word_embeddings=true but tensor 'lm_head.weight' differs "
                               "from model.embed_tokens.weight; set tie_word_embeddings to false");
    found.erase(it);
  }
  AGENTR1_CHECK(found.empty(), model_dir << ": unexpected tensor '" << found.begin()->first << "' (shape "
                                         << shape_str(found.begin()->second.sizes()) << ") not used by a " << arch
                                         << " model with this config.json");

  GgufExportSummary summary;
  summary.arch = arch;
  const GgmlType wtype = weight_type(o.dtype);
  uint64_t offset = 0;
  for (TensorPlan& t : plan) {
    if (cfg.arch == Arch::kLlama) {
      const bool q = ends_with(t.name, "attn_q.weight") || ends_with(t.name, "attn_q.bias");
      const bool k = ends_with(t.name, "attn_k.weight") || ends_with(t.name, "attn_k.bias");
      if (q) t.data = rope_pairs(t.data, cfg.num_attention_heads);
      if (k) t.data = rope_pairs(t.data, cfg.num_key_value_heads);
    }
    // Norms and every 1-D tensor stay f32 (llama.cpp's kernels expect them so).
    t.type = t.data.dim() <= 1 || ends_with(t.name, "_norm.weight") ? GgmlType::kF32 : wtype;
    if (t.type == GgmlType::kQ8_0 && t.data.size(-1) % kQ8Block != 0) {
      AGENTR1_LOG(WARN) << "GGUF export: '" << t.name << "' has rows of " << t.data.size(-1)
                        << " values, not a multiple of " << kQ8Block << "; written f16 instead of q8_0";
      summary.f16_fallback.push_back(t.name);
      t.type = GgmlType::kF16;
    }
    t.offset = offset;
    t.nbytes = type_bytes(t.type, t.data.numel());
    offset += padded(t.nbytes);
  }

  // ---- metadata
  fs::path dir_name = fs::absolute(dir).lexically_normal();
  if (!dir_name.has_filename()) dir_name = dir_name.parent_path();  // "models/agent/"
  Metadata kv;
  kv.str("general.architecture", arch);
  kv.str("general.type", "model");
  kv.str("general.name", o.name.empty() ? dir_name.filename().string() : o.name);
  kv.u32("general.alignment", kAlignment);
  kv.u32("general.file_type", file_type(o.dtype));
  kv.u32("general.quantization_version", kQuantVersion);
  kv.u32(arch + ".vocab_size", cfg.vocab_size);
  kv.u32(arch + ".context_length", cfg.max_position_embeddings);
  kv.u32(arch + ".embedding_length", cfg.hidden_size);
  kv.u32(arch + ".block_count", cfg.num_hidden_layers);
  kv.u32(arch + ".feed_forward_length", cfg.intermediate_size);
  kv.u32(arch + ".attention.head_count", cfg.num_attention_heads);
  kv.u32(arch + ".attention.head_count_kv", cfg.num_key_value_heads);
  if (cfg.arch != Arch::kQwen2) {  // configs that state head_dim (qwen2's is hidden / heads)
    kv.u32(arch + ".attention.key_length", cfg.head_dim);
    kv.u32(arch + ".attention.value_length", cfg.head_dim);
  }
  if (cfg.arch == Arch::kLlama) kv.u32(arch + ".rope.dimension_count", cfg.head_dim);
  kv.f32(arch + ".rope.freq_base", cfg.rope_theta);
  kv.f32(arch + ".attention.layer_norm_rms_epsilon", cfg.rms_norm_eps);
  kv.str("tokenizer.ggml.model", "gpt2");
  kv.str("tokenizer.ggml.pre", vocab.pre);
  kv.str_array("tokenizer.ggml.tokens", vocab.tokens);
  kv.i32_array("tokenizer.ggml.token_type", vocab.types);
  kv.str_array("tokenizer.ggml.merges", vocab.merges);
  for (const auto& [key, id] : vocab.special_ids) kv.u32(key, id);
  for (const auto& [key, value] : vocab.add_flags) kv.boolean(key, value);
  if (vocab.add_space_prefix) kv.boolean("tokenizer.ggml.add_space_prefix", *vocab.add_space_prefix);
  if (!vocab.chat_template.empty()) kv.str("tokenizer.chat_template", vocab.chat_template);
  if (!vocab.named_templates.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, text] : vocab.named_templates) {
      kv.str("tokenizer.chat_template." + name, text);
      names.push_back(name);
    }
    kv.str_array("tokenizer.chat_templates", names);
  }

  // ---- header + tensor infos
  Bytes head;
  head.put<uint32_t>(0x46554747u);  // "GGUF" read as a little-endian u32
  head.put<uint32_t>(kGgufVersion);
  head.put<uint64_t>(plan.size());
  head.put<uint64_t>(static_cast<uint64_t>(kv.count()));
  std::string header = head.data() + kv.bytes();
  Bytes infos;
  for (const TensorPlan& t : plan) {
    infos.str(t.name);
    infos.put<uint32_t>(static_cast<uint32_t>(t.data.dim()));
    for (int64_t d = t.data.dim() - 1; d >= 0; --d) infos.put<uint64_t>(static_cast<uint64_t>(t.data.size(d)));
    infos.put<uint32_t>(static_cast<uint32_t>(t.type));
    infos.put<uint64_t>(t.offset);
  }
  header += infos.data();

  // ---- write: temp file, then rename onto the target
  TempFile tmp(out_path);
  {
    std::ofstream out(tmp.path(), std::ios::binary | std::ios::trunc);
    AGENTR1_CHECK(out.good(), "cannot write " << tmp.path());
    write_all(out, header, tmp.path());
    write_padding(out, header.size(), tmp.path());
    for (const TensorPlan& t : plan) {
      const std::string bytes = with_context("tensor '" + t.source + "'", [&] { return tensor_bytes(t.data, t.type); });
      AGENTR1_CHECK(bytes.size() == t.nbytes, "tensor '" << t.name << "': " << bytes.size() << " bytes, planned "
                                                        << t.nbytes);
      write_all(out, bytes, tmp.path());
      write_padding(out, bytes.size(), tmp.path());
    }
    out.close();
    AGENTR1_CHECK(!out.fail(), "error closing " << tmp.path() << " (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp.path(), out_path, ec);
  AGENTR1_CHECK(!ec, "renaming " << tmp.path() << " to " << out_path << ": " << ec.message());
  tmp.release();

  summary.tokenizer_pre = vocab.pre;
  summary.tensors = static_cast<int64_t>(plan.size());
  summary.metadata_keys = kv.count();
  summary.vocab_size = cfg.vocab_size;
  summary.file_bytes = static_cast<int64_t>(fs::file_size(out_path));
  return summary;
}

}  // namespace agentr1::model
