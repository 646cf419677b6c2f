// SLEEF-backed fp32 math matching PyTorch's CPU vector kernels (see torch_math.h).
#include "kernels/cpu/torch_math.h"

#include <sleef.h>

namespace beam::cpu {

float torch_powf(float base, float exponent) { return Sleef_powf1_u10purecfma(base, exponent); }
float torch_expf(float x) { return Sleef_expf1_u10purecfma(x); }
float torch_cosf(float x) { return Sleef_cosf1_u10purecfma(x); }
float torch_sinf(float x) { return Sleef_sinf1_u10purecfma(x); }
float torch_tanhf(float x) { return Sleef_tanhf1_u10purecfma(x); }

}  // namespace beam::cpu
