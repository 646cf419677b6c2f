// Warp-level tensor-core product shared by the MoE kernels: mma.sync m16n8k16 with bf16 inputs and
// fp32 accumulators (the fragment layouts are PTX's; the callers document how they fill them).
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

// The same with the A fragment as an array and the B fragment as one pair.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint2 b) {
  mma_bf16(c, a[0], a[1], a[2], a[3], b.x, b.y);
}

}  // namespace beam::cuda
