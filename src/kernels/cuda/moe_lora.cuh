// Per-request LoRA inside the CUDA routed experts (kernels/api/moe.h's MoeLora), as plain kernels
// around the expert GEMMs (moe_lora.cu): a shrink computes each routed row's h = scale · A_{e,s} ·
// in; for gate_up an expand writes the fp32 deltas Σ_j h_j · B_{e,s}[col, j] of gate and up, which
// the GEMM epilogues (moe_small_batch.cuh by routed slot, moe_grouped_gemm.cuh by grouped row) add
// to their rounded outputs before SwiGLU, one load each; for down an expand adds them to the GEMM's
// rounded output rows in place. kernels/cpu/moe_experts.cpp's rounding points, fp32 sums in another
// order. A gate_up GEMM whose terms have delta == nullptr runs as without LoRA.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/api/lora.h"
#include "kernels/api/moe.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda::moe_lora {

using bf16_t = __nv_bfloat16;

// What the small-batch gate_up kernels' epilogue reads to add LoRA deltas (all on the device):
// the deltas by routed slot (those kernels group the slots themselves).
struct SlotTerms {
  const float* delta = nullptr;    // [T * top_k, 2, n]: routed slot i's gate and up deltas of each
                                   // act column (launch_expand); nullptr: no LoRA
  const int32_t* slots = nullptr;  // [T] each token's adapter slot (kNoLoraSlot: none)
  const int32_t* ids = nullptr;    // [T, top_k] the routing (a token's experts are distinct)
  int top_k = 0;
};

// What the grouped gate_up kernels' epilogues read: the deltas by grouped row.
struct RowTerms {
  // [rows, 2, n]: grouped row g's gate and up deltas (launch_expand with `has`); nullptr: no LoRA
  const float* delta = nullptr;
  const int32_t* has = nullptr;  // [rows] 1 where grouped row g has deltas (its token an adapter)
};

// bf16(f32(v) + delta) as a float: a rounded output with its LoRA delta.
__device__ __forceinline__ float add_rounded(float v, float delta) {
  return __bfloat162float(__float2bfloat16_rn(__fadd_rn(v, delta)));
}

// The epilogues' call (static: a copy in each .cu that includes this): not inlined, so the LoRA
// code is one function, not a copy in each unrolled store of every GEMM instantiation (ptxas time
// and registers), and the values come back as a pair (no references into the callers' registers).
// The rounded gate g and up u of act column col (of n) of token t's row on expert e with their
// deltas added when the token has an adapter, else as given. The slot and routing loads do not
// depend on each other (the scan has no early exit), so the delta loads wait for one round trip.
static __device__ __noinline__ float2 gate_up_with_lora(const SlotTerms l, int t, int e, int64_t n,
                                                        int64_t col, float g, float u) {
  const int32_t* ids = l.ids + static_cast<int64_t>(t) * l.top_k;
  int k_of_e = -1;
  for (int k = 0; k < l.top_k; ++k) k_of_e = ids[k] == e ? k : k_of_e;
  if (l.slots[t] < 0 || k_of_e < 0) return make_float2(g, u);
  const float* d = l.delta + (static_cast<int64_t>(t) * l.top_k + k_of_e) * 2 * n;
  return make_float2(add_rounded(g, d[col]), add_rounded(u, d[n + col]));
}

// The rounded gate g and up u of act column col (of n) of grouped row `row` with its deltas when
// it has them, else as given (the three loads independent: the delta words are read whatever the
// flag, from the scratch that holds them).
__device__ __forceinline__ float2 row_with_lora(const RowTerms& l, int64_t row, int64_t n,
                                                int64_t col, float g, float u) {
  const float* d = l.delta + row * 2 * n;
  const float dg = d[col], du = d[n + col];
  if (l.has[row] == 0) return make_float2(g, u);
  return make_float2(add_rounded(g, dg), add_rounded(u, du));
}

// row_with_lora as one function for the cp.async grouped kernel's unrolled stores.
static __device__ __noinline__ float2 gate_up_with_lora(const RowTerms l, int64_t row, int64_t n,
                                                        int64_t col, float g, float u) {
  return row_with_lora(l, row, n, col, g, u);
}

// Which routed slots a LoRA launch visits, and in what order: block row b takes slot
// order[b] (nullptr: slot b); -1 entries and slots without an expert or adapter are skipped. The
// grouped path passes its grouped-row order, so consecutive blocks share an expert's A and B.
struct Rows {
  const int32_t* slots = nullptr;  // [T] each token's adapter slot
  const int32_t* ids = nullptr;    // [T, top_k]
  const int32_t* order = nullptr;  // [count] slot of block row b, or -1 (nullptr: b)
  int64_t count = 0;               // block rows (T * top_k)
  int top_k = 0;
};

// The shrink of one expert GEMM: for each visited slot i = t * top_k + k with expert e and token
// slot s, h[i, p * r + j] = scale_p[s] · Σ_c f32(in[row_i, c]) · f32(A_p[e, s, j, c]) for each
// part p, row_i = t (in_row_of == nullptr) or in_row_of[i] (the act row of a grouped row). in:
// [.., k] bf16; parts: 1 or 2 stacks on in's width. Rows without an adapter are left unwritten.
void launch_shrink(CudaContext& ctx, const bf16_t* in, const int32_t* in_row_of, int64_t k,
                   const ExpertLoraStack* const* parts, int num_parts, const Rows& rows, float* h);

// The gate_up expand: delta[i, p, col] = Σ_j h[i, p * r + j] · f32(B_p[e, s, col, j]) (j in order,
// from 0) for parts gate, up (n act columns) of each visited slot i (SlotTerms::delta's layout),
// or, with `has`, delta[row_of[i], p, col] and has[row_of[i]] = whether slot i has deltas
// (RowTerms' layout by grouped row; row_of: each slot's grouped row).
void launch_expand(CudaContext& ctx, const float* h, const ExpertLoraStack& gate,
                   const ExpertLoraStack& up, const Rows& rows, float* delta,
                   int32_t* has = nullptr, const int32_t* row_of = nullptr);

// The grouped path's visit order: for each expert e, order[offsets[e] ..] = the routed slots of
// its grouped rows (grouped.order: the slot of each grouped row) sorted stably by their tokens'
// adapter slot, so that consecutive visits mostly share one expert and adapter; entries from
// offsets[E] on are left as they are. A token's slot outside [kNoLoraSlot, num_slots) traps.
void launch_sort_by_adapter(CudaContext& ctx, const Rows& grouped, const int32_t* offsets,
                            int num_experts, int num_slots, int32_t* order);

// The down expand, after the down GEMM: y[out_row_of[i], col] = bf16(f32(y[..]) + Σ_j h[i, j] ·
// f32(B[e, s, col, j])) over y's n columns of each visited slot i: what the GEMM's rounded store
// with the delta added and rounded again would have written.
void launch_expand_add(CudaContext& ctx, const float* h, const ExpertLoraStack& down,
                       const Rows& rows, const int32_t* out_row_of, bf16_t* y);

}  // namespace beam::cuda::moe_lora
