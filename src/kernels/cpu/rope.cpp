// CPU RoPE and SSMax with PyTorch's fp32 arithmetic: exponent (2i)/D in fp32, θ^e with torch's
// powf, angle = fp32(fp32(p) * inv_freq), cos/sin with torch's cosf/sinf, each rounded to bf16;
// then x*cos and rotate_half(x)*sin each rounded to bf16 and their sum rounded again.
#include "kernels/cpu/rope.h"

#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/torch_math.h"

namespace beam::cpu {
namespace {

// Rotates the heads of one token in place. x: [num_heads, D] bf16; cos/sin: [D/2] bf16 values.
void rotate_heads(bf16* x, int64_t num_heads, int64_t D, const float* cos_h, const float* sin_h) {
  const int64_t half = D / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    bf16* row = x + h * D;
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = to_float(row[i]), x2 = to_float(row[i + half]);
      // rotate_half(x) = [-x2, x1]; the cos/sin tables repeat over both halves.
      const float lo = round_bf16(x1 * cos_h[i]) + round_bf16(-x2 * sin_h[i]);
      const float hi = round_bf16(x2 * cos_h[i]) + round_bf16(x1 * sin_h[i]);
      row[i] = to_bf16(lo);
      row[i + half] = to_bf16(hi);
    }
  }
}

}  // namespace

float rope_inv_freq(float theta, int64_t i, int64_t head_dim) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
  return 1.0f / torch_powf(theta, exponent);
}

float rope_angle(int64_t position, float inv_freq) {
  return static_cast<float>(position) * inv_freq;
}

float ssmax_scale(int64_t position) {
  const float base = 1.0f + (static_cast<float>(position) + 1.0f) / 2048.0f;
  return torch_powf(base, 0.1f);
}

void apply_rope(ThreadPool& pool, const TensorView& q, const TensorView& k,
                const TensorView& positions, float theta) {
  const int64_t T = q.dim(0), Nq = q.dim(1), Nkv = k.dim(1), D = q.dim(2), half = D / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = rope_inv_freq(theta, i, D);
  pool.parallel_for(T, 4, [&](int64_t t0, int64_t t1) {
    std::vector<float> cos_h(static_cast<size_t>(half)), sin_h(static_cast<size_t>(half));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p = positions.as<int64_t>()[t];
      for (int64_t i = 0; i < half; ++i) {
        const float angle = rope_angle(p, inv_freq[i]);
        cos_h[i] = round_bf16(torch_cosf(angle));
        sin_h[i] = round_bf16(torch_sinf(angle));
      }
      rotate_heads(q.as<bf16>() + t * Nq * D, Nq, D, cos_h.data(), sin_h.data());
      rotate_heads(k.as<bf16>() + t * Nkv * D, Nkv, D, cos_h.data(), sin_h.data());
    }
  });
}

void apply_ssmax(ThreadPool& pool, const TensorView& q, const TensorView& positions) {
  const int64_t T = q.dim(0), width = q.dim(1) * q.dim(2);
  pool.parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float s = ssmax_scale(positions.as<int64_t>()[t]);
      bf16* row = q.as<bf16>() + t * width;
      for (int64_t i = 0; i < width; ++i) row[i] = to_bf16(to_float(row[i]) * s);
    }
  });
}

}  // namespace beam::cpu
