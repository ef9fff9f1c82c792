// tree_pack_bench — tokens forwarded and wall time of one learner pass (forward +
// backward over every micro-batch, as Actor::update runs it) on multi-turn append-only
// trajectories in GRPO groups, for three layouts of the same data:
//   (a) one row per step, as Agent-R1 trains (actor.merge_prefix_steps=false);
//   (b) the packing before tree packing: a trajectory's append-only steps merged into one
//       row, a micro-batch's common prefix computed once (min_shared_prefix 16);
//   (c) tree packing (actor.tree_packing=true): each micro-batch a prefix tree, every
//       shared prefix (the group's prompt, earlier turns) forwarded once.
//
//   build/bench/tree_pack_bench [--threads 2] [--groups 2] [--n 8] [--turns 5]
//                               [--system 60] [--prompt 60] [--response 20] [--tool 15]
//                               [--mb 8] [--reps 3]
//
// Every trajectory starts with the same `system` tokens, then its group's `prompt`;
// --mb rows per micro-batch (8 = one group per micro-batch, 16 = two).
//
// Validates first: the three layouts' losses and gradient norms must agree (exit 1
// otherwise). Repetitions alternate between layouts; prints medians and ratios.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "agentr1/model/transformer.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/learner/scoring.h"
#include "bench_model.h"

using namespace agentr1;

namespace {

struct Args {
  int threads = 2, groups = 2, n = 8, turns = 5, system = 60, prompt = 60, response = 20, tool = 15, reps = 3, mb = 8;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "tree_pack_bench: %s\nusage: tree_pack_bench [--threads 2] [--groups 2] [--n 8] [--turns 5] "
               "[--system 60] [--prompt 60] [--response 20] [--tool 15] [--mb 8] [--reps 3]\n",
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
    if (v < 1) usage((k + " must be >= 1").c_str());
    if (k == "--threads") a.threads = v;
    else if (k == "--groups") a.groups = v;
    else if (k == "--n") a.n = v;
    else if (k == "--turns") a.turns = v;
    else if (k == "--prompt") a.prompt = v;
    else if (k == "--response") a.response = v;
    else if (k == "--tool") a.tool = v;
    else if (k == "--reps") a.reps = v;
    else if (k == "--system") a.system = v;
    else if (k == "--mb") a.mb = v;
    else usage(("unknown option " + k).c_str());
  }
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Layout {
  const char* name;
  std::vector<train::PackedRow> rows;
  int64_t min_shared_prefix;
  bool tree;
};

struct Pass {
  double loss = 0, grad_norm = 0;
  int64_t tokens = 0;  // tokens the model forwarded
};

// One learner pass: micro-batches of mb rows, token-mean NLL over all action tokens.
Pass run(model::Transformer& m, const Layout& l, int mb_rows) {
  Pass p;
  m->zero_grad();
  int64_t actions = 0;
  for (const auto& r : l.rows) actions += r.num_action_tokens();
  for (const auto& mb : train::make_micro_batches(l.rows, mb_rows, 0, l.tree)) {
    const train::TrainBatch b = train::collate(l.rows, mb, l.min_shared_prefix, at::Device(at::kCPU), l.tree);
    if (l.tree) {
      p.tokens += b.tree_nodes;
    } else {
      p.tokens += b.prefix_len;
      for (int64_t r : mb) p.tokens += static_cast<int64_t>(l.rows[r].tokens.size()) - b.prefix_len;
    }
    const at::Tensor lp = train::target_logprobs(m, b);
    const at::Tensor loss = -(lp * b.action_mask).sum() / static_cast<double>(actions);
    loss.backward();
    p.loss += loss.item<double>();
  }
  double g = 0;
  for (const auto& q : m->parameters()) g += q.grad().pow(2).sum().item<double>();
  p.grad_norm = std::sqrt(g);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  at::set_num_threads(a.threads);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> tok(3, 1023);
  auto draw = [&](int n) {
    TokenIds t(static_cast<size_t>(n));
    for (auto& x : t) x = tok(rng);
    return t;
  };
  std::vector<Trajectory> trajs;
  const TokenIds system = draw(a.system);
  for (int g = 0; g < a.groups; ++g) {
    TokenIds prompt = system;
    const TokenIds question = draw(a.prompt);
    prompt.insert(prompt.end(), question.begin(), question.end());
    for (int s = 0; s < a.n; ++s) {
      Trajectory t;
      t.uid = std::to_string(g) + "/" + std::to_string(s);
      t.group = std::to_string(g);
      TokenIds ctx = prompt;
      for (int k = 0; k < a.turns; ++k) {
        Step st;
        st.prompt_ids = ctx;
        st.response_ids = draw(a.response);
        st.response_logprobs.assign(st.response_ids.size(), -1.0f);
        ctx.insert(ctx.end(), st.response_ids.begin(), st.response_ids.end());
        const TokenIds tool = draw(a.tool);
        ctx.insert(ctx.end(), tool.begin(), tool.end());
        t.steps.push_back(st);
      }
      trajs.push_back(t);
    }
  }
  const std::vector<float> zero_adv(trajs.size(), 0.0f);
  std::vector<Layout> layouts = {
      {"(a) one row per step", train::pack_trajectories(trajs, zero_adv, false), 0, false},
      {"(b) merged steps + shared prefix", train::pack_trajectories(trajs, zero_adv, true), 16, false},
      {"(c) tree packing", train::pack_trajectories(trajs, zero_adv, true), 0, true},
  };
  model::Transformer m = model::init_random(bench::builtin_shape(), 3);
  m->train();
  std::printf("tree_pack_bench: %d groups x %d trajectories x %d append-only turns (system %d + prompt %d, response "
              "%d, tool %d tokens); %lld-parameter Qwen3 model; micro-batches of %d rows; %d threads\n\n",
              a.groups, a.n, a.turns, a.system, a.prompt, a.response, a.tool, (long long)m->config().num_parameters(),
              a.mb, at::get_num_threads());

  std::vector<Pass> first;
  for (const auto& l : layouts) first.push_back(run(m, l, a.mb));
  for (size_t k = 1; k < first.size(); ++k) {
    const double dl = std::abs(first[k].loss - first[0].loss);
    const double dg = std::abs(first[k].grad_norm - first[0].grad_norm) / first[0].grad_norm;
    if (dl > 1e-4 || dg > 1e-4) {
      std::fprintf(stderr, "VALIDATION FAILED: %s: loss %.6f vs %.6f, grad norm rel diff %.2e\n", layouts[k].name,
                   first[k].loss, first[0].loss, dg);
      return 1;
    }
  }
  std::printf("validation: loss %.6f and gradient norm %.6f agree across the three layouts\n\n", first[0].loss,
              first[0].grad_norm);
  std::vector<std::vector<double>> t(layouts.size());
  for (int r = 0; r < a.reps; ++r)
    for (size_t k = 0; k < layouts.size(); ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      run(m, layouts[k], a.mb);
      t[k].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  std::printf("| layout | rows | tokens forwarded | vs (a) | median s (fwd+bwd) | speed-up vs (a) | vs (b) |\n");
  std::printf("|---|--:|--:|--:|--:|--:|--:|\n");
  for (size_t k = 0; k < layouts.size(); ++k)
    std::printf("| %s | %zu | %lld | %.2fx fewer | %.3f | %.2fx | %.2fx |\n", layouts[k].name, layouts[k].rows.size(),
                (long long)first[k].tokens, double(first[0].tokens) / first[k].tokens, median(t[k]),
                median(t[0]) / median(t[k]), median(t[1]) / median(t[k]));
  return 0;
}
