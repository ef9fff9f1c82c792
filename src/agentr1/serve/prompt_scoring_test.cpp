// /v1/completions prompt_logprobs through an in-process server over a tiny model: every
// entry against log_softmax(logits / T) of the model's full forward written here, the
// vLLM shape (first null, the actual token present, k or k + 1 entries, ranks), and the
// 400s for bad values.
#include "agentr1/serve/prompt_scoring.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include "agentr1/serve/test_server.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::serve {
namespace {

const std::string& model_dir() {
  static const std::string d = train::testing::make_tiny_model_dir("serve_scoring") + "/model";
  return d;
}

json post(const std::string& url, const json& body, int* status) {
  httplib::Client cli(url);
  cli.set_read_timeout(std::chrono::seconds(60));
  const httplib::Result r = cli.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(static_cast<bool>(r)) << url;
  if (!r) return json();
  *status = r->status;
  return json::parse(r->body);
}

TokenIds prompt(int from, int n, int64_t vocab) {
  TokenIds t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<TokenId>((from + 13 * i) % (vocab - 10) + 5));
  return t;
}

// Log-probs [n,V] of the model's full forward at temperature T (the reference).
at::Tensor reference(model::Transformer& m, const TokenIds& ids, double T) {
  at::NoGradGuard ng;
  const int64_t n = static_cast<int64_t>(ids.size());
  const std::vector<int64_t> v(ids.begin(), ids.end());
  const at::Tensor in = at::tensor(v, at::kLong).view({1, n});
  return at::log_softmax(m->forward(in, at::arange(n, at::kLong).view({1, n}))[0].to(at::kFloat) / T, -1);
}

// Tolerance 1e-5: the server's forward (hidden states of [1,n], then [c,H] x [H,V] for
// the logits) and the reference's (forward of [1,n]) run the same fp32 weights through
// products of other shapes, whose rounding may differ by a few ulps; log-probs here are
// about -5 (ulp 5e-7).
constexpr double kTol = 1e-5;

TEST(PromptLogprobs, MatchTheFullForwardInVllmsShape) {
  testing::InProcessServer s(model_dir());
  const int64_t vocab = s.model()->config().vocab_size;
  const std::vector<TokenIds> prompts = {prompt(3, 12, vocab), prompt(40, 7, vocab)};
  const int k = 4;
  for (const double T : {0.7, 1.0}) {
    int status = 0;
    const json r = post(s.url(), json{{"prompt", prompts}, {"max_tokens", 1}, {"temperature", T},
                                      {"prompt_logprobs", k}}, &status);
    ASSERT_EQ(status, 200) << r.dump();
    ASSERT_EQ(r["choices"].size(), prompts.size());
    double max_diff = 0;
    for (size_t p = 0; p < prompts.size(); ++p) {
      const TokenIds& ids = prompts[p];
      const json& pl = r["choices"][p]["prompt_logprobs"];
      ASSERT_EQ(pl.size(), ids.size());
      EXPECT_TRUE(pl[0].is_null());
      const at::Tensor ref = reference(s.model(), ids, T);
      for (size_t t = 1; t < ids.size(); ++t) {
        const json& e = pl[t];
        const at::Tensor row = ref[static_cast<int64_t>(t) - 1];  // predicts token t
        const std::string key = std::to_string(ids[t]);
        ASSERT_TRUE(e.contains(key)) << "position " << t << ": " << e.dump();
        const float want = row[ids[t]].item<float>();
        const double got = e[key]["logprob"].get<double>();
        EXPECT_NEAR(got, want, kTol) << "position " << t;
        max_diff = std::max(max_diff, std::abs(got - want));
        EXPECT_EQ(e[key]["rank"].get<int64_t>(), (row > want).sum().item<int64_t>() + 1) << "position " << t;
        const auto [tv, ti] = row.topk(k);
        bool actual_in_top = false;
        for (int j = 0; j < k; ++j) {
          const std::string id = std::to_string(ti[j].item<int64_t>());
          actual_in_top = actual_in_top || id == key;
          ASSERT_TRUE(e.contains(id)) << "position " << t << " top " << j << ": " << e.dump();
          EXPECT_NEAR(e[id]["logprob"].get<double>(), tv[j].item<float>(), kTol);
          if (id != key) EXPECT_EQ(e[id]["rank"].get<int>(), j + 1);
          EXPECT_TRUE(e[id]["decoded_token"].is_string());
        }
        EXPECT_EQ(e.size(), actual_in_top ? static_cast<size_t>(k) : static_cast<size_t>(k + 1)) << e.dump();
      }
    }
    std::printf("prompt_logprobs at T=%.1f: max |server - full forward| = %.3g\n", T, max_diff);
  }
  // k = 0: the actual token only; max_tokens 0: nothing generated.
  int status = 0;
  const json r = post(s.url(), json{{"prompt", prompts[1]}, {"max_tokens", 0}, {"prompt_logprobs", 0}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& c = r["choices"][0];
  EXPECT_EQ(c["text"], "");
  EXPECT_EQ(c["finish_reason"], "length");
  const at::Tensor ref = reference(s.model(), prompts[1], 1.0);
  for (size_t t = 1; t < prompts[1].size(); ++t) {
    ASSERT_EQ(c["prompt_logprobs"][t].size(), 1u);
    EXPECT_NEAR(c["prompt_logprobs"][t][std::to_string(prompts[1][t])]["logprob"].get<double>(),
                ref[static_cast<int64_t>(t) - 1][prompts[1][t]].item<float>(), kTol);
  }
}

TEST(PromptLogprobs, BadValuesAre400sNamingTheField) {
  testing::InProcessServer s(model_dir());
  const TokenIds p = {5, 6, 7};
  for (const json& bad : {json(21), json(-1), json("3"), json(1.5)}) {
    int status = 0;
    const json r = post(s.url(), json{{"prompt", p}, {"max_tokens", 1}, {"prompt_logprobs", bad}}, &status);
    EXPECT_EQ(status, 400) << bad.dump();
    EXPECT_EQ(r["error"]["param"], "prompt_logprobs") << r.dump();
    EXPECT_NE(r["error"]["message"].get<std::string>().find("'prompt_logprobs' must be an integer in 0..20"),
              std::string::npos)
        << r.dump();
  }
  int status = 0;
  json r = post(s.url(), json{{"prompt", p}, {"prompt_logprobs", 2}, {"stream", true}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "prompt_logprobs");
  r = post(s.url(), json{{"prompt", p}, {"max_tokens", 0}}, &status);  // 0 only with prompt_logprobs
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "max_tokens");
}

}  // namespace
}  // namespace agentr1::serve
