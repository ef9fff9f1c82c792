// agentr1 replay — exact replay check: re-scores a dumped step file with the weights
// that produced it and reports how far the logged behaviour log-probs are from it.
//
//   agentr1 replay --dump runs/x/trajectories/step_000003.jsonl
//   # {"checkpoint": "runs/x/checkpoints/step_000002", "policy_version": 2, "steps": 64,
//   #  "tokens": 1843, "max_abs_diff": 2.1e-06, "mean_abs_diff": 3.0e-07, "tolerance": 0.001,
//   #  "within_tolerance": true}
//
// The rollouts of RL step s come from policy version s - 1 (the weights after step
// s - 1), kept as checkpoints/step_<s-1> when it was saved; version 0 is the run's
// model.path. --checkpoint overrides the choice. Each dumped step's prompt + response ids
// are scored in one forward (fp32, no cache), the response tokens' log-probs taken at the
// run's rollout.temperature (1 for greedy turns, as the sampler logs them), and compared
// with the dump's response_logprobs. Exit code 0 within --tolerance, 3 outside it (the
// JSON line is printed either way); errors (missing files, a dump of another model) are
// one line and exit code 1.
//
// The tolerance (default 1e-3) covers the engine's batched, KV-cached fp32 arithmetic
// against one uncached forward: the same numbers summed in a different order (measured
// ~1e-6 on the tiny test model); a different checkpoint is off by orders of magnitude.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/model/transformer.h"
#include "command.h"

