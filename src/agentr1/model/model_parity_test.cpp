// Parity of the C++ transformer with tests/ref/model_ref.py, an independent float64
// implementation of the HF Qwen2/Qwen3/Llama forward that also writes the checkpoints
// (its own safetensors writer). Tolerances:
//   fp32 weights, fp32 compute:           1e-4 (max abs log-prob diff)
//   bf16/fp16 file loaded as fp32:        1e-4 vs the reference on the same rounded weights
//   bf16 file computed in bf16:           mean abs diff <= kBf16MeanTol and max <= kBf16MaxTol
//                                         vs the reference on the same rounded weights. bf16
//                                         activations keep ~3 significant digits and these
//                                         deliberately peaky test models have log-probs down
//                                         to -30: logits of |x| in [16, 32) are rounded to
//                                         multiples of 0.125 by the bf16 lm_head alone (HF
//                                         computes it in bf16 too), so single tokens move by
//                                         up to ~0.5 and the mean by ~0.05-0.09.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/model/safetensors.h"
#include "agentr1/model/transformer.h"

namespace agentr1::model {
namespace {

namespace fs = std::filesystem;

constexpr double kFp32Tol = 1e-4;
constexpr double kBf16MeanTol = 0.15;
constexpr double kBf16MaxTol = 1.0;

std::string python_ref() { return std::string(AGENTR1_REF_DIR) + "/model_ref.py"; }

class ParityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/agentr1_model_parity_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string cmd = std::string(AGENTR1_PYTHON) + " " + python_ref() + " gen " + dir_;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(dir_ + "/manifest.json");
    manifest_ = json::parse(in);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static at::Tensor ids_of(const json& seq) {
    std::vector<int64_t> v = seq.get<std::vector<int64_t>>();
    return at::tensor(v, at::kLong).unsqueeze(0);
  }

  // Max abs diff between our log-probs (model, every manifest sequence) and `ref`.
  static double max_diff(Transformer& m, const json& ref, double* mean = nullptr) {
    at::NoGradGuard ng;
    double worst = 0, sum = 0;
    int64_t n = 0;
    const json& seqs = manifest_["sequences"];
    for (size_t i = 0; i < seqs.size(); ++i) {
      at::Tensor lp = token_logprobs(m, ids_of(seqs[i]))[0];
      std::vector<double> want = ref[i].get<std::vector<double>>();
      EXPECT_EQ(lp.size(0), static_cast<int64_t>(want.size()));
      for (size_t t = 0; t < want.size(); ++t) {
        const double d = std::abs(lp[t].item<double>() - want[t]);
        worst = std::max(worst, d);
        sum += d;
        ++n;
      }
    }
    if (mean) *mean = n ? sum / n : 0.0;
    return worst;
  }

  static json find_model(const std::string& name) {
    for (const auto& m : manifest_["models"])
      if (m["name"] == name) return m;
    ADD_FAILURE() << "no model " << name << " in manifest";
    return {};
  }

