// agentr1/train/learner/metrics.h — the metrics map of a training step: namespaced keys
// (actor/pg_loss, critic/vf_loss, timing/gen, ...) to numbers, as the learner, the loop's
// phases and SFT report them and the step logger writes them (metrics.jsonl).
//
//   Metrics m = learner.score(rows);
//   merge_into(m, learner.update(rows, /*update_actor=*/true));
//   logger.metrics(step, m);
#pragma once

#include <map>
#include <string>

namespace agentr1::train {

using Metrics = std::map<std::string, double>;

// Copies every key of `more` into `m`; a key already in `m` takes `more`'s value.
inline void merge_into(Metrics& m, const Metrics& more) {
  for (const auto& kv : more) m[kv.first] = kv.second;
}

}  // namespace agentr1::train
