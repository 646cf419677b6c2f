// RankedHostMover: the hierarchical cache's copies on a tensor-parallel engine. The host tier
// (HostKvTier, rank 0's bookkeeping) moves a block through this mover: rank 0's HostKvStore makes
// the copy at once on the engine's stream, and the copy is recorded for the worker ranks, whose
// KV storage holds their heads of the same blocks; flush() has every worker make the recorded
// copies, in order, on its own thread and stream (EngineRanks::host_copies). The engine flushes
// before the workers next touch their KV storage (a step's copy-on-write copies, a forward), so
// every rank sees the copies in the order rank 0 made them. One owner: the engine thread.
#pragma once

#include <vector>

#include "runtime/engine_ranks.h"
#include "runtime/prefix_cache/host_kv_store.h"

namespace beam {

class RankedHostMover final : public HostBlockMover {
 public:
  // rank0 and ranks must outlive the mover.
  RankedHostMover(HostKvStore& rank0, EngineRanks& ranks) : rank0_(rank0), ranks_(ranks) {}
  void save(AttentionKind pool, BlockId block, int32_t slot) override;
  void load(AttentionKind pool, int32_t slot, BlockId block) override;
  // The workers make the copies recorded since the last flush.
  void flush();

 private:
  HostKvStore& rank0_;
  EngineRanks& ranks_;
  std::vector<HostCopy> pending_;
};

}  // namespace beam
