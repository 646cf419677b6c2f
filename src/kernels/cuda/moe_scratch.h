// Per-context scratch of the CUDA routed experts (kernels/cuda/moe_experts.cu): the token
// permutation by expert, the SwiGLU activations and the expert outputs of every routed row.
#pragma once

#include <cstddef>

namespace beam {

struct MoeScratch {
  void* base = nullptr;  // stream-ordered (cudaMallocAsync), grows to the largest need
  size_t bytes = 0;

  MoeScratch() = default;
  MoeScratch(const MoeScratch&) = delete;
  MoeScratch& operator=(const MoeScratch&) = delete;
  ~MoeScratch();
};

}  // namespace beam
