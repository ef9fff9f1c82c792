// prefix_cache_bench — how much prompt the paged prefix cache saves on the workload it
// is for: GRPO groups of 8 samples over 3-turn append-only tool episodes (turn t+1's
// prompt = turn t's prompt + response + a tool result), on the ~4M-parameter
// Qwen3-architecture bench model.
//
//   build/bench/prefix_cache_bench [--threads 2] [--groups 8] [--n 8] [--turns 3]
//                                  [--system 160] [--question 40] [--response 32]
//                                  [--tool 24]
//
// Validates first: every trajectory's tokens with the cache on equal those with it off
// (one greedy group, the rest sampled with fixed seeds), else exits 1. Then prints
// prefill tokens computed / prompt tokens submitted (target <= 25%), the KV memory the
// running sequences hold (paged blocks against the fixed max_context slot per sequence
// of the design before), and the wall time of both, measured side by side.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "agentr1/core/log.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "bench_model.h"

using namespace agentr1;
using agentr1::bench::bench_config;

namespace {

struct Args {
  int threads = 2, groups = 8, n = 8, turns = 3, system = 160, question = 40, response = 32, tool = 24;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "prefix_cache_bench: %s\nusage: prefix_cache_bench [--threads 2] [--groups 8] [--n 8] [--turns 3] "
               "[--system 160] [--question 40] [--response 32] [--tool 24]\n",
               why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--help" || k == "-h") usage("help");
    if (i + 1 >= argc) usage(("missing value for " + k).c_str());
    int v = 0;
    try {
      v = std::stoi(argv[++i]);
    } catch (const std::logic_error&) {
      usage(("bad value for " + k).c_str());
    }
    if (v < 1) usage((k + " must be >= 1").c_str());
    if (k == "--threads") a.threads = v;
    else if (k == "--groups") a.groups = v;
    else if (k == "--n") a.n = v;
    else if (k == "--turns") a.turns = v;
    else if (k == "--system") a.system = v;
    else if (k == "--question") a.question = v;
    else if (k == "--response") a.response = v;
    else if (k == "--tool") a.tool = v;
    else usage(("unknown flag " + k).c_str());
  }
  return a;
}


TokenIds random_tokens(std::mt19937_64& g, int n) {
  std::uniform_int_distribution<int> d(0, 4095);
  TokenIds t(static_cast<size_t>(n));
  for (auto& x : t) x = d(g);
  return t;
}

struct Outcome {
  std::vector<TokenIds> final_context;  // per trajectory: last prompt + last response
  rollout::EngineStats stats;
  double seconds = 0;
  int64_t running_peak = 0;
};

