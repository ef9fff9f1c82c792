// agentr1/tasks/data_split.h — which side of a family's train/test partition a sample
// comes from. Every family partitions its generated data deterministically (by a hash
// of the problem, question, goal or world), so held-out samples never appear in training.
//
//   DataSplit s = parse_data_split("test");   // kTest
//   data_split_name(s);                       // "test"
//   parse_data_split("dev");                  // Error "unknown data split 'dev'; known: train, test, any"
#pragma once

#include <string>

namespace agentr1::tasks {

enum class DataSplit {
  kTrain,  // the training side of the partition
  kTest,   // the held-out side (disjoint from kTrain)
  kAny,    // no partition
};
// "train" | "test" | "any"; anything else throws Error listing them.
DataSplit parse_data_split(const std::string& name);
std::string data_split_name(DataSplit split);

}  // namespace agentr1::tasks
