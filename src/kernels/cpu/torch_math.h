// fp32 elementary functions bit-identical to PyTorch's CPU kernels. PyTorch evaluates float
// pow/exp/cos/sin/tanh on contiguous tensors with SLEEF's 1.0-ulp vector functions; glibc's
// correctly rounded libm differs from them in the last bit for some inputs (e.g. θ^(2i/D) for
// θ = 1e6, D = 128, which moves RoPE angles at position 1e6). These wrappers call SLEEF's scalar
// FMA variant, which tests/unit/kernels checks bit-exactly against tables dumped from torch.
#pragma once

namespace beam::cpu {

float torch_powf(float base, float exponent);
float torch_expf(float x);
float torch_cosf(float x);
float torch_sinf(float x);
float torch_tanhf(float x);

// torch.sigmoid on fp32: 1 / (1 + exp(-x)).
inline float torch_sigmoidf(float x) { return 1.0f / (1.0f + torch_expf(-x)); }
// torch silu on fp32: x / (1 + exp(-x)).
inline float torch_siluf(float x) { return x / (1.0f + torch_expf(-x)); }

}  // namespace beam::cpu