namespace {

using agentr1::Error;
using agentr1::json;
namespace fs = std::filesystem;

struct ReplayOpts {
  std::string dump;
  std::string checkpoint;   // "" = from the run directory and the dump's policy version
  double temperature = -1;  // < 0 = the run's rollout.temperature
  double tolerance = 1e-3;
  int threads = 1;
};

// The run directory of a dump file: <run>/trajectories/step_NNNNNN.jsonl.
fs::path run_dir_of(const std::string& dump) {
  const fs::path p = fs::absolute(dump);
  return p.parent_path().parent_path();
}

int run_replay(const ReplayOpts& o) {
  namespace m = agentr1::model;
  agentr1::cli::set_threads(o.threads);
  std::ifstream in(o.dump);
  if (!in) throw Error("cannot open dump file '" + o.dump + "' (a run's trajectories/step_NNNNNN.jsonl)");
  std::vector<agentr1::Trajectory> trajs;
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded())
      throw Error(o.dump + ":" + std::to_string(lineno) + ": not valid JSON; expected one dumped trajectory per line");
    trajs.push_back(agentr1::with_context(o.dump + ":" + std::to_string(lineno),
                                          [&] { return agentr1::Trajectory::from_json(j); }));
  }
  if (trajs.empty() || trajs.front().steps.empty()) throw Error("dump file '" + o.dump + "' holds no steps");
  const int64_t version = trajs.front().steps.front().policy_version;
  for (const auto& t : trajs)
    for (const auto& s : t.steps)
      if (s.policy_version != version)
        throw Error("dump file '" + o.dump + "' mixes policy versions " + std::to_string(version) + " and " +
                    std::to_string(s.policy_version) + "; replay one version at a time with --checkpoint");

  const fs::path run = run_dir_of(o.dump);
  const fs::path config_path = run / "config.yaml";
  json cfg = json::object();
  if (fs::exists(config_path)) cfg = agentr1::load_yaml_file(config_path.string());
  std::string ckpt = o.checkpoint;
  if (ckpt.empty()) {
    if (version == 0) {
      if (!cfg.contains("model") || !cfg["model"].value("path", json("")).is_string() ||
          cfg["model"]["path"].get<std::string>().empty())
        throw Error("the dump comes from the run's initial model (policy version 0), but " + config_path.string() +
                    " names no model.path; pass --checkpoint DIR");
      ckpt = cfg["model"]["path"].get<std::string>();
    } else {
      char name[32];
      std::snprintf(name, sizeof(name), "step_%06lld", static_cast<long long>(version));
      ckpt = (run / "checkpoints" / name).string();
      if (!fs::exists(fs::path(ckpt) / "model.safetensors") && !fs::exists(fs::path(ckpt) / "adapter_model.safetensors"))
        throw Error("the dump comes from policy version " + std::to_string(version) + ", but " + ckpt +
                    " was not saved (trainer.save_freq); pass --checkpoint DIR with those weights");
    }
  }
  double temperature = o.temperature;
  if (temperature < 0) {
    temperature = 1.0;
    if (cfg.contains("rollout") && cfg["rollout"].contains("temperature") && cfg["rollout"]["temperature"].is_number())
      temperature = cfg["rollout"]["temperature"].get<double>();
  }
  if (!(temperature > 0)) temperature = 1.0;  // greedy turns log T = 1 log-probs

  m::Transformer model = agentr1::with_context("loading checkpoint '" + ckpt + "'", [&] {
    return m::load_model_dir(ckpt, at::kFloat, at::kCPU);  // a LoRA checkpoint: its base + adapter
  });
  model->eval();
  const int64_t vocab = model->config().vocab_size;
  at::NoGradGuard no_grad;
  double max_diff = 0, sum_diff = 0;
  int64_t tokens = 0, steps = 0;
  for (size_t ti = 0; ti < trajs.size(); ++ti) {
    for (size_t si = 0; si < trajs[ti].steps.size(); ++si) {
      const agentr1::Step& s = trajs[ti].steps[si];
      if (s.response_ids.empty()) continue;
      const std::string where = "trajectory " + std::to_string(ti) + " step " + std::to_string(si);
      if (s.response_logprobs.size() != s.response_ids.size())
        throw Error(where + ": " + std::to_string(s.response_logprobs.size()) + " logged log-probs for " +
                    std::to_string(s.response_ids.size()) + " response tokens; the dump is damaged");
      std::vector<int64_t> ids(s.prompt_ids.begin(), s.prompt_ids.end());
      ids.insert(ids.end(), s.response_ids.begin(), s.response_ids.end());
      for (int64_t id : ids)
        if (id < 0 || id >= vocab)
          throw Error(where + ": token id " + std::to_string(id) + " is outside the checkpoint's vocabulary [0, " +
                      std::to_string(vocab) + "); the dump comes from another model");
      at::Tensor t = at::from_blob(ids.data(), {1, static_cast<int64_t>(ids.size())}, at::kLong);
      at::Tensor logits = model->forward(t).to(at::kFloat);   // [1, T, V]
      const int64_t p = static_cast<int64_t>(s.prompt_ids.size());
      const int64_t n = static_cast<int64_t>(s.response_ids.size());
      at::Tensor lp = at::log_softmax(logits[0].slice(0, p - 1, p - 1 + n) / temperature, -1);
      at::Tensor tgt = at::from_blob(ids.data() + p, {n, 1}, at::kLong);
      at::Tensor got = lp.gather(1, tgt).squeeze(1).contiguous();
      const float* g = got.data_ptr<float>();
      for (int64_t k = 0; k < n; ++k) {
        const double d = std::abs(static_cast<double>(g[k]) - static_cast<double>(s.response_logprobs[k]));
        max_diff = std::max(max_diff, d);
        sum_diff += d;
      }
      tokens += n;
      ++steps;
    }
  }
  json out = json::object();
  out["checkpoint"] = ckpt;
  out["policy_version"] = version;
  out["temperature"] = temperature;
  out["steps"] = steps;
  out["tokens"] = tokens;
  out["max_abs_diff"] = max_diff;
  out["mean_abs_diff"] = tokens > 0 ? sum_diff / static_cast<double>(tokens) : 0.0;
  out["tolerance"] = o.tolerance;
  out["within_tolerance"] = max_diff <= o.tolerance;
  std::cout << out.dump() << "\n";
  return max_diff <= o.tolerance ? 0 : 3;
}

agentr1::cli::Registrar reg("replay",
                            "Re-score a dumped step with the checkpoint that produced it; report the log-prob gap",
                            [](CLI::App& app) {
  auto o = std::make_shared<ReplayOpts>();
  app.add_option("--dump", o->dump, "a run's trajectories/step_NNNNNN.jsonl")->required();
  app.add_option("--checkpoint", o->checkpoint,
                 "HF model directory with the weights that sampled the dump (default: the run's checkpoint of the "
                 "dump's policy version, or model.path for version 0)");
  app.add_option("--temperature", o->temperature, "sampling temperature of the dump (default: the run's rollout.temperature)")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--tolerance", o->tolerance, "largest |logged - replayed| log-prob accepted")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));
  app.add_option("--threads", o->threads, "torch threads (0 = all cores)")->capture_default_str();
  return [o]() -> int { return run_replay(*o); };
});

}  // namespace
