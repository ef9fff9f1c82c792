// learner_bench — time of one learner step (forward + backward over a batch of packed
// rows, as SftLearner::step and Actor::update run it) with the shared-prefix path on and
// off, side by side in one run, on the built-in default model's shape.
//
//   build-*/bench/learner_bench [--threads N] [--rows 16] [--prefix 220] [--own 100]
//                               [--reps 5]
//
// Rows imitate the calculator task: `prefix` tokens every row shares (system prompt +
// tools block), then `own` tokens per row (question, tool call, tool response, answer)
// of which the last 40% are response tokens. Validates first: the two paths' SFT losses
// and gradient norms must agree (else exit 1 without timing). Repetitions alternate
// between the two paths so machine noise hits both alike; prints medians and the ratio.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "agentr1/model/transformer.h"
#include "agentr1/sft/sft.h"
#include "agentr1/train/learner/batch.h"
#include "bench_model.h"

using namespace agentr1;

namespace {

struct Args {
  int threads = 0;
  int rows = 16;
  int prefix = 220;
  int own = 100;
  int reps = 5;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "learner_bench: %s\nusage: learner_bench [--threads N] [--rows 16] [--prefix 220] "
               "[--own 100] [--reps 5]\n",
               why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--help" || k == "-h") usage("help");
    if (i + 1 >= argc) usage(("missing value for " + k).c_str());
    const int v = std::atoi(argv[++i]);
    if (k == "--threads") a.threads = v;
    else if (k == "--rows") a.rows = v;
    else if (k == "--prefix") a.prefix = v;
    else if (k == "--own") a.own = v;
    else if (k == "--reps") a.reps = v;
    else usage(("unknown option " + k).c_str());
  }
  if (a.rows < 2 || a.prefix < 1 || a.own < 4 || a.reps < 1) usage("need rows >= 2, prefix >= 1, own >= 4, reps >= 1");
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  at::set_num_threads(a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency()));
  const model::ModelConfig cfg = bench::builtin_shape();
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> tok(0, static_cast<int>(cfg.vocab_size) - 1);
  std::vector<train::PackedRow> rows(static_cast<size_t>(a.rows));
  TokenIds prefix;
  for (int i = 0; i < a.prefix; ++i) prefix.push_back(tok(rng));
  for (int r = 0; r < a.rows; ++r) {
    train::PackedRow& row = rows[static_cast<size_t>(r)];
    row.tokens = prefix;
    const int own = a.own - (r % 5) * 3;  // slightly different lengths, as in real batches
    for (int i = 0; i < own; ++i) row.tokens.push_back(tok(rng));
    const size_t n = row.tokens.size(), first_action = n - static_cast<size_t>(own * 2 / 5);
    row.action.assign(n, 0);
    for (size_t t = first_action; t < n; ++t) row.action[t] = 1;
    row.advantage.assign(n, 0.f);
    row.rollout_logprob.assign(n, 0.f);
    row.step_of.assign(n, -1);
    row.trajectory = r;
  }
  std::printf("learner_bench: %d rows x (%d shared + ~%d own tokens), %lld-parameter Qwen3 model, %d threads\n",
              a.rows, a.prefix, a.own, static_cast<long long>(cfg.num_parameters()), at::get_num_threads());
  // Two SFT learners from the same weights: min_shared_prefix 0 (off) and 16 (on).
  std::vector<std::unique_ptr<train::SftLearner>> learners;
  for (int64_t msp : {int64_t{0}, int64_t{16}}) {
    train::SftOptions o;
    o.optim.lr = 1e-12;  // weights stay (practically) put; we time, not train
    o.micro_batch_size = a.rows;
    o.min_shared_prefix = msp;
    learners.push_back(std::make_unique<train::SftLearner>(model::init_random(cfg, 3), o));
  }
  auto step = [&](int k) { return learners[static_cast<size_t>(k)]->step(rows); };
  auto m0 = step(0), m1 = step(1);
  const double dl = std::abs(m0["sft/loss"] - m1["sft/loss"]);
  const double dg = std::abs(m0["sft/grad_norm"] - m1["sft/grad_norm"]) / std::max(1e-12, m0["sft/grad_norm"]);
  std::printf("check: loss %.6f vs %.6f (|diff| %.2e), grad norm %.6f vs %.6f (rel diff %.2e)\n", m0["sft/loss"],
              m1["sft/loss"], dl, m0["sft/grad_norm"], m1["sft/grad_norm"], dg);
  if (dl > 1e-4 || dg > 1e-3) {
    std::printf("FAIL: the shared-prefix path disagrees with the full rows\n");
    return 1;
  }
  std::vector<double> t[2];
  for (int r = 0; r < a.reps; ++r)
    for (int k = 0; k < 2; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      step(k);
      t[k].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  int64_t tokens = 0;
  for (const auto& r : rows) tokens += static_cast<int64_t>(r.tokens.size());
  const double full = median(t[0]), shared = median(t[1]);
  std::printf("%-28s %10s %14s\n", "learner step (fwd+bwd)", "median s", "row tokens/s");
  std::printf("%-28s %10.3f %14.0f\n", "full rows", full, tokens / full);
  std::printf("%-28s %10.3f %14.0f\n", "shared prefix", shared, tokens / shared);
  std::printf("speed-up: %.2fx\n", full / shared);
  return 0;
}
