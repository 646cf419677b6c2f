// cudaMalloc-backed DeviceBuffers and stream-ordered copies.
#include "kernels/cuda/device_memory.h"

#include <cstdio>
#include <string>

#include "kernels/cuda/check.h"

namespace beam::cuda {

Expected<DeviceBuffer> allocate(CudaContext& ctx, size_t nbytes) {
  if (nbytes == 0) return DeviceBuffer(nullptr, 0, Device::kCuda);
  CUDA_OK(cudaSetDevice(ctx.device));
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, nbytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky out-of-memory error
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return make_error("CUDA out of memory allocating " + std::to_string(nbytes) + " bytes (" +
                      std::to_string(free_bytes) + " of " + std::to_string(total) + " free): " +
                      cudaGetErrorString(err));
  }
  std::shared_ptr<void> owner(p, [](void* q) { cudaFree(q); });
  return DeviceBuffer(std::move(owner), nbytes, Device::kCuda);
}

void copy(CudaContext& ctx, void* dst, Device dst_device, const void* src, Device src_device,
          size_t nbytes) {
  if (nbytes == 0) return;
  CUDA_OK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, ctx.stream));
  if (dst_device == Device::kCpu || src_device == Device::kCpu) CUDA_OK(cudaStreamSynchronize(ctx.stream));
}

void synchronize(CudaContext& ctx) { CUDA_OK(cudaStreamSynchronize(ctx.stream)); }

void memory_info(CudaContext& ctx, size_t* free_bytes, size_t* total_bytes) {
  CUDA_OK(cudaSetDevice(ctx.device));
  CUDA_OK(cudaMemGetInfo(free_bytes, total_bytes));
}

std::string describe(CudaContext& ctx) {
  size_t free_bytes = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
  char buf[1024];
  std::snprintf(buf, sizeof(buf), "%s (sm_%d%d, %d SMs), %.1f GiB free of %.1f GiB", ctx.props.name,
                ctx.props.major, ctx.props.minor, ctx.props.multiProcessorCount,
                free_bytes / 1073741824.0, total / 1073741824.0);
  return buf;
}

}  // namespace beam::cuda
