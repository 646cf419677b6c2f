// SLEEF-backed fp32 math matching PyTorch's CPU vector kernels (see torch_math.h). Builds without
// -march (Debug) call the same SLEEF entry points (declared here when sleef.h hides them); the
// 8-lane ones go through SLEEF's run-time dispatcher, as PyTorch does. Needs AVX2 + FMA at run
// time.
#include "kernels/cpu/torch_math.h"

#include <sleef.h>

#if !defined(FP_FAST_FMA)  // sleef.h declares the FMA variants only in FMA builds
extern "C" float Sleef_powf1_u10purecfma(float, float);
extern "C" float Sleef_expf1_u10purecfma(float);
extern "C" float Sleef_tanhf1_u10purecfma(float);
#endif

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include <immintrin.h>

#if !defined(__AVX__)  // sleef.h declares its __m256 functions only in AVX builds
extern "C" __m256 Sleef_cosf8_u10(__m256);
extern "C" __m256 Sleef_sinf8_u10(__m256);
#endif

namespace beam::cpu {

void torch_cosf8(const float* x, float* out) {
  _mm256_storeu_ps(out, Sleef_cosf8_u10(_mm256_loadu_ps(x)));
}
void torch_sinf8(const float* x, float* out) {
  _mm256_storeu_ps(out, Sleef_sinf8_u10(_mm256_loadu_ps(x)));
}

}  // namespace beam::cpu
#pragma GCC pop_options

namespace beam::cpu {

float torch_powf(float base, float exponent) {
  return Sleef_powf1_u10purecfma(base, exponent);
}
float torch_expf(float x) {
  return Sleef_expf1_u10purecfma(x);
}
float torch_tanhf(float x) {
  return Sleef_tanhf1_u10purecfma(x);
}

}  // namespace beam::cpu
