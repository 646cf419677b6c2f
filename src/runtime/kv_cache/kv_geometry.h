// KvGeometry: the model's KV shape as the cache sees it (layers and bytes per block in each
// pool), and plan_kv_pools(): a byte budget → block counts for the full and sliding pools.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace beam {

struct KvGeometry {
  int64_t block_size_tokens = 64;
  int64_t sliding_window_tokens = 0;  // W: keys a sliding query sees, itself included
  int64_t num_kv_heads = 0;           // Nkv
  int64_t head_dim = 0;               // D
  std::vector<AttentionKind> layer_types;  // [L]; selects each layer's pool

  int64_t num_layers(AttentionKind pool) const;
  // K and V (bf16) of one token, summed over the pool's layers.
  int64_t bytes_per_token(AttentionKind pool) const {
    return num_layers(pool) * 2 * num_kv_heads * head_dim * 2;
  }
  int64_t bytes_per_block(AttentionKind pool) const {
    return bytes_per_token(pool) * block_size_tokens;
  }
};

// Geometry of a validated config with the given block size. Errors name the offending field.
Expected<KvGeometry> kv_geometry_from_config(const BeamConfig& config, int64_t block_size_tokens);

// How a byte budget is split between the pools.
//  sliding blocks = live + cached, where
//    live   = max_running_seqs * (ceil((W-1)/B) + 2) + ceil(max_step_tokens/B)
//             (each running sequence keeps window + one block, plus the current step's chunk)
//    cached = cached_sliding_per_full_token * full blocks (windows the prefix cache keeps so
//             that later turns hit; one window per cached session end / checkpoint)
//  full blocks = what is left of the budget after the live sliding blocks, shared with the
//    cached sliding blocks in the ratio above.
//  ring pages (KvRingPool, when set) = live + cached, where
//    live   = min(max_running_seqs * pages_per_seq, the full blocks' tokens / page_tokens)
//             + fixed_pages (a sequence's ring never holds more positions than its full blocks)
//    cached = cached_sliding_per_full_token * full blocks' tokens / page_tokens (finished
//             sequences' rings kept for later turns, as their sliding windows are)
//    taken from the budget before the full blocks, which share what is left with them; at most
//    max_budget_share of the budget (positions a ring lacks cost its drafts' acceptance only,
//    while KV blocks are throughput), the full blocks then sharing the rest with the sliding.

// Pages beside the KV pools that running sequences fill like sliding windows: the DFlash2
// drafter's context rings (docs/runtime.md "DFlash2 drafts").
struct KvRingPool {
  int64_t page_bytes = 0;  // 0: no ring pool
  int64_t page_tokens = 16;
  int64_t pages_per_seq = 0;  // the most pages one running sequence's ring holds
  int64_t fixed_pages = 0;    // held apart from every sequence
  double max_budget_share = 0.25;
};

struct KvPoolSplit {
  int64_t max_running_seqs = 64;
  int64_t max_step_tokens = 8192;
  double cached_sliding_per_full_token = 0.1;
  KvRingPool ring{};
};

struct KvPoolSizes {
  int32_t num_full_blocks = 0;
  int32_t num_sliding_blocks = 0;
  int64_t num_ring_pages = 0;  // KvPoolSplit::ring's pages (0 without one)
};

// Block counts for both pools within budget_bytes. Error when the budget cannot hold the live
// sliding windows plus at least one full block, or a count would overflow int32.
Expected<KvPoolSizes> plan_kv_pools(const KvGeometry& geometry, int64_t budget_bytes,
                                    const KvPoolSplit& split);

// Bytes the two KV pools of `sizes` occupy (not the ring pool's).
int64_t kv_pool_bytes(const KvGeometry& geometry, const KvPoolSizes& sizes);

}  // namespace beam
