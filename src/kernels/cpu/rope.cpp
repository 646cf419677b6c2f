// CPU RoPE and SSMax with PyTorch's fp32 arithmetic: exponent (2i)/D in fp32, θ^e with torch's
// powf, angle = fp32(fp32(p) * inv_freq), cos/sin as torch's vector loop evaluates them, each
// rounded to bf16; then x*cos and rotate_half(x)*sin each rounded to bf16, their sum rounded.
#include "kernels/cpu/rope.h"

#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/torch_math.h"

namespace beam::cpu {
namespace {

// Rotates the heads of one token in place. x: [num_heads, D] bf16; cos/sin: [D] bf16 values.
void rotate_heads(bf16* x, int64_t num_heads, int64_t D, const float* cos_d, const float* sin_d) {
  const int64_t half = D / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    bf16* row = x + h * D;
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = to_float(row[i]), x2 = to_float(row[i + half]);
      // rotate_half(x) = [-x2, x1]
      const float lo = round_bf16(x1 * cos_d[i]) + round_bf16(-x2 * sin_d[i]);
      const float hi = round_bf16(x2 * cos_d[i + half]) + round_bf16(x1 * sin_d[i + half]);
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

void rope_cos_sin(int64_t position, const float* inv_freq, int64_t head_dim, float* cos_out,
                  float* sin_out) {
  const int64_t half = head_dim / 2;
  // HF's emb = cat(angles, angles), evaluated in groups of 8 lanes as torch's AVX2 loop does
  // (exact for D % 16 == 0; otherwise torch's groups cross tokens and the last group is padded).
  std::vector<float> emb(static_cast<size_t>((head_dim + 7) / 8 * 8), 0.0f);
  for (int64_t i = 0; i < half; ++i) emb[i] = emb[i + half] = rope_angle(position, inv_freq[i]);
  float c8[8], s8[8];
  for (int64_t g = 0; g < head_dim; g += 8) {
    torch_cosf8(&emb[g], c8);
    torch_sinf8(&emb[g], s8);
    for (int64_t l = 0; l < 8 && g + l < head_dim; ++l) {
      cos_out[g + l] = c8[l];
      sin_out[g + l] = s8[l];
    }
  }
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
    std::vector<float> cos_d(static_cast<size_t>(D)), sin_d(static_cast<size_t>(D));
    for (int64_t t = t0; t < t1; ++t) {
      rope_cos_sin(positions.as<int64_t>()[t], inv_freq.data(), D, cos_d.data(), sin_d.data());
      for (int64_t d = 0; d < D; ++d) {
        cos_d[d] = round_bf16(cos_d[d]);
        sin_d[d] = round_bf16(sin_d[d]);
      }
      rotate_heads(q.as<bf16>() + t * Nq * D, Nq, D, cos_d.data(), sin_d.data());
      rotate_heads(k.as<bf16>() + t * Nkv * D, Nkv, D, cos_d.data(), sin_d.data());
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
