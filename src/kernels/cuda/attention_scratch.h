// Per-context scratch of the CUDA paged attention (kernels/cuda/attention.cu): the partial
// softmax states of split-KV work items of eager calls, and the fixed-address plans that CUDA
// graph steps read (kernels/api/fixed_attention.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/api/fixed_attention.h"

namespace beam {

struct FixedAttentionPlan;               // kernels/cuda/attention.cu

struct AttentionScratch {
  float* partials = nullptr;  // stream-ordered (cudaMallocAsync), grows to the largest need
  size_t floats = 0;
  std::unique_ptr<FixedAttentionPlan> fixed[kNumFixedAttentionSlots];
  uint64_t fixed_generation = 0;  // bumped whenever a fixed plan's memory is reallocated

  AttentionScratch();
  AttentionScratch(const AttentionScratch&) = delete;
  AttentionScratch& operator=(const AttentionScratch&) = delete;
  ~AttentionScratch();
};

}  // namespace beam