// Runs every trajectory's turns in lock step (as the synchronous rollout does): all of
// turn t is submitted at once, then each trajectory appends its response and a tool
// result (fixed per trajectory and turn) to form turn t+1's prompt.
Outcome run(model::Transformer& m, const Args& a, int max_context, bool prefix_cache) {
  rollout::EngineOptions o;
  o.max_batch = a.groups * a.n;
  o.max_context = max_context;
  o.prefix_cache = prefix_cache;
  rollout::Engine e(m, o);
  std::mt19937_64 g(11);
  const TokenIds system = random_tokens(g, a.system);
  const int n_traj = a.groups * a.n;
  std::vector<TokenIds> ctx(static_cast<size_t>(n_traj));
  for (int q = 0; q < a.groups; ++q) {
    TokenIds p = system;
    const TokenIds question = random_tokens(g, a.question);
    p.insert(p.end(), question.begin(), question.end());
    for (int s = 0; s < a.n; ++s) ctx[static_cast<size_t>(q * a.n + s)] = p;
  }
  std::vector<std::vector<TokenIds>> tool(static_cast<size_t>(n_traj));
  for (auto& t : tool)
    for (int k = 0; k < a.turns; ++k) t.push_back(random_tokens(g, a.tool));
  const auto t0 = std::chrono::steady_clock::now();
  for (int turn = 0; turn < a.turns; ++turn) {
    std::vector<GenRequest> reqs;
    for (int i = 0; i < n_traj; ++i) {
      SamplingParams sp;
      sp.temperature = i < a.n ? 0.0f : 1.0f;  // the first group greedy, the rest sampled
      sp.max_new_tokens = a.response;
      sp.seed = 1000 + 97 * i + turn;
      reqs.push_back({ctx[static_cast<size_t>(i)], sp});
    }
    const auto res = e.generate(reqs);
    for (int i = 0; i < n_traj; ++i) {
      TokenIds& c = ctx[static_cast<size_t>(i)];
      c.insert(c.end(), res[i].token_ids.begin(), res[i].token_ids.end());
      if (turn + 1 < a.turns) c.insert(c.end(), tool[i][turn].begin(), tool[i][turn].end());
    }
  }
  Outcome out;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.final_context = ctx;
  out.stats = e.stats();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  set_log_level(LogLevel::kWarn);
  at::set_num_threads(a.threads);
  torch::NoGradGuard ng;
  model::Transformer m = model::init_random(bench_config(), 1);
  const int max_context = a.system + a.question + a.turns * (a.response + a.tool) + 1;
  std::printf("prefix_cache_bench: %d groups x %d samples, %d append-only turns; prompt %d shared + %d own tokens, "
              "%d-token responses, %d-token tool results; max_context %d; %d threads\n\n",
              a.groups, a.n, a.turns, a.system, a.question, a.response, a.tool, max_context, a.threads);

  const Outcome on = run(m, a, max_context, true);
  const Outcome off = run(m, a, max_context, false);
  for (size_t i = 0; i < on.final_context.size(); ++i)
    if (on.final_context[i] != off.final_context[i]) {
      std::fprintf(stderr, "VALIDATION FAILED: trajectory %zu differs with the prefix cache on\n", i);
      return 1;
    }
  std::printf("validation: all %zu trajectories identical with the cache on and off (%d greedy, the rest sampled)\n\n",
              on.final_context.size(), a.n);

  auto frac = [](const rollout::EngineStats& s) {
    return 100.0 * static_cast<double>(s.prefill_tokens_computed) / static_cast<double>(s.prompt_tokens);
  };
  std::printf("| prefix cache | prompt tokens submitted | prefill tokens computed | computed / submitted | wall s |\n");
  std::printf("|---|--:|--:|--:|--:|\n");
  std::printf("| off | %lld | %lld | %.1f%% | %.2f |\n", (long long)off.stats.prompt_tokens,
              (long long)off.stats.prefill_tokens_computed, frac(off.stats), off.seconds);
  std::printf("| on | %lld | %lld | %.1f%% | %.2f |\n\n", (long long)on.stats.prompt_tokens,
              (long long)on.stats.prefill_tokens_computed, frac(on.stats), on.seconds);

  const double block_kib = static_cast<double>(on.stats.kv_block_bytes) / 1024.0;
  const double per_pos_kib = block_kib / 16.0;
  const int seqs = a.groups * a.n;
  std::printf("KV memory held by the %d running sequences at the peak: paged, shared blocks once: %lld blocks = "
              "%.1f MiB (%.1f KiB per sequence); without sharing (cache off): %lld blocks = %.1f MiB; the slot "
              "design before (one max_context slot per sequence): %.1f MiB (%.1f KiB per sequence)\n",
              seqs, (long long)on.stats.kv_blocks_peak, on.stats.kv_blocks_peak * block_kib / 1024.0,
              on.stats.kv_blocks_peak * block_kib / seqs, (long long)off.stats.kv_blocks_peak,
              off.stats.kv_blocks_peak * block_kib / 1024.0, seqs * max_context * per_pos_kib / 1024.0,
              max_context * per_pos_kib);
  std::printf("prefill computed / submitted with the cache: %.1f%% (target <= 25%%): %s\n", frac(on.stats),
              frac(on.stats) <= 25.0 ? "met" : "NOT met");
  return 0;
}
