// Per-request LoRA inside the CUDA routed experts (kernels/api/moe.h's MoeLora): a shrink kernel
// (moe_lora.cu) computes each routed row's h = scale · A_{e,s} · in before the expert GEMM, and
// the GEMM epilogues (moe_small_batch.cuh, moe_grouped_gemm.cuh) add the expand Σ_j h_j · B_{e,s}
// [col, j] to their rounded outputs, then round again: kernels/cpu/moe_experts.cpp's rounding
// points, fp32 sums in another order. A GEMM whose Terms have h == nullptr runs as without LoRA.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/api/lora.h"
#include "kernels/api/moe.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda::moe_lora {

using bf16_t = __nv_bfloat16;

// What an expert GEMM's epilogue reads to add LoRA deltas (all on the device).
struct Terms {
  const float* h = nullptr;    // [T * top_k, parts * r]: routed slot i's h of each part; nullptr:
                               // no LoRA
  const bf16_t* b0 = nullptr;  // part 0's B [E, S, n, r] (gate_up: gate; down: down)
  const bf16_t* b1 = nullptr;  // part 1's B (gate_up: up)
  const int32_t* slots = nullptr;  // [T] each token's adapter slot (kNoLoraSlot: none)
  const int32_t* ids = nullptr;    // [T, top_k] the routing (a token's experts are distinct)
  int top_k = 0, num_slots = 0, rank = 0;
};

// acc + Σ_u x[u] · f32(w[u]) over 8 elements in order (w 16-byte aligned).
__device__ __forceinline__ float fma8(const float* x, const bf16_t* w, float acc) {
  const uint4 v = *reinterpret_cast<const uint4*>(w);
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const float2 f = __bfloat1622float2(pairs[u]);
    acc = __fmaf_rn(x[2 * u], f.x, acc);
    acc = __fmaf_rn(x[2 * u + 1], f.y, acc);
  }
  return acc;
}

// Where token t's routed row on expert e finds its LoRA: its h row and the index of row 0 of
// B_{e,s} among a part's [E, S, n] rows; h == nullptr when the token has no adapter.
struct RowLora {
  const float* h = nullptr;
  int64_t b_row0 = 0;
};
__device__ __forceinline__ RowLora row_lora(const Terms& l, int t, int e, int parts, int64_t n) {
  const int s = l.slots[t];
  if (s < 0) return {};
  const int32_t* ids = l.ids + static_cast<int64_t>(t) * l.top_k;
  for (int k = 0; k < l.top_k; ++k)
    if (ids[k] == e)
      return {l.h + (static_cast<int64_t>(t) * l.top_k + k) * parts * l.rank,
              (static_cast<int64_t>(e) * l.num_slots + s) * n};
  return {};
}

// Σ_j h[j] · f32(b_row[j]) in j order over the rank (b_row: one output column's row of B).
__device__ __forceinline__ float expand(const float* h, const bf16_t* b_row, int rank) {
  float acc = 0.0f;
  if (rank % 8 == 0) {  // 16-byte rows (the stacks are 256-byte aligned)
    for (int j = 0; j < rank; j += 8) acc = fma8(h + j, b_row + j, acc);
  } else {
    for (int j = 0; j < rank; ++j) acc = __fmaf_rn(h[j], __bfloat162float(b_row[j]), acc);
  }
  return acc;
}

// bf16(f32(v) + delta) as a float: a rounded output with its LoRA delta.
__device__ __forceinline__ float add_rounded(float v, float delta) {
  return __bfloat162float(__float2bfloat16_rn(__fadd_rn(v, delta)));
}

// The epilogues' calls (static: a copy in each .cu that includes this): not inlined, so the LoRA
// code is one function, not a copy in each unrolled store of every GEMM instantiation (ptxas time
// and registers), and the values come back as a pair (no references into the callers' registers).

// The rounded gate g and up u of act column col (of n) of token t's row on expert e with their
// LoRA deltas when the token has an adapter (parts gate, up), else as given.
static __device__ __noinline__ float2 gate_up_with_lora(const Terms l, int t, int e, int64_t n,
                                                        int64_t col, float g, float u) {
  const RowLora row = row_lora(l, t, e, 2, n);
  if (row.h == nullptr) return make_float2(g, u);
  const int64_t at = (row.b_row0 + col) * l.rank;
  return make_float2(add_rounded(g, expand(row.h, l.b0 + at, l.rank)),
                     add_rounded(u, expand(row.h + l.rank, l.b1 + at, l.rank)));
}

// Output columns col and col + 1 (sums y0, y1; col + 1 may be n, then y1 stays) of token t's row
// on expert e, rounded and with their LoRA deltas when the token has an adapter (the caller's
// store rounds them again, exactly), else as given.
static __device__ __noinline__ float2 pair_with_lora(const Terms l, int t, int e, int64_t n,
                                                     int64_t col, float y0, float y1) {
  const RowLora row = row_lora(l, t, e, 1, n);
  if (row.h == nullptr) return make_float2(y0, y1);
  const bf16_t* b = l.b0 + (row.b_row0 + col) * l.rank;
  const auto rounded = [](float v) { return __bfloat162float(__float2bfloat16_rn(v)); };
  return make_float2(
      add_rounded(rounded(y0), expand(row.h, b, l.rank)),
      col + 1 < n ? add_rounded(rounded(y1), expand(row.h, b + l.rank, l.rank)) : y1);
}

// The shrink of one expert GEMM, queued on ctx.stream as a plain launch (after everything before
// it): for each routed slot i = t * top_k + k with an expert and a token slot s >= 0,
// h[i, p * r + j] = scale_p[s] · Σ_c f32(in[row_i, c]) · f32(A_p[e, s, j, c]) for each part p,
// row_i = t (in_row_of == nullptr) or in_row_of[i] (the act row of a grouped row). in: [.., k]
// bf16; parts: 1 or 2 stacks on in's width. Rows without an adapter are left unwritten.
void launch_shrink(CudaContext& ctx, const bf16_t* in, const int32_t* in_row_of, int64_t k,
                   const ExpertLoraStack* const* parts, int num_parts, const int32_t* slots,
                   const int32_t* ids, int64_t num_rows, int top_k, float* h);

}  // namespace beam::cuda::moe_lora
