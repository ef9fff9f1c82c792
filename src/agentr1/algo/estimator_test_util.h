// Test helpers for the algo estimator/loss tests: runs tests/ref/algo_estimators_ref.py
// once per test binary and converts its JSON.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/algo/estimator.h"
#include "agentr1/core/json.h"

namespace agentr1::algo::testing {

inline json& estimators_reference() {
  static json ref = [] {
    char tmpl[] = "/tmp/agentr1_algo_est_XXXXXX";
    const char* dir = mkdtemp(tmpl);
    EXPECT_NE(dir, nullptr);
    const std::string out = std::string(dir) + "/algo_estimators_ref.json";
    const std::string cmd = std::string(AGENTR1_PYTHON) + " " + AGENTR1_SOURCE_DIR +
                            "/tests/ref/algo_estimators_ref.py " + out;
    const int rc = std::system(cmd.c_str());
    if (rc != 0) {
      ADD_FAILURE() << "reference script failed (" << cmd
                    << "); it needs Debian's python3-torch: run scripts/setup.sh";
      return json::object();
    }
    std::ifstream f(out);
    json j = json::parse(f);
    std::remove(out.c_str());
    ::rmdir(dir);
    return j;
  }();
  return ref;
}

inline at::Tensor tensor_from(const json& rows) {
  // [B,T] or [B,T,V] nested arrays of numbers -> double tensor
  std::vector<int64_t> shape;
  const json* p = &rows;
  while (p->is_array()) {
    shape.push_back(static_cast<int64_t>(p->size()));
    p = &(*p)[0];
  }
  std::vector<double> flat;
  std::function<void(const json&)> walk = [&](const json& j) {
    if (j.is_array())
      for (const auto& x : j) walk(x);
    else
      flat.push_back(j.get<double>());
  };
  walk(rows);
  return at::tensor(flat, at::kDouble).reshape(shape);
}

// A reference batch and the per-token vectors its steps' views point into (so it is
// not copyable: a copy's views would point at the original's storage).
struct RefBatch {
  RefBatch() = default;
  RefBatch(const RefBatch&) = delete;
  RefBatch& operator=(const RefBatch&) = delete;
  RefBatch(RefBatch&&) = default;  // moving the outer vector keeps the inner buffers
  std::vector<std::vector<float>> store;
  std::vector<TrajectoryTokens> trajs;
};

inline RefBatch trajectories_from(const json& trajs) {
  RefBatch out;
  for (const auto& t : trajs)
    for (const auto& s : t["steps"]) {
      out.store.push_back(s["token_values"].get<std::vector<float>>());
      out.store.push_back(s["token_kl"].get<std::vector<float>>());
    }
  size_t k = 0;
  for (const auto& t : trajs) {
    TrajectoryTokens tr;
    tr.group = t["group"].get<std::string>();
    tr.outcome_reward = t["outcome_reward"].get<float>();
    for (const auto& s : t["steps"]) {
      StepTokens st;
      st.reward = s["reward"].get<float>();
      st.n_tokens = s["n_tokens"].get<int64_t>();
      st.value = s["value"].get<float>();
      st.token_values = out.store[k++];
      st.token_kl = out.store[k++];
      if (s.contains("anchor")) st.anchor = s["anchor"].get<std::string>();
      tr.steps.push_back(std::move(st));
    }
    out.trajs.push_back(std::move(tr));
  }
  return out;
}

}  // namespace agentr1::algo::testing
