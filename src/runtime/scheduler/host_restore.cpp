// restore_waiting_from_host: the host tier's restores before a step's plan.
#include "runtime/scheduler/host_restore.h"

#include <algorithm>
#include <vector>

namespace beam {

HostRestore restore_waiting_from_host(std::span<const SeqState> waiting, int64_t max_seqs,
                                      const KvCacheManager& kv, PrefixCache& prefix,
                                      HostRestoreMemo* memo) {
  HostRestore total;
  if (prefix.host_tier() == nullptr) return total;
  HostRestoreMemo kept;  // the memo's entries of sequences still waiting
  BlockCounts spared;  // this step's restores: their blocks (at most: path and window) and rest
  int64_t rests = 0;   // the full blocks the rest of their prompts needs
  const auto n = std::min<size_t>(waiting.size(), static_cast<size_t>(std::max<int64_t>(max_seqs, 0)));
  for (size_t i = 0; i < n; ++i) {
    const std::span<const int32_t> tokens = reusable_tokens(waiting[i]);
    const uint64_t salt = waiting[i].cache_salt;
    const std::pair<uint64_t, uint64_t> stamp{prefix.epoch(), prefix.host_tier()->generation()};
    if (auto it = memo->find(waiting[i].id); it != memo->end() && it->second == stamp) {
      kept.insert(*it);
      continue;
    }
    HostRestore r = prefix.plan_host_restore(tokens, salt);
    if (r.num_tokens == 0) {
      kept.emplace(waiting[i].id, stamp);
      continue;
    }
    // The full blocks its prompt still needs once restored: a restore the admission cannot follow
    // would be evicted again before it is used.
    const int64_t rest = blocks_for_tokens(static_cast<int64_t>(waiting[i].tokens.size()), kv.block_size()) -
                         r.num_tokens / kv.block_size();
    // Eviction spares the prefixes restored before in this step (a later restore taking their
    // blocks would undo them) and the rest of their prompts.
    if (!(r.blocks + BlockCounts{rest, 0}).fits_in(kv.free_blocks() + prefix.evictable() - spared)) break;
    if (!r.blocks.fits_in(kv.free_blocks())) {
      // Eviction spares the device prefixes of the sequences ahead (admitted first: restored in
      // an earlier step, or cached) and this one's own part (taking it would grow the restore).
      std::vector<PrefixNodeId> keep;
      BlockCounts ahead;
      for (size_t j = 0; j <= i; ++j) {
        const PrefixMatch m = match_reusable(prefix, waiting[j]);
        if (m.num_tokens == 0) continue;
        keep.push_back(m.endpoint);
        const int64_t d = m.num_tokens / kv.block_size();
        if (j < i)
          ahead += BlockCounts{
              d, d - first_visible_block(m.num_tokens, kv.sliding_window(), kv.block_size())};
      }
      const BlockCounts room = kv.free_blocks() + prefix.evictable() - ahead;
      if (!(r.blocks + BlockCounts{rest + rests, 0}).fits_in(room)) break;
      prefix.touch_host_prefix(tokens, salt);  // the blocks eviction saves go to other slots
      prefix.evict_until_free(r.blocks, keep);
      // Eviction may have moved part of this very prefix to the host: plan again, no more evictions.
      r = prefix.plan_host_restore(tokens, salt);
      if (r.num_tokens == 0) continue;
      if (!r.blocks.fits_in(kv.free_blocks())) break;
    }
    r = prefix.restore_from_host(tokens, salt);
    total.num_tokens += r.num_tokens;
    total.blocks += r.blocks;
    const int64_t depth = r.num_tokens / kv.block_size();
    spared += BlockCounts{depth + rest,
                          depth - first_visible_block(r.num_tokens, kv.sliding_window(), kv.block_size())};
    rests += rest;
  }
  *memo = std::move(kept);
  return total;
}

}  // namespace beam
