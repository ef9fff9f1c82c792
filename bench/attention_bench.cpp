// attention_bench — one long row through the learner (target log-probs of every token,
// forward and backward, as Actor::update runs a micro-batch) with the attention dense and
// in tiles with an online softmax (actor.attention_block), side by side: peak RSS and
// seconds of each.
//
//   build/bench/attention_bench [--tokens 4096] [--layers 4] [--block 256] [--threads N]
//                               [--reps 2] [--checkpoint 1] [--lora 16]
//
// The model has Qwen3-0.6B's widths (hidden 1024, 16/8 heads of 128, intermediate 3072,
// vocab 151936, tied) with `layers` decoder layers and random weights; LoRA rank `lora`
// on all linear layers (0 = full fine-tuning) and layer checkpointing as the 1.5B run in
// the README used them. Each variant runs in a child process of its own (fork before any
// libtorch work), so each peak RSS is that variant's alone. Validates first, in a child
// too: on a row of 2 tiles + 37 tokens, the tiled path's log-probs and adapter gradients
// must equal the dense path's (else exit 1 without timing).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agentr1/model/transformer.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/learner/scoring.h"
#include "bench_model.h"

using namespace agentr1;

namespace {

struct Args {
  int tokens = 4096;
  int layers = 4;
  int block = 256;
  int threads = 0;
  int reps = 2;
  int checkpoint = 1;
  int lora = 16;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "attention_bench: %s\nusage: attention_bench [--tokens 4096] [--layers 4] [--block 256] "
               "[--threads N] [--reps 2] [--checkpoint 1] [--lora 16]\n",
               why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") usage("help");
    if (i + 1 >= argc) usage(("missing value for " + k).c_str());
    const int v = std::atoi(argv[++i]);
    if (k == "--tokens") a.tokens = v;
    else if (k == "--layers") a.layers = v;
    else if (k == "--block") a.block = v;
    else if (k == "--threads") a.threads = v;
    else if (k == "--reps") a.reps = v;
    else if (k == "--checkpoint") a.checkpoint = v;
    else if (k == "--lora") a.lora = v;
    else usage(("unknown option " + k).c_str());
  }
  if (a.tokens < 2 || a.layers < 1 || a.block < 1 || a.reps < 1 || a.lora < 0)
    usage("need tokens >= 2, layers >= 1, block >= 1, reps >= 1, lora >= 0");
  return a;
}

model::Transformer make_model(const Args& a) {
  model::ModelConfig cfg = bench::qwen3_06b_shape();
  cfg.num_hidden_layers = a.layers;
  cfg.max_position_embeddings = std::max<int64_t>(cfg.max_position_embeddings, a.tokens);
  model::Transformer m = model::init_random(cfg, 3);
  if (a.lora > 0) {
    model::LoraOptions lo;
    lo.rank = a.lora;
    lo.alpha = 2.0 * a.lora;
    m->add_lora(lo, 4);
    torch::NoGradGuard ng;
    for (auto& [name, t] : m->lora_parameters()) t.normal_(0.0, 0.02);  // B != 0: adapters matter
  }
  m->set_gradient_checkpointing(a.checkpoint != 0);
  m->train();
  return m;
}

// One row of n random tokens, every token after the first a target with weight 1.
train::TrainBatch make_row(int64_t n, int64_t vocab) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> tok(0, static_cast<int>(vocab) - 1);
  std::vector<train::PackedRow> rows(1);
  train::PackedRow& r = rows[0];
  for (int64_t i = 0; i < n; ++i) r.tokens.push_back(tok(rng));
  r.action.assign(static_cast<size_t>(n), 1);
  r.action[0] = 0;
  r.advantage.assign(static_cast<size_t>(n), 1.f);
  r.rollout_logprob.assign(static_cast<size_t>(n), 0.f);
  r.step_of.assign(static_cast<size_t>(n), 0);
  return train::collate(rows, {0});
}

// Forward + backward of the sum of the row's target log-probs; returns them (detached).
at::Tensor learner_pass(model::Transformer& m, const train::TrainBatch& b) {
  m->zero_grad();
  const at::Tensor lp = train::target_logprobs(m, b, nullptr, 1.0);
  (lp * b.action_mask).sum().backward();
  return lp.detach();
}

