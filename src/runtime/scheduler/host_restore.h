// Before a step is planned: the hierarchical cache's host tier gives back the prefixes that the
// next waiting sequences extend, so the plan admits them on a longer cached prefix.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>

#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/prefix_cache/prefix_cache.h"
#include "runtime/scheduler/scheduler.h"

namespace beam {

// The waiting sequences a walk found nothing to restore for, with the (device epoch, host
// generation) of that walk: they are not walked again until a device block leaves the tree or the
// host tier takes one the device let go (a step's walks then cost nothing when nothing changed,
// write-through copies included; a device prefix that grows until the host continues it waits
// for the next eviction). Owned by the caller.
using HostRestoreMemo = std::unordered_map<SeqId, std::pair<uint64_t, uint64_t>>;

// For the first max_seqs of `waiting` (in admission order): PrefixCache::restore_from_host of
// its reusable tokens, evicting device blocks (to the host tier) when the free ones are too few
// but never the prefixes of the sequences ahead of it (restored before or cached: they are
// admitted first, so none undoes another). A restore is made only when
// the pools could also hold the rest of that prompt (else it would be evicted again unused).
// Stops at the first sequence whose restore does not fit (head of line, as admission). Returns the blocks and tokens loaded
// (num_tokens: the restored prefixes' lengths summed).
HostRestore restore_waiting_from_host(std::span<const SeqState> waiting, int64_t max_seqs,
                                      const KvCacheManager& kv, PrefixCache& prefix,
                                      HostRestoreMemo* memo);

}  // namespace beam
