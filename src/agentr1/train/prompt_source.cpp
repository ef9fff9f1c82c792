#include "agentr1/train/prompt_source.h"

#include "agentr1/core/error.h"
#include "agentr1/core/rng.h"
#include "agentr1/tasks/dataset.h"

namespace agentr1::train {

PromptSource::PromptSource(std::vector<Sample> samples, int64_t batch_size, uint64_t seed)
    : samples_(std::move(samples)), batch_size_(batch_size), seed_(seed) {
  AGENTR1_CHECK(!samples_.empty(), "the training set has no samples (HINT: check data.train_files, or set "
                                   "data.train_size >= 1 for a generated set)");
  AGENTR1_CHECK(batch_size_ >= 1, "data.train_batch_size must be >= 1, got " << batch_size_);
}

std::vector<Sample> PromptSource::batch(int64_t step) const {
  AGENTR1_CHECK(step >= 1, "PromptSource::batch: steps count from 1, got " << step);
  const int64_t n = static_cast<int64_t>(samples_.size());
  std::vector<Sample> out;
  out.reserve(static_cast<size_t>(batch_size_));
  std::vector<size_t> order;
  int64_t order_epoch = -1;
  for (int64_t i = 0; i < batch_size_; ++i) {
    const int64_t flat = (step - 1) * batch_size_ + i;
    const int64_t epoch = flat / n;
    if (epoch != order_epoch) {
      Rng rng(derive_seed(seed_, {0x5eed, static_cast<uint64_t>(epoch)}));
      order = rng.permutation(static_cast<size_t>(n));
      order_epoch = epoch;
    }
    out.push_back(samples_[order[static_cast<size_t>(flat % n)]]);
  }
  return out;
}

namespace {

std::vector<Sample> load_or_generate(const std::string& files, const DataOptions& d, const tasks::TaskFamily& family,
                                     tasks::DataSplit split, int64_t n, uint64_t seed,
                                     const std::function<void(const Sample&)>& check) {
  if (!files.empty()) {
    tasks::JsonlReadOptions ro;
    ro.skip_bad_rows = d.skip_bad_rows;
    ro.check = check;
    auto rows = tasks::load_jsonl(files, ro);
    AGENTR1_CHECK(!rows.empty(), "dataset '" << files << "' has no samples");
    return rows;
  }
  return with_context("generating the " + tasks::data_split_name(split) + " split of task '" + family.name() + "'",
                      [&] { return family.make_dataset(split, n, seed); });
}

}  // namespace

RunDatasets load_datasets(const DataOptions& d, const tasks::TaskFamily& family,
                          const std::function<void(const Sample&)>& check) {
  RunDatasets out;
  const uint64_t seed = static_cast<uint64_t>(d.seed);
  out.train = load_or_generate(d.train_files, d, family, tasks::DataSplit::kTrain, d.train_size, seed, check);
  out.val = load_or_generate(d.val_files, d, family, tasks::DataSplit::kTest, d.val_size, seed + 1000003, check);
  return out;
}

}  // namespace agentr1::train
