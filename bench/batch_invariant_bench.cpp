// batch_invariant_bench — what rollout.batch_invariant costs: generation tokens/s of the
// engine with its batch-invariant kernels (model/row_linear.h) against its default BLAS
// products, side by side in one run, on the ~4M-parameter bench model and on a random
// model of Qwen3-0.6B's shape (the real-size case), at batch 1 and 64.
//
//   build/bench/batch_invariant_bench [--threads 2] [--batches 1,64] [--new 32] [--prompt 32]
//                                     [--reps 3] [--real-new 8] [--long-prompt 512]
//                                     [--dtypes fp32,bf16] [--no-real]
//
// Validates first: (1) in the invariant mode a request decoded inside a full batch has
// the same tokens and log-probs bit for bit as alone; (2) the two modes' prefill logits
// agree within 1e-3 (fp32; 5e-2 bf16), so both compute the same model. Exits 1 if either
// fails. Then, per model and batch size, alternates the two modes --reps times and prints
// the best tokens/s of each and the ratio invariant / default; then the prefill of one
// --long-prompt-token prompt (512-row products, where BLAS gemm is strongest), in prompt
// tokens/s.
#include <ATen/Parallel.h>
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agentr1/core/log.h"
#include "agentr1/core/timing.h"
#include "agentr1/model/kv_cache.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "bench_env.h"
#include "bench_model.h"

using namespace agentr1;
using agentr1::bench::blas_core;
using agentr1::bench::cpu_name;
using agentr1::bench::load_average;

namespace {

struct Args {
  int threads = 2;
  std::vector<int> batches = {1, 64};
  int prompt = 32;
  int max_new = 32;
  int real_new = 8;
  int reps = 3;
  int long_prompt = 512;  // prefill case: one prompt of this many tokens (0 = skip)
  bool real = true;
  std::vector<std::string> dtypes = {"fp32"};
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "batch_invariant_bench: %s\nusage: batch_invariant_bench [--threads 2] [--batches 1,64] [--new 32] "
               "[--prompt 32] [--reps 3] [--real-new 8] [--long-prompt 512] [--dtypes fp32,bf16] [--no-real]\n",
               why);
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) out.push_back(x);
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + k).c_str());
      return argv[++i];
    };
    auto num = [&](int lo) {
      const std::string v = val();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (*end || n < lo) usage((k + " needs an integer >= " + std::to_string(lo) + ", got '" + v + "'").c_str());
      return static_cast<int>(n);
    };
    if (k == "--threads") a.threads = num(1);
    else if (k == "--new") a.max_new = num(1);
    else if (k == "--prompt") a.prompt = num(1);
    else if (k == "--reps") a.reps = num(1);
    else if (k == "--real-new") a.real_new = num(1);
    else if (k == "--long-prompt") a.long_prompt = num(0);
    else if (k == "--no-real") a.real = false;
    else if (k == "--dtypes") a.dtypes = split(val());
    else if (k == "--batches") {
      a.batches.clear();
      for (const auto& b : split(val())) a.batches.push_back(std::max(1, std::atoi(b.c_str())));
    } else usage(("unknown argument " + k).c_str());
  }
  return a;
}

std::vector<TokenIds> prompts(int batch, int len, uint64_t seed, int64_t vocab) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int> d(0, static_cast<int>(vocab) - 1);
  std::vector<TokenIds> out(static_cast<size_t>(batch));
  for (auto& p : out)
    for (int i = 0; i < len; ++i) p.push_back(d(g));
  return out;
}

std::vector<GenResult> run(rollout::Engine& e, const std::vector<TokenIds>& ps, int max_new) {
  std::vector<GenRequest> reqs;
  for (size_t i = 0; i < ps.size(); ++i) {
    SamplingParams s;
    s.temperature = 1.0f;
    s.max_new_tokens = max_new;
    s.seed = 1000 + i;
    reqs.push_back({ps[i], s});
  }
  return e.generate(reqs);
}

rollout::EngineOptions engine_options(int batch, int context, bool invariant, int threads) {
  rollout::EngineOptions o;
  o.max_batch = batch;
  o.max_context = context;
  o.prefix_cache = false;  // distinct random prompts: measure plain decoding
  o.batch_invariant = invariant;
  o.threads = threads;
  return o;
}

bool same(const GenResult& a, const GenResult& b) {
  return a.token_ids == b.token_ids && a.logprobs.size() == b.logprobs.size() &&
         std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * sizeof(float)) == 0;
}

