#include "agentr1/tasks/data_split.h"

#include "agentr1/core/error.h"

namespace agentr1::tasks {

DataSplit parse_data_split(const std::string& name) {
  if (name == "train") return DataSplit::kTrain;
  if (name == "test") return DataSplit::kTest;
  if (name == "any") return DataSplit::kAny;
  throw Error("unknown data split '" + name + "'; known: train, test, any");
}

std::string data_split_name(DataSplit split) {
  switch (split) {
    case DataSplit::kTrain: return "train";
    case DataSplit::kTest: return "test";
    case DataSplit::kAny: return "any";
  }
  return "?";
}

}  // namespace agentr1::tasks
