#include "agentr1/rollout/block_pool.h"

#include <algorithm>

#include "agentr1/core/error.h"

namespace agentr1::rollout {

BlockPool::BlockPool(int n_blocks, int block_size, bool share) : bs_(block_size), share_(share) {
  AGENTR1_CHECK(n_blocks >= 1, "BlockPool: n_blocks must be >= 1, got " << n_blocks);
  AGENTR1_CHECK(block_size >= 1, "BlockPool: block_size must be >= 1, got " << block_size);
  nodes_.resize(static_cast<size_t>(n_blocks));
  for (int b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // allocate 0, 1, ... first
}

BlockPool::Match BlockPool::longest_prefix(const TokenIds& ids, int max_len) const {
  Match m;
  if (!share_) return m;
  const int cap = std::min(max_len, static_cast<int>(ids.size()));
  const std::vector<int32_t>* kids = &root_;
  int pos = 0;
  while (pos < cap) {
    int32_t best = -1;
    int best_len = 0;
    const int limit = std::min(bs_, cap - pos);
    for (int32_t c : *kids) {
      const TokenIds& t = nodes_[c].tokens;
      const int n = std::min(limit, static_cast<int>(t.size()));
      int k = 0;
      while (k < n && t[k] == ids[pos + k]) ++k;
      if (k > best_len) {
        best = c;
        best_len = k;
      }
    }
    if (best < 0) break;
    if (best_len == bs_) {  // a full block, all of it: share it and go on
      m.shared.push_back(best);
      pos += bs_;
      kids = &nodes_[best].children;
      continue;
    }
    m.copy_src = best;
    m.copy_len = best_len;
    m.take_over = nodes_[best].ref == 0 && nodes_[best].children.empty();
    break;
  }
  return m;
}

void BlockPool::ref_inc(int32_t b) {
  Node& n = nodes_[b];
  if (n.ref == 0 && n.in_tree) --n_cached_;
  ++n.ref;
  n.last_use = ++clock_;
}

int32_t BlockPool::allocate() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    uint64_t oldest = UINT64_MAX;
    for (int32_t i = 0; i < n_blocks(); ++i) {
      const Node& n = nodes_[i];
      if (n.in_tree && n.ref == 0 && n.children.empty() && n.last_use < oldest) {
        oldest = n.last_use;
        b = i;
      }
    }
    AGENTR1_CHECK(b >= 0, "BlockPool: no free or evictable block (internal error: reservations exceeded)");
    detach(b);
    --n_cached_;
  }
  Node& n = nodes_[b];
  n.tokens.clear();
  n.children.clear();
  n.parent = -1;
  n.in_tree = false;
  n.ref = 1;
  n.last_use = ++clock_;
  return b;
}

void BlockPool::insert(int32_t b, int32_t parent) {
  nodes_[b].parent = parent;
  nodes_[b].in_tree = true;
  children_of(parent).push_back(b);
}

void BlockPool::detach(int32_t b) {
  Node& n = nodes_[b];
  if (!n.in_tree) return;
  std::vector<int32_t>& sib = children_of(n.parent);
  sib.erase(std::remove(sib.begin(), sib.end(), b), sib.end());
  n.in_tree = false;
  n.parent = -1;
}

bool BlockPool::start(Seq& s, const Match& m, int need_positions, Copy* copy) {
  AGENTR1_CHECK(s.table.empty() && s.len == 0, "BlockPool::start: the sequence already holds blocks");
  const int need_blocks = std::max(1, (need_positions + bs_ - 1) / bs_);
  AGENTR1_CHECK(need_blocks <= n_blocks(), "BlockPool: a sequence of " << need_positions << " positions needs "
                                                                        << need_blocks << " blocks; the pool has "
                                                                        << n_blocks());
  for (int32_t b : m.shared) ref_inc(b);
  if (m.take_over) ref_inc(m.copy_src);
  const int to_allocate = need_blocks - static_cast<int>(m.shared.size()) - (m.take_over ? 1 : 0);
  if (n_free() + n_cached_ - reserved_ < to_allocate) {  // undo: this request waits
    auto undo = [&](int32_t b) {
      if (--nodes_[b].ref == 0 && nodes_[b].in_tree) ++n_cached_;
    };
    for (int32_t b : m.shared) undo(b);
    if (m.take_over) undo(m.copy_src);
    return false;
  }
  reserved_ += to_allocate;
  s.reserved = to_allocate;
  s.table = m.shared;
  s.len = static_cast<int>(m.shared.size()) * bs_;
  *copy = Copy{};
  if (m.take_over) {
    nodes_[m.copy_src].tokens.resize(static_cast<size_t>(m.copy_len));
    s.table.push_back(m.copy_src);
    s.len += m.copy_len;
  } else if (m.copy_src >= 0 && m.copy_len > 0) {
    --s.reserved;
    --reserved_;
    const int32_t dst = allocate();
    const TokenIds& src = nodes_[m.copy_src].tokens;
    nodes_[dst].tokens.assign(src.begin(), src.begin() + m.copy_len);
    if (share_) insert(dst, m.shared.empty() ? -1 : m.shared.back());
    s.table.push_back(dst);
    s.len += m.copy_len;
    *copy = Copy{m.copy_src, dst, m.copy_len};
  }
  peak_in_use_ = std::max(peak_in_use_, n_in_use());
  return true;
}

void BlockPool::grow(Seq& s, int upto) {
  while (static_cast<int>(s.table.size()) * bs_ < upto) {
    AGENTR1_CHECK(s.reserved > 0, "BlockPool::grow: the sequence outgrew its reservation (internal error)");
    --s.reserved;
    --reserved_;
    const int32_t b = allocate();
    // In the tree when its predecessor is (a block being grown past is full).
    if (share_ && (s.table.empty() || nodes_[s.table.back()].in_tree))
      insert(b, s.table.empty() ? -1 : s.table.back());
    s.table.push_back(b);
  }
  peak_in_use_ = std::max(peak_in_use_, n_in_use());
}

void BlockPool::append(Seq& s, const TokenId* ids, int n) {
  for (int i = 0; i < n; ++i, ++s.len) {
    const size_t bi = static_cast<size_t>(s.len / bs_);
    AGENTR1_CHECK(bi < s.table.size(), "BlockPool::append: position " << s.len << " has no block (grow first)");
    TokenIds& t = nodes_[s.table[bi]].tokens;
    AGENTR1_CHECK(static_cast<int>(t.size()) == s.len % bs_,
                  "BlockPool::append: block " << s.table[bi] << " holds " << t.size() << " tokens, expected "
                                              << s.len % bs_ << " (internal error)");
    t.push_back(ids[i]);
  }
}

void BlockPool::release(Seq& s) {
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) {  // leaves first
    Node& n = nodes_[*it];
    n.last_use = ++clock_;
    if (--n.ref > 0) continue;
    if (n.in_tree && !n.tokens.empty()) {
      ++n_cached_;
    } else {  // out of the tree, or empty: nothing to reuse
      detach(*it);
      n.tokens.clear();
      n.children.clear();  // an empty block has no children; a detached one lost them
      free_.push_back(*it);
    }
  }
  reserved_ -= s.reserved;
  s = Seq{};
}

void BlockPool::clear_cached() {
  for (int32_t b = 0; b < n_blocks(); ++b) {
    Node& n = nodes_[b];
    if (!n.in_tree) continue;
    n.in_tree = false;
    n.parent = -1;
    n.children.clear();
    if (n.ref == 0) {
      n.tokens.clear();
      free_.push_back(b);
      --n_cached_;
    }
  }
  root_.clear();
}

}  // namespace agentr1::rollout
