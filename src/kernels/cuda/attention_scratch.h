// Per-context scratch of the CUDA paged attention (kernels/cuda/attention.cu): the partial
// softmax states of split-KV work items, combined by the reduce kernel.
#pragma once

#include <cstddef>

namespace beam {

struct AttentionScratch {
  float* partials = nullptr;  // stream-ordered (cudaMallocAsync), grows to the largest need
  size_t floats = 0;

  AttentionScratch() = default;
  AttentionScratch(const AttentionScratch&) = delete;
  AttentionScratch& operator=(const AttentionScratch&) = delete;
  ~AttentionScratch();
};

}  // namespace beam
