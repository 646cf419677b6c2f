// KvGeometry from a BeamConfig and the byte-budget split between the two KV pools.
#include "runtime/kv_cache/kv_geometry.h"

#include <algorithm>
#include <limits>
#include <string>

#include "runtime/kv_cache/kv_types.h"

namespace beam {

int64_t KvGeometry::num_layers(AttentionKind pool) const {
  return std::count(layer_types.begin(), layer_types.end(), pool);
}

Expected<KvGeometry> kv_geometry_from_config(const BeamConfig& config, int64_t block_size_tokens) {
  if (block_size_tokens <= 0)
    return make_error("KV block size must be positive, got " + std::to_string(block_size_tokens));
  if (config.num_kv_heads <= 0 || config.head_dim <= 0)
    return make_error("config: num_key_value_heads and head_dim must be positive");
  if (static_cast<int64_t>(config.layer_types.size()) != config.num_layers)
    return make_error("config: layer_types has " + std::to_string(config.layer_types.size()) +
                      " entries for " + std::to_string(config.num_layers) + " layers");
  KvGeometry g;
  g.block_size_tokens = block_size_tokens;
  g.sliding_window_tokens = config.sliding_window;
  g.num_kv_heads = config.num_kv_heads;
  g.head_dim = config.head_dim;
  g.layer_types = config.layer_types;
  for (AttentionKind pool : kKvPools) {
    if (g.num_layers(pool) == 0)
      return make_error(std::string("config: the hybrid KV cache needs at least one ") +
                        (pool == AttentionKind::kFull ? "full_attention" : "sliding_attention") +
                        " layer");
  }
  if (g.sliding_window_tokens <= 0)
    return make_error("config: sliding_window must be positive, got " +
                      std::to_string(g.sliding_window_tokens));
  return g;
}

Expected<KvPoolSizes> plan_kv_pools(const KvGeometry& g, int64_t budget_bytes,
                                    const KvPoolSplit& split) {
  const int64_t B = g.block_size_tokens;
  if (split.max_running_seqs <= 0 || split.max_step_tokens <= 0 ||
      split.cached_sliding_per_full_token < 0)
    return make_error("KV pool split: max_running_seqs and max_step_tokens must be positive and "
                      "cached_sliding_per_full_token non-negative");
  if (split.ring.page_bytes < 0 || (split.ring.page_bytes > 0 &&
                                    (split.ring.page_tokens <= 0 || split.ring.pages_per_seq < 0 ||
                                     split.ring.fixed_pages < 0 ||
                                     !(split.ring.max_budget_share > 0 &&
                                       split.ring.max_budget_share <= 1))))
    return make_error("KV pool split: a ring pool needs positive page_tokens, non-negative "
                      "page_bytes, pages_per_seq and fixed_pages, and max_budget_share in (0, 1]");
  const int64_t per_seq = blocks_for_tokens(g.sliding_window_tokens - 1, B) + 2;
  const int64_t live_sliding =
      split.max_running_seqs * per_seq + blocks_for_tokens(split.max_step_tokens, B);
  const int64_t full_bb = g.bytes_per_block(AttentionKind::kFull);
  const int64_t sliding_bb = g.bytes_per_block(AttentionKind::kSliding);
  const KvRingPool& ring = split.ring;
  const double r = split.cached_sliding_per_full_token;
  // Ring pages per full block: the cached ones, and with rings bounded by the full blocks' tokens
  // the live ones too.
  const double ring_per_full =
      ring.page_bytes > 0 ? static_cast<double>(B) / static_cast<double>(ring.page_tokens) : 0;
  const int64_t live_rings = ring.page_bytes > 0 ? split.max_running_seqs * ring.pages_per_seq : 0;
  const int64_t fixed_ring = ring.page_bytes > 0 ? ring.fixed_pages : 0;
  const double per_full = static_cast<double>(full_bb) + r * static_cast<double>(sliding_bb);
  const int64_t fixed = live_sliding * sliding_bb + fixed_ring * ring.page_bytes;
  const auto full_blocks = [&](int64_t live_ring_pages, double ring_pages_per_full) {
    const int64_t rest = budget_bytes - fixed - live_ring_pages * ring.page_bytes;
    const double per = per_full + ring_pages_per_full * static_cast<double>(ring.page_bytes);
    return rest > 0 ? static_cast<int64_t>(static_cast<double>(rest) / per) : int64_t{0};
  };
  // Every running sequence's whole ring when the full blocks hold that many tokens, else rings
  // bounded by the full blocks' tokens.
  int64_t num_full = full_blocks(live_rings, r * ring_per_full);
  double live_ring_per_full = 0;
  if (static_cast<double>(live_rings) > static_cast<double>(num_full) * ring_per_full) {
    live_ring_per_full = ring_per_full;
    num_full = full_blocks(0, (1 + r) * ring_per_full);
  }
  // (All zero without a ring pool.)
  int64_t num_ring =
      fixed_ring +
      (live_ring_per_full > 0
           ? static_cast<int64_t>(live_ring_per_full * static_cast<double>(num_full))
           : live_rings) +
      static_cast<int64_t>(r * ring_per_full * static_cast<double>(num_full));
  if (ring.page_bytes > 0) {  // capped: the rest is the KV pools'
    const int64_t most_ring = std::max(
        fixed_ring,
        static_cast<int64_t>(ring.max_budget_share * static_cast<double>(budget_bytes)) /
            ring.page_bytes);
    if (num_ring > most_ring) {
      num_ring = most_ring;
      const int64_t rest = budget_bytes - live_sliding * sliding_bb - num_ring * ring.page_bytes;
      num_full = rest > 0 ? static_cast<int64_t>(static_cast<double>(rest) / per_full) : 0;
    }
  }
  if (num_full < 1)
    return make_error("KV budget of " + std::to_string(budget_bytes) + " bytes cannot hold the " +
                      std::to_string(live_sliding) + " sliding blocks (" +
                      std::to_string(live_sliding * sliding_bb) + " bytes) that " +
                      std::to_string(split.max_running_seqs) +
                      " running sequences need plus one full block" +
                      (fixed_ring > 0 ? " and " + std::to_string(fixed_ring) + " ring pages" : "") +
                      "; raise the budget or lower max_running_seqs / max_step_tokens");
  const int64_t num_sliding = live_sliding + static_cast<int64_t>(r * static_cast<double>(num_full));
  // A layer's K (and V) cache is [blocks, block size, Nkv, D]; the CUDA decode attention indexes
  // its rows (blocks x block size x Nkv) in 32 bits, which also keeps block ids in int32.
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (std::max(num_full, num_sliding) > kMax / (B * g.num_kv_heads))
    return make_error("KV pools of " + std::to_string(num_full) + " full / " +
                      std::to_string(num_sliding) + " sliding blocks of " + std::to_string(B) +
                      " tokens x " + std::to_string(g.num_kv_heads) +
                      " KV heads hold over 2^31 cache rows a layer, more than the attention "
                      "kernels index; lower the KV budget (--kv-budget-mb)");
  return KvPoolSizes{static_cast<int32_t>(num_full), static_cast<int32_t>(num_sliding), num_ring};
}

int64_t kv_pool_bytes(const KvGeometry& g, const KvPoolSizes& sizes) {
  return sizes.num_full_blocks * g.bytes_per_block(AttentionKind::kFull) +
         sizes.num_sliding_blocks * g.bytes_per_block(AttentionKind::kSliding);
}

}  // namespace beam
