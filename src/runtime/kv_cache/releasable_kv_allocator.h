// ReleasableKvAllocator: KV pool memory as ReleasableMemory (kernels/api/releasable_memory.h) on
// any device, so an engine in sleep mode gives the pools' pages back and takes them again at the
// same addresses (the KV views, and CUDA graphs that read them, stay valid).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "kernels/api/releasable_memory.h"
#include "runtime/kv_cache/kv_storage.h"

namespace beam {

// Owned by the engine thread, like the KvStorage it serves. ctx (and its CudaContext) must outlive
// the allocator.
class ReleasableKvAllocator final : public KvMemoryAllocator {
 public:
  explicit ReleasableKvAllocator(const KernelContext& ctx) : ctx_(ctx) {}
  Device device() const override { return ctx_.device; }
  Expected<void*> allocate(size_t nbytes) override;
  void deallocate(void* data, size_t nbytes) override;
  // Queued on ctx's stream, so it is ordered before the next forward.
  void copy(void* dst, const void* src, size_t nbytes) override;

  // Every allocation's pages back (their contents are lost); nothing may use them meanwhile.
  void release_all();
  // Pages again for every allocation; an error when the device has no room (then the ones not
  // restored stay released, and restore_all may be called again).
  Status restore_all();
  // The bytes of the allocations handed out.
  int64_t bytes() const;

 private:
  KernelContext ctx_;
  std::unordered_map<void*, std::shared_ptr<ReleasableMemory>> live_;  // by address
};

}  // namespace beam
