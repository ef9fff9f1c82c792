// agentr1/train/prompt_source.h — the prompts of each RL step, and the run's datasets.
//
//   auto family = tasks::make_task_family(cfg.data.task, cfg.data.task_kwargs);
//   RunDatasets d = load_datasets(cfg.data, *family);     // JSONL files, else generated
//   PromptSource prompts(d.train, cfg.data.train_batch_size, cfg.data.seed);
//   std::vector<Sample> batch = prompts.batch(step);      // step 1, 2, ...
//
// batch(step) depends only on (samples, batch size, seed, step): sample number
// (step-1) * batch_size + i of an endless sequence of epochs, each a permutation drawn
// from derive_seed(seed, {0x5eed, epoch}). A resumed run therefore sees exactly the
// prompts the uninterrupted run would have seen, with no cursor to save.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "agentr1/core/trajectory.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/train/train_config.h"

namespace agentr1::train {

class PromptSource {
 public:
  // Throws Error if samples is empty or batch_size < 1.
  PromptSource(std::vector<Sample> samples, int64_t batch_size, uint64_t seed);
  std::vector<Sample> batch(int64_t step) const;  // step >= 1
  size_t size() const { return samples_.size(); }

 private:
  std::vector<Sample> samples_;
  int64_t batch_size_;
  uint64_t seed_;
};

struct RunDatasets {
  std::vector<Sample> train;  // data.train_files, else family.make_dataset(kTrain, train_size, seed)
  std::vector<Sample> val;    // data.val_files, else family.make_dataset(kTest, val_size, seed + 1000003)
};

// Throws Error naming the file (bad rows, no rows) or the family's error.
// check (may be empty) runs on every row read from a file (tasks::JsonlReadOptions::check:
// a failing row is reported with file:line, or skipped with data.skip_bad_rows).
RunDatasets load_datasets(const DataOptions& data, const tasks::TaskFamily& family,
                          const std::function<void(const Sample&)>& check = {});

}  // namespace agentr1::train
