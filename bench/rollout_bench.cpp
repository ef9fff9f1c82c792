// rollout_bench — generation throughput of rollout::Engine against the decode loop a
// PyTorch user would write (bench/hf_decode_loop.py: HF-style eager KV-cache sampling
// on Debian's python3-torch), on the same ~4M-parameter Qwen3-architecture checkpoint,
// the same prompts and the same thread count.
//
//   build/bench/rollout_bench [--threads 2] [--batches 1,16,64] [--prompt 32] [--new 128]
//                             [--reps 2] [--python /usr/bin/python3]
//
// Validates first (llm.c style): greedy outputs of the engine and of the Python loop
// must agree token for token (and their log-probs to 1e-3) on 4 rows x 24 tokens, else
// it exits 1 without timing. Then, per batch size, alternates the two --reps times and
// prints the best tokens/s of each and their ratio, and finally the fraction of this
// machine's measured fp32 matmul peak the engine reaches at the largest batch.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/log.h"
#include "agentr1/core/timing.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "bench_env.h"
#include "bench_model.h"

using namespace agentr1;
using agentr1::bench::bench_config;
using agentr1::bench::blas_core;
using agentr1::bench::cpu_name;
using agentr1::bench::load_average;

namespace {

struct Args {
  int threads = 2;
  std::vector<int> batches = {1, 16, 64};
  int prompt = 32;
  int max_new = 128;
  int reps = 2;
  std::string python = "/usr/bin/python3";
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "rollout_bench: %s\nusage: rollout_bench [--threads 2] [--batches 1,16,64] [--prompt 32] "
               "[--new 128] [--reps 2] [--python /usr/bin/python3]\n",
               why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--help" || k == "-h") usage("help");
    if (i + 1 >= argc) usage(("missing value for " + k).c_str());
    std::string v = argv[++i];
    try {
      if (k == "--threads") a.threads = std::stoi(v);
      else if (k == "--prompt") a.prompt = std::stoi(v);
      else if (k == "--new") a.max_new = std::stoi(v);
      else if (k == "--reps") a.reps = std::stoi(v);
      else if (k == "--python") a.python = v;
      else if (k == "--batches") {
        a.batches.clear();
        std::stringstream ss(v);
        std::string item;
        while (std::getline(ss, item, ',')) a.batches.push_back(std::stoi(item));
      } else usage(("unknown flag " + k).c_str());
    } catch (const std::logic_error&) {
      usage(("bad value for " + k + ": " + v).c_str());
    }
  }
  if (a.threads < 1 || a.prompt < 1 || a.max_new < 1 || a.reps < 1 || a.batches.empty())
    usage("sizes must be >= 1");
  for (int b : a.batches)
    if (b < 1) usage("batch sizes must be >= 1");
  return a;
}


std::vector<TokenIds> prompts(int batch, int len, uint64_t seed, int64_t vocab) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int> d(0, static_cast<int>(vocab) - 1);
  std::vector<TokenIds> out(batch);
  for (auto& p : out)
    for (int i = 0; i < len; ++i) p.push_back(d(g));
  return out;
}

// Engine: all rows submitted at once, exactly max_new tokens each (no stop tokens).
std::vector<GenResult> run_engine(rollout::Engine& e, const std::vector<TokenIds>& ps, float t, int max_new) {
  std::vector<GenRequest> reqs;
  for (size_t i = 0; i < ps.size(); ++i) {
    SamplingParams s;
    s.temperature = t;
    s.max_new_tokens = max_new;
    s.seed = 1000 + i;
    reqs.push_back({ps[i], s});
  }
  return e.generate(reqs);
}

struct PyResult {
  std::vector<TokenIds> ids;
  std::vector<std::vector<float>> logprobs;
  double seconds = 0;
};

// The Python loop on the same checkpoint and prompts (one process per call: it times
// its own generation after a warm-up, so start-up and loading are not counted).
PyResult run_python(const Args& a, const std::string& dir, const std::vector<TokenIds>& ps, float t, int max_new) {
  const std::string pfile = dir + "/prompts.json", ofile = dir + "/out.json";
  {
    std::ofstream f(pfile);
    f << json(ps).dump();
  }
  std::ostringstream cmd;
  cmd << a.python << " " << AGENTR1_BENCH_DIR << "/hf_decode_loop.py --model " << dir << "/model --prompts " << pfile
      << " --max-new " << max_new << " --threads " << a.threads << " --temperature " << t << " --out " << ofile;
  if (std::system(cmd.str().c_str()) != 0) {
    std::fprintf(stderr, "rollout_bench: the Python baseline failed: %s\n", cmd.str().c_str());
    std::exit(1);
  }
  std::ifstream f(ofile);
  json j = json::parse(f);
  PyResult r;
  r.ids = j["token_ids"].get<std::vector<TokenIds>>();
  r.logprobs = j["logprobs"].get<std::vector<std::vector<float>>>();
  r.seconds = j["seconds"].get<double>();
  return r;
}

