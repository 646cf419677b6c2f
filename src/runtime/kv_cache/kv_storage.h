// KvStorage: the KV memory of both pools — per layer K and V tensors [num_blocks, B, Nkv, D] bf16
// — and the KvLayers view the model reads. Memory comes from a KvMemoryAllocator (HostKvAllocator
// on the CPU, DeviceKvAllocator in device_kv_allocator.h on CUDA). Owned by the engine.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/api/device_memory.h"
#include "model/forward_batch.h"
#include "runtime/kv_cache/kv_geometry.h"
#include "runtime/kv_cache/kv_types.h"

namespace beam {

// Where KV memory lives. One allocation per pool, freed with the storage.
class KvMemoryAllocator {
 public:
  virtual ~KvMemoryAllocator() = default;
  virtual Device device() const = 0;
  // nbytes of memory on device(), aligned to at least 256 bytes.
  virtual Expected<void*> allocate(size_t nbytes) = 0;
  virtual void deallocate(void* data, size_t nbytes) = 0;
  // Copies nbytes between two allocations of this allocator (ordered before later work).
  virtual void copy(void* dst, const void* src, size_t nbytes) = 0;
};

// Plain host memory (CPU backend and tests).
class HostKvAllocator final : public KvMemoryAllocator {
 public:
  Device device() const override { return Device::kCpu; }
  Expected<void*> allocate(size_t nbytes) override;
  void deallocate(void* data, size_t nbytes) override;
  void copy(void* dst, const void* src, size_t nbytes) override;
};

class KvStorage {
 public:
  // Allocates both pools: pool memory is [layers of that kind][K, V][num_blocks][B][Nkv][D] bf16.
  // The allocator must outlive the storage.
  static Expected<KvStorage> create(const KvGeometry& geometry, const KvPoolSizes& sizes,
                                    KvMemoryAllocator& allocator);
  KvStorage(KvStorage&&) noexcept;
  KvStorage& operator=(KvStorage&&) noexcept;
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;
  ~KvStorage();

  // One PagedKv per model layer, pointing into its pool's memory.
  const KvLayers& layers() const { return layers_; }
  int64_t num_blocks(AttentionKind pool) const;
  int64_t bytes(AttentionKind pool) const { return pools_[index(pool)].nbytes; }
  // Block `block` of `pool` in every layer of that pool: rows K of its first layer, V of it, K of
  // the next, ... (2 x layers rows of one block's bytes each, at the pool's plane pitch).
  PitchedRows block_rows(AttentionKind pool, BlockId block) const;
  // Copies every layer's K and V of each copy's src block to its dst block.
  void copy_blocks(std::span<const BlockCopy> copies);

 private:
  struct PoolMemory {
    void* data = nullptr;
    size_t nbytes = 0;
    int64_t num_blocks = 0;
  };
  static int index(AttentionKind pool) { return pool == AttentionKind::kFull ? 0 : 1; }
  KvStorage() = default;
  void release();

  KvMemoryAllocator* allocator_ = nullptr;
  PoolMemory pools_[2];
  KvLayers layers_;
  std::vector<AttentionKind> layer_pool_;  // [L]
  int64_t block_bytes_per_layer_ = 0;      // bytes of K (or V) of one block of one layer
};

}  // namespace beam
