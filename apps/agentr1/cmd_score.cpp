// agentr1 score — per-token log-probs of token sequences under a model.
//
//   echo '[9707, 1879, 0]' | agentr1 score --model models/tiny     # [-5.1, -7.3]
//
// Reads one JSON array of token ids per line on stdin and prints, per line, a JSON
// array with log p(ids[t] | ids[<t]) for every token after the first (fp32 compute).
// Blank lines are skipped. A bad line stops with a one-line error naming the line
// number (exit code 1).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/model/transformer.h"
#include "command.h"

namespace {

using agentr1::Error;
using agentr1::json;

struct ScoreOpts {
  std::string model;  // HF model directory (config.json + safetensors)
  int threads = 0;    // torch threads; 0 = all cores
};

int run_score(const ScoreOpts& o) {
  namespace m = agentr1::model;
  agentr1::cli::set_threads(o.threads);
  m::Transformer model = m::load_model_dir(o.model, at::kFloat, at::kCPU);  // or a LoRA adapter over its base
  const int64_t vocab = model->config().vocab_size;
  at::NoGradGuard no_grad;
  std::ios::sync_with_stdio(false);
  std::string line;
  size_t lineno = 0;
  while (std::getline(std::cin, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = "stdin line " + std::to_string(lineno);
    json v;
    try {
      v = json::parse(line);
    } catch (const json::exception& e) {
      throw Error(where + ": not valid JSON (" + e.what() + "); expected an array of token ids");
    }
    if (!v.is_array()) throw Error(where + ": expected a JSON array of token ids, got " + v.type_name());
    std::vector<int64_t> ids;
    ids.reserve(v.size());
    for (const auto& x : v) {
      if (!x.is_number_integer()) throw Error(where + ": token ids must be integers, got " + x.dump());
      const int64_t id = x.get<int64_t>();
      if (id < 0 || id >= vocab)
        throw Error(where + ": token id " + std::to_string(id) + " is outside the model's vocabulary [0, " +
                    std::to_string(vocab) + ")");
      ids.push_back(id);
    }
    const int64_t max_pos = model->config().max_position_embeddings;
    if (static_cast<int64_t>(ids.size()) > max_pos)
      throw Error(where + ": " + std::to_string(ids.size()) + " tokens, more than the model's max_position_embeddings " +
                  std::to_string(max_pos) + " (positions past it were never trained); shorten the sequence");
    json out = json::array();
    if (ids.size() >= 2) {
      at::Tensor t = at::from_blob(ids.data(), {1, static_cast<int64_t>(ids.size())}, at::kLong);
      at::Tensor lp = m::token_logprobs(model, t)[0].contiguous();
      const float* p = lp.data_ptr<float>();
      for (int64_t i = 0; i < lp.size(0); ++i) out.push_back(static_cast<double>(p[i]));
    }
    std::cout << out.dump() << '\n';
  }
  std::cout.flush();
  return 0;
}

agentr1::cli::Registrar reg("score", "Per-token log-probs of token id sequences (JSON lines)", [](CLI::App& app) {
  auto o = std::make_shared<ScoreOpts>();
  app.add_option("--model", o->model, "HF model directory")->required();
  app.add_option("--threads", o->threads, "torch threads (0 = all cores)")->capture_default_str();
  return [o]() { return run_score(*o); };
});

}  // namespace
