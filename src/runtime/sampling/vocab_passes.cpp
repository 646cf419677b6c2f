// vocab_passes: AVX2 bodies over blocks of 8 and a scalar body for the tail (and for builds
// without AVX2) performing the same operations per lane.
#include "runtime/sampling/vocab_passes.h"

#include <cmath>
#include <cstddef>

#include "runtime/sampling/fast_exp.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace beam {
namespace {

constexpr size_t kLanes = 8;

// max(a, b) that keeps `a` when b is NaN, the same as _mm256_max_ps(b, a).
inline float max_keep(float a, float b) { return b > a ? b : a; }

double sum_lanes(const double (&lanes)[kLanes]) {
  double sum = 0.0;
  for (double l : lanes) sum += l;
  return sum;
}

#if defined(__AVX2__)
// Loads the values of candidates [i, i + 8) in order, and their ids (as float bits).
inline void load_candidates8(const TokenCandidate* c, __m256* values, __m256* ids) {
  const __m256i deinterleave = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  __m256 a = _mm256_permutevar8x32_ps(_mm256_loadu_ps(&c[0].value), deinterleave);
  __m256 b = _mm256_permutevar8x32_ps(_mm256_loadu_ps(&c[4].value), deinterleave);
  *values = _mm256_permute2f128_ps(a, b, 0x20);
  *ids = _mm256_permute2f128_ps(a, b, 0x31);
}

inline void store_candidates8(TokenCandidate* c, __m256 values, __m256 ids) {
  const __m256i interleave = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_ps(&c[0].value,
                   _mm256_permutevar8x32_ps(_mm256_permute2f128_ps(values, ids, 0x20), interleave));
  _mm256_storeu_ps(&c[4].value,
                   _mm256_permutevar8x32_ps(_mm256_permute2f128_ps(values, ids, 0x31), interleave));
}

inline void add_to_lanes(__m256 w, __m256d* lo, __m256d* hi) {
  *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
  *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
}

inline void store_lanes(__m256d lo, __m256d hi, double (&lanes)[kLanes]) {
  _mm256_storeu_pd(lanes, lo);
  _mm256_storeu_pd(lanes + 4, hi);
}

inline void store_lanes(__m256 m, float (&lanes)[kLanes]) { _mm256_storeu_ps(lanes, m); }
#endif

// Max over lanes, then the tail, in the fixed order (get(i) reads element i).
template <typename Get>
float max_by_lanes(size_t n, Get get) {
  float lanes[kLanes];
  for (float& l : lanes) l = -INFINITY;
  size_t i = 0;
#if defined(__AVX2__)
  __m256 m = _mm256_set1_ps(-INFINITY);
  for (; i + kLanes <= n; i += kLanes) m = _mm256_max_ps(get.block(i), m);
  store_lanes(m, lanes);
#endif
  for (; i < n; ++i) lanes[i % kLanes] = max_keep(lanes[i % kLanes], get(i));
  float out = -INFINITY;
  for (float l : lanes) out = max_keep(out, l);
  return out;
}

struct FloatReader {
  const float* data;
  float operator()(size_t i) const { return data[i]; }
#if defined(__AVX2__)
  __m256 block(size_t i) const { return _mm256_loadu_ps(data + i); }
#endif
};

struct CandidateReader {
  const TokenCandidate* data;
  float operator()(size_t i) const { return data[i].value; }
#if defined(__AVX2__)
  __m256 block(size_t i) const {
    __m256 values, ids;
    load_candidates8(data + i, &values, &ids);
    return values;
  }
#endif
};

}  // namespace

float max_value(std::span<const float> values) {
  return max_by_lanes(values.size(), FloatReader{values.data()});
}

float max_value(std::span<const TokenCandidate> candidates) {
  return max_by_lanes(candidates.size(), CandidateReader{candidates.data()});
}

double sum_exp(std::span<const float> values, float max, float inv_scale) {
  double lanes[kLanes] = {};
  size_t i = 0, n = values.size();
#if defined(__AVX2__)
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  const __m256 m = _mm256_set1_ps(max), s = _mm256_set1_ps(inv_scale);
  for (; i + kLanes <= n; i += kLanes) {
    __m256 x = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(values.data() + i), m), s);
    add_to_lanes(exp_nonpositive8(x), &lo, &hi);
  }
  store_lanes(lo, hi, lanes);
#endif
  for (; i < n; ++i) lanes[i % kLanes] += exp_nonpositive((values[i] - max) * inv_scale);
  return sum_lanes(lanes);
}

double exp_weights_in_place(std::span<TokenCandidate> candidates, float max, float inv_scale) {
  double lanes[kLanes] = {};
  size_t i = 0, n = candidates.size();
#if defined(__AVX2__)
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  const __m256 m = _mm256_set1_ps(max), s = _mm256_set1_ps(inv_scale);
  for (; i + kLanes <= n; i += kLanes) {
    __m256 values, ids;
    load_candidates8(candidates.data() + i, &values, &ids);
    __m256 w = exp_nonpositive8(_mm256_mul_ps(_mm256_sub_ps(values, m), s));
    store_candidates8(candidates.data() + i, w, ids);
    add_to_lanes(w, &lo, &hi);
  }
  store_lanes(lo, hi, lanes);
#endif
  for (; i < n; ++i) {
    float w = exp_nonpositive((candidates[i].value - max) * inv_scale);
    candidates[i].value = w;
    lanes[i % kLanes] += w;
  }
  return sum_lanes(lanes);
}

}  // namespace beam
