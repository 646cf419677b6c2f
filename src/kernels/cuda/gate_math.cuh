// The sigmoid output gate's device arithmetic (BEAM.md §3.7), shared by output_gate
// (kernels/cuda/activation.cu) and the gated decode-attention epilogue (attention_decode.cuh) so
// both round at the same points with the same fp32 operations. Self-contained (bf16 rounding
// spelled out) so kernels that do not include bf16_math.cuh can use it.
#pragma once

#include <cuda_bf16.h>

namespace beam::cuda {

// The gate factor bf16(sigmoid(bf16(g + b))) of one element (g its gate input, b its head's
// bias), with kernels/cpu/activation.cpp's rounding points (round to nearest even).
__device__ __forceinline__ float output_gate_factor(float g, float b) {
  const float pre = __bfloat162float(__float2bfloat16_rn(g + b));
  return __bfloat162float(__float2bfloat16_rn(1.0f / (1.0f + expf(-pre))));
}

// The gated output o * factor in fp32 (o a bf16 value widened), before its bf16 rounding.
__device__ __forceinline__ float apply_output_gate(float o, float g, float b) {
  return o * output_gate_factor(g, b);
}

}  // namespace beam::cuda
