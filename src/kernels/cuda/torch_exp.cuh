// fp32 exp, sigmoid and SiLU bit-identical to kernels/cpu/torch_math.h (PyTorch's CPU kernels,
// which use SLEEF's expf_u10): the same Cody-Waite reduction, polynomial and fused multiply-adds,
// written with explicitly rounded operations so nvcc cannot contract them. Compiles for host and
// device; the host build lets tests compare it with SLEEF on every float.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace beam::torch_exp {

// Correctly rounded fp32 operations (device: the _rn intrinsics, which nvcc never fuses).
BEAM_HOST_DEVICE float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
BEAM_HOST_DEVICE float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
BEAM_HOST_DEVICE float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
// Nearest integer, ties to even (SLEEF's vrint on FMA targets); |x| < 2^31 where it matters.
BEAM_HOST_DEVICE int rint_to_int(float x) {
#ifdef __CUDA_ARCH__
  return __float2int_rn(x);
#else
  const float r = std::nearbyint(x);
  if (r != r) return 0;  // NaN propagates through the reduction instead
  return r >= 2147483648.0f ? INT32_MAX : r <= -2147483648.0f ? INT32_MIN : static_cast<int>(r);
#endif
}

// 2^q for q in [-126, 127].
BEAM_HOST_DEVICE float pow2i(int q) {
  const uint32_t bits = static_cast<uint32_t>(q + 0x7f) << 23;
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// SLEEF xexpf (u10, FMA variant): exp(d), 0 below -104, +inf above 100.
BEAM_HOST_DEVICE float expf(float d) {
  const int q = rint_to_int(mul_rn(d, 1.442695040888963407359924681001892137426645954152985934f));
  float s = fmaf(static_cast<float>(q), -0.693145751953125f, d);
  s = fmaf(static_cast<float>(q), -1.428606765330187045e-06f, s);
  float u = 0.000198527617612853646278381f;
  u = fmaf(u, s, 0.00139304355252534151077271f);
  u = fmaf(u, s, 0.00833336077630519866943359f);
  u = fmaf(u, s, 0.0416664853692054748535156f);
  u = fmaf(u, s, 0.166666671633720397949219f);
  u = fmaf(u, s, 0.5f);
  u = add_rn(1.0f, fmaf(mul_rn(s, s), u, s));
  if (d < -104.0f) return 0.0f;
  if (d > 100.0f) return INFINITY;
  // ldexp in two steps, as SLEEF's vldexp2 (q may exceed one exponent's range).
  return mul_rn(mul_rn(u, pow2i(q >> 1)), pow2i(q - (q >> 1)));
}

// torch.sigmoid on fp32: 1 / (1 + exp(-x)).
BEAM_HOST_DEVICE float sigmoidf(float x) {
  return div_rn(1.0f, add_rn(1.0f, expf(-x)));
}
// torch silu on fp32: x / (1 + exp(-x)).
BEAM_HOST_DEVICE float siluf(float x) {
  return div_rn(x, add_rn(1.0f, expf(-x)));
}

}  // namespace beam::torch_exp
