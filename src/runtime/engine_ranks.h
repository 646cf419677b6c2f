// EngineRanks: what an engine whose model is split over several ranks (EngineOptions::
// tensor_parallel_size; model/tensor_parallel.h) holds beside rank 0's model and KV storage: the
// group the ranks meet in (threads of this process on the CPU, NCCL over GPUs 0..n-1 on CUDA),
// the worker ranks (model/beam/rank_workers.h: rank r's weight slice on GPU r, uploaded on its
// thread) and each worker's KV storage, whose block tables are rank 0's (every rank stores its KV
// heads of the same blocks).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "kernels/api/device_memory.h"
#include "model/beam/local_kv_cache.h"
#include "model/beam/rank_workers.h"
#include "model/weight_locator.h"
#include "runtime/engine_device.h"
#include "runtime/kv_cache/kv_geometry.h"
#include "runtime/engine_sleep.h"
#include "runtime/kv_cache/kv_storage.h"
#include "runtime/prefix_cache/host_kv_store.h"

namespace beam {

// Owned and called by the engine's thread.
class EngineRanks {
 public:
  // The group and ranks 1..size-1, rank r's weights from source(r) (host weights holding its
  // experts, sliced by shard_beam_weights) on rank0's kind of device: CPU ranks of
  // threads_per_rank threads, or GPU r for rank r (its context, weights and stream for NCCL; the
  // GPU ranks load and upload one at a time, so the host holds one rank's weights at once), with
  // rank0's decode-graph and attention settings; with sleep_mode, GPU ranks' weights in
  // releasable memory; with `lora`, each rank's LoRA slots of its share (releasable with a GPU
  // rank's weights in sleep mode). Errors: a config that does not split, NCCL or GPUs missing,
  // weights or slots that do not fit a GPU, a source's error.
  static Expected<std::unique_ptr<EngineRanks>> create(const RankWeights& source, int size,
                                                       const EngineDevice& rank0,
                                                       int threads_per_rank, bool sleep_mode,
                                                       std::optional<LoraSlotsOptions> lora);
  ~EngineRanks();

  int size() const { return group_->size(); }
  // Rank 0's place: the engine's BeamModel takes it.
  ModelShard rank0_shard() const { return ModelShard{TensorParallel{0, size()}, &group_->rank(0)}; }

  // The warm-up's scratch KV caches on the workers (LocalKvCache::create of num_seqs sequences of
  // max_tokens slots, each holding its rank's heads), a step through them with rank 0's (model,
  // cache), then gone; the workers' models keep their activations, as rank 0's scratch model.
  Status warm_up_step(BeamModel& rank0, const LocalKvCache& cache0, const ForwardBatch& batch,
                      int64_t num_seqs, int64_t max_tokens, ForwardOutput& out);
  // The least free memory over the workers' devices (the KV budget must fit every rank).
  Expected<DeviceMemoryInfo> least_free_memory();
  // Each worker's KV storage: rank_geometry (one rank's KV heads) and `sizes`, on its device
  // (releasable with sleep_mode, each worker then with a SleepController of its own).
  Status allocate_kv(const KvGeometry& rank_geometry, const KvPoolSizes& sizes, bool sleep_mode);
  // Sleep mode on every worker, as rank 0's SleepController does it (its arguments): each
  // releases its KV pools and / or weights (a GPU rank's) and its eager activations on its
  // thread. Returns the bytes released over the workers; the first worker's error.
  Expected<int64_t> sleep(SleepLevel level, bool weights, bool kv_cache);
  Status wake_up(bool weights, bool kv_cache);
  // Loads adapter's share into LoRA slot `slot` of every worker (LoraSlots::load), as rank 0
  // did; the first worker's error.
  Status load_lora(int32_t slot, const LoraAdapter& adapter);

  // The whole LM head into `whole` ([V, H] bf16 on rank 0's device): rank0_rows (rank 0's
  // vocabulary rows) and every worker's, copied in rank order (a DFlash2 drafter on rank 0 reads
  // out over the whole vocabulary; again after each weight update).
  Status gather_lm_head(const KernelContext& rank0, const TensorView& rank0_rows,
                        const TensorView& whole);
  // One step on every rank (RankWorkers::forward) with rank 0's model and KV storage.
  Status forward(BeamModel& rank0, const KvStorage& storage0, const ForwardBatch& batch,
                 ForwardOutput& out);
  // The copies rank 0's storage makes (prefix-cache copy-on-write), on every worker's.
  void copy_blocks(std::span<const BlockCopy> copies);
  // Each worker's host tier memory (the hierarchical cache): `slots` blocks of each pool of its
  // KV storage (allocate_kv first), pinned on a GPU, made on its thread. Errors: memory the host
  // cannot give, naming the rank.
  Status allocate_host_kv(BlockCounts slots);
  // The host tier's copies rank 0 made (RankedHostMover), in order, on every worker's KV storage
  // and host memory.
  void host_copies(std::span<const HostCopy> copies);
  // The workers' host tier memory in bytes (0 without one).
  int64_t host_kv_bytes() const;
  // Serves source's weights on ranks 1.. (RankWorkers::replace_weights; rank 0's model gets its
  // own slice from the engine).
  Status replace_weights(const RankWeights& source);
  // Each worker's part of checkpoint tensor `name` (read_weight_part, up to max_rows rows) into
  // parts[r], on its thread; parts holds size() entries (rank 0's is the caller's).
  Status read_weight_parts(const std::string& name, int64_t max_rows,
                           std::vector<WeightPart>& parts);

 private:
  // A worker's device side (its CUDA context and weights on a GPU), KV memory and storage.
  struct Worker {
    std::shared_ptr<EngineDevice> device;
    std::unique_ptr<KvMemoryAllocator> allocator;
    std::optional<KvStorage> storage;
    std::optional<HostKvStore> host;      // the hierarchical cache's memory, over storage
    std::optional<LocalKvCache> scratch;  // the warm-up's
    SleepController sleep;                // sleep mode (off: default)
  };
  EngineRanks() = default;

  std::unique_ptr<CommGroup> group_;
  std::vector<Worker> workers_;  // [r - 1] for rank r
  std::unique_ptr<RankWorkers> ranks_;
  std::vector<const KvLayers*> kv_;  // every rank's for forward(), rank 0's set per step
};

}  // namespace beam
