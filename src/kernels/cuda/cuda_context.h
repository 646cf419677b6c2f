// CudaContext: everything a CUDA op needs besides its tensors — the stream all work is queued on,
// the cuBLASLt handle and workspace, and staging memory for per-step host metadata.
#pragma once

#include <cstddef>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "kernels/cuda/attention_scratch.h"
#include "kernels/cuda/gemm_plans.h"
#include "kernels/cuda/op_scratch.h"

namespace beam {

// How per-step host metadata (token ids, positions, KV slots, block tables, attention plans)
// reaches the device — the one mechanism, used by every op and by the model:
// - The host writes it into PINNED memory (PinnedRegion::host) and queues cudaMemcpyAsync to the
//   region's device mirror on the context's stream: no pageable copy, no synchronization.
// - Eager steps use StagingArena::stage(): a bump allocator over pinned regions, reset per step.
// - CUDA graph steps use PinnedRegions owned by their user (the model's decode workspace, the
//   attention op's fixed plans): addresses never change while the region lives, so a captured
//   graph can read them; the host rewrites the pinned bytes and uploads them before each replay.
// The host must not rewrite pinned bytes whose upload may still be in flight: BeamModel::forward
// synchronizes the stream before it writes a step's metadata.

// Pinned host bytes and a device mirror of the same capacity, at fixed addresses (256-byte
// aligned) until destroyed. Move-only; freeing synchronizes the device (never inside a capture).
class PinnedRegion {
 public:
  PinnedRegion() = default;
  // Throws DeviceOutOfMemory (naming `what`) when either side does not fit, holding nothing.
  PinnedRegion(size_t capacity, const char* what);
  PinnedRegion(PinnedRegion&& other) noexcept;
  PinnedRegion& operator=(PinnedRegion&& other) noexcept;
  PinnedRegion(const PinnedRegion&) = delete;
  PinnedRegion& operator=(const PinnedRegion&) = delete;
  ~PinnedRegion();

  char* host() const { return host_; }
  char* device() const { return device_; }
  size_t capacity() const { return capacity_; }
  // Queues the copy of bytes [offset, offset + nbytes) from host() to device() on stream.
  void upload(size_t offset, size_t nbytes, cudaStream_t stream) const;

 private:
  void release();
  char* host_ = nullptr;
  char* device_ = nullptr;
  size_t capacity_ = 0;
};

// Per-step staging of eager ops (see above). Pointers handed out stay valid until reset(), which
// begin_step() calls at the start of each step, after the previous one synchronized.
class StagingArena {
 public:
  StagingArena() = default;
  StagingArena(const StagingArena&) = delete;
  StagingArena& operator=(const StagingArena&) = delete;

  // Queues a copy of nbytes from src on `stream`; returns the device address (256-byte aligned).
  void* stage(const void* src, size_t nbytes, cudaStream_t stream);
  template <typename T>
  const T* stage(const std::vector<T>& v, cudaStream_t stream) {
    return static_cast<const T*>(stage(v.data(), v.size() * sizeof(T), stream));
  }
  void reset();

 private:
  void grow(size_t min_bytes);
  std::vector<PinnedRegion> blocks_;  // the last one is current; older ones are freed at reset()
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
  AttentionScratch attention;  // paged_attention(): split-KV partial states and fixed graph plans
  OpScratch moe;  // moe_experts(): expert permutation, activations and expert outputs
  OpScratch moe_router;  // moe_router_route(): router logits (partial sums for small T)
  OpScratch lora;        // lora_add(): the tensor-core path's h (more than 256 tokens)
  OpScratch dflash2_select;  // dflash2_select(): the split top-k's slices' candidate keys
  // launch_kernel's After::kProgrammatic takes effect (kernels/cuda/launch.h); false makes every
  // launch wait for the previous kernel (benchmarks' --no-pdl, a fallback for a misbehaving driver).
  bool programmatic_launch = true;

  CudaContext() = default;
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;
  ~CudaContext();
};

}  // namespace beam
