// CUDA side of kernels/api/device_memory.h (called only from there).
#pragma once

#include <cstddef>

#include "core/status.h"
#include "kernels/api/device_memory.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

Expected<DeviceBuffer> allocate(CudaContext& ctx, size_t nbytes);
// Copies nbytes between host and/or device memory on ctx.stream; waits when dst is on the host.
void copy(CudaContext& ctx, void* dst, Device dst_device, const void* src, Device src_device,
          size_t nbytes);
// Queues an async copy of nbytes between device memory and/or pinned host memory (no wait).
void copy_async(CudaContext& ctx, void* dst, const void* src, size_t nbytes);
void zero(CudaContext& ctx, void* dst, size_t nbytes);
// copy over `rows` rows of row_bytes at the pitches given (one cudaMemcpy2DAsync).
void copy_2d(CudaContext& ctx, void* dst, Device dst_device, size_t dst_pitch, const void* src,
             Device src_device, size_t src_pitch, size_t row_bytes, size_t rows);
// copy_2d with no wait (host memory must be pinned).
void copy_2d_async(CudaContext& ctx, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                   size_t row_bytes, size_t rows);
// nbytes of pinned host memory (cudaMallocHost), a host DeviceBuffer freed by cudaFreeHost.
Expected<DeviceBuffer> allocate_pinned(CudaContext& ctx, size_t nbytes);
// zero over `rows` rows of row_bytes at dst + i * pitch (one cudaMemset2DAsync).
void zero_2d(CudaContext& ctx, void* dst, size_t pitch, size_t row_bytes, size_t rows);
void synchronize(CudaContext& ctx);
// cudaSetDevice(ctx.device) on the calling thread.
void bind_device(CudaContext& ctx);
int device_count();
// Metadata in a PinnedRegion (kernels/cuda/cuda_context.h).
Expected<MetadataBuffer> allocate_metadata(CudaContext& ctx, size_t nbytes);
// CUDA graphs of ctx.stream (thread-local capture mode).
void begin_capture(CudaContext& ctx);
Expected<StepGraph> end_capture(CudaContext& ctx);
void launch(CudaContext& ctx, const StepGraph& graph);
// Hash of the addresses and sizes of ctx's lazily grown scratch (see graph_fingerprint).
uint64_t fingerprint(const CudaContext& ctx);
void memory_info(CudaContext& ctx, size_t* free_bytes, size_t* total_bytes);
std::string describe(CudaContext& ctx);

}  // namespace beam::cuda
