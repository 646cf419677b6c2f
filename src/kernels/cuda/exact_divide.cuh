// fp32 division of many dividends by one divisor (attention's o / l), bit-identical to the
// correctly rounded a / b but with one reciprocal per divisor: per dividend a multiply and two
// fused multiply-adds instead of __fdiv_rn's reciprocal (MUFU, a quarter-rate unit), Newton step,
// range check and branch. Compiles for host and device; the host build lets tests compare it
// with a / b.
#pragma once

#include <cfloat>
#include <cmath>

#include "core/host_device.h"
#include "kernels/cuda/torch_exp.cuh"  // mul_rn

namespace beam::exact_divide {

// fp32(1 / b), correctly rounded.
BEAM_HOST_DEVICE float reciprocal_rn(float b) {
#ifdef __CUDA_ARCH__
  return __frcp_rn(b);
#else
  return 1.0f / b;
#endif
}

// Whether divide_by_reciprocal is exact for every dividend a with min_abs <= |a| <= max_abs and
// every divisor in [1, b_max], b_max <= 2^40: the quotients are normal numbers of at least 2^-100
// (smaller ones make the residual below inexact) and no dividend is infinite.
BEAM_HOST_DEVICE bool reciprocal_exact(float min_abs, float max_abs, float b_max) {
  return min_abs >= torch_exp::mul_rn(0x1p-100f, b_max) && max_abs <= FLT_MAX;
}

// fp32(a / b), correctly rounded, given y = reciprocal_rn(b), within the domain reciprocal_exact
// states: q = a y is within an ulp of a / b, the residual a - q b is exact in one fma, and
// q + y (a - q b) rounds to the correctly rounded quotient (Markstein).
BEAM_HOST_DEVICE float divide_by_reciprocal(float a, float b, float y) {
  const float q = torch_exp::mul_rn(a, y);
  return fmaf(fmaf(-q, b, a), y, q);
}

}  // namespace beam::exact_divide
