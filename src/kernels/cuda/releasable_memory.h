// CUDA ReleasableMemory (kernels/api/releasable_memory.h): virtual memory management.
#pragma once

#include <cstddef>
#include <memory>

#include "core/status.h"
#include "kernels/api/releasable_memory.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// nbytes (rounded up to the allocation granularity, 2 MiB) of device memory at a reserved
// virtual range; an error naming the size when the device has no room.
Expected<std::shared_ptr<ReleasableMemory>> allocate_releasable(CudaContext& ctx, size_t nbytes);

}  // namespace beam::cuda
