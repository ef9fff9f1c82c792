// agentr1/train/run_dir.h — the run directory and its files.
//
//   RunDir run(cfg.trainer.output_dir.empty() ? "runs/" + name : cfg.trainer.output_dir);
//   run.write_text("config.yaml", to_yaml(tree));
//   run.append_jsonl("metrics.jsonl", metrics_json);           // one line per step
//   run.append_jsonl("trajectories/step_000003.jsonl", traj);  // step-level dumps
//   run.write_json("summary.json", summary);                   // atomically (tmp + rename)
//
// Layout: config.yaml, metrics.jsonl, trajectories/step_NNNNNN.jsonl,
// checkpoints/step_NNNNNN/ (HF model + trainer_state.json), summary.json.
#pragma once

#include <map>
#include <string>

#include "agentr1/core/json.h"

namespace agentr1::train {

class RunDir {
 public:
  // Creates the directory (and parents). Throws Error naming the path on failure.
  explicit RunDir(std::string path);
  const std::string& path() const { return path_; }
  std::string file(const std::string& rel) const { return path_ + "/" + rel; }

  void write_text(const std::string& rel, const std::string& text) const;  // atomic
  void write_json(const std::string& rel, const json& j) const;            // atomic, indented
  void append_jsonl(const std::string& rel, const json& j) const;          // one line

 private:
  std::string path_;
};

// "step_000012"
std::string step_name(int64_t step);
// Creates dir and parents; throws Error naming it on failure.
void make_dirs(const std::string& dir);
std::string read_text_file(const std::string& path);
// Metrics map -> JSON object with "step" first.
json metrics_json(int64_t step, const std::map<std::string, double>& m);

}  // namespace agentr1::train