// Returns false (after printing why) when validation fails.
bool validate(model::Transformer& m, const Args& a, int max_new, const char* name) {
  const int64_t V = m->config().vocab_size;
  const int big = *std::max_element(a.batches.begin(), a.batches.end());
  const int ctx = a.prompt + max_new + 1;
  const auto ps = prompts(std::max(big, 2), a.prompt, 7, V);
  GenResult alone;
  {
    rollout::Engine e(m, engine_options(1, ctx, true, a.threads));
    alone = run(e, {ps[0]}, max_new)[0];
  }
  {
    rollout::Engine e(m, engine_options(std::max(big, 2), ctx, true, a.threads));
    const auto all = run(e, ps, max_new);
    if (!same(all[0], alone)) {
      std::fprintf(stderr, "VALIDATION FAILED (%s): invariant mode, a request in a batch of %d differs from alone\n",
                   name, std::max(big, 2));
      return false;
    }
  }
  // Both modes compute the same model: prefill logits of 4 prompts, one call.
  at::NoGradGuard ng;
  const at::ScalarType dt = m->parameters().front().scalar_type();
  std::vector<std::vector<int32_t>> tables(4);
  std::vector<model::CachedRow> rows;
  std::vector<int64_t> ids;
  const int64_t bs = 16, per = (a.prompt + bs - 1) / bs;
  for (int r = 0; r < 4; ++r) {
    for (int64_t b = 0; b < per; ++b) tables[r].push_back(static_cast<int32_t>(r * per + b));
    rows.push_back({0, a.prompt, &tables[r]});
    ids.insert(ids.end(), ps[r].begin(), ps[r].end());
  }
  const at::Tensor t = at::tensor(ids, at::kLong);
  at::Tensor lg[2];
  for (int inv = 0; inv < 2; ++inv) {
    model::KVCache cache(m->config(), 4 * per, bs, dt, at::kCPU);
    cache.batch_invariant = inv == 1;
    lg[inv] = m->forward_cached(t, rows, cache);
  }
  const double diff = (lg[0] - lg[1]).abs().max().item<double>();
  const double tol = dt == at::kFloat ? 1e-3 : 5e-2;
  if (!(diff <= tol)) {
    std::fprintf(stderr, "VALIDATION FAILED (%s): default and invariant logits differ by %.3g (> %.0e)\n", name,
                 diff, tol);
    return false;
  }
  std::printf("validation (%s): invariant mode, row 0 of a batch of %d = alone, bit for bit (%d tokens); "
              "logits of the two modes within %.2e\n",
              name, std::max(big, 2), max_new, diff);
  return true;
}

void measure(model::Transformer& m, const Args& a, int max_new, const char* name) {
  const int64_t V = m->config().vocab_size;
  for (int batch : a.batches) {
    const int ctx = a.prompt + max_new + 1;
    rollout::Engine def(m, engine_options(batch, ctx, false, a.threads));
    rollout::Engine inv(m, engine_options(batch, ctx, true, a.threads));
    const auto ps = prompts(batch, a.prompt, 100 + batch, V);
    run(def, ps, 2);  // warm-up
    run(inv, ps, 2);
    double best[2] = {0, 0};
    for (int r = 0; r < a.reps; ++r)
      for (int mode = 0; mode < 2; ++mode) {
        rollout::Engine& e = mode ? inv : def;
        const auto t0 = std::chrono::steady_clock::now();
        const auto out = run(e, ps, max_new);
        const double s = seconds_since(t0);
        int64_t toks = 0;
        for (const auto& g : out) toks += static_cast<int64_t>(g.token_ids.size());
        best[mode] = std::max(best[mode], toks / s);
      }
    std::printf("| %-26s | %5d | %13.1f | %15.1f | %18.2fx |\n", name, batch, best[0], best[1], best[1] / best[0]);
    std::fflush(stdout);
  }
}

// One long prompt, one new token: the prefill's prompt tokens per second.
void measure_prefill(model::Transformer& m, const Args& a, const char* name) {
  if (a.long_prompt == 0) return;
  const int ctx = a.long_prompt + 2;
  rollout::Engine def(m, engine_options(1, ctx, false, a.threads));
  rollout::Engine inv(m, engine_options(1, ctx, true, a.threads));
  const auto ps = prompts(1, a.long_prompt, 900, m->config().vocab_size);
  double best[2] = {0, 0};
  for (int r = 0; r < a.reps; ++r)
    for (int mode = 0; mode < 2; ++mode) {
      rollout::Engine& e = mode ? inv : def;
      const auto t0 = std::chrono::steady_clock::now();
      run(e, ps, 1);
      best[mode] = std::max(best[mode], a.long_prompt / seconds_since(t0));
    }
  std::printf("| %-26s | %5s | %13.1f | %15.1f | %18.2fx |\n", name, ("p" + std::to_string(a.long_prompt)).c_str(),
              best[0], best[1], best[1] / best[0]);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  set_log_level(LogLevel::kWarn);
  at::set_num_threads(a.threads);
  std::printf("batch_invariant_bench: %s, %u hardware threads, %d threads; BLAS core %s; load average %s\n",
              cpu_name().c_str(), std::thread::hardware_concurrency(), a.threads, blas_core().c_str(),
              load_average().c_str());
  std::printf("workload: prompt %d random tokens, %d new tokens per row (%d for the 0.6B shape), temperature 1, "
              "prefix cache off, best of %d alternating runs\n\n",
              a.prompt, a.max_new, a.real_new, a.reps);
  struct Model {
    std::string name;
    model::ModelConfig cfg;
    int max_new;
  };
  std::vector<Model> models;
  for (const auto& d : a.dtypes) {
    models.push_back({"bench 4.2M " + d, bench::bench_config(), a.max_new});
    if (a.real) models.push_back({"Qwen3-0.6B shape " + d, bench::qwen3_06b_shape(), a.real_new});
  }
  std::vector<std::pair<std::string, model::Transformer>> built;
  for (const auto& mdl : models) {
    const std::string dt = mdl.name.substr(mdl.name.rfind(' ') + 1);
    model::Transformer m = model::init_random(mdl.cfg, 1);
    m->to(model::parse_dtype(dt));
    m->eval();
    if (!validate(m, a, mdl.max_new, mdl.name.c_str())) return 1;
    built.emplace_back(mdl.name, m);
  }
  std::printf("\n| model                      | batch | default tok/s | invariant tok/s | invariant / default |\n");
  std::printf("|----------------------------|------:|--------------:|----------------:|--------------------:|\n");
  for (size_t i = 0; i < built.size(); ++i) {
    measure(built[i].second, a, models[i].max_new, built[i].first.c_str());
    measure_prefill(built[i].second, a, built[i].first.c_str());
  }
  if (a.long_prompt > 0)
    std::printf("\nbatch pN: one prompt of N tokens and 1 new token, in prompt tokens/s (prefill in chunks of 512)\n");
  return 0;
}
