// agentr1/view/run_reader.h — what `agentr1 view` reads from run directories, as the
// JSON its web page asks for. Pure file reading: no server, no torch; the files may be
// growing while a run trains, so every read takes what is complete and no more.
//
//   std::vector<RunEntry> runs = discover_runs({"runs/default", "runs/compare"});
//   json m = read_metrics(runs[0].path, 0);      // {"records": [...], "next": offset}
//   json s = list_steps(runs[0].path);           // {"train": [1, 2], "val": [0, 10]}
//   json t = read_trajectories(runs[0].path, 2, DumpKind::Train, &tok);
//
// A run directory (train/run_dir.h) holds config.yaml, metrics.jsonl,
// trajectories/step_NNNNNN.jsonl, trajectories/val_step_NNNNNN.jsonl, summary.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::text {
class Tokenizer;
}

namespace agentr1::view {

struct RunEntry {
  std::string name;  // the directory's name; "parent/child" for the runs of a compare or
                     // benchmark directory (path relative to the directory given)
  std::string path;  // as given, or given + "/" + the relative path
};

// A directory is a run when it has metrics.jsonl, summary.json, config.yaml or
// trajectories/. A path that is not a run is searched (3 levels deep, names sorted) for
// runs: a compare or benchmark directory opens as its runs. A path that does not exist
// yet, or an empty directory, is a run that has not written its files yet (a viewer
// started with its trainer; logged as a WARN). Throws Error naming the path when it is
// not a directory, or holds no run but other files.
std::vector<RunEntry> discover_runs(const std::vector<std::string>& paths);

// metrics.jsonl from byte `offset` on: {"records": [one object per complete line],
// "next": offset after the last complete line, "file": the file's identity (device and
// inode), "skipped": lines that were not JSON objects}. A last line without its newline
// is being written: it is left for the next call. A missing file gives no records and
// next = offset. The file was replaced (--overwrite removes it, --resume cuts it by
// renaming a new one over it) when `file` is given and differs from the file's identity,
// or when offset is past its end: then it is read from 0 and the answer says "reset": true.
json read_metrics(const std::string& run_dir, uint64_t offset, const std::string& file = "");

// {"train": [steps with trajectories/step_N.jsonl], "val": [steps with val_step_N.jsonl]},
// ascending. A missing trajectories/ gives two empty lists.
json list_steps(const std::string& run_dir);

enum class DumpKind { Train, Val };

// Adds to each step of one dump record (a Trajectory's JSON with the logger's columns):
//   "prompt_carried"    leading prompt tokens equal to the previous step's prompt followed
//                       by its response (0 at the first step): what the context policy
//                       kept unchanged;
//   "prompt_rewritten"  the prompt is not an extension of that concatenation (the
//                       context policy dropped or changed earlier context);
// and, with a tokenizer: "prompt_text" and "response_text" (decoded) where the dump has
// none, "prompt_pieces" and "response_pieces" (one string per id, joining to the decoded
// text: the text each id completes, so a character split over byte tokens is carried by
// the id that completes it and the ids before it have ""; for a decoder that cannot decode
// incrementally, each id decoded alone).
// Steps without prompt_ids/response_ids arrays are left as they are.
void annotate_trajectory(json& record, const text::Tokenizer* tokenizer);

// {"trajectories": [annotated records of trajectories/(val_)step_N.jsonl]}. Throws Error
// (naming the file) when the dump does not exist; lines that do not parse are skipped and
// counted in "skipped" (a line cut by a crash).
json read_trajectories(const std::string& run_dir, int64_t step, DumpKind kind, const text::Tokenizer* tokenizer);

// The same validation prompt across the run's validation dumps: the index-th record of
// the first val dump names the sample; each val dump contributes its record with an
// equal "sample" (or, for dumps without samples, the index-th record).
// {"sample": ..., "steps": [{"step": S, "trajectory": annotated record}]}. Throws Error
// when there is no val dump or index is out of range (the message says how many there are).
json val_compare(const std::string& run_dir, int64_t index, const text::Tokenizer* tokenizer);

// {"text": config.yaml's text} ("" when missing) and summary.json's object ({} when
// missing or not JSON).
json read_config(const std::string& run_dir);
json read_summary(const std::string& run_dir);

// The tokenizer directory for a run: the newest checkpoints/step_N/ with a tokenizer.json,
// else config.yaml's model.path when it has one (relative paths as the trainer reads them:
// from the current directory), else "" (no tokenizer: the page shows ids).
std::string find_tokenizer_dir(const std::string& run_dir);

}  // namespace agentr1::view
