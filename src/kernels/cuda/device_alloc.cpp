// The throwing scratch allocators of kernels/cuda/device_alloc.h.
#include "kernels/cuda/device_alloc.h"

#include <cstdio>
#include <string>

#include "kernels/api/device_out_of_memory.h"
#include "kernels/cuda/check.h"

namespace beam {
namespace {

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// Returns p when err is success; throws DeviceOutOfMemory when memory is short; aborts otherwise.
void* checked(cudaError_t err, void* p, size_t bytes, const char* what, const char* kind) {
  if (err == cudaSuccess) return p;
  BEAM_CHECK(err == cudaErrorMemoryAllocation)
      << what << ": " << kind << " of " << bytes << " bytes: " << cudaGetErrorName(err) << " ("
      << cudaGetErrorString(err) << ")";
  cudaGetLastError();  // clear it: the next CUDA_LAUNCH_OK must not report this allocation
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaGetLastError();
  throw DeviceOutOfMemory(std::string(what) + ": out of " + kind + " memory for " + mib(bytes) +
                          " of scratch (device: " + mib(free_bytes) + " free of " +
                          mib(total_bytes) + ")");
}

}  // namespace

void* device_malloc_async(size_t bytes, cudaStream_t stream, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaMallocAsync(&p, bytes, stream);  // before `p` is read
  return checked(err, p, bytes, what, "device");
}

void* device_malloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  return checked(err, p, bytes, what, "device");
}

void* pinned_malloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, bytes);
  return checked(err, p, bytes, what, "pinned host");
}

}  // namespace beam