void set_threads(const Args& a) {
  at::set_num_threads(a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency()));
}

// Child: the tiled path against the dense one on a short row. Exit 0 when they agree.
int validate(const Args& a) {
  set_threads(a);
  model::Transformer m = make_model(a);
  const train::TrainBatch b = make_row(2 * a.block + 37, m->config().vocab_size);
  std::vector<at::Tensor> lp, g[2];
  for (int k = 0; k < 2; ++k) {
    m->set_attention_block(k == 0 ? 0 : a.block);
    lp.push_back(learner_pass(m, b));
    for (auto& p : m->trainable_parameters()) g[k].push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
  }
  const double dlp = ((lp[0] - lp[1]).abs() * b.action_mask).max().item<double>();
  double scale = 0, diff = 0;
  for (size_t i = 0; i < g[0].size(); ++i) {
    scale = std::max(scale, g[0][i].abs().max().item<double>());
    diff = std::max(diff, (g[0][i] - g[1][i]).abs().max().item<double>());
  }
  std::printf("check (row of %lld tokens): max |dlogp| %.2e, gradient rel diff %.2e\n",
              static_cast<long long>(b.input_ids.size(1)), dlp, diff / std::max(scale, 1e-30));
  std::fflush(stdout);
  return dlp < 1e-4 && scale > 0 && diff / scale < 1e-4 ? 0 : 1;
}

// Child: `reps` learner passes over one row of a.tokens tokens with attention `block`
// (0 = dense); prints the median seconds on one line for the parent.
int measure(const Args& a, int block) {
  set_threads(a);
  model::Transformer m = make_model(a);
  m->set_attention_block(block);
  const train::TrainBatch b = make_row(a.tokens, m->config().vocab_size);
  std::vector<double> t;
  for (int r = 0; r < a.reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    learner_pass(m, b);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  std::printf("seconds %.3f\n", t[t.size() / 2]);
  std::fflush(stdout);
  return 0;
}

struct ChildResult {
  int status = -1;
  double max_rss_gib = 0;
  std::string out;
};

// Runs fn in a forked child, its stdout through a pipe; its peak RSS from wait4.
template <class F>
ChildResult run_child(F fn) {
  int fd[2];
  if (pipe(fd) != 0) std::exit(3);
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 1);
    std::_Exit(fn());
  }
  close(fd[1]);
  ChildResult r;
  char buf[512];
  for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) r.out.append(buf, static_cast<size_t>(n));
  close(fd[0]);
  rusage ru{};
  int st = 0;
  wait4(pid, &st, 0, &ru);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  r.max_rss_gib = static_cast<double>(ru.ru_maxrss) / (1024.0 * 1024.0);  // kB -> GiB
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::printf("attention_bench: one row of %d tokens, Qwen3-0.6B widths x %d layers, %s, %s, tiles of %d\n",
              a.tokens, a.layers, a.lora > 0 ? ("LoRA r" + std::to_string(a.lora)).c_str() : "full fine-tuning",
              a.checkpoint ? "layer checkpointing" : "no checkpointing", a.block);
  const ChildResult v = run_child([&] { return validate(a); });
  std::printf("%s", v.out.c_str());
  if (v.status != 0) {
    std::printf("FAIL: tiled attention disagrees with dense attention (status %d)\n", v.status);
    return 1;
  }
  std::printf("%-30s %12s %14s\n", "learner pass (fwd+bwd)", "peak RSS", "median s");
  double secs[2] = {0, 0}, rss[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const int block = k == 0 ? 0 : a.block;
    const ChildResult r = run_child([&] { return measure(a, block); });
    const char* name = k == 0 ? "dense attention" : "tiles + online softmax";
    if (r.status != 0) {
      std::printf("%-30s %12s %14s (child exited with %d: out of memory?)\n", name, "-", "-", r.status);
      continue;
    }
    std::sscanf(r.out.c_str(), "seconds %lf", &secs[k]);
    rss[k] = r.max_rss_gib;
    std::printf("%-30s %9.2f GiB %14.2f\n", name, rss[k], secs[k]);
  }
  if (secs[0] > 0 && secs[1] > 0)
    std::printf("tiled / dense: peak RSS %.2fx, time %.2fx\n", rss[1] / rss[0], secs[1] / secs[0]);
  return 0;
}
