// HostKvStore: the host tier's memory — block slots in host memory the device copies to and from
// without staging (pinned on CUDA) — and the copies between them and a KvStorage's blocks. A slot
// of a pool holds one block of every layer of that pool: [layers of that kind][K, V][B][Nkv][D]
// bf16. One owner: the engine thread (the copies are queued on its context's stream).
#pragma once

#include <cstdint>

#include "core/status.h"
#include "kernels/api/context.h"
#include "kernels/api/device_memory.h"
#include "runtime/kv_cache/kv_storage.h"
#include "runtime/prefix_cache/host_kv_tier.h"

namespace beam {

// One copy between a device block and a host slot of a pool (HostBlockMover's save or load), as
// recorded for the other ranks of a tensor-parallel engine.
struct HostCopy {
  enum Direction : uint8_t { kToHost, kToDevice };
  Direction direction;
  AttentionKind pool;
  BlockId block;
  int32_t slot;
};

class HostKvStore final : public HostBlockMover {
 public:
  // Host memory for `slots` blocks of each of storage's pools; an error naming the bytes when
  // the host cannot give them. ctx (its stream orders the copies) and storage must outlive it.
  static Expected<HostKvStore> create(const KernelContext& ctx, const KvStorage& storage,
                                      BlockCounts slots);
  // Bytes of one block of `pool` (every layer of that kind, K and V).
  static int64_t block_bytes(const KvStorage& storage, AttentionKind pool);
  HostKvStore(HostKvStore&&) noexcept = default;
  HostKvStore& operator=(HostKvStore&&) noexcept = default;
  // Waits for the copies still queued, so the memory outlives them.
  ~HostKvStore() override;

  // The storage whose blocks save / load copy from now on (the engine's, once it has its final
  // address): its pools have the shapes create() saw.
  void attach(const KvStorage& storage);
  BlockCounts slots() const { return slots_; }
  int64_t bytes() const;
  void save(AttentionKind pool, BlockId block, int32_t slot) override;
  void load(AttentionKind pool, int32_t slot, BlockId block) override;
  // save() or load() as c says.
  void apply(const HostCopy& c);

 private:
  HostKvStore() = default;
  PitchedRows slot_rows(AttentionKind pool, int32_t slot) const;

  KernelContext ctx_;
  const KvStorage* storage_ = nullptr;
  BlockCounts device_blocks_;  // the storage's pools (attach checks them)
  BlockCounts block_bytes_;    // bytes of one block of each pool
  BlockCounts slots_;
  DeviceBuffer memory_[2];  // [full, sliding]
};

}  // namespace beam
