// Per-context scratch of the CUDA paged attention (kernels/cuda/attention.cu): the partial
// softmax states of split-KV work items and the decode kernel's ticket counters of eager calls,
// and the fixed-address plans that CUDA graph steps read (kernels/api/fixed_attention.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/api/fixed_attention.h"

namespace beam {

struct FixedAttentionPlan;               // kernels/cuda/attention.cu
struct DecodeMapCache;                   // kernels/cuda/attention.cu

struct AttentionScratch {
  float* partials = nullptr;  // stream-ordered (cudaMallocAsync), grows to the largest need
  size_t floats = 0;
  uint32_t* counters = nullptr;  // decode combine tickets: stream-ordered, zero between launches
  size_t num_counters = 0;
  // A bit per decode kernel (head_dim, q heads per warp) whose shared-memory limit is raised.
  uint32_t decode_attributes = 0;
  uint32_t prefill_attributes = 0;  // bit per prefill kernel (fp32 / bf16 P) whose smem is raised
  // Clusters of the four-warp decode kernel the GPU holds at once (-1: not asked yet).
  int decode_clusters = -1;
  std::unique_ptr<FixedAttentionPlan> fixed[kNumFixedAttentionSlots];
  uint64_t fixed_generation = 0;  // bumped whenever a fixed plan's memory is reallocated
  // The tensor-core decode kernel's TMA maps of the KV caches seen, so eager calls encode a
  // layer's maps once.
  std::unique_ptr<DecodeMapCache> decode_maps;

  AttentionScratch();
  AttentionScratch(const AttentionScratch&) = delete;
  AttentionScratch& operator=(const AttentionScratch&) = delete;
  ~AttentionScratch();
};

}  // namespace beam
