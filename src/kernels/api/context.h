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

struct KernelContext {
  Device device = Device::kCpu;
  ThreadPool* pool = nullptr;   // CPU: required; owned by the caller
  CudaContext* cuda = nullptr;  // CUDA: required; owned by the caller (create_cuda_context)
  // Every output row depends only on its own inputs, whatever else is in the batch (fixed-order
  // GEMM), so a request's tokens never depend on batch composition. false lets large-M CPU GEMMs
  // take OpenBLAS's faster path, whose summation order differs from the small-M kernel's.
  bool batch_invariant = true;
  // CUDA: decode-only steps replay CUDA graphs captured per batch-size bucket
  // (model/beam/decode_graphs.h); false runs every step eagerly. Ignored on the CPU.
  bool cuda_graphs = true;
  AttentionProbs attention_probs = AttentionProbs::kFp32;
  // Benchmarks only: told about each op boundary of a model step (kernels/api/step_profiler.h);
  // null (the default) costs one pointer check per op. Not owned.
  StepProfiler* profiler = nullptr;
};

}  // namespace beam
