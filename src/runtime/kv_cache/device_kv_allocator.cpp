// DeviceKvAllocator: DeviceBuffers kept alive by address until deallocate().
#include "runtime/kv_cache/device_kv_allocator.h"

#include <string>

namespace beam {

Expected<void*> DeviceKvAllocator::allocate(size_t nbytes) {
  Expected<DeviceBuffer> b = allocate_buffer(ctx_, nbytes);
  if (!b.ok()) return make_error("KV storage: " + b.error().message);
  void* data = b->data();
  BEAM_CHECK(data != nullptr && live_.count(data) == 0) << "KV storage: bad allocation of " << nbytes << " bytes";
  live_.emplace(data, std::move(*b));
  return data;
}

void DeviceKvAllocator::deallocate(void* data, size_t nbytes) {
  auto it = live_.find(data);
  BEAM_CHECK(it != live_.end() && it->second.nbytes() == nbytes)
      << "KV storage: deallocating " << nbytes << " bytes this allocator did not hand out";
  live_.erase(it);
}

void copy_device_bytes(const KernelContext& ctx, void* dst, const void* src, size_t nbytes) {
  const Shape shape{static_cast<int64_t>(nbytes)};
  copy_tensor(ctx, TensorView{dst, DType::kU8, shape, ctx.device},
              TensorView{const_cast<void*>(src), DType::kU8, shape, ctx.device});
}

void DeviceKvAllocator::copy(void* dst, const void* src, size_t nbytes) {
  copy_device_bytes(ctx_, dst, src, nbytes);
}

}  // namespace beam
