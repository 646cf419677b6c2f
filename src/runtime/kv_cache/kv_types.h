// Small value types shared by the KV cache, prefix cache and scheduler: typed block and sequence
// ids, per-pool block counts, block copies, and the block arithmetic of a sliding window.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/strong_id.h"
#include "model/config.h"

namespace beam {

// A physical block of one pool; which pool is always known from context (an AttentionKind).
using BlockId = StrongId<struct BlockIdTag, int32_t>;
// A sequence whose KV the cache holds (one sample of one request); numbered by the engine.
using SeqId = StrongId<struct SeqIdTag, int64_t>;

// The two pools: full-attention layers (kFull) and sliding-window layers (kSliding).
inline constexpr AttentionKind kKvPools[] = {AttentionKind::kFull, AttentionKind::kSliding};

// A number of blocks in each pool.
struct BlockCounts {
  int64_t full = 0;
  int64_t sliding = 0;

  int64_t& of(AttentionKind kind) {
    switch (kind) {
      case AttentionKind::kFull: return full;
      case AttentionKind::kSliding: return sliding;
    }
    return full;
  }
  int64_t of(AttentionKind kind) const { return const_cast<BlockCounts*>(this)->of(kind); }
  BlockCounts& operator+=(const BlockCounts& o) {
    full += o.full;
    sliding += o.sliding;
    return *this;
  }
  BlockCounts& operator-=(const BlockCounts& o) {
    full -= o.full;
    sliding -= o.sliding;
    return *this;
  }
  friend BlockCounts operator+(BlockCounts a, const BlockCounts& b) { return a += b; }
  friend BlockCounts operator-(BlockCounts a, const BlockCounts& b) { return a -= b; }
  // True when both counts are <= the other's (this many blocks fit into `o`).
  bool fits_in(const BlockCounts& o) const { return full <= o.full && sliding <= o.sliding; }
  bool operator==(const BlockCounts&) const = default;
};

// Copy every layer's K and V of block `src` into block `dst` of pool `pool` (fork of a shared,
// partially filled last block). The engine performs copies before the forward that writes dst.
struct BlockCopy {
  AttentionKind pool = AttentionKind::kFull;
  BlockId src;
  BlockId dst;
};

// Blocks needed to hold `num_tokens` slots.
constexpr int64_t blocks_for_tokens(int64_t num_tokens, int64_t block_size) {
  return (num_tokens + block_size - 1) / block_size;
}

// First logical block holding a key visible to the query at slot `pos` (keys pos-W+1 .. pos).
constexpr int64_t first_visible_block(int64_t pos, int64_t window, int64_t block_size) {
  return std::max<int64_t>(0, pos - window + 1) / block_size;
}

// First sliding block a sequence with `num_computed` written slots keeps. It covers the window
// of the block-aligned prefix floor(c/B)*B (so that prefix can enter the prefix cache with its
// window intact) and therefore also the window of the next query at slot c.
constexpr int64_t first_kept_sliding_block(int64_t num_computed, int64_t window, int64_t block_size) {
  return first_visible_block(num_computed / block_size * block_size, window, block_size);
}

}  // namespace beam
