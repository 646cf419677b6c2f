// The LoRA launches' arguments and slot lookups, shared by the routed experts' CUDA-core kernels
// (moe_lora.cu: any shape, slot order) and the tensor-core ones over tiles of rows
// (moe_lora_mma.cu: grouped order, or the tokens in order as one expert for the dense lora_add of a
// prefill chunk, lora.cu; the shapes `shrink_mma_fits` / `expand_mma_fits` take).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/moe_lora.cuh"

namespace beam::cuda::moe_lora {

constexpr int kMaxParts = 4;  // stacks on one input: gate and up, or a dense call's modules
constexpr unsigned kMaxGridY = 65535;

// Routed slot i's place: its token t, expert e and the token's adapter slot s (trivial, so tiles
// of them live in shared memory).
struct Slot {
  int64_t i;
  int t, e, s;
  __device__ bool has_lora() const { return i >= 0 && e >= 0 && s >= 0; }
  __device__ bool same_factors(const Slot& o) const { return e == o.e && s == o.s; }
};

// No slot (a block row past the rows, or order's -1).
__device__ __forceinline__ Slot no_slot() {
  return Slot{-1, 0, -1, -1};
}

// The slot that block row b visits (Rows::order).
__device__ __forceinline__ Slot slot_of(const Rows& r, int64_t b) {
  Slot v = no_slot();
  v.i = r.order ? r.order[b] : b;
  if (v.i < 0) return v;
  v.t = static_cast<int>(v.i / r.top_k);
  v.e = r.ids != nullptr ? r.ids[v.i] : 0;
  v.s = r.slots[v.t];
  return v;
}

// Block row b's slot, or no_slot() past the rows.
__device__ __forceinline__ Slot slot_or_none(const Rows& r, int64_t b) {
  return b < r.count ? slot_of(r, b) : no_slot();
}

// arr[i] (i < kMaxParts) by selects: a dynamic index into a kernel's parameters copies them to the
// stack.
template <class T>
__device__ __forceinline__ T pick(const T (&arr)[kMaxParts], int i) {
  return i == 0 ? arr[0] : i == 1 ? arr[1] : i == 2 ? arr[2] : arr[3];
}

struct ShrinkArgs {
  const bf16_t* in;
  const int32_t* in_row_of;
  int64_t k;
  const bf16_t* a[kMaxParts];     // [E, S, r, k]
  const float* scale[kMaxParts];  // [S]
  int parts, num_slots, rank;
  Rows rows;
  float* h;           // [T * top_k, parts * r] by routed slot
  bool vector_loads;  // k % 8 == 0, in and every A 16-byte aligned
};

struct ExpandArgs {
  const float* h;              // [T * top_k, h_stride] by routed slot, part p's from column p * r
  const bf16_t* b[kMaxParts];  // [E, S, n, r]
  int parts, num_slots, rank;
  int64_t n;
  int64_t h_stride;  // floats a row of h (parts * r unless h holds other stacks' columns too)
  int64_t y_stride;  // kAdd: elements a row of y (n unless y is a slice of wider rows)
  Rows rows;
  float* delta;               // kAdd false: [T * top_k, parts, n] (has: [rows, parts, n])
  int32_t* has;               // kAdd false: nullptr, or [rows] whether grouped row g has deltas
  const int32_t* out_row_of;  // kAdd: y row of each slot (nullptr: the slot's index); with has:
                              // grouped row of each slot
  bf16_t* y;                  // kAdd: [.., y_stride], columns 0 .. n - 1 updated
};

// The tensor-core shrink (moe_lora_mma.cu) takes p: rows in runs of shared factors (grouped
// order, or one expert: ids == nullptr), 16-byte loads.
bool shrink_mma_fits(const ShrinkArgs& p);
// The tensor-core shrink: h of every visited slot, as the CUDA-core one (sums in another order).
void launch_shrink_mma(CudaContext& ctx, const ShrinkArgs& p);

// The tensor-core expand takes p: rows as the shrink's, r % 4 == 0, n % 8 == 0, y_stride % 8 ==
// 0, h, delta and y 16-byte, every B 8-byte aligned.
bool expand_mma_fits(const ExpandArgs& p);
// The tensor-core expand: the CUDA-core expand's deltas (kAdd: added to y), sums in another order.
void launch_expand_mma(CudaContext& ctx, const ExpandArgs& p, bool add);

}  // namespace beam::cuda::moe_lora
