// ReleasableMemory: device memory whose pages can be given back while its addresses stay
// reserved — an engine's weights and KV pools in sleep mode (runtime/engine.h, Engine::sleep).
// release() hands the pages back (the contents are lost); restore() takes pages again at the same
// addresses, so pointers into the memory, and CUDA graphs that use them, stay valid. CUDA: a
// reserved virtual range mapped to a physical allocation (cuMemCreate / cuMemMap), which release
// unmaps and frees; CPU: an anonymous mapping whose pages madvise(MADV_DONTNEED) returns (restored
// pages read as zeros).
#pragma once

#include <cstddef>
#include <memory>

#include "core/status.h"
#include "kernels/api/context.h"
#include "kernels/api/device_memory.h"

namespace beam {

class ReleasableMemory {
 public:
  virtual ~ReleasableMemory() = default;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool released() const { return released_; }
  // The pages back to the device (no-op when released). No work that uses them may be queued.
  void release();
  // Pages again at the same addresses, contents undefined (no-op unless released). An error
  // naming the bytes when the device has no room; the memory then stays released.
  Status restore();

 protected:
  ReleasableMemory(void* data, size_t nbytes, Device device)
      : data_(data), nbytes_(nbytes), device_(device) {}
  virtual void release_pages() = 0;
  virtual Status restore_pages() = 0;

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  bool released_ = false;
};

// nbytes of releasable memory on ctx.device; an error (naming the size) when it does not fit.
Expected<std::shared_ptr<ReleasableMemory>> allocate_releasable(const KernelContext& ctx,
                                                                size_t nbytes);

// A DeviceBuffer over the whole of `memory` that keeps it alive.
DeviceBuffer releasable_buffer(const std::shared_ptr<ReleasableMemory>& memory);

}  // namespace beam
