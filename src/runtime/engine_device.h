// EngineDevice: where an engine runs — the CUDA context (on Device::kCuda), the weights on that
// device, the KV memory allocator for it, and the KV budget sized for it (docs/runtime.md, Device).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "kernels/api/context.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/releasable_memory.h"
#include "model/config.h"
#include "model/lora_slots.h"
#include "model/weights.h"
#include "runtime/kv_cache/kv_geometry.h"
#include "runtime/kv_cache/kv_storage.h"

namespace beam {

class EngineRanks;  // runtime/engine_ranks.h

// "1.23 GiB".
std::string gib_text(int64_t bytes);

struct EngineDevice {
  Device device = Device::kCpu;
  std::shared_ptr<CudaContext> cuda;            // set for Device::kCuda
  int gpu = 0;                                  // Device::kCuda: the GPU's index
  std::shared_ptr<const BeamWeights> weights;   // on `device`
  int64_t weight_device_bytes = 0;              // 0 on the CPU (the weights stay where they were loaded)
  // Sleep mode on CUDA: the weights' arena, which Engine::sleep gives back (null on the CPU, where
  // the weights stay in host memory, and without sleep mode).
  std::shared_ptr<ReleasableMemory> weight_memory;
  bool cuda_graphs = true;                      // KernelContext::cuda_graphs (EngineOptions::cuda_graphs)
  AttentionProbs attention_probs = AttentionProbs::kFp32;  // KernelContext::attention_probs
  BatchInvariance batch_invariance = BatchInvariance::kCpuOnly;  // KernelContext's

  // The context ops run in; pool is the CPU thread pool (required on the CPU).
  KernelContext context(ThreadPool* pool) const {
    KernelContext ctx{device, pool, cuda.get()};
    ctx.cuda_graphs = cuda_graphs;
    ctx.attention_probs = attention_probs;
    ctx.batch_invariance = batch_invariance;
    return ctx;
  }
};

// Creates the CUDA context of GPU `gpu` (Device::kCuda; its error says why CUDA is unavailable;
// the calling thread's current device becomes that GPU) and uploads the weights to it (into
// releasable memory with `sleep_mode`); on the CPU it keeps the host weights.
Expected<EngineDevice> open_engine_device(Device device,
                                          std::shared_ptr<const BeamWeights> host_weights,
                                          bool sleep_mode = false, int gpu = 0);

// The chunked-prefill token budget of a step when EngineOptions leaves it unset: 8192 tokens on a
// CUDA device of at least 70 GiB (vLLM's rule for H100 / H200-class GPUs; on the H200 long prompts
// then prefill ~1.2x faster, docs/benchmarks.md run 249), else 2048.
int64_t default_max_tokens_per_step(Device device, int64_t device_memory_bytes);

// A default step budget fitted to an explicit KV budget: `tokens` halved while it is above 2048
// (the CPU's default) and plan_kv_pools cannot hold the sliding blocks such a step needs beside
// max_running sequences' windows, so a --kv-budget-mb that serves on the CPU serves on any device.
// Returns `tokens` when they fit, else the largest halving that fits or 2048 (whose error the
// pool plan then reports).
int64_t fit_step_tokens_to_kv_budget(int64_t tokens, const KvGeometry& geometry,
                                     int64_t budget_bytes, int64_t max_running);

// The device's memory while the largest step an engine may run holds its activations.
struct StepMemory {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
  int64_t step_bytes = 0;  // what the step took: activations, kernel scratch, GEMM plans
  double seconds = 0;      // the warm-up's wall time, its allocations included
};

// CUDA: one forward of `tokens` tokens spread over min(max_seqs, tokens) sequences (as many logit
// rows as a step can have) on a scratch model and KV cache, so the kernels' scratch reaches a
// full step's size before the KV pools take the rest: no later step runs out of memory for it, no
// first large prefill grows it and so recaptures the decode graphs. An error names the step size
// when it does not fit. Returns the free memory measured while the scratch model still holds its
// activations (the engine's own model needs them again). With LoRA slots (lent to the scratch
// model and given back, whatever the outcome) the step's tokens use slot 0 (empty: the same
// outputs), so the LoRA kernels' scratch (e.g. expert LoRA's fp32 deltas) is reserved too.
// With `ranks` (a tensor-parallel engine's workers) the step runs on every rank, each through
// scratch KV caches of its heads, and the free memory is the least over the ranks' devices.
Expected<StepMemory> warm_up_largest_step(const EngineDevice& device, int64_t tokens,
                                          int64_t max_seqs, int64_t block_size,
                                          std::unique_ptr<LoraSlots>& lora,
                                          EngineRanks* ranks = nullptr);

// KV budget in bytes (both pools): `requested` when given; else 1 GiB on the CPU, and on CUDA the
// free memory measured during the largest step (warm_up_largest_step) minus memory_plan's
// activation reserve, kept as headroom (decode graphs, long decode batches' attention scratch).
Expected<int64_t> kv_budget_bytes(const EngineDevice& device, const BeamConfig& config,
                                  std::optional<int64_t> requested, int64_t max_running,
                                  const std::optional<StepMemory>& step);

// Host memory on the CPU; device memory through allocate_buffer on CUDA; with `sleep_mode` a
// ReleasableKvAllocator on either. The returned allocator holds a context pointing at
// device.cuda, which must outlive it.
std::unique_ptr<KvMemoryAllocator> make_kv_allocator(const EngineDevice& device, bool sleep_mode);

}  // namespace beam
