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
void synchronize(CudaContext& ctx);
void memory_info(CudaContext& ctx, size_t* free_bytes, size_t* total_bytes);
std::string describe(CudaContext& ctx);

}  // namespace beam::cuda
