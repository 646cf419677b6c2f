// CUDA position transforms on normalised q/k: rotate-half RoPE (BEAM.md §3.4), SSMax (§3.5), and
// both fused with the per-head q/k RMSNorm before them.
#pragma once

#include "core/tensor.h"
#include "kernels/api/rope.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/rope.cpp: q [T, Nq, D], k [T, Nkv, D] bf16 (D <= 512) and
// positions [T] i64, all on the device; q and k rotated in place on ctx.stream.
void apply_rope(CudaContext& ctx, const TensorView& q, const TensorView& k,
                const TensorView& positions, float theta);

// q [T, Nq, D] bf16, positions [T] i64 on the device; q scaled in place on ctx.stream.
void apply_ssmax(CudaContext& ctx, const TensorView& q, const TensorView& positions);

// qk_norm_rope / qk_norm_ssmax of kernels/api/rope.h (views validated there, on the device), and
// with `store` the final k and v rows also copied into the pool slots:
// one launch where D % 16 == 0, D <= 256 and q, k, the norm weights (and v and the pool) are
// 16-byte aligned, else rms_norm + apply_rope / apply_ssmax (+ store_kv); bit-identical to those
// ops either way.
void qk_norm_rope(CudaContext& ctx, const QkTensors& qk, float eps, float theta,
                  const KvStore* store = nullptr);
void qk_norm_ssmax(CudaContext& ctx, const QkTensors& qk, float eps,
                   const KvStore* store = nullptr);

}  // namespace beam::cuda
