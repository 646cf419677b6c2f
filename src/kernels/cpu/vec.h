// Vector helpers for the CPU kernels: bf16 <-> fp32 row conversion and the fixed-order fp32 dot
// product tile behind every GEMM. AVX2+FMA when the build targets it (Release: x86-64-v3), else a
// scalar emulation of the same 8-lane order, so both builds give bit-identical results.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/bf16.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define BEAM_CPU_AVX2 1
#endif

namespace beam::cpu {

inline float as_f32(float v) {
  return v;
}
inline float as_f32(bf16 v) {
  return to_float(v);
}

// dst[i] = f32(src[i]) (exact widening).
inline void widen_bf16(const bf16* src, float* dst, int64_t n) {
  int64_t i = 0;
#if BEAM_CPU_AVX2
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(w));
  }
#endif
  for (; i < n; ++i) dst[i] = to_float(src[i]);
}

inline void widen_row(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
inline void widen_row(const bf16* src, float* dst, int64_t n) {
  widen_bf16(src, dst, n);
}

// dst[i] = bf16(src[i]) with round-to-nearest-even.
inline void narrow_to_bf16(const float* src, bf16* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

// Stores one fp32 result in the output dtype (the GEMM's single rounding).
inline void store_out(float v, float* dst) {
  *dst = v;
}
inline void store_out(float v, bf16* dst) {
  *dst = to_bf16(v);
}

// Dot-product order shared by all GEMM paths (so a row's result never depends on M, tiling or
// threads): lane l (0..7) accumulates x[k]*w[k] for k = l, l+8, ... < K8 = K & ~7 with fused
// multiply-adds in increasing k; lanes are summed as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7));
// then the tail k in [K8, K) is added with fused multiply-adds in increasing k.
//
// dot_tile computes out[i * NR + j] = dot(x + i * ldx, w + j * ldw, K) for i < MR, j < NR;
// x rows are fp32, w rows are W (bf16 or fp32).
#if BEAM_CPU_AVX2
inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline __m256 load8(const bf16* p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline float lane_sum(__m256 v) {
  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // l_i + l_{i+4}
  __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));  // (a0 + a2, a1 + a3)
  __m128 c = _mm_add_ss(b, _mm_movehdup_ps(b));   // b0 + b1
  return _mm_cvtss_f32(c);
}

template <int MR, int NR, typename W>
inline void dot_tile(const float* x, int64_t ldx, const W* w, int64_t ldw, int64_t K, float* out) {
  __m256 acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  const int64_t K8 = K & ~int64_t{7};
  for (int64_t k = 0; k < K8; k += 8) {
    __m256 wv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wv[j] = load8(w + j * ldw + k);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      __m256 xv = _mm256_loadu_ps(x + i * ldx + k);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float s = lane_sum(acc[i][j]);
      for (int64_t k = K8; k < K; ++k) s = std::fma(x[i * ldx + k], as_f32(w[j * ldw + k]), s);
      out[i * NR + j] = s;
    }
  }
}
#else
template <int MR, int NR, typename W>
inline void dot_tile(const float* x, int64_t ldx, const W* w, int64_t ldw, int64_t K, float* out) {
  const int64_t K8 = K & ~int64_t{7};
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      const float* xr = x + i * ldx;
      const W* wr = w + j * ldw;
      float lane[8] = {};
      for (int64_t k = 0; k < K8; k += 8)
        for (int l = 0; l < 8; ++l) lane[l] = std::fma(xr[k + l], as_f32(wr[k + l]), lane[l]);
      float a[4];
      for (int l = 0; l < 4; ++l) a[l] = lane[l] + lane[l + 4];
      float s = (a[0] + a[2]) + (a[1] + a[3]);
      for (int64_t k = K8; k < K; ++k) s = std::fma(xr[k], as_f32(wr[k]), s);
      out[i * NR + j] = s;
    }
  }
}
#endif

// y[i] = fma(a, x[i], y[i]) for i < n (same result in the AVX2 and scalar builds).
inline void axpy(float a, const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if BEAM_CPU_AVX2
  const __m256 av = _mm256_set1_ps(a);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
  for (; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

// acc[u][d] = fma(p[u][j], v[j][d], acc[u][d]) for j = 0..n-1 in increasing order, u < rows,
// d < D (the per-element order of repeated axpy calls). p: [rows] rows of stride ldp;
// v: [n, D]; acc: [rows, D]. The AVX2 path keeps a 4 x 16 block of acc in registers over j.
#if BEAM_CPU_AVX2
template <int UR>
inline void accumulate_pv_rows(const float* p, int64_t ldp, const float* v, int64_t n, int64_t D,
                               float* acc) {
  int64_t d = 0;
  for (; d + 16 <= D; d += 16) {
    __m256 a[UR][2];
#pragma GCC unroll 4
    for (int u = 0; u < UR; ++u) {
      a[u][0] = _mm256_loadu_ps(acc + u * D + d);
      a[u][1] = _mm256_loadu_ps(acc + u * D + d + 8);
    }
    for (int64_t j = 0; j < n; ++j) {
      const __m256 v0 = _mm256_loadu_ps(v + j * D + d), v1 = _mm256_loadu_ps(v + j * D + d + 8);
#pragma GCC unroll 4
      for (int u = 0; u < UR; ++u) {
        const __m256 pu = _mm256_broadcast_ss(p + u * ldp + j);
        a[u][0] = _mm256_fmadd_ps(pu, v0, a[u][0]);
        a[u][1] = _mm256_fmadd_ps(pu, v1, a[u][1]);
      }
    }
#pragma GCC unroll 4
    for (int u = 0; u < UR; ++u) {
      _mm256_storeu_ps(acc + u * D + d, a[u][0]);
      _mm256_storeu_ps(acc + u * D + d + 8, a[u][1]);
    }
  }
  for (; d < D; ++d)
    for (int u = 0; u < UR; ++u)
      for (int64_t j = 0; j < n; ++j)
        acc[u * D + d] = std::fma(p[u * ldp + j], v[j * D + d], acc[u * D + d]);
}
#endif

inline void accumulate_pv(const float* p, int64_t ldp, int64_t rows, const float* v, int64_t n,
                          int64_t D, float* acc) {
#if BEAM_CPU_AVX2
  int64_t u = 0;
  for (; u + 4 <= rows; u += 4) accumulate_pv_rows<4>(p + u * ldp, ldp, v, n, D, acc + u * D);
  switch (rows - u) {
    case 3:
      accumulate_pv_rows<3>(p + u * ldp, ldp, v, n, D, acc + u * D);
      break;
    case 2:
      accumulate_pv_rows<2>(p + u * ldp, ldp, v, n, D, acc + u * D);
      break;
    case 1:
      accumulate_pv_rows<1>(p + u * ldp, ldp, v, n, D, acc + u * D);
      break;
    default:
      break;
  }
#else
  for (int64_t u = 0; u < rows; ++u)
    for (int64_t j = 0; j < n; ++j) axpy(p[u * ldp + j], v + j * D, acc + u * D, D);
#endif
}

// y[i] *= a for i < n.
inline void scale_row(float a, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

}  // namespace beam::cpu
