// StepProfiler: an optional hook the model calls between the ops of a forward step, so a benchmark
// can time each op kind (bench step --breakdown). Off unless KernelContext::profiler is set; it
// only observes the stream (events / host clock) and never changes what the ops compute.
#pragma once

#include "kernels/api/context.h"

namespace beam {

// The op kinds of a step, in the order the model queues them within a layer.
enum class StepOp {
  kSetup,       // work queued before the first op (per-step metadata uploads)
  kEmbedding,   // token embedding gather
  kNorm,        // input_norm at layer 0 (later pre-norms are fused into kPostNorm)
  kQkvg,        // the q, k, v and gate projections
  kQkNormRope,  // q/k norms and RoPE (sliding) or SSMax scaling (full)
  kStoreKv,     // k and v into the paged cache
  kAttention,   // paged attention (and zeroing its padding rows)
  kGate,        // output gate
  kOProj,       // o_proj
  kPostNorm,    // post-attention and post-MLP norm + residual (+ the next pre-norm, fused)
  kRouter,      // router GEMM and top-k routing
  kExperts,     // routed experts (gate_up, activation, down, weighted combine)
  kDense,       // dense MLP (gate_up, swiglu, down)
  kHead,        // final row gather, norm, LM head and softcap
  kLora,        // per-request LoRA deltas on any projection (steps with adapter tokens only)
};
inline constexpr int kNumStepOps = static_cast<int>(StepOp::kLora) + 1;

// Short stable name ("qkvg", "o_proj", ...) used as the JSON key.
inline const char* step_op_name(StepOp op) {
  switch (op) {
    case StepOp::kSetup: return "setup";
    case StepOp::kEmbedding: return "embedding";
    case StepOp::kNorm: return "norms";
    case StepOp::kQkvg: return "qkvg";
    case StepOp::kQkNormRope: return "qk_norm_rope";
    case StepOp::kStoreKv: return "store_kv";
    case StepOp::kAttention: return "attention";
    case StepOp::kGate: return "gate";
    case StepOp::kOProj: return "o_proj";
    case StepOp::kPostNorm: return "post_norm";
    case StepOp::kRouter: return "router";
    case StepOp::kExperts: return "experts";
    case StepOp::kDense: return "dense";
    case StepOp::kHead: return "head";
    case StepOp::kLora:
      return "lora";
  }
  return "?";
}

class StepProfiler {
 public:
  virtual ~StepProfiler() = default;
  // Everything queued on the context since the previous mark (or the profiler's start) is `op`.
  virtual void mark(StepOp op) = 0;
};

// The model's hook: one pointer check when no profiler is set. Eager steps only — a profiler must
// not be set while CUDA graphs capture (the caller turns KernelContext::cuda_graphs off).
inline void profile_mark(const KernelContext& ctx, StepOp op) {
  if (ctx.profiler != nullptr) ctx.profiler->mark(op);
}

}  // namespace beam
