// HostKvStore: slot memory and the pitched copies of whole blocks.
#include "runtime/prefix_cache/host_kv_store.h"

#include <string>

#include "core/check.h"

namespace beam {
namespace {

int pool_index(AttentionKind pool) { return pool == AttentionKind::kFull ? 0 : 1; }

}  // namespace

int64_t HostKvStore::block_bytes(const KvStorage& storage, AttentionKind pool) {
  const PitchedRows r = storage.block_rows(pool, BlockId(0));
  return static_cast<int64_t>(r.rows * r.row_bytes);
}

Expected<HostKvStore> HostKvStore::create(const KernelContext& ctx, const KvStorage& storage,
                                          BlockCounts slots) {
  HostKvStore s;
  s.ctx_ = ctx;
  s.storage_ = &storage;
  s.slots_ = slots;
  for (AttentionKind pool : kKvPools) {
    s.device_blocks_.of(pool) = storage.num_blocks(pool);
    if (slots.of(pool) == 0 || storage.num_blocks(pool) == 0) {
      s.slots_.of(pool) = 0;
      continue;
    }
    s.block_bytes_.of(pool) = block_bytes(storage, pool);
    const auto nbytes = static_cast<size_t>(slots.of(pool) * s.block_bytes_.of(pool));
    Expected<DeviceBuffer> b = allocate_pinned_host(ctx, nbytes);
    if (!b.ok())
      return make_error("hierarchical cache: the host tier's " + std::to_string(slots.of(pool)) +
                        (pool == AttentionKind::kFull ? " full" : " sliding") + " blocks (" +
                        std::to_string(nbytes) + " bytes): " + b.error().message);
    s.memory_[pool_index(pool)] = std::move(*b);
  }
  return s;
}

HostKvStore::~HostKvStore() {
  if (memory_[0].data() != nullptr || memory_[1].data() != nullptr) synchronize(ctx_);
}

void HostKvStore::attach(const KvStorage& storage) {
  for (AttentionKind pool : kKvPools)
    BEAM_CHECK(storage.num_blocks(pool) == device_blocks_.of(pool) &&
               (slots_.of(pool) == 0 || block_bytes(storage, pool) == block_bytes_.of(pool)))
        << "host tier attached to KV storage of another shape";
  storage_ = &storage;
}

int64_t HostKvStore::bytes() const {
  return static_cast<int64_t>(memory_[0].nbytes() + memory_[1].nbytes());
}

PitchedRows HostKvStore::slot_rows(AttentionKind pool, int32_t slot) const {
  BEAM_CHECK(slot >= 0 && slot < slots_.of(pool)) << "host slot " << slot << " of " << slots_.of(pool);
  const PitchedRows block = storage_->block_rows(pool, BlockId(0));
  PitchedRows r;
  r.data = static_cast<char*>(memory_[pool_index(pool)].data()) +
           static_cast<size_t>(slot) * block.rows * block.row_bytes;
  r.device = Device::kCpu;
  r.pitch = block.row_bytes;
  r.row_bytes = block.row_bytes;
  r.rows = block.rows;
  return r;
}

void HostKvStore::save(AttentionKind pool, BlockId block, int32_t slot) {
  copy_rows_async(ctx_, slot_rows(pool, slot), storage_->block_rows(pool, block));
}

void HostKvStore::load(AttentionKind pool, int32_t slot, BlockId block) {
  copy_rows_async(ctx_, storage_->block_rows(pool, block), slot_rows(pool, slot));
}

void HostKvStore::apply(const HostCopy& c) {
  if (c.direction == HostCopy::kToHost) {
    save(c.pool, c.block, c.slot);
  } else {
    load(c.pool, c.slot, c.block);
  }
}

}  // namespace beam
