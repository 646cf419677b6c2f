// EngineRanks: what an engine whose model is split over several ranks (EngineOptions::
// tensor_parallel_size; model/tensor_parallel.h) holds beside rank 0's model and KV storage:
// the group the ranks meet in, the worker ranks (model/beam/rank_workers.h) and each worker's
// KV storage, whose block tables are rank 0's (every rank stores its KV heads of the same blocks).
// On the CPU backend for now: the ranks are threads of this process.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "comm/local_group.h"
#include "core/status.h"
#include "model/beam/rank_workers.h"
#include "runtime/kv_cache/kv_geometry.h"
#include "runtime/kv_cache/kv_storage.h"

namespace beam {

// Owned and called by the engine's thread.
class EngineRanks {
 public:
  // Ranks 1..size-1 of `full` (host weights) with KV storage of rank_geometry (one rank's KV
  // heads) and `sizes` from `allocator` (which must outlive this); threads_per_rank CPU threads
  // each. Errors: a config that does not split, KV memory the host cannot give.
  static Expected<std::unique_ptr<EngineRanks>> create(std::shared_ptr<const BeamWeights> full,
                                                       int size, const KvGeometry& rank_geometry,
                                                       const KvPoolSizes& sizes,
                                                       KvMemoryAllocator& allocator,
                                                       int threads_per_rank);

  int size() const { return group_->size(); }
  // Rank 0's place: the engine's BeamModel takes it.
  ModelShard rank0_shard() const { return ModelShard{TensorParallel{0, size()}, &group_->rank(0)}; }

  // One step on every rank (RankWorkers::forward) with rank 0's model and KV storage.
  Status forward(BeamModel& rank0, const KvStorage& storage0, const ForwardBatch& batch,
                 ForwardOutput& out);
  // The copies rank 0's storage makes (prefix-cache copy-on-write), on every other rank's.
  void copy_blocks(std::span<const BlockCopy> copies);
  // Serves `full` on ranks 1.. (rank 0's model gets its own slice from the engine).
  Status replace_weights(const std::shared_ptr<const BeamWeights>& full);

 private:
  EngineRanks() = default;

  std::unique_ptr<LocalGroup> group_;
  std::unique_ptr<RankWorkers> workers_;
  std::vector<KvStorage> storage_;   // ranks 1..size-1
  std::vector<const KvLayers*> kv_;  // every rank's, rank 0's set per step
};

}  // namespace beam
