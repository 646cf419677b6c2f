// Warp-level tensor-core product shared by the MoE kernels: mma.sync m16n8k16 with bf16 inputs and
// fp32 accumulators (the fragment layouts are PTX's; the callers document how they fill them), and
// fp32 operands split exactly into three bf16 terms for it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace beam::cuda {

// c += a . b for one m16n8k16 bf16 tile, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// An fp32 pair as three bf16x2 terms, hi + mid + lo == value exactly (truncations: each residual
// has at most 16, then 8, significant bits; exact for |value| >= 2^-100, i.e. all but denormal
// scales). Low half: the first value.
struct Split3 {
  uint32_t hi, mid, lo;
};
__device__ __forceinline__ Split3 split3(float f0, float f1) {
  const uint32_t u0 = __float_as_uint(f0), u1 = __float_as_uint(f1);
  const float r0 = __fsub_rn(f0, __uint_as_float(u0 & 0xffff0000u));
  const float r1 = __fsub_rn(f1, __uint_as_float(u1 & 0xffff0000u));
  const uint32_t v0 = __float_as_uint(r0), v1 = __float_as_uint(r1);
  const float l0 = __fsub_rn(r0, __uint_as_float(v0 & 0xffff0000u));
  const float l1 = __fsub_rn(r1, __uint_as_float(v1 & 0xffff0000u));
  return {__byte_perm(u0, u1, 0x7632), __byte_perm(v0, v1, 0x7632),
          __byte_perm(__float_as_uint(l0), __float_as_uint(l1), 0x7632)};
}

// The same with the A fragment as an array and the B fragment as one pair.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint2 b) {
  mma_bf16(c, a[0], a[1], a[2], a[3], b.x, b.y);
}

}  // namespace beam::cuda
