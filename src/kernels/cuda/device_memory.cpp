// cudaMalloc-backed DeviceBuffers and stream-ordered copies.
#include "kernels/cuda/device_memory.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "kernels/api/device_out_of_memory.h"
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

void copy_async(CudaContext& ctx, void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  CUDA_OK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, ctx.stream));
}

void zero(CudaContext& ctx, void* dst, size_t nbytes) {
  CUDA_OK(cudaMemsetAsync(dst, 0, nbytes, ctx.stream));
}

void copy_2d(CudaContext& ctx, void* dst, Device dst_device, size_t dst_pitch, const void* src,
             Device src_device, size_t src_pitch, size_t row_bytes, size_t rows) {
  CUDA_OK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDefault,
                            ctx.stream));
  if (dst_device == Device::kCpu || src_device == Device::kCpu)
    CUDA_OK(cudaStreamSynchronize(ctx.stream));
}

void copy_2d_async(CudaContext& ctx, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                   size_t row_bytes, size_t rows) {
  CUDA_OK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDefault,
                            ctx.stream));
}

Expected<DeviceBuffer> allocate_pinned(CudaContext& ctx, size_t nbytes) {
  if (nbytes == 0) return DeviceBuffer(nullptr, 0, Device::kCpu);
  CUDA_OK(cudaSetDevice(ctx.device));
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, nbytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return make_error("out of pinned host memory allocating " + std::to_string(nbytes) +
                      " bytes: " + cudaGetErrorString(err));
  }
  std::shared_ptr<void> owner(p, [](void* q) { cudaFreeHost(q); });
  return DeviceBuffer(std::move(owner), nbytes, Device::kCpu);
}

void zero_2d(CudaContext& ctx, void* dst, size_t pitch, size_t row_bytes, size_t rows) {
  CUDA_OK(cudaMemset2DAsync(dst, pitch, 0, row_bytes, rows, ctx.stream));
}

void synchronize(CudaContext& ctx) { CUDA_OK(cudaStreamSynchronize(ctx.stream)); }

Expected<MetadataBuffer> allocate_metadata(CudaContext& ctx, size_t nbytes) {
  CUDA_OK(cudaSetDevice(ctx.device));
  std::shared_ptr<PinnedRegion> region;
  try {
    region = std::make_shared<PinnedRegion>(nbytes, "step metadata");
  } catch (const DeviceOutOfMemory& e) {
    return make_error(e.what());
  }
  void* host = region->host();
  void* device = region->device();
  return MetadataBuffer(std::move(region), host, device, nbytes, Device::kCuda);
}

void bind_device(CudaContext& ctx) { CUDA_OK(cudaSetDevice(ctx.device)); }

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no GPU: none visible
    return 0;
  }
  return count;
}

void begin_capture(CudaContext& ctx) {
  CUDA_OK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
}

Expected<StepGraph> end_capture(CudaContext& ctx) {
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(ctx.stream, &graph);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    return make_error(std::string("CUDA graph capture failed: ") + cudaGetErrorString(err));
  }
  cudaGraphExec_t exec = nullptr;
  err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return make_error(std::string("CUDA graph instantiation failed: ") + cudaGetErrorString(err));
  }
  std::shared_ptr<void> owner(static_cast<void*>(exec),
                              [](void* e) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(e)); });
  return StepGraph(std::move(owner));
}

void launch(CudaContext& ctx, const StepGraph& graph) {
  CUDA_OK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph.exec()), ctx.stream));
}

uint64_t fingerprint(const CudaContext& ctx) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the values below
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  };
  mix(reinterpret_cast<uintptr_t>(ctx.moe.base));
  mix(ctx.moe.bytes);
  mix(reinterpret_cast<uintptr_t>(ctx.moe_router.base));
  mix(ctx.moe_router.bytes);
  for (const OpScratch* s :
       {&ctx.linear.x_f32, &ctx.linear.split_out, &ctx.lora, &ctx.dflash2_select}) {
    mix(reinterpret_cast<uintptr_t>(s->base));
    mix(s->bytes);
  }
  mix(reinterpret_cast<uintptr_t>(ctx.lt_workspace));
  mix(ctx.attention.fixed_generation);
  return h;
}

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
