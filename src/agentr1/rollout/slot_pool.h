// agentr1/rollout/slot_pool.h — bookkeeping for the engine's KV-cache slots and the
// prefix cache: which slot holds which tokens, who is using it, which to evict.
//
//   SlotPool pool(/*n_slots=*/128);
//   SlotPool::Match m = pool.longest_prefix(prompt, /*max_len=*/prompt.size() - 1);
//   int s = pool.acquire_free();             // free slot, else evicts the LRU cached one
//   pool.set_running(s); pool.tokens(s) = ...;  // mirror of what the KV cache holds
//   pool.release(s, /*keep=*/true);          // finished: keep its KV for later reuse
//
// No tensors here: the engine mirrors every change it makes to model::KVCache (invariant:
// tokens(s).size() == cache.length(s)). A slot is in one of three states:
//   kFree     holds nothing useful
//   kRunning  owned by an in-flight sequence (its tokens may still be matched and
//             copied from, never evicted)
//   kCached   a finished sequence's KV kept for prefix reuse; evicted least recently
//             used first
#pragma once

#include <cstdint>
#include <vector>

#include "agentr1/core/generator.h"

namespace agentr1::rollout {

class SlotPool {
 public:
  enum class State { kFree, kRunning, kCached };
  struct Match {
    int slot = -1;   // -1: no slot shares a prefix
    int len = 0;     // number of leading tokens shared (0 when slot == -1)
  };

  explicit SlotPool(int n_slots);

  int n_slots() const { return static_cast<int>(slots_.size()); }
  State state(int slot) const { return slots_.at(slot).state; }
  // The tokens whose keys/values slot `slot` holds, in position order.
  TokenIds& tokens(int slot) { return slots_.at(slot).tokens; }
  const TokenIds& tokens(int slot) const { return slots_.at(slot).tokens; }

  // The shareable running or cached slot sharing the longest prefix with `ids`, capped at
  // max_len. Ties prefer a cached slot (it can be taken over without a copy), then
  // the lower slot index.
  Match longest_prefix(const TokenIds& ids, int max_len) const;

  // A free slot, else the least recently used cached slot other than `keep` (which is
  // emptied and returned). Returns -1 when every slot is running (or is `keep`).
  // The returned slot is still kFree/kCached: call set_running.
  int acquire_free(int keep = -1);
  // Marks the slot running (from any state); touches its LRU stamp.
  void set_running(int slot);
  // A running slot's sequence finished: keep=true caches its tokens for reuse
  // (kCached, most recently used), keep=false empties it (kFree).
  void release(int slot, bool keep);
  // Empties every cached slot (weights changed: their keys/values are stale) and stops
  // the running ones from being matched (they keep running; when released they are
  // emptied, not cached). Returns the slots that were emptied.
  std::vector<int> clear_cached();

  int count(State s) const;

 private:
  struct Slot {
    State state = State::kFree;
    TokenIds tokens;
    uint64_t last_use = 0;
    bool shareable = true;  // false: keys/values predate clear_cached(), never matched
  };
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
};

}  // namespace agentr1::rollout
