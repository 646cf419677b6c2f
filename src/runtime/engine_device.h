// EngineDevice: where an engine runs — the CUDA context (on Device::kCuda), the weights on that
// device, the KV memory allocator for it, and the KV budget sized for it (docs/runtime.md, Device).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/status.h"
#include "kernels/api/context.h"
#include "kernels/api/device_memory.h"
#include "model/config.h"
#include "model/weights.h"
#include "runtime/kv_cache/kv_storage.h"

namespace beam {

struct EngineDevice {
  Device device = Device::kCpu;
  std::shared_ptr<CudaContext> cuda;            // set for Device::kCuda
  std::shared_ptr<const BeamWeights> weights;   // on `device`
  int64_t weight_device_bytes = 0;              // 0 on the CPU (the weights stay where they were loaded)
  bool cuda_graphs = true;                      // KernelContext::cuda_graphs (EngineOptions::cuda_graphs)
  AttentionProbs attention_probs = AttentionProbs::kFp32;  // KernelContext::attention_probs

  // The context ops run in; pool is the CPU thread pool (required on the CPU).
  KernelContext context(ThreadPool* pool) const {
    KernelContext ctx{device, pool, cuda.get()};
    ctx.cuda_graphs = cuda_graphs;
    ctx.attention_probs = attention_probs;
    return ctx;
  }
};

// Creates the CUDA context of GPU 0 (Device::kCuda; its error says why CUDA is unavailable) and
// uploads the weights to it; on the CPU it keeps the host weights.
Expected<EngineDevice> open_engine_device(Device device, std::shared_ptr<const BeamWeights> host_weights);

// KV budget in bytes (both pools): `requested` when given; else 1 GiB on the CPU, and on CUDA the
// device's free memory (weights already uploaded) minus memory_plan's activation reserve.
Expected<int64_t> kv_budget_bytes(const EngineDevice& device, const BeamConfig& config,
                                  std::optional<int64_t> requested, int64_t max_running);

// Host memory on the CPU; device memory through allocate_buffer on CUDA. The returned allocator
// holds a context pointing at device.cuda, which must outlive it.
std::unique_ptr<KvMemoryAllocator> make_kv_allocator(const EngineDevice& device);

}  // namespace beam
