// ReleasableKvAllocator: ReleasableMemory kept by address until deallocate().
#include "runtime/kv_cache/releasable_kv_allocator.h"

#include <string>

#include "core/check.h"
#include "runtime/kv_cache/device_kv_allocator.h"

namespace beam {

Expected<void*> ReleasableKvAllocator::allocate(size_t nbytes) {
  Expected<std::shared_ptr<ReleasableMemory>> m = allocate_releasable(ctx_, nbytes);
  if (!m.ok()) return make_error("KV storage: " + m.error().message);
  void* data = (*m)->data();
  BEAM_CHECK(data != nullptr && live_.count(data) == 0)
      << "KV storage: bad allocation of " << nbytes << " bytes";
  live_.emplace(data, std::move(*m));
  return data;
}

void ReleasableKvAllocator::deallocate(void* data, size_t nbytes) {
  auto it = live_.find(data);
  BEAM_CHECK(it != live_.end() && it->second->nbytes() >= nbytes)
      << "KV storage: deallocating " << nbytes << " bytes this allocator did not hand out";
  live_.erase(it);
}

void ReleasableKvAllocator::copy(void* dst, const void* src, size_t nbytes) {
  copy_device_bytes(ctx_, dst, src, nbytes);
}

void ReleasableKvAllocator::release_all() {
  synchronize(ctx_);
  for (auto& [data, memory] : live_) memory->release();
}

Status ReleasableKvAllocator::restore_all() {
  for (auto& [data, memory] : live_) BEAM_RETURN_IF_ERROR(memory->restore());
  return ok_status();
}

int64_t ReleasableKvAllocator::bytes() const {
  int64_t total = 0;
  for (const auto& [data, memory] : live_) total += static_cast<int64_t>(memory->nbytes());
  return total;
}

}  // namespace beam