  static std::string dir_;
  static json manifest_;
};
std::string ParityTest::dir_;
json ParityTest::manifest_;

TEST_F(ParityTest, Fp32CheckpointsMatchReference) {
  int n = 0;
  for (const auto& m : manifest_["models"]) {
    if (m["file_dtype"] != "fp32") continue;
    ++n;
    // Weights are far from uniform so a wrong formula cannot hide in a flat distribution.
    EXPECT_GT(m["spread"].get<double>(), 5.0);
    Transformer model = load_pretrained(m["dir"].get<std::string>(), at::kFloat, at::kCPU);
    const double d = max_diff(model, m["logprobs"]);
    std::printf("[parity] %-18s fp32 max_abs_diff %.3e\n", m["name"].get<std::string>().c_str(), d);
    EXPECT_LE(d, kFp32Tol) << m["name"];
  }
  EXPECT_EQ(n, 6);
}

TEST_F(ParityTest, LowPrecisionFilesLoad) {
  int n = 0;
  for (const auto& m : manifest_["models"]) {
    if (m["file_dtype"] == "fp32") continue;
    ++n;
    const std::string name = m["name"].get<std::string>();
    Transformer f32 = load_pretrained(m["dir"].get<std::string>(), at::kFloat, at::kCPU);
    const double d = max_diff(f32, m["logprobs"]);
    const double d_model = max_diff(f32, m["logprobs_fp32_model"]);
    std::printf("[parity] %-18s file as fp32: max_abs_diff %.3e (vs fp32 model %.3e)\n", name.c_str(), d, d_model);
    EXPECT_LE(d, kFp32Tol) << name;
    if (m["file_dtype"] == "bf16") {  // bf16 compute (fp16 matmul is not available on CPU)
      Transformer b16 = load_pretrained(m["dir"].get<std::string>(), at::kBFloat16, at::kCPU);
      double mean = 0;
      const double db = max_diff(b16, m["logprobs"], &mean);
      std::printf("[parity] %-18s bf16 compute: max_abs_diff %.3e mean_abs_diff %.3e\n", name.c_str(), db, mean);
      EXPECT_LE(db, kBf16MaxTol) << name;
      EXPECT_LE(mean, kBf16MeanTol) << name;
    }
  }
  EXPECT_EQ(n, 4);
}

// Our writer's output is read by the Python reader (single file and sharded), whose
// forward must reproduce our scores; a perturbed score must make the check fail.
TEST_F(ParityTest, SavedModelReadByReference) {
  const json m = find_model("qwen3_untied");
  Transformer model = load_pretrained(m["dir"].get<std::string>(), at::kFloat, at::kCPU);
  struct Case {
    std::string sub;
    at::ScalarType dtype;
    int64_t shard;
  };
  for (const Case& c : {Case{"saved_fp32", at::kFloat, 0}, Case{"saved_sharded", at::kFloat, 200000},
                        Case{"saved_bf16_sharded", at::kBFloat16, 100000}}) {
    const std::string out = dir_ + "/" + c.sub;
    save_pretrained(model, out, c.dtype, c.shard);
    EXPECT_EQ(fs::exists(out + "/model.safetensors.index.json"), c.shard > 0) << c.sub;
    Transformer back = load_pretrained(out, at::kFloat, at::kCPU);
    EXPECT_EQ(back->config().torch_dtype, hf_dtype_name(c.dtype));
    // Reload equals the original (exactly for fp32; the bf16 rounding otherwise).
    auto a = model->named_parameters();
    auto b = back->named_parameters();
    ASSERT_EQ(a.size(), b.size());
    for (const auto& p : a) {
      const at::Tensor& q = *b.find(p.key());
      EXPECT_TRUE(q.equal(p.value().to(c.dtype).to(at::kFloat))) << c.sub << " " << p.key();
    }
    // Our scores of the reloaded model, checked by the Python reader + forward.
    json scores;
    scores["sequences"] = manifest_["sequences"];
    scores["logprobs"] = json::array();
    {
      at::NoGradGuard ng;
      for (const auto& s : manifest_["sequences"]) {
        at::Tensor lp = token_logprobs(back, ids_of(s))[0];
        scores["logprobs"].push_back(std::vector<double>(lp.data_ptr<float>(), lp.data_ptr<float>() + lp.size(0)));
      }
    }
    const std::string sp = out + "/scores.json";
    std::ofstream(sp) << scores.dump();
    const std::string cmd = std::string(AGENTR1_PYTHON) + " " + python_ref() + " check " + out + " " + sp + " 1e-4";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    if (c.sub == "saved_fp32") {
      scores["logprobs"][2][5] = scores["logprobs"][2][5].get<double>() + 1e-2;
      std::ofstream(sp) << scores.dump();
      EXPECT_NE(std::system(cmd.c_str()), 0) << "the Python check must reject a perturbed score";
    }
  }
}

}  // namespace
}  // namespace agentr1::model
