// EngineRanks: the worker ranks of a tensor-parallel engine and their KV storage.
#include "runtime/engine_ranks.h"

namespace beam {

Expected<std::unique_ptr<EngineRanks>> EngineRanks::create(
    std::shared_ptr<const BeamWeights> full, int size, const KvGeometry& rank_geometry,
    const KvPoolSizes& sizes, KvMemoryAllocator& allocator, int threads_per_rank) {
  std::unique_ptr<EngineRanks> ranks(new EngineRanks());
  ranks->group_ = std::make_unique<LocalGroup>(size);
  BEAM_ASSIGN_OR_RETURN(ranks->workers_,
                        RankWorkers::create(std::move(full), *ranks->group_, threads_per_rank));
  for (int r = 1; r < size; ++r) {
    BEAM_ASSIGN_OR_RETURN(KvStorage storage, KvStorage::create(rank_geometry, sizes, allocator));
    ranks->storage_.push_back(std::move(storage));
  }
  ranks->kv_.assign(static_cast<size_t>(size), nullptr);
  for (int r = 1; r < size; ++r) ranks->kv_[r] = &ranks->storage_[r - 1].layers();
  return ranks;
}

Status EngineRanks::forward(BeamModel& rank0, const KvStorage& storage0, const ForwardBatch& batch,
                            ForwardOutput& out) {
  kv_[0] = &storage0.layers();
  return workers_->forward(rank0, batch, kv_, out);
}

void EngineRanks::copy_blocks(std::span<const BlockCopy> copies) {
  for (KvStorage& s : storage_) s.copy_blocks(copies);
}

Status EngineRanks::replace_weights(const std::shared_ptr<const BeamWeights>& full) {
  return workers_->replace_weights(full);
}

}  // namespace beam
