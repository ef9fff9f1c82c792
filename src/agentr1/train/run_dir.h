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
  // Creates the directory (and parents) unless create is false (then the first write
  // creates it). Throws Error naming the path on failure.
  explicit RunDir(std::string path, bool create = true);
  const std::string& path() const { return path_; }
  std::string file(const std::string& rel) const { return path_ + "/" + rel; }

  // Atomic and durable: written to rel.tmp, fsync'd, renamed over rel, the directory
  // fsync'd; a crash leaves the old file or the new one, never a mix.
  void write_text(const std::string& rel, const std::string& text) const;
  void write_json(const std::string& rel, const json& j) const;            // as write_text, indented
  void append_jsonl(const std::string& rel, const json& j) const;          // one line

  // A run lives here already: metrics.jsonl, summary.json or checkpoints/ exists.
  bool has_run() const;
  // Removes what a run writes (config.yaml, metrics.jsonl, summary.json, trajectories/,
  // checkpoints/, remote_weights/: weights handed to remote engines, full model copies;
  // tensorboard/);
  // other files are left alone.
  void clear_run() const;
  // Resume: keeps the lines of the JSONL file rel whose "step" is <= step (and drops
  // lines that do not parse, e.g. one cut by a crash), atomically. Returns the number of
  // lines dropped; a missing file is 0.
  size_t cut_jsonl_after(const std::string& rel, int64_t step) const;
  // Resume: removes trajectories/step_N.jsonl and trajectories/val_step_N.jsonl with
  // N > step. Returns how many were removed.
  size_t cut_dumps_after(int64_t step) const;

 private:
  std::string path_;
};

// "step_000012"
std::string step_name(int64_t step);
// Creates dir and parents; throws Error naming it on failure.
void make_dirs(const std::string& dir);
// fsync of a file or a directory (best effort: errors are ignored, as on filesystems
// that do not support syncing directories).
void fsync_path(const std::string& path);
std::string read_text_file(const std::string& path);
// Metrics map -> JSON object with "step" first.
json metrics_json(int64_t step, const std::map<std::string, double>& m);

}  // namespace agentr1::train
