// LocalKvCache: the simplest KV cache behind the KvLayers interface — a fixed number of sequence
// slots, each owning a contiguous run of blocks in both pools, nothing shared or released. Used by
// the CLI's forward/generate and by tests; the serving runtime has its own paged hybrid cache.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/api/device_memory.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/tensor_parallel.h"

namespace beam {

// Owned by one thread.
class LocalKvCache {
 public:
  // Room for num_seqs sequences of up to max_tokens KV slots each, on ctx's device; an error when
  // the device is out of memory. A tensor-parallel rank's cache (tp) holds that rank's KV heads.
  static Expected<LocalKvCache> create(const KernelContext& ctx, const BeamConfig& config,
                                       int64_t num_seqs, int64_t max_tokens,
                                       int64_t block_size = 16, TensorParallel tp = {});
  // The same in host memory (aborts when the host is out of memory).
  LocalKvCache(const BeamConfig& config, int64_t num_seqs, int64_t max_tokens,
               int64_t block_size = 16, TensorParallel tp = {});

  const KvLayers& layers() const { return layers_; }
  int64_t max_tokens() const { return blocks_per_seq_ * block_size_; }
  // Block table of sequence slot s (the same physical blocks in both pools).
  std::span<const int32_t> block_table(int64_t s) const;

 private:
  LocalKvCache(int64_t num_seqs, int64_t max_tokens, int64_t block_size);
  Status allocate(const KernelContext& ctx, const BeamConfig& config, TensorParallel tp);

  int64_t block_size_;
  int64_t blocks_per_seq_;
  std::vector<DeviceBuffer> storage_;  // per layer: k then v
  std::vector<int32_t> tables_;        // [num_seqs * blocks_per_seq]
  KvLayers layers_;
};

}  // namespace beam
