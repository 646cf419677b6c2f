// Allocations of the CUDA ops' own scratch: out of memory throws DeviceOutOfMemory (naming the op
// and the bytes asked, free and total) with CUDA's last error cleared, so the next launch check
// does not see it; any other failure is a bug or a lost device and aborts (CUDA_OK).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace beam {

void* device_malloc_async(size_t bytes, cudaStream_t stream, const char* what);  // cudaMallocAsync
void* device_malloc(size_t bytes, const char* what);                             // cudaMalloc
void* pinned_malloc(size_t bytes, const char* what);                             // cudaMallocHost

}  // namespace beam
