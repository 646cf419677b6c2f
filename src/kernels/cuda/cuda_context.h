// CudaContext: everything a CUDA op needs besides its tensors — the stream all work is queued on,
// the cuBLASLt handle and workspace, and staging memory for per-step host metadata.
#pragma once

#include <cstddef>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "kernels/cuda/attention_scratch.h"
#include "kernels/cuda/gemm_plans.h"
#include "kernels/cuda/moe_scratch.h"

namespace beam {

// Copies small host arrays (block tables, sequence descriptors) to the device through pinned
// memory. Pointers handed out stay valid (and at fixed addresses while capacity suffices) until
// reset(), which the model calls at the start of each step, after the previous one synchronized.
class StagingArena {
 public:
  StagingArena() = default;
  StagingArena(const StagingArena&) = delete;
  StagingArena& operator=(const StagingArena&) = delete;
  ~StagingArena();

  // Queues a copy of nbytes from src on `stream`; returns the device address (256-byte aligned).
  void* stage(const void* src, size_t nbytes, cudaStream_t stream);
  template <typename T>
  const T* stage(const std::vector<T>& v, cudaStream_t stream) {
    return static_cast<const T*>(stage(v.data(), v.size() * sizeof(T), stream));
  }
  void reset();

 private:
  struct Block {
    char* host = nullptr;  // pinned
    char* device = nullptr;
    size_t capacity = 0;
  };
  void grow(size_t min_bytes);
  std::vector<Block> blocks_;  // the last one is current; older ones are freed at reset()
  size_t used_ = 0;
};

struct CudaContext {
  int device = 0;
  cudaDeviceProp props{};
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* lt_workspace = nullptr;  // for cublasLtMatmul
  size_t lt_workspace_bytes = 0;
  StagingArena staging;
  LinearCache linear;  // linear(): cuBLASLt plans per shape and the router's fp32 x scratch
  AttentionScratch attention;  // paged_attention(): split-KV partial softmax states
  MoeScratch moe;  // moe_experts(): expert permutation, activations and expert outputs

  CudaContext() = default;
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;
  ~CudaContext();
};

}  // namespace beam
