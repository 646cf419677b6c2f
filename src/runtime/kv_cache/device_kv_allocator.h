// DeviceKvAllocator: KV pool memory on a KernelContext's device (the CUDA backend's allocator),
// through the device-neutral allocate_buffer / copy_tensor API.
#pragma once

#include <unordered_map>

#include "kernels/api/device_memory.h"
#include "runtime/kv_cache/kv_storage.h"

namespace beam {

// nbytes from src to dst, both on ctx's device, queued on ctx's stream (the device KV allocators'
// copy).
void copy_device_bytes(const KernelContext& ctx, void* dst, const void* src, size_t nbytes);

// Owned by the engine thread, like the KvStorage it serves. ctx (and its CudaContext) must outlive
// the allocator.
class DeviceKvAllocator final : public KvMemoryAllocator {
 public:
  explicit DeviceKvAllocator(const KernelContext& ctx) : ctx_(ctx) {}
  Device device() const override { return ctx_.device; }
  Expected<void*> allocate(size_t nbytes) override;
  void deallocate(void* data, size_t nbytes) override;
  // Queued on ctx's stream, so it is ordered before the next forward.
  void copy(void* dst, const void* src, size_t nbytes) override;

 private:
  KernelContext ctx_;
  std::unordered_map<void*, DeviceBuffer> live_;  // allocations handed out, by address
};

}  // namespace beam
