// Position transforms applied to normalised q/k (BEAM.md §3.4, §3.5).
#pragma once

#include <span>

#include "kernels/api/attention.h"
#include "kernels/api/context.h"

namespace beam {

// HF rotate-half RoPE over the whole head, in place. q: [T, Nq, D] bf16, k: [T, Nkv, D] bf16,
// positions: [T] i64. inv_freq[i] = 1 / θ^(2i/D) in fp32, angle = fp32(fp32(p) * inv_freq[i]),
// cos/sin evaluated in fp32 then rounded to bf16, and x*cos + rotate_half(x)*sin computed as
// bf16 tensor ops (each product and the sum rounded to bf16).
void apply_rope(const KernelContext& ctx, const TensorView& q, const TensorView& k,
                const TensorView& positions, float theta);

// SSMax on NoPE layers, in place: q = bf16(f32(q) * s(p)), s(p) = (1 + (p+1)/2048)^0.1 in fp32.
// q: [T, Nq, D] bf16, positions: [T] i64.
void apply_ssmax(const KernelContext& ctx, const TensorView& q, const TensorView& positions);

// The q/k of one attention layer after the projections: q [T, Nq, D], k [T, Nkv, D] bf16 (updated
// in place), their per-head RMSNorm weights q_norm, k_norm [D] bf16, positions [T] i64.
struct QkTensors {
  TensorView q, k, q_norm, k_norm, positions;
};

// Where a q/k op also writes the layer's new K/V rows: v [T, Nkv, D] bf16 (same shape as qk.k),
// slots [T] i64 and the pool `cache`, exactly as store_kv (kernels/api/attention.h).
struct KvStore {
  TensorView v, slots;
  PagedKv cache;
};

// The per-head q/k norms (BEAM.md §3.3) then RoPE (sliding layers): rms_norm(q as [T*Nq, D],
// q_norm), rms_norm(k as [T*Nkv, D], k_norm), apply_rope(q, k); with store, then
// store_kv(qk.k, store->v, store->slots, store->cache) (slot -1: row skipped). Bit-identical to
// that composition on every device (CUDA: one launch at Beam's head sizes, store included).
void qk_norm_rope(const KernelContext& ctx, const QkTensors& qk, float eps, float theta,
                  const KvStore* store = nullptr);

// The same norms then SSMax on q (NoPE layers): rms_norm(q), rms_norm(k), apply_ssmax(q); with
// store, then store_kv as above.
void qk_norm_ssmax(const KernelContext& ctx, const QkTensors& qk, float eps,
                   const KvStore* store = nullptr);

// The fp32 SSMax factor for one absolute position (shared by CPU and CUDA code and tests).
// (1 + (fp32(p) + 1) / 2048) in fp32, then pow with PyTorch's fp32 powf (SLEEF) and exponent 0.1f.
float ssmax_scale(int64_t position);

// inv_freq[i] = 1 / θ^(fp32(2i) / D), bit-identical to PyTorch's fp32 computation (its powf is
// SLEEF's, not glibc's: they differ in the last bit for some θ and i). 0 <= i < head_dim / 2.
float rope_inv_freq(float theta, int64_t i, int64_t head_dim);

// The fp32 angle of one position and frequency: fp32(fp32(p) * inv_freq), one rounding.
float rope_angle(int64_t position, float inv_freq);

// fp32 cos and sin of one token's HF table row cat(angles, angles), before the bf16 rounding,
// bit-identical to PyTorch's CPU (SLEEF vectors of 8 lanes; exact for head_dim % 16 == 0).
// cos_out, sin_out: [head_dim].
void rope_cos_sin(int64_t position, float theta, int64_t head_dim, std::span<float> cos_out,
                  std::span<float> sin_out);

}  // namespace beam
