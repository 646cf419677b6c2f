// Per-context scratch of the CUDA MoE ops: moe_experts' token permutation, SwiGLU activations and
// expert outputs (kernels/cuda/moe_experts.cu), and moe_router_route's router logits.
#pragma once

#include <cstddef>

struct CUstream_st;  // cudaStream_t without the CUDA headers

namespace beam {

struct MoeScratch {
  void* base = nullptr;  // stream-ordered (cudaMallocAsync), grows to the largest need
  size_t bytes = 0;

  MoeScratch() = default;
  MoeScratch(const MoeScratch&) = delete;
  MoeScratch& operator=(const MoeScratch&) = delete;
  ~MoeScratch();

  // At least `bytes` of scratch; growing is stream-ordered on `stream` and refused (checked, the
  // message names `op`) during graph capture. Defined in kernels/cuda/moe_experts.cu.
  char* reserve(size_t bytes, CUstream_st* stream, const char* op);
};

}  // namespace beam