// Best fp32 GFLOP/s of a 1024^3 matmul on this thread count.
double matmul_peak_gflops() {
  at::Tensor x = at::randn({1024, 1024}), y = at::randn({1024, 1024});
  at::mm(x, y);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    at::Tensor z = at::mm(x, y);
    best = std::max(best, 2.0 * 1024 * 1024 * 1024 / seconds_since(t0) / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  set_log_level(LogLevel::kWarn);
  at::set_num_threads(a.threads);
  torch::NoGradGuard ng;

  const model::ModelConfig cfg = bench_config();
  model::Transformer m = model::init_random(cfg, /*seed=*/1);
  int64_t n_params = 0;
  for (const auto& p : m->parameters()) n_params += p.numel();
  char tmpl[] = "/tmp/rollout_bench_XXXXXX";
  if (!mkdtemp(tmpl)) usage("cannot create a temporary directory");
  const std::string dir = tmpl;
  model::save_pretrained(m, dir + "/model", at::kFloat);

  std::printf("rollout_bench: Qwen3-arch random model, vocab %lld, hidden %lld, %lld layers, %lld heads / %lld kv "
              "heads, intermediate %lld, tied embeddings: %lld parameters (%.2fM), fp32\n",
              (long long)cfg.vocab_size, (long long)cfg.hidden_size, (long long)cfg.num_hidden_layers,
              (long long)cfg.num_attention_heads, (long long)cfg.num_key_value_heads,
              (long long)cfg.intermediate_size, (long long)n_params, n_params / 1e6);
  std::printf("hardware: %s, %u hardware threads; %d threads for both; BLAS core %s; load average %s\n",
              cpu_name().c_str(), std::thread::hardware_concurrency(), a.threads, blas_core().c_str(),
              load_average().c_str());
  std::printf("workload: prompt %d tokens, %d new tokens per row, temperature 1, best of %d alternating runs\n\n",
              a.prompt, a.max_new, a.reps);

  // Validate: greedy, engine vs the Python loop, 4 rows, 24 tokens (its own context).
  {
    const int n = 24;
    rollout::EngineOptions o;
    o.max_batch = 4;
    o.max_context = a.prompt + n + 1;
    rollout::Engine e(m, o);
    const auto ps = prompts(4, a.prompt, 7, cfg.vocab_size);
    const auto eng = run_engine(e, ps, 0.0f, n);
    const PyResult py = run_python(a, dir, ps, 0.0f, n);
    double worst = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
      if (eng[i].token_ids != py.ids[i]) {
        std::fprintf(stderr, "VALIDATION FAILED: row %zu: engine and Python greedy outputs differ\n", i);
        return 1;
      }
      for (int t = 0; t < n; ++t) worst = std::max(worst, std::fabs(double(eng[i].logprobs[t]) - py.logprobs[i][t]));
    }
    if (worst > 1e-3) {
      std::fprintf(stderr, "VALIDATION FAILED: log-probs differ by %.3g (> 1e-3)\n", worst);
      return 1;
    }
    std::printf("validation: greedy outputs of the engine and the Python loop agree (4 rows x %d tokens; "
                "log-probs within %.1e)\n\n",
                n, worst);
  }

  std::printf("| batch | engine tok/s | Python loop tok/s | engine / Python | mean decode batch |\n");
  std::printf("|------:|-------------:|------------------:|----------------:|------------------:|\n");
  double last_eng = 0;
  for (int batch : a.batches) {
    rollout::EngineOptions o;
    o.max_batch = batch;
    o.max_context = a.prompt + a.max_new + 1;
    o.prefix_cache = false;  // distinct random prompts: nothing to reuse; measure plain decoding
    rollout::Engine e(m, o);
    const auto ps = prompts(batch, a.prompt, 100 + batch, cfg.vocab_size);
    run_engine(e, ps, 1.0f, 8);  // warm-up
    double best_eng = 0, best_py = 0, occupancy = 0;
    for (int r = 0; r < a.reps; ++r) {
      e.reset_stats();
      auto t0 = std::chrono::steady_clock::now();
      const auto out = run_engine(e, ps, 1.0f, a.max_new);
      const double te = seconds_since(t0);
      int64_t toks = 0;
      for (auto& g : out) toks += static_cast<int64_t>(g.token_ids.size());
      best_eng = std::max(best_eng, toks / te);
      occupancy = e.stats().mean_decode_batch();
      const PyResult py = run_python(a, dir, ps, 1.0f, a.max_new);
      best_py = std::max(best_py, static_cast<double>(batch) * a.max_new / py.seconds);
    }
    std::printf("| %5d | %12.0f | %17.0f | %14.2fx | %17.1f |\n", batch, best_eng, best_py, best_eng / best_py,
                occupancy);
    std::fflush(stdout);
    last_eng = best_eng;
  }

  // Arithmetic per generated token: every linear layer and the (tied) output head,
  // plus attention over the mean context (prompt + half the new tokens).
  const double H = cfg.hidden_size, I = cfg.intermediate_size, hd = cfg.head_dim;
  const double qkvo = H * hd * (2.0 * cfg.num_attention_heads + 2.0 * cfg.num_key_value_heads);
  const double ctx = a.prompt + a.max_new / 2.0;
  const double flops = 2.0 * (cfg.num_hidden_layers * (qkvo + 3.0 * H * I) + H * cfg.vocab_size) +
                       4.0 * cfg.num_hidden_layers * cfg.num_attention_heads * hd * ctx;
  const double peak = matmul_peak_gflops();
  std::printf("\nfp32 matmul peak (1024^3, %d threads): %.1f GFLOP/s; engine at batch %d: %.2f MFLOP/token x %.0f "
              "tok/s = %.1f GFLOP/s = %.1f%% of peak\n",
              a.threads, peak, a.batches.back(), flops / 1e6, last_eng, flops * last_eng / 1e9,
              100.0 * flops * last_eng / 1e9 / peak);
  std::filesystem::remove_all(dir);
  return 0;
}
