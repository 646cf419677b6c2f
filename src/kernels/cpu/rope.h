// CPU position transforms on normalised q/k: rotate-half RoPE (BEAM.md §3.4) and SSMax (§3.5).
#pragma once

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace beam::cpu {

// The fp32 values of BEAM.md §3.4 / §3.5, computed as PyTorch computes them (torch_math.h).
float rope_inv_freq(float theta, int64_t i, int64_t head_dim);
float rope_angle(int64_t position, float inv_freq);
float ssmax_scale(int64_t position);
// fp32 cos/sin of one token's HF table row cat(angles, angles): cos_out, sin_out [head_dim];
// inv_freq [head_dim / 2].
void rope_cos_sin(int64_t position, const float* inv_freq, int64_t head_dim, float* cos_out,
                  float* sin_out);

// Views validated by kernels/api/rope.cpp: q [T, Nq, D], k [T, Nkv, D] bf16, positions [T] i64.
void apply_rope(ThreadPool& pool, const TensorView& q, const TensorView& k,
                const TensorView& positions, float theta);
void apply_ssmax(ThreadPool& pool, const TensorView& q, const TensorView& positions);

}  // namespace beam::cpu
