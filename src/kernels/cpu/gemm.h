// CPU GEMM: out[M, N] = x[M, K] · w[N, K]ᵀ with fp32 accumulation and one rounding to out's dtype.
// Every output element is the fixed-order dot product of vec.h, whatever M, tiling or threads.
#pragma once

#include <cstdint>
#include <span>

#include "core/bf16.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace beam::cpu {

// kTiles: the AVX2 register tiles (fixed dot order, results independent of M). kBlas: OpenBLAS
// sgemm on fp32 copies of blocks of w (faster for many rows; its own summation order).
// kAuto: kTiles below kBlasMinRows rows, kBlas from there on.
enum class GemmPath { kAuto, kTiles, kBlas };
inline constexpr int64_t kBlasMinRows = 128;

// Row-major operands: x fp32 [M, K] (row stride K), w [N, K] (row stride K), out [M, N] with row
// stride ldo. Parallel over blocks of N; x must stay valid and unchanged during the call.
void gemm(ThreadPool& pool, const float* x, int64_t M, int64_t K, const bf16* w, int64_t N,
          bf16* out, int64_t ldo, GemmPath path = GemmPath::kAuto);
void gemm(ThreadPool& pool, const float* x, int64_t M, int64_t K, const bf16* w, int64_t N,
          float* out, int64_t ldo, GemmPath path = GemmPath::kAuto);
void gemm(ThreadPool& pool, const float* x, int64_t M, int64_t K, const float* w, int64_t N,
          bf16* out, int64_t ldo, GemmPath path = GemmPath::kAuto);
void gemm(ThreadPool& pool, const float* x, int64_t M, int64_t K, const float* w, int64_t N,
          float* out, int64_t ldo, GemmPath path = GemmPath::kAuto);

// Single-threaded variants for callers that already run inside a pool task (attention scores).
void gemm_serial(const float* x, int64_t M, int64_t K, const bf16* w, int64_t N, float* out,
                 int64_t ldo);
void gemm_serial(const float* x, int64_t M, int64_t K, const float* w, int64_t N, float* out,
                 int64_t ldo);

// linear() of kernels/api/gemm.h on validated views: x [M, K] bf16|f32, w [N, K] bf16|f32,
// out [M, N] bf16|f32.
void linear(ThreadPool& pool, const TensorView& x, const TensorView& w, const TensorView& out,
            GemmPath path = GemmPath::kAuto);

// linear_split() of kernels/api/gemm.h on validated views: linear() per consecutive row range of
// w (outs[i] [M, n_i]), with x widened once.
void linear_split(ThreadPool& pool, const TensorView& x, const TensorView& w,
                  std::span<const TensorView> outs, GemmPath path = GemmPath::kAuto);

}  // namespace beam::cpu
