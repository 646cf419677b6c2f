// Device-neutral memory for tensors: allocation, copies between host and device, and the CUDA
// context's lifetime. The model and runtime use only this header, never CUDA's, so they build
// and run unchanged with and without the CUDA backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/status.h"
#include "kernels/api/context.h"

namespace beam {

// An owning allocation on one device (host: 64-byte aligned; CUDA: cudaMalloc, 256-byte aligned).
// Copies share the allocation; it is freed with the last copy.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::shared_ptr<void> data, size_t nbytes, Device device)
      : data_(std::move(data)), nbytes_(nbytes), device_(device) {}
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  const std::shared_ptr<void>& owner() const { return data_; }
  // A [shape] view of the first bytes (checked against nbytes).
  TensorView view(DType dtype, Shape shape) const;

 private:
  std::shared_ptr<void> data_;
  size_t nbytes_ = 0;
  Device device_ = Device::kCpu;
};

// nbytes on ctx.device; an error (naming the size) when the device is out of memory.
Expected<DeviceBuffer> allocate_buffer(const KernelContext& ctx, size_t nbytes);

// dst = src (same dtype and element count; each on the host or on ctx's device). Ordered on ctx's
// stream; a copy to host memory has completed when this returns.
void copy_tensor(const KernelContext& ctx, const TensorView& dst, const TensorView& src);

// Waits until all work queued on ctx has finished (no-op on the CPU).
void synchronize(const KernelContext& ctx);

// Starts a forward step: per-step staging memory (batch metadata the CUDA ops copy to the device)
// is reused from here on. The caller must have synchronized the previous step. No-op on the CPU.
void begin_step(const KernelContext& ctx);

// A CUDA stream, cuBLASLt handle and workspace, and staging memory on GPU `device_index`;
// KernelContext::cuda points at it. An error in builds without the CUDA backend or without a GPU.
Expected<std::shared_ptr<CudaContext>> create_cuda_context(int device_index);

// Free and total bytes of ctx's device memory (cudaMemGetInfo); zeros for Device::kCpu.
struct DeviceMemoryInfo {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
DeviceMemoryInfo device_memory_info(const KernelContext& ctx);

// "NVIDIA H200, 139.8 GiB free of 139.8 GiB" for logs; "CPU" for Device::kCpu.
std::string describe_device(const KernelContext& ctx);

}  // namespace beam
