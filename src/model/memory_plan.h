// MemoryPlan: how one GPU's memory splits into weights, an activation reserve, and the two KV
// pools of the hybrid cache (sliding-window layers, full-attention layers).
//
// Split rule:
//   weights     = loaded weight bytes / num_gpus (weights assumed sharded evenly: TP + EP)
//   reserve     = activation_reserve_bytes, default max(2 GiB, 4% of GPU memory)
//   sliding     = max_num_seqs x sliding_window tokens: a running sequence keeps at most W keys
//                 per sliding layer, so this pool never needs more
//   full        = everything left, in tokens of all full-attention layers together
// KV heads split over GPUs like attention heads (ceil(Nkv / num_gpus) per GPU; replicated
// when there are more GPUs than KV heads). KV is bf16.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/config.h"

namespace beam {

struct MemoryPlanOptions {
  int64_t gpu_memory_bytes = 0;                    // per GPU
  int64_t num_gpus = 1;
  int64_t max_num_seqs = 256;                      // concurrent sequences the sliding pool serves
  std::optional<int64_t> activation_reserve_bytes = std::nullopt;  // default: the rule above
};

struct MemoryPlan {
  int64_t gpu_memory_bytes = 0;          // per GPU
  int64_t num_gpus = 1;
  int64_t weight_bytes = 0;              // per GPU
  // Host memory one GPU rank's load holds at once: every tensor but the routed experts, whole
  // (sliced after the load); the experts stream from the checkpoint to the GPU (ExpertCopy).
  int64_t host_load_bytes = 0;
  int64_t activation_reserve_bytes = 0;  // per GPU
  int64_t kv_heads_per_gpu = 0;
  int64_t sliding_bytes_per_token = 0;   // K+V of every sliding layer, per GPU
  int64_t full_bytes_per_token = 0;      // K+V of every full-attention layer, per GPU
  int64_t sliding_pool_tokens = 0;
  int64_t sliding_pool_bytes = 0;
  int64_t full_pool_tokens = 0;
  int64_t full_pool_bytes = 0;
  bool fits = false;
  std::string reason;                    // why it does not fit (empty when it fits)
};

// Requires positive gpu_memory_bytes, num_gpus and max_num_seqs (callers validate flags).
MemoryPlan plan_memory(const BeamConfig& config, const MemoryPlanOptions& options);

}  // namespace beam
