// A per-context scratch buffer of one CUDA op family (CudaContext: the MoE ops' permutation,
// activations and router logits; linear()'s fp32 x and linear_split's packed output; lora_add's
// h), grown on the stream to the largest need and never during graph capture.
#pragma once

#include <cstddef>

struct CUstream_st;  // cudaStream_t without the CUDA headers

namespace beam {

struct OpScratch {
  void* base = nullptr;  // stream-ordered (cudaMallocAsync), grows to the largest need
  size_t bytes = 0;

  OpScratch() = default;
  OpScratch(const OpScratch&) = delete;
  OpScratch& operator=(const OpScratch&) = delete;
  ~OpScratch();

  // At least `bytes` of scratch; growing is stream-ordered on `stream` and refused (checked, the
  // message names `op`) during graph capture. The first `zeroed_head` bytes (<= bytes) are zeroed
  // on the stream whenever the buffer is allocated: counters that the op's kernels keep at zero
  // between launches. Out of memory throws DeviceOutOfMemory (kernels/api/device_out_of_memory.h)
  // and leaves the scratch empty. Defined in kernels/cuda/cuda_context.cpp.
  char* reserve(size_t bytes, CUstream_st* stream, const char* op, size_t zeroed_head = 0);
};

}  // namespace beam
