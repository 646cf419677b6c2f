// CUDA linear(): out[M, N] = x[M, K] · w[N, K]ᵀ with fp32 accumulation — a weight-streaming
// skinny GEMM (gemm_skinny.cu) at small M, cuBLASLt (gemm.cu) otherwise.
#pragma once

#include <span>

#include "core/tensor.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/gemm.cpp, all in device memory. Supported dtypes (x, w, out):
// (bf16, bf16, bf16|f32) as one bf16 tensor-core GEMM, and (bf16|f32, f32, f32) as an exact fp32
// GEMM (the router of BEAM.md §3.10; a bf16 x is widened first). Other combinations abort.
// bf16 x bf16 with M <= kSkinnyDispatchRows runs linear_skinny, everything else linear_cublaslt.
// invariant (a batch-invariant context, kernels/api/context.h): every M runs linear_cublaslt on
// the algorithm its (N, K) shares with every other M, without split-K, so out's row m is the same
// bits whatever the other rows are.
void linear(CudaContext& ctx, const TensorView& x, const TensorView& w, const TensorView& out,
            bool invariant = false);

// Largest M linear_skinny accepts, and the largest M linear() sends to it: from M = 2 on each
// weight chunk's multiply by M rows of x outweighs the stream, and cuBLASLt is faster (H200 run
// 160: o_proj at M = 2 / 8 0.024 / 0.054 ms against 0.018 / 0.018; at M = 1 the skinny kernel
// wins: LM head 0.349 against 0.374 ms).
constexpr int64_t kSkinnyMaxRows = 16;
constexpr int64_t kSkinnyDispatchRows = 1;

// (bf16, bf16, bf16|f32) with M <= kSkinnyMaxRows: one warp streams a few rows of w against all of
// x. Deterministic, and out[m, n] is summed in the same order whatever M is (batch invariant).
void linear_skinny(CudaContext& ctx, const TensorView& x, const TensorView& w,
                   const TensorView& out);

// linear_split of kernels/api/gemm.h (views validated there): where linear() would run the skinny
// kernel, one skinny launch over all of w's rows, each row stored into its output (bit-identical
// to linear() per range). Above that up to kSplitGemmMaxRows rows with bf16 outputs whose widths
// are multiples of 8: one cuBLASLt GEMM over all of w into the context's scratch, then one kernel
// scattering its column ranges (bit-identical to linear() over all of w, split; a few narrow
// GEMMs would leave most SMs idle at these M). Otherwise, and always when invariant, linear() per
// row range.
void linear_split(CudaContext& ctx, const TensorView& x, const TensorView& w,
                  std::span<const TensorView> outs, bool invariant = false);

// Most rows linear_split runs as one GEMM plus a column scatter (past it each range's GEMM fills
// the GPU and the scatter's extra traffic would cost more than it saves).
constexpr int64_t kSplitGemmMaxRows = 256;

// The skinny kernel over all rows of w, rows split consecutively over outs (at most
// kMaxLinearSplits, one dtype); out element (m, n) is the same sum as in linear_skinny.
void linear_skinny_split(CudaContext& ctx, const TensorView& x, const TensorView& w,
                         std::span<const TensorView> outs);

// The cuBLASLt path for every supported dtype combination (see linear).
void linear_cublaslt(CudaContext& ctx, const TensorView& x, const TensorView& w,
                     const TensorView& out, bool invariant = false);

// Rows at which a batch-invariant (N, K) asks the heuristic for the algorithm every M then runs:
// prefill-sized tiles, which decode batches pay for (not yet measured on a GPU: docs/benchmarks.md
// "Deterministic inference").
constexpr int64_t kInvariantPlanRows = 1024;

}  // namespace beam::cuda
