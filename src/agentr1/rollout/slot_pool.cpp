#include "agentr1/rollout/slot_pool.h"

#include <algorithm>

#include "agentr1/core/error.h"

namespace agentr1::rollout {

SlotPool::SlotPool(int n_slots) {
  AGENTR1_CHECK(n_slots >= 1, "SlotPool: n_slots must be >= 1, got " << n_slots);
  slots_.resize(static_cast<size_t>(n_slots));
}

SlotPool::Match SlotPool::longest_prefix(const TokenIds& ids, int max_len) const {
  Match best;
  const size_t cap = static_cast<size_t>(std::max(0, max_len));
  for (int s = 0; s < n_slots(); ++s) {
    const Slot& sl = slots_[s];
    if (sl.state == State::kFree || !sl.shareable || sl.tokens.empty()) continue;
    const size_t n = std::min({cap, ids.size(), sl.tokens.size()});
    size_t i = 0;
    while (i < n && ids[i] == sl.tokens[i]) ++i;
    if (i == 0) continue;
    const int len = static_cast<int>(i);
    const bool better =
        len > best.len || (len == best.len && sl.state == State::kCached &&
                           slots_[best.slot].state != State::kCached);
    if (better) best = {s, len};
  }
  return best;
}

int SlotPool::acquire_free(int keep) {
  int lru = -1;
  for (int s = 0; s < n_slots(); ++s) {
    const Slot& sl = slots_[s];
    if (sl.state == State::kFree && s != keep) return s;
    if (sl.state == State::kCached && s != keep &&
        (lru < 0 || sl.last_use < slots_[lru].last_use))
      lru = s;
  }
  if (lru >= 0) {
    slots_[lru].state = State::kFree;
    slots_[lru].tokens.clear();
  }
  return lru;
}

void SlotPool::set_running(int slot) {
  Slot& sl = slots_.at(slot);
  if (sl.state != State::kRunning) sl.shareable = true;
  sl.state = State::kRunning;
  sl.last_use = ++clock_;
}

void SlotPool::release(int slot, bool keep) {
  Slot& sl = slots_.at(slot);
  AGENTR1_CHECK(sl.state == State::kRunning,
                "SlotPool::release: slot " << slot << " is not running");
  if (keep && sl.shareable && !sl.tokens.empty()) {
    sl.state = State::kCached;
    sl.last_use = ++clock_;
  } else {
    sl.state = State::kFree;
    sl.shareable = true;
    sl.tokens.clear();
  }
}

std::vector<int> SlotPool::clear_cached() {
  std::vector<int> emptied;
  for (int s = 0; s < n_slots(); ++s) {
    if (slots_[s].state == State::kRunning) slots_[s].shareable = false;
    if (slots_[s].state != State::kCached) continue;
    slots_[s].state = State::kFree;
    slots_[s].tokens.clear();
    emptied.push_back(s);
  }
  return emptied;
}

int SlotPool::count(State st) const {
  return static_cast<int>(
      std::count_if(slots_.begin(), slots_.end(), [st](const Slot& s) { return s.state == st; }));
}

}  // namespace agentr1::rollout
