// fp32 elementary functions bit-identical to PyTorch's CPU kernels. PyTorch evaluates float
// pow/exp/cos/sin/tanh on contiguous tensors with SLEEF's 1.0-ulp vector functions; glibc's
// correctly rounded libm differs from them in the last bit for some inputs (e.g. θ^(2i/D) for
// θ = 1e6, D = 128, which moves RoPE angles at position 1e6). tests/unit/kernels checks these
// wrappers bit-exactly against tables dumped from torch (tests/data/kernels).
#pragma once

namespace beam::cpu {

// Lane-wise functions: SLEEF's scalar FMA variant gives the same bits as its AVX2 vector one.
float torch_powf(float base, float exponent);
float torch_expf(float x);
float torch_tanhf(float x);

// torch.sigmoid on fp32: 1 / (1 + exp(-x)).
inline float torch_sigmoidf(float x) {
  return 1.0f / (1.0f + torch_expf(-x));
}
// torch silu on fp32: x / (1 + exp(-x)).
inline float torch_siluf(float x) {
  return x / (1.0f + torch_expf(-x));
}

// cos / sin of 8 consecutive elements of a contiguous tensor, as one AVX2 vector of PyTorch's
// loop: SLEEF switches the whole vector to its large-argument range reduction when any lane has
// |x| >= 125, so a lane's last bit depends on its 7 neighbours. Callers must pass the same groups
// of 8 that torch would (elements 8m..8m+7 of the tensor). Needs AVX2 at run time.
void torch_cosf8(const float* x, float* out);
void torch_sinf8(const float* x, float* out);

}  // namespace beam::cpu
