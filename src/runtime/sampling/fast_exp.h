// exp for non-positive arguments, for the sampler's full-vocabulary passes: the Cephes expf
// polynomial (≈1 ulp over [-87.3, 0]) with results below 2^-126 (and -inf, NaN) flushed to 0.
// The scalar and AVX2 versions perform the same IEEE operations (no FMA), so they agree exactly.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace beam::exp_detail {

inline constexpr float kMinArg = -87.33654f;  // ln(2^-126): smallest normal result
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
inline constexpr float kLn2Hi = 0.693359375f;      // Cody-Waite split of ln 2
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                   4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

}  // namespace beam::exp_detail

namespace beam {

// e^x for x <= 0; 0 for x < ln(2^-126) or NaN.
inline float exp_nonpositive(float x) {
  using namespace exp_detail;
  if (!(x >= kMinArg)) return 0.0f;
  float shifted = x * kLog2e + kRoundMagic;  // n = round(x / ln 2) in [-126, 0]
  float n = shifted - kRoundMagic;
  int32_t n_int = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRoundMagic);
  float r = x - n * kLn2Hi - n * kLn2Lo;  // |r| <= ln 2 / 2
  float p = kPoly[0];
  for (int k = 1; k < 6; ++k) p = p * r + kPoly[k];
  p = p * r * r + r + 1.0f;
  return std::bit_cast<float>(std::bit_cast<int32_t>(p) + n_int * (1 << 23));  // p * 2^n
}

#if defined(__AVX2__)
// Eight lanes of exp_nonpositive, operation for operation.
inline __m256 exp_nonpositive8(__m256 x) {
  using namespace exp_detail;
  __m256 in_range = _mm256_cmp_ps(x, _mm256_set1_ps(kMinArg), _CMP_GE_OQ);  // false for NaN
  __m256 xc = _mm256_and_ps(x, in_range);  // out-of-range lanes compute exp(0), masked below
  __m256 magic = _mm256_set1_ps(kRoundMagic);
  __m256 shifted = _mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)), magic);
  __m256 n = _mm256_sub_ps(shifted, magic);
  __m256i n_int = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_castps_si256(magic));
  __m256 r = _mm256_sub_ps(_mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Hi))),
                           _mm256_mul_ps(n, _mm256_set1_ps(kLn2Lo)));
  __m256 p = _mm256_set1_ps(kPoly[0]);
  for (int k = 1; k < 6; ++k)
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kPoly[k]));
  p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r), _mm256_set1_ps(1.0f));
  __m256i scaled = _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(n_int, 23));
  return _mm256_and_ps(_mm256_castsi256_ps(scaled), in_range);
}
#endif

}  // namespace beam
