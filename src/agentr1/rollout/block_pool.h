// agentr1/rollout/block_pool.h — bookkeeping for the engine's paged KV cache: which
// block holds which tokens, who references it, which cached prefix a new request can
// reuse, and which block to evict.
//
//   BlockPool pool(/*n_blocks=*/1024, /*block_size=*/16, /*share=*/true);
//   BlockPool::Match m = pool.longest_prefix(prompt, prompt.size() - 1);
//   BlockPool::Seq s;
//   BlockPool::Copy cp;
//   if (pool.start(s, m, /*need_positions=*/prompt.size() + max_new, &cp)) {
//     if (cp.src >= 0) cache.copy_block(cp.src, cp.dst, cp.n);  // copy-on-write
//     pool.grow(s, s.len + n);             // blocks for the next n positions
//     ... forward_cached writes them ...
//     pool.append(s, ids, n);              // mirror what the blocks now hold
//     pool.release(s);                     // finished: its blocks stay as prefix cache
//   }
//
// No tensors here: the engine applies every copy to model::KVCache. The structure is a
// radix tree whose nodes are blocks (SGLang's RadixAttention at block granularity,
// vLLM's automatic prefix caching as a tree): a block's children continue its tokens.
// Full blocks are shared by reference (the n samples of a GRPO group share their
// prompt; turn t+1 of an append-only trajectory shares turn t); a matching partial
// block is copied into a private one (or adopted when nothing references it). A block
// is
//   free        in the free list
//   referenced  held by >= 1 running sequence (never evicted)
//   cached      in the tree, unreferenced: reusable; evicted least recently used first,
//               leaves first (an unreferenced block's descendants are unreferenced too)
// Admission reserves a sequence's worst case (need_positions) up front, so a running
// sequence never runs out of blocks: no preemption, no recomputation.
#pragma once

#include <cstdint>
#include <vector>

#include "agentr1/core/generator.h"

namespace agentr1::rollout {

class BlockPool {
 public:
  // share=false: no tree (prefix cache off); released blocks are freed at once.
  BlockPool(int n_blocks, int block_size, bool share);

  struct Match {
    std::vector<int32_t> shared;  // full blocks holding the first shared.size() * bs tokens
    int32_t copy_src = -1;        // a block whose first copy_len tokens continue the prefix
    int copy_len = 0;
    bool take_over = false;       // copy_src is an unreferenced cached leaf: adopt it
    int len(int block_size) const { return static_cast<int>(shared.size()) * block_size + copy_len; }
  };
  // The longest cached or running prefix of ids, at most max_len tokens.
  Match longest_prefix(const TokenIds& ids, int max_len) const;

  struct Seq {
    std::vector<int32_t> table;  // block i holds positions [i*bs, (i+1)*bs)
    int len = 0;                 // positions written (mirrored by append)
    int reserved = 0;            // blocks it may still allocate
  };
  struct Copy {
    int32_t src = -1, dst = -1;  // src = -1: nothing to copy
    int n = 0;
  };
  // Starts s (empty) from match m: references m's full blocks and sets up its partial
  // block (adopted, or allocated with *copy to apply to the cache), s.len = m.len.
  // Reserves blocks for need_positions positions in all. Returns false, changing
  // nothing, when the pool cannot guarantee that beside the running reservations.
  bool start(Seq& s, const Match& m, int need_positions, Copy* copy);
  // Makes s's table cover positions [0, upto), allocating from its reservation.
  void grow(Seq& s, int upto);
  // Records n tokens written at positions s.len.. and advances s.len.
  void append(Seq& s, const TokenId* ids, int n);
  // Drops s's references (s is emptied): blocks in the tree stay cached, others are freed.
  void release(Seq& s);
  // Weights changed: frees every cached block and takes the referenced ones out of the
  // tree (their sequences keep running; their blocks are freed when released).
  void clear_cached();

  int n_blocks() const { return static_cast<int>(nodes_.size()); }
  int block_size() const { return bs_; }
  int n_free() const { return static_cast<int>(free_.size()); }
  int n_cached() const { return n_cached_; }
  int n_in_use() const { return n_blocks() - n_free() - n_cached_; }  // referenced
  int peak_in_use() const { return peak_in_use_; }
  int reserved() const { return reserved_; }
  int ref_count(int32_t block) const { return nodes_.at(block).ref; }
  const TokenIds& tokens(int32_t block) const { return nodes_.at(block).tokens; }
  bool in_tree(int32_t block) const { return nodes_.at(block).in_tree; }

 private:
  struct Node {
    TokenIds tokens;                // what the block holds, positions in order
    int32_t parent = -1;            // -1: a child of the root
    std::vector<int32_t> children;  // blocks continuing this one (it is full)
    int ref = 0;
    uint64_t last_use = 0;
    bool in_tree = false;
  };
  int32_t allocate();  // a free block, else the LRU cached leaf; ref = 1, not in the tree
  void ref_inc(int32_t b);
  void insert(int32_t b, int32_t parent);  // into the tree as a child of parent (-1: root)
  void detach(int32_t b);                  // out of its parent's children list
  std::vector<int32_t>& children_of(int32_t parent) { return parent < 0 ? root_ : nodes_[parent].children; }

  int bs_;
  bool share_;
  std::vector<Node> nodes_;
  std::vector<int32_t> root_;
  std::vector<int32_t> free_;
  int n_cached_ = 0;
  int reserved_ = 0;
  int peak_in_use_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace agentr1::rollout
