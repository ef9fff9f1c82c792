// agentr1/train/rollout/weight_push.h — handing the learner's weights to remote inference
// servers (rollout.engine=remote): the policy written to disk in HF layout, then loaded
// by every server. Used by RemoteBackend (rollout_backend.h): written when a version is
// staged, loaded when it is applied (in turn with generation under SyncRolloutSource; by
// the producer under AsyncRolloutSource).
//
//   WeightPusher w(policy, at::kFloat, "/shared/weights", "models/qwen3");
//   std::string dir = w.write(3);   // <weights_dir>/policy_v000003, on the learner's thread
//   w.load(gen, dir, 3);            // every server loads it; gen stamps 3; v2's directory goes
//   w.push(gen, 4);                 // write, then load
//
// write(v) writes config.json, model.safetensors (in `dtype`) and the tokenizer files of
// `tokenizer_dir` under <dir>.tmp and renames it to <dir> (a server never sees half a
// model). load() asks every server to load it (RemoteGenerator::update_weights: POST
// /update_weights_from_disk with model_path and policy_version, in parallel), and only
// when all succeeded removes the previously loaded directory (no server reads it any
// more). A directory written but never loaded (a newer version replaced it first) is
// removed with discard().
//
// Threads: write() and discard() on one thread (the learner's: write reads the policy's
// parameters, which only that thread changes), load() on one thread (possibly another);
// they touch different directories, except that load() removes the directory it
// replaces, which write() never targets again (versions only grow).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "agentr1/model/transformer.h"

namespace agentr1::rollout {
class RemoteGenerator;
}

namespace agentr1::train {

// "policy_v000003": the directory name of version 3 under weights_dir.
std::string policy_dir_name(int64_t version);

class WeightPusher {
 public:
  // policy: the learner's module (shared handle, read by write()). dtype: what the
  // servers load (the training dtype: the same bits they generate with). weights_dir:
  // created when missing; must be readable by the servers under the same path.
  // tokenizer_dir: the model directory whose tokenizer files are copied beside the
  // weights. Throws Error when weights_dir is empty.
  WeightPusher(model::Transformer policy, at::ScalarType dtype, std::string weights_dir, std::string tokenizer_dir);

  // Writes version `version` and returns its absolute directory. Throws Error (naming the
  // directory and rollout.remote.weights_dir) when writing fails; nothing is left under
  // the final name then.
  std::string write(int64_t version);
  // Every server of `gen` loads `dir` as `version` (see the top). Throws Error naming each
  // server that failed; the previously loaded directory is then kept.
  void load(rollout::RemoteGenerator& gen, const std::string& dir, int64_t version);
  // write(), then load(): the synchronous hand-over. Returns the seconds it took.
  double push(rollout::RemoteGenerator& gen, int64_t version);
  // Removes a directory write() returned that will not be loaded (best effort).
  void discard(const std::string& dir);

  // The directory the servers loaded last ("" before the first load).
  const std::string& loaded_dir() const { return loaded_dir_; }
  const std::string& weights_dir() const { return weights_dir_; }

 private:
  model::Transformer policy_;
  at::ScalarType dtype_;
  std::string weights_dir_;
  std::string tokenizer_dir_;
  std::string loaded_dir_;
};

}  // namespace agentr1::train
