// KernelContext: where an op runs. CPU ops use the thread pool; CUDA ops the stream, cuBLASLt
// handle and staging memory of a CudaContext (kernels/cuda/cuda_context.h).
#pragma once

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace beam {

struct CudaContext;  // defined in kernels/cuda/cuda_context.h (CUDA builds only)
class StepProfiler;  // kernels/api/step_profiler.h

// How attention's probabilities P enter the P·V product (BEAM.md §3.3: softmax and accumulation in
// fp32). kFp32: P to fp32 precision, the CPU reference's. kBf16: a kernel may round P to bf16
// first, as FlashAttention does: the CUDA prefill kernel (chunks of >= 64 rows at head_dim 128)
// then does a third less tensor work; each output moves by at most 2^-8 · max|v| plus one bf16
// rounding. The CPU and the CUDA decode kernels keep fp32 P either way.
enum class AttentionProbs { kFp32, kBf16 };
// "fp32" / "bf16": the --attention-probs spelling, also in reports.
inline const char* attention_probs_name(AttentionProbs p) {
  return p == AttentionProbs::kBf16 ? "bf16" : "fp32";
}

// Which devices' ops keep every output row dependent on its own inputs alone, whatever else is
// in the batch (docs/runtime.md "Batch invariance"), so a request's tokens never depend on batch
// composition or scheduling. kCpuOnly (the default): the CPU's fixed-order GEMMs; CUDA ops take
// their fastest path per batch size (the skinny GEMV, split GEMMs, the small-batch experts, the
// tensor-core prefill attention for long chunks), whose summation orders differ in the last bits.
// kAlways (`--enable-deterministic-inference`): CUDA ops too pin one path per shape (cuBLASLt
// without split-K for every M, the grouped experts, the fused router and the cluster LoRA kernel
// in 256-token slices, prompt rows on the prefill attention kernel and generated rows on the
// decode kernel). kNever: the CPU's large-M GEMMs may take OpenBLAS (tests, benchmarks).
enum class BatchInvariance { kCpuOnly, kAlways, kNever };

struct KernelContext {
  Device device = Device::kCpu;
  ThreadPool* pool = nullptr;   // CPU: required; owned by the caller
  CudaContext* cuda = nullptr;  // CUDA: required; owned by the caller (create_cuda_context)
  BatchInvariance batch_invariance = BatchInvariance::kCpuOnly;
  // CUDA: decode-only steps replay CUDA graphs captured per batch-size bucket
  // (model/beam/decode_graphs.h); false runs every step eagerly. Ignored on the CPU.
  bool cuda_graphs = true;
  AttentionProbs attention_probs = AttentionProbs::kFp32;
  // Benchmarks only: told about each op boundary of a model step (kernels/api/step_profiler.h);
  // null (the default) costs one pointer check per op. Not owned.
  StepProfiler* profiler = nullptr;
};

// Whether ops on `device` must be batch invariant under setting b.
inline bool batch_invariant(Device device, BatchInvariance b) {
  switch (b) {
    case BatchInvariance::kCpuOnly:
      return device == Device::kCpu;
    case BatchInvariance::kAlways:
      return true;
    case BatchInvariance::kNever:
      break;
  }
  return false;
}
inline bool batch_invariant(const KernelContext& ctx) {
  return batch_invariant(ctx.device, ctx.batch_invariance);
}

}  // namespace beam
