// CUDA routed experts (BEAM.md §3.10, kernels/cpu/moe_experts.cpp's rounding points), two paths.
// Grouped (large batches): the (t, k) slots are grouped by expert in a deterministic order
// (counts, scan, stable scatter), the grouped gate_up GEMM applies SwiGLU in its epilogue, the
// grouped down GEMM writes each slot's bf16 expert output, and the combine sums w_k * f32(y_k) in
// fp32 in k order, rounding once. Small batch (decode, up to 2048 routed rows): the weight-
// streaming gate_up and down kernels of moe_small_batch.cuh (each selected expert read once, on
// one persistent block per SM) and the same combine, chained by programmatic dependent launch.
// Every launch is sized for the worst case (T * top_k rows); work past the real rows exits.
// Expert weights of widths that are multiples of 64 are packed (moe_packed.cuh; both paths read
// them so), others row-major (the grouped path only).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "core/logging.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/moe.h"
#include "kernels/cuda/moe_grouped_gemm.cuh"
#include "kernels/cuda/moe_lora.cuh"
#include "kernels/cuda/moe_packed.cuh"
#include "kernels/cuda/moe_small_batch.cuh"
#include "kernels/cuda/tensor_map.h"

namespace beam {

namespace cuda {
namespace {

using moe_gemm::bf16_t;
using moe_gemm::Epilogue;

constexpr int kScatterThreads = 256;
constexpr int kCombineThreads = 128;
constexpr int kGatherThreads = 128;
constexpr size_t kScratchAlign = 256;
static_assert(kMoeSmallBatchRowLimit == moe_small::kMaxRows &&
              kMoeSmallBatchMaxRows <= kMoeSmallBatchRowLimit &&
              kMoeSmallBatchMaxWidth == moe_small::kMaxK);
// The small-batch path chains its three launches with programmatic dependent launch (each kernel
// starts on the SMs its predecessor frees and waits for its writes with griddepcontrol.wait; the
// first one depends so on whatever kernel precedes it, the router's in the model).
constexpr After kSmallBatchAfter = After::kProgrammatic;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
size_t align_up(size_t n) {
  return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

struct Problem {
  int64_t T, H, E, I, top_k, rows;
};

// ctx.moe begins with the small-batch kernels' pool counters (gate_up, down: 0 between launches,
// zeroed whenever the scratch is reallocated; no other call touches them), then one call's arrays.
constexpr size_t kPoolCounterBytes = kScratchAlign;

// Carves ctx.moe into the arrays of one call (byte offsets from the base).
struct ScratchLayout {
  size_t counts, offsets, tile_offsets, tile_counters, row_token, entry_of, slot_of, visit, act, y,
      h_gate_up, h_down, delta, has_lora, total;

  // rank: the LoRA stacks' (0: no LoRA).
  ScratchLayout(int64_t E, int64_t rows, int64_t H, int64_t I, int64_t rank) {
    size_t at = kPoolCounterBytes;
    auto take = [&at](size_t bytes) {
      const size_t here = at;
      at += align_up(bytes);
      return here;
    };
    counts = take(E * sizeof(int32_t));              // [E] rows per expert
    offsets = take((E + 1) * sizeof(int32_t));       // [E + 1] first grouped row
    tile_offsets = take((E + 1) * sizeof(int32_t));  // [E + 1] first M tile
    tile_counters = take(2 * sizeof(int32_t));       // [2] TMA GEMMs' next tile (gate_up, down)
    row_token = take(rows * sizeof(int32_t));        // [rows] token of each grouped row
    entry_of = take(rows * sizeof(int32_t));         // [T * top_k] grouped row of a slot
    slot_of = take(rank > 0 ? rows * sizeof(int32_t) : 0);  // [rows] slot of a grouped row (LoRA)
    visit = take(rank > 0 ? rows * sizeof(int32_t) : 0);    // [rows] LoRA's order of the slots
    act = take(static_cast<size_t>(rows * I) * sizeof(bf16_t));  // [rows, I] SwiGLU output
    y = take(static_cast<size_t>(rows * H) * sizeof(bf16_t));    // [rows, H] expert output
    h_gate_up = take(static_cast<size_t>(rows * 2 * rank) * sizeof(float));  // [T * top_k, 2 r]
    h_down = take(static_cast<size_t>(rows * rank) * sizeof(float));         // [T * top_k, r]
    delta = take(rank > 0 ? static_cast<size_t>(rows * 2 * I) * sizeof(float) : 0);  // [rows, 2, I]
    has_lora = take(rank > 0 ? rows * sizeof(int32_t) : 0);  // [rows] whether a row has deltas
    total = at;
  }
};

// The small-batch path's arrays (the kernels group the slots themselves).
struct SmallLayout {
  size_t entry_of, act, y, h_gate_up, h_down, delta, total;

  SmallLayout(int64_t rows, int64_t H, int64_t I, int64_t rank) {
    size_t at = kPoolCounterBytes;
    auto take = [&at](size_t bytes) {
      const size_t here = at;
      at += align_up(bytes);
      return here;
    };
    entry_of = take(rows * sizeof(int32_t));  // [T * top_k] grouped row of each slot
    act = take(static_cast<size_t>(rows * I) * sizeof(bf16_t));  // [rows, I] SwiGLU output
    y = take(static_cast<size_t>(rows * H) * sizeof(bf16_t));    // [rows, H] expert output
    h_gate_up = take(static_cast<size_t>(rows * 2 * rank) * sizeof(float));  // [T * top_k, 2 r]
    h_down = take(static_cast<size_t>(rows * rank) * sizeof(float));         // [T * top_k, r]
    delta =
        take(rank > 0 ? static_cast<size_t>(rows * 2 * I) * sizeof(float) : 0);  // [T*top_k,2,I]
    total = at;
  }
};

// The rank of lora's stacks (0 without LoRA).
int64_t lora_rank(const MoeLora* lora) {
  return lora ? lora->gate.a.dim(2) : 0;
}

// The routed slots of lora's launches, in `order` (moe_lora::Rows; nullptr: slot order).
moe_lora::Rows lora_rows(const MoeLora& lora, const Problem& pb, const TensorView& ids,
                         const int32_t* order) {
  return moe_lora::Rows{.slots = lora.slots.as<int32_t>(),
                        .ids = ids.as<int32_t>(),
                        .order = order,
                        .count = pb.rows,
                        .top_k = static_cast<int>(pb.top_k)};
}

// Before the gate_up GEMM: h of the gate and up stacks on x's rows, then their deltas (by routed
// slot, or with `has` by grouped row: moe_lora::launch_expand).
void gate_up_deltas(CudaContext& ctx, const MoeLora& lora, const Problem& pb, const TensorView& x,
                    const moe_lora::Rows& rows, float* h, float* delta, int32_t* has = nullptr,
                    const int32_t* row_of = nullptr) {
  const ExpertLoraStack* parts[] = {&lora.gate, &lora.up};
  moe_lora::launch_shrink(ctx, static_cast<const bf16_t*>(x.data), nullptr, pb.H, parts, 2, rows,
                          h);
  moe_lora::launch_expand(ctx, h, lora.gate, lora.up, rows, delta, has, row_of);
}

// h of the down stack on act's grouped rows (before the down GEMM).
void shrink_down(CudaContext& ctx, const MoeLora& lora, const Problem& pb, const bf16_t* act,
                 const int32_t* entry_of, const moe_lora::Rows& rows, float* h) {
  const ExpertLoraStack* parts[] = {&lora.down};
  moe_lora::launch_shrink(ctx, act, entry_of, pb.I, parts, 1, rows, h);
}

// ctx.moe with at least `bytes` (OpScratch::reserve), its pool counters zeroed when new.
char* scratch(CudaContext& ctx, size_t bytes) {
  return ctx.moe.reserve(bytes, ctx.stream, "moe_experts (CUDA)", kPoolCounterBytes);
}

// counts[e] = number of slots routed to e (counts zeroed before); a kNoExpert slot gets
// entry_of -1 (scatter_kernel writes the others). Any other id outside [0, E) traps.
__global__ void count_kernel(const int32_t* ids, int64_t num_slots, int num_experts,
                             int32_t* counts, int32_t* entry_of) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_slots;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t e = ids[i];
    if (e == kNoExpert) {
      entry_of[i] = -1;
      continue;
    }
    if (e < 0 || e >= num_experts) __trap();
    atomicAdd(&counts[e], 1);
  }
}

// One warp: offsets = exclusive scan of counts, tile_offsets = exclusive scan of
// ceil(counts / tile_rows); both with their totals at [E].
__global__ void offsets_kernel(const int32_t* counts, int num_experts, int tile_rows,
                               int32_t* offsets, int32_t* tile_offsets) {
  const int lane = static_cast<int>(threadIdx.x);
  int carry_rows = 0, carry_tiles = 0;
  for (int base = 0; base < num_experts; base += 32) {
    const int e = base + lane;
    const int rows = e < num_experts ? counts[e] : 0;
    const int tiles = (rows + tile_rows - 1) / tile_rows;
    int incl_rows = rows, incl_tiles = tiles;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int r = __shfl_up_sync(0xffffffffu, incl_rows, d);
      const int t = __shfl_up_sync(0xffffffffu, incl_tiles, d);
      if (lane >= d) {
        incl_rows += r;
        incl_tiles += t;
      }
    }
    if (e < num_experts) {
      offsets[e] = carry_rows + incl_rows - rows;
      tile_offsets[e] = carry_tiles + incl_tiles - tiles;
    }
    carry_rows += __shfl_sync(0xffffffffu, incl_rows, 31);
    carry_tiles += __shfl_sync(0xffffffffu, incl_tiles, 31);
  }
  if (lane == 0) {
    offsets[num_experts] = carry_rows;
    tile_offsets[num_experts] = carry_tiles;
  }
}

// Block e lists the slots routed to e in increasing slot order (the CPU's bucket order):
// row_token[offsets[e] + j] = token of its j-th slot, entry_of[slot] = that grouped row and, when
// slot_of is set, slot_of[that row] = slot.
__global__ void __launch_bounds__(kScatterThreads)
    scatter_kernel(const int32_t* ids, int64_t num_slots, int top_k, const int32_t* counts,
                   const int32_t* offsets, int32_t* row_token, int32_t* entry_of,
                   int32_t* slot_of) {
  constexpr int kWarps = kScatterThreads / 32;
  __shared__ int warp_hits[kWarps];
  const int e = static_cast<int>(blockIdx.x);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int first = offsets[e], end = first + counts[e];
  int next = first;  // grouped row of the next hit; uniform over the block
  for (int64_t base = 0; base < num_slots && next < end; base += kScatterThreads) {
    const int64_t slot = base + threadIdx.x;
    const bool hit = slot < num_slots && ids[slot] == e;
    const unsigned ballot = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) warp_hits[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, chunk = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      before += w < warp ? warp_hits[w] : 0;
      chunk += warp_hits[w];
    }
    if (hit) {
      const int row = next + before + __popc(ballot & ((1u << lane) - 1u));
      row_token[row] = static_cast<int32_t>(slot / top_k);
      entry_of[slot] = row;
      if (slot_of != nullptr) slot_of[row] = static_cast<int32_t>(slot);
    }
    next += chunk;
    __syncthreads();  // warp_hits is rewritten next round
  }
}

// out[t] = bf16(Σ_k fma(w[t, k], f32(y[entry_of[t, k]]), acc)) in k order from 0 (the CPU's
// combine), slots with entry_of -1 (kNoExpert) skipped; N = 8 columns per 16-byte access, or 1 for
// odd widths. Grid: x = token, y = chunk of kCombineThreads * N columns (one access per thread; the
// k loop unrolled so the loads of eight slots are in flight together). On the small-batch path it
// is a programmatic dependent of the down kernel, which lets it start only after every down block
// waited for the gate_up kernel: the weights (router, before gate_up) and the first kEarlySlots
// entry_of (gate_up) are read before griddepcontrol.wait, y (down) after it, through L2. On the
// grouped path (ordinary launch) the wait is a no-op.
constexpr int kEarlySlots = 8;
template <int N>
__device__ __forceinline__ void combine_slot(const bf16_t* y, int32_t entry, float w, int64_t H,
                                             int64_t c, float (&acc)[N]) {
  if (entry < 0) return;  // no expert
  const bf16_t* src = y + static_cast<int64_t>(entry) * H + c;
  if constexpr (N == 8) {
    const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(src));
    const bf16_t* v = reinterpret_cast<const bf16_t*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = __fmaf_rn(w, __bfloat162float(v[i]), acc[i]);
  } else {
    acc[0] = __fmaf_rn(w, __bfloat162float(__ldcg(src)), acc[0]);
  }
}

// Out: bf16_t (the sum rounded once) or float (the sum as it is: a tensor-parallel rank's partial).
template <int N, typename Out>
__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(const bf16_t* y, const int32_t* entry_of, const float* weights, int top_k,
                   int64_t H, Out* out) {
  const int64_t t = blockIdx.x;
  const int64_t c = (static_cast<int64_t>(blockIdx.y) * kCombineThreads + threadIdx.x) * N;
  if (c >= H) return;
  int32_t early_entry[kEarlySlots];
  float early_w[kEarlySlots];
#pragma unroll
  for (int k = 0; k < kEarlySlots; ++k) {
    early_entry[k] = k < top_k ? __ldcg(entry_of + t * top_k + k) : 0;
    early_w[k] = k < top_k ? weights[t * top_k + k] : 0.0f;
  }
  pdl_wait();
  float acc[N] = {};
#pragma unroll
  for (int k = 0; k < kEarlySlots; ++k) {
    if (k < top_k) combine_slot<N>(y, early_entry[k], early_w[k], H, c, acc);
  }
#pragma unroll 8
  for (int k = kEarlySlots; k < top_k; ++k) {
    combine_slot<N>(y, __ldcg(entry_of + t * top_k + k), weights[t * top_k + k], H, c, acc);
  }
  if constexpr (std::is_same_v<Out, float>) {
    if constexpr (N == 8) {
      float4* dst = reinterpret_cast<float4*>(out + t * H + c);
      dst[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      dst[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    } else {
      out[t * H + c] = acc[0];
    }
  } else if constexpr (N == 8) {
    uint4 raw;
    bf16_t* v = reinterpret_cast<bf16_t*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = __float2bfloat16_rn(acc[i]);
    *reinterpret_cast<uint4*>(out + t * H + c) = raw;
  } else {
    out[t * H + c] = __float2bfloat16_rn(acc[0]);
  }
}

// The combine's grid for vectors of N columns.
dim3 combine_grid(int64_t T, int64_t H, int N) {
  const int64_t chunks = ceil_div(H, int64_t{kCombineThreads} * N);
  BEAM_CHECK(T <= INT32_MAX && chunks <= 65535)
      << "moe_experts (CUDA): combine grid " << T << " x " << chunks;
  return dim3(static_cast<unsigned>(T), static_cast<unsigned>(chunks));
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// The combine of T tokens into out (bf16, or f32 unrounded), 8 columns a thread where the width
// and out's alignment allow; `after`: the small-batch path's programmatic dependence, or a plain
// launch.
void launch_combine(CudaContext& ctx, const Problem& pb, const bf16_t* y, const int32_t* entry_of,
                    const float* w, const TensorView& out, After after) {
  const int top_k = static_cast<int>(pb.top_k);
  const bool wide = pb.H % 8 == 0 && aligned16(out.data);
  auto go = [&](auto kernel, int n, auto* o) {
    launch_kernel(ctx, kernel, combine_grid(pb.T, pb.H, n), dim3(kCombineThreads), 0, after, y,
                  entry_of, w, top_k, pb.H, o);
  };
  if (out.dtype == DType::kF32) {
    auto* o = static_cast<float*>(out.data);
    wide ? go(combine_kernel<8, float>, 8, o) : go(combine_kernel<1, float>, 1, o);
  } else {
    auto* o = static_cast<bf16_t*>(out.data);
    wide ? go(combine_kernel<8, bf16_t>, 8, o) : go(combine_kernel<1, bf16_t>, 1, o);
  }
}

// Grouped row order, row offsets and M-tile offsets (tiles of up to tile_rows rows) per expert
// (into the scratch arrays).
void permute(CudaContext& ctx, const Problem& pb, int tile_rows, const int32_t* ids,
             int32_t* counts, int32_t* offsets, int32_t* tile_offsets, int32_t* row_token,
             int32_t* entry_of, int32_t* slot_of) {
  CUDA_OK(cudaMemsetAsync(counts, 0, pb.E * sizeof(int32_t), ctx.stream));
  const int64_t count_blocks = std::min<int64_t>(ceil_div(pb.rows, 256), 1024);
  count_kernel<<<static_cast<unsigned>(count_blocks), 256, 0, ctx.stream>>>(
      ids, pb.rows, static_cast<int>(pb.E), counts, entry_of);
  CUDA_LAUNCH_OK();
  offsets_kernel<<<1, 32, 0, ctx.stream>>>(counts, static_cast<int>(pb.E), tile_rows, offsets,
                                           tile_offsets);
  CUDA_LAUNCH_OK();
  scatter_kernel<<<static_cast<unsigned>(pb.E), kScatterThreads, 0, ctx.stream>>>(
      ids, pb.rows, static_cast<int>(pb.top_k), counts, offsets, row_token, entry_of, slot_of);
  CUDA_LAUNCH_OK();
}

// Most M tiles of up to tile_rows rows: ceil(rows / tile_rows) full ones plus one partial tile
// per non-empty expert.
int64_t most_m_tiles(const Problem& pb, int tile_rows) {
  return ceil_div(pb.rows, tile_rows) + std::min(pb.E, pb.rows);
}

// One grouped GEMM launch over every possible (M tile, column band) pair (M tiles of up to
// tile_rows <= moe_gemm::kBM rows).
template <Epilogue kEp>
void launch_grouped_gemm(CudaContext& ctx, const Problem& pb, int tile_rows,
                         const moe_gemm::Args& args) {
  const int64_t m_tiles = most_m_tiles(pb, tile_rows);
  const int64_t n_tiles = ceil_div(args.n, moe_gemm::tile_cols(kEp));
  const int64_t blocks = m_tiles * n_tiles;
  BEAM_CHECK(blocks <= INT32_MAX) << "moe_experts (CUDA): grid " << m_tiles << " x " << n_tiles
                                  << " too large";
  // The LoRA epilogue's instantiation (gate_up only) when the step has LoRA.
  auto kernel = moe_gemm::grouped_gemm_kernel<kEp, false>;
  if constexpr (kEp == Epilogue::kSwiGLU) {
    if (args.lora.delta != nullptr) kernel = moe_gemm::grouped_gemm_kernel<kEp, true>;
  }
  CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               moe_gemm::kSmemBytes));
  kernel<<<static_cast<unsigned>(blocks), moe_gemm::kThreads, moe_gemm::kSmemBytes, ctx.stream>>>(
      args);
  CUDA_LAUNCH_OK();
}

// xg[r, :] = x[row_token[r], :] for r < *num_rows (16-byte chunks; H % 8 == 0, both aligned).
// Grid: x = grouped row, as many as there are slots (kNoExpert slots have no row).
__global__ void __launch_bounds__(kGatherThreads)
    gather_rows_kernel(const bf16_t* x, const int32_t* row_token, const int32_t* num_rows,
                       int64_t H, bf16_t* xg) {
  const int64_t r = blockIdx.x;
  if (r >= *num_rows) return;
  const auto* src = reinterpret_cast<const uint4*>(x + static_cast<int64_t>(row_token[r]) * H);
  auto* dst = reinterpret_cast<uint4*>(xg + r * H);
  for (int64_t c = threadIdx.x; c < H / 8; c += kGatherThreads) dst[c] = src[c];
}

// The TMA kernel's maps: weights w [E, w_rows, k] whose box (a tile's kWRows rows) lists
// weight_row's order: kSwiGLU, groups of 8 act columns, the 8 gate then the 8 up rows of a group;
// kStore, groups of 16 columns, the 8 even then the 8 odd ones. Row-major weights as
// {k, 8, 2, groups, E}; packed ones (moe_packed.cuh, whose tiles hold the rows in that order, a
// packed step being one kBK slice) as {kBK, 16, groups, k / kBK, E}: either box lands as the
// same 128-byte shared rows. Grouped rows a [rows, k] as {k, rows}.
template <Epilogue kEp>
bool encode_maps(moe_gemm::tma::Args& args, const bf16_t* a, int64_t rows, const bf16_t* w,
                 bool packed, int64_t E, int64_t n, int64_t k) {
  namespace tma = moe_gemm::tma;
  const TensorMapEncoder encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const auto row = static_cast<cuuint64_t>(k) * sizeof(bf16_t), un = static_cast<cuuint64_t>(n);
  const bool swiglu = kEp == Epilogue::kSwiGLU;
  const cuuint64_t groups = swiglu ? un / 8 : un / 16;
  bool ok = false;
  if (packed) {
    constexpr cuuint64_t kStepBytes = moe_packed::kStepElems * sizeof(bf16_t);
    const cuuint64_t steps = static_cast<cuuint64_t>(k) / moe_packed::kStepCols;
    const cuuint64_t w_dims[5] = {moe_packed::kStepCols, moe_packed::kTileRows, groups, steps,
                                  static_cast<cuuint64_t>(E)};
    const cuuint64_t w_strides[4] = {moe_packed::kStepCols * sizeof(bf16_t), steps * kStepBytes,
                                     kStepBytes, groups * steps * kStepBytes};
    const cuuint32_t w_box[5] = {moe_packed::kStepCols, moe_packed::kTileRows, tma::kWeightGroups,
                                 1, 1};
    ok = encode_bf16_map(encode, args.w_map, w, 5, w_dims, w_strides, w_box);
  } else {
    const cuuint64_t w_dims[5] = {static_cast<cuuint64_t>(k), 8, 2, groups,
                                  static_cast<cuuint64_t>(E)};
    const cuuint64_t w_strides[4] = {swiglu ? row : 2 * row, swiglu ? un * row : row,
                                     swiglu ? 8 * row : 16 * row, swiglu ? 2 * un * row : un * row};
    const cuuint32_t w_box[5] = {moe_gemm::kBK, 8, 2, tma::kWeightGroups, 1};
    ok = encode_bf16_map(encode, args.w_map, w, 5, w_dims, w_strides, w_box);
  }
  const cuuint64_t a_dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint32_t a_box[2] = {moe_gemm::kBK, tma::kBoxRows};
  return ok && encode_bf16_map(encode, args.a_map, a, 2, a_dims, &row, a_box);
}

// Whether the TMA kernel takes a GEMM: k % 8 == 0 (16-byte row strides), n in whole weight-box
// groups, 16-byte aligned operands.
template <Epilogue kEp>
bool tma_fits(const bf16_t* a, const bf16_t* w, int64_t n, int64_t k) {
  const int64_t group = kEp == Epilogue::kSwiGLU ? 8 : 16;
  return k > 0 && k % 8 == 0 && n > 0 && n % group == 0 && aligned16(a) && aligned16(w);
}

// The TMA grouped GEMM (moe_gemm::tma) with ring R (M tiles of up to R::kRows rows) on persistent
// clusters, one block per SM, as many as fit at once; tile_counter zeroed on the stream before.
// False (nothing queued) if the driver refuses the tensor maps or no cluster fits.
template <class R, Epilogue kEp>
bool launch_grouped_gemm_tma(CudaContext& ctx, const Problem& pb, const moe_gemm::Args& p,
                             const bf16_t* a, int32_t* tile_counter) {
  static_assert(R::kRows <= moe_gemm::kBM, "the cp.async fallback takes the same M tiles");
  namespace tma = moe_gemm::tma;
  tma::Args args{};
  if (!encode_maps<kEp>(args, a, pb.rows, p.w, p.packed_w, pb.E, p.n, p.k)) {
    log_warning(
        "moe_experts (CUDA): the driver refused the grouped GEMM's tensor maps; running "
        "the cp.async kernel");
    return false;
  }
  args.p = p;
  args.tile_counter = tile_counter;
  const int64_t m_tiles = most_m_tiles(pb, R::kRows);
  BEAM_CHECK(m_tiles * ceil_div(p.n, moe_gemm::tile_cols(kEp, tma::kWRows)) < INT32_MAX)
      << "moe_experts (CUDA): " << m_tiles << " M tiles too many";
  // The LoRA epilogue's instantiation (gate_up only) when the step has LoRA.
  auto kernel = tma::grouped_gemm_kernel<R, kEp, false>;
  if constexpr (kEp == Epilogue::kSwiGLU) {
    if (p.lora.delta != nullptr) kernel = tma::grouped_gemm_kernel<R, kEp, true>;
  }
  constexpr int kSmemBytes = R::smem_bytes(kEp);
  CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  const dim3 cluster(tma::kCluster, 1, 1), block(tma::kThreads);
  const int clusters = max_active_clusters(kernel, cluster, block, kSmemBytes);
  if (clusters <= 0) {
    log_warning(
        "moe_experts (CUDA): no cluster of the grouped GEMM's blocks fits; running the "
        "cp.async kernel");
    return false;
  }
  const int most_blocks = ctx.props.multiProcessorCount / tma::kCluster * tma::kCluster;
  const dim3 grid(static_cast<unsigned>(std::min(clusters * tma::kCluster, most_blocks)));
  launch_kernel_in_clusters(ctx, kernel, grid, cluster, block, kSmemBytes, After::kComplete, args);
  return true;
}

// The TMA kernel's tiles (moe_gemm::tma's rings): up to 64 grouped rows on the deepest ring, 128
// against two column bands, or 256.
enum class GroupedTiles { kShort, kWide, kLong };

// How the grouped path runs its GEMMs: on the TMA kernel where the shapes allow it (else, or when
// !use_tma, the cp.async one, over the same M tiles).
struct GroupedPlan {
  bool use_tma = true;
  GroupedTiles tiles = GroupedTiles::kLong;
};

// kAuto's plan: tiles by the experts' average rows (kMoeShortTilesMaxAverageRows,
// kMoeWideTilesMaxAverageRows).
GroupedPlan auto_plan(const Problem& pb) {
  if (pb.rows <= kMoeShortTilesMaxAverageRows * pb.E) return {.tiles = GroupedTiles::kShort};
  if (pb.rows <= kMoeWideTilesMaxAverageRows * pb.E) return {.tiles = GroupedTiles::kWide};
  return {.tiles = GroupedTiles::kLong};
}

// f(R{}) for the ring R of `tiles` (moe_gemm::tma::ShortTiles, WideTiles or LongTiles).
template <class F>
auto with_ring(GroupedTiles tiles, F&& f) {
  namespace tma = moe_gemm::tma;
  switch (tiles) {
    case GroupedTiles::kShort:
      return f(tma::ShortTiles{});
    case GroupedTiles::kWide:
      return f(tma::WideTiles{});
    case GroupedTiles::kLong:
      break;
  }
  return f(tma::LongTiles{});
}

// The TMA kernel of plan's ring; false as launch_grouped_gemm_tma.
template <Epilogue kEp>
bool launch_tma(CudaContext& ctx, const Problem& pb, const GroupedPlan& plan,
                const moe_gemm::Args& p, const bf16_t* a, int32_t* tile_counter) {
  return with_ring(plan.tiles, [&](auto ring) {
    return launch_grouped_gemm_tma<decltype(ring), kEp>(ctx, pb, p, a, tile_counter);
  });
}

// Grouped path: permutation, grouped gate_up GEMM + SwiGLU, grouped down GEMM, combine. A GEMM
// whose shapes allow it runs on the TMA kernel; gate_up then reads x's rows gathered in grouped
// order into y (free until the down GEMM writes it). Weights packed when
// moe_packed::packed_widths(H, I). LoRA (moe_lora.cuh): shrink and expand before gate_up (whose
// epilogue adds the deltas), shrink before down, the down expand after it.
void run_grouped(CudaContext& ctx, const Problem& pb, const TensorView& x,
                 const TensorView& gate_up, const TensorView& down, const TensorView& ids,
                 const TensorView& weights, const TensorView& out, const GroupedPlan& plan,
                 const MoeLora* lora) {
  const ScratchLayout layout(pb.E, pb.rows, pb.H, pb.I, lora_rank(lora));
  char* base = scratch(ctx, layout.total);
  auto* counts = reinterpret_cast<int32_t*>(base + layout.counts);
  auto* offsets = reinterpret_cast<int32_t*>(base + layout.offsets);
  auto* tile_offsets = reinterpret_cast<int32_t*>(base + layout.tile_offsets);
  auto* tile_counters = reinterpret_cast<int32_t*>(base + layout.tile_counters);
  auto* row_token = reinterpret_cast<int32_t*>(base + layout.row_token);
  auto* entry_of = reinterpret_cast<int32_t*>(base + layout.entry_of);
  auto* act = reinterpret_cast<bf16_t*>(base + layout.act);
  auto* y = reinterpret_cast<bf16_t*>(base + layout.y);
  auto* h_gate_up = reinterpret_cast<float*>(base + layout.h_gate_up);
  auto* h_down = reinterpret_cast<float*>(base + layout.h_down);
  auto* delta = reinterpret_cast<float*>(base + layout.delta);
  // LoRA's launches visit the slots by expert (an expert's A and B stay in L2), then adapter (the
  // visit order, -1 past the rows with an expert); the gate_up deltas are by grouped row.
  auto* slot_of = lora ? reinterpret_cast<int32_t*>(base + layout.slot_of) : nullptr;
  const int tile_rows = with_ring(plan.tiles, [](auto ring) { return decltype(ring)::kRows; });
  permute(ctx, pb, tile_rows, ids.as<int32_t>(), counts, offsets, tile_offsets, row_token, entry_of,
          slot_of);
  moe_lora::Rows lora_in_groups{};
  moe_lora::RowTerms up_lora{};
  if (lora) {  // visited by expert, then adapter: a LoRA tile's rows mostly share their factors
    auto* has = reinterpret_cast<int32_t*>(base + layout.has_lora);
    auto* visit = reinterpret_cast<int32_t*>(base + layout.visit);
    CUDA_OK(cudaMemsetAsync(visit, 0xff, pb.rows * sizeof(int32_t), ctx.stream));
    moe_lora::launch_sort_by_adapter(ctx, lora_rows(*lora, pb, ids, slot_of), offsets,
                                     static_cast<int>(pb.E), static_cast<int>(lora->gate.a.dim(1)),
                                     visit);
    lora_in_groups = lora_rows(*lora, pb, ids, visit);
    gate_up_deltas(ctx, *lora, pb, x, lora_in_groups, h_gate_up, delta, has, entry_of);
    up_lora = moe_lora::RowTerms{.delta = delta, .has = has};
  }
  CUDA_OK(cudaMemsetAsync(tile_counters, 0, 2 * sizeof(int32_t), ctx.stream));

  const auto* xp = static_cast<const bf16_t*>(x.data);
  const auto* gu = static_cast<const bf16_t*>(gate_up.data);
  const auto* dn = static_cast<const bf16_t*>(down.data);
  const auto E = static_cast<int32_t>(pb.E);
  const bool packed = moe_packed::packed_widths(pb.H, pb.I);
  // out [rows, n] = A (row a_row_of[r], or r) · W_e ᵀ over k, with this call's grouping
  auto gemm_args = [&](const bf16_t* a, const int32_t* a_row_of, const bf16_t* w, int64_t n,
                       int64_t k, bool async_loads, bf16_t* out_rows) {
    return moe_gemm::Args{.a = a,
                          .a_row_of = a_row_of,
                          .w = w,
                          .packed_w = packed,
                          .offsets = offsets,
                          .tile_offsets = tile_offsets,
                          .num_experts = E,
                          .n = n,
                          .k = k,
                          .async_loads = async_loads,
                          .out = out_rows};
  };
  if (pb.I > 0) {  // act [rows, I] = SwiGLU(x[token] · gate_up[e]ᵀ)
    moe_gemm::Args args = gemm_args(xp, row_token, gu, pb.I, pb.H,
                                    pb.H % 8 == 0 && aligned16(xp) && aligned16(gu), act);
    args.lora = up_lora;
    bool done = false;
    if (plan.use_tma && tma_fits<Epilogue::kSwiGLU>(xp, gu, pb.I, pb.H)) {
      gather_rows_kernel<<<static_cast<unsigned>(pb.rows), kGatherThreads, 0, ctx.stream>>>(
          xp, row_token, offsets + pb.E, pb.H, y);
      CUDA_LAUNCH_OK();
      done = launch_tma<Epilogue::kSwiGLU>(ctx, pb, plan, args, y, tile_counters);
    }
    if (!done) launch_grouped_gemm<Epilogue::kSwiGLU>(ctx, pb, tile_rows, args);
  }
  {  // y [rows, H] = act · down[e]ᵀ (zeros when I == 0)
    moe_gemm::Args args =
        gemm_args(act, nullptr, dn, pb.H, pb.I, pb.I % 8 == 0 && aligned16(dn), y);
    if (lora) shrink_down(ctx, *lora, pb, act, entry_of, lora_in_groups, h_down);
    if (!plan.use_tma || !tma_fits<Epilogue::kStore>(act, dn, pb.H, pb.I) ||
        !launch_tma<Epilogue::kStore>(ctx, pb, plan, args, act, tile_counters + 1))
      launch_grouped_gemm<Epilogue::kStore>(ctx, pb, tile_rows, args);
    if (lora) moe_lora::launch_expand_add(ctx, h_down, lora->down, lora_in_groups, entry_of, y);
  }
  launch_combine(ctx, pb, y, entry_of, weights.as<float>(), out, After::kComplete);
}

// The kernel with kSteps fragment steps a warp and 16-row passes when `wide`, else 8-row ones
// (instantiated for the compact tables only).
template <moe_small::Phase kPhase, int kSteps, int kRows, bool kLora>
auto expert_kernel_for(bool wide) {
  if constexpr (kRows == moe_small::kCompactRows) {
    if (!wide) return moe_small::expert_kernel<kPhase, 1, kSteps, kRows, kLora>;
  }
  return moe_small::expert_kernel<kPhase, 2, kSteps, kRows, kLora>;
}

// One persistent block per SM (moe_small_batch.cuh) with kRows-slot tables; passes of 16 rows
// from kWidePassMinRows routed rows, else of 8; the down kernels (never with LoRA) hold
// kShortSteps fragments per warp when K allows.
template <moe_small::Phase kPhase, int kRows, bool kLora>
void launch_expert_kernel_rows(CudaContext& ctx, const moe_small::KernelArgs<kLora>& args,
                               After after) {
  namespace small = moe_small;
  const bool wide = args.rows >= small::kWidePassMinRows;
  const int64_t warp_steps = ceil_div(ceil_div(args.k, small::kStepCols), int64_t{small::kWarps});
  auto kernel = expert_kernel_for<kPhase, small::kMaxSteps, kRows, kLora>(wide);
  if constexpr (kPhase == small::Phase::kDown) {
    if (warp_steps <= small::kShortSteps)
      kernel = expert_kernel_for<kPhase, small::kShortSteps, kRows, kLora>(wide);
  }
  constexpr size_t kSmemBytes = small::smem_bytes<kRows>();
  CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kSmemBytes)));
  const dim3 grid(static_cast<unsigned>(ctx.props.multiProcessorCount));
  launch_kernel(ctx, kernel, grid, dim3(small::kThreads), kSmemBytes, after, args);
}

// launch_expert_kernel_rows with the smallest tables that hold args.rows: kCompactRows up to that
// many routed rows, else kMaxRows (wide passes only).
template <moe_small::Phase kPhase, bool kLora>
void launch_expert_kernel_as(CudaContext& ctx, const moe_small::KernelArgs<kLora>& args,
                             After after) {
  static_assert(moe_small::kCompactRows >= moe_small::kWidePassMinRows,
                "past the compact tables the passes are wide");
  if (args.rows <= moe_small::kCompactRows) {
    launch_expert_kernel_rows<kPhase, moe_small::kCompactRows, kLora>(ctx, args, after);
  } else {
    launch_expert_kernel_rows<kPhase, moe_small::kMaxRows, kLora>(ctx, args, after);
  }
}

// The gate_up kernels with the LoRA epilogue when lora has terms (delta set), else those without.
void launch_gate_up_kernel(CudaContext& ctx, const moe_small::Args& args,
                           const moe_lora::SlotTerms& lora, After after) {
  constexpr auto kGateUp = moe_small::Phase::kGateUp;
  if (lora.delta != nullptr) {
    launch_expert_kernel_as<kGateUp, true>(ctx, moe_small::LoraArgs{args, lora}, after);
  } else {
    launch_expert_kernel_as<kGateUp, false>(ctx, args, after);
  }
}

// Small-batch path (moe_small_batch_supports holds, rows <= kMaxRows): act = SwiGLU(x . gate_up)
// and y = act . down on the weight-streaming kernels, then the combine of the grouped path.
void run_small_batch(CudaContext& ctx, const Problem& pb, const TensorView& x,
                     const TensorView& gate_up, const TensorView& down, const TensorView& ids,
                     const TensorView& weights, const TensorView& out, const MoeLora* lora) {
  namespace small = moe_small;
  const SmallLayout layout(pb.rows, pb.H, pb.I, lora_rank(lora));
  char* base = scratch(ctx, layout.total);
  auto* entry_of = reinterpret_cast<int32_t*>(base + layout.entry_of);
  auto* act = reinterpret_cast<bf16_t*>(base + layout.act);
  auto* y = reinterpret_cast<bf16_t*>(base + layout.y);
  auto* h_gate_up = reinterpret_cast<float*>(base + layout.h_gate_up);
  auto* h_down = reinterpret_cast<float*>(base + layout.h_down);
  auto* delta = reinterpret_cast<float*>(base + layout.delta);
  const auto rows = static_cast<int>(pb.rows), top_k = static_cast<int>(pb.top_k),
             experts = static_cast<int>(pb.E);
  const small::Args up{.ids = ids.as<int32_t>(),
                       .rows = rows,
                       .top_k = top_k,
                       .num_experts = experts,
                       .a = static_cast<const bf16_t*>(x.data),
                       .w = static_cast<const bf16_t*>(gate_up.data),
                       .n = pb.I,
                       .k = pb.H,
                       .out = act,
                       .entry_of = entry_of,
                       .pool = reinterpret_cast<int32_t*>(base)};
  // With LoRA, its kernels are plain launches between the chained kernels (the next one waits
  // for them), visiting the slots in slot order (the grouping is the kernels' own).
  const moe_lora::Rows lora_slots = lora ? lora_rows(*lora, pb, ids, nullptr) : moe_lora::Rows{};
  moe_lora::SlotTerms up_lora{};
  if (lora) {
    gate_up_deltas(ctx, *lora, pb, x, lora_slots, h_gate_up, delta);
    up_lora = moe_lora::SlotTerms{.delta = delta,
                                  .slots = lora_slots.slots,
                                  .ids = lora_slots.ids,
                                  .top_k = lora_slots.top_k};
  }
  launch_gate_up_kernel(ctx, up, up_lora, kSmallBatchAfter);
  small::Args dn = up;
  dn.a = act;
  dn.w = static_cast<const bf16_t*>(down.data);
  dn.n = pb.H;
  dn.k = pb.I;
  dn.out = y;
  dn.entry_of = nullptr;
  dn.pool = reinterpret_cast<int32_t*>(base) + 1;
  if (lora) shrink_down(ctx, *lora, pb, act, entry_of, lora_slots, h_down);
  launch_expert_kernel_as<small::Phase::kDown, false>(ctx, dn, kSmallBatchAfter);
  if (lora) moe_lora::launch_expand_add(ctx, h_down, lora->down, lora_slots, entry_of, y);

  launch_combine(ctx, pb, y, entry_of, weights.as<float>(), out, kSmallBatchAfter);
}

}  // namespace

bool moe_small_batch_supports(const TensorView& x, const TensorView& gate_up,
                              const TensorView& down) {
  const int64_t H = x.dim(1), E = gate_up.dim(0), I = gate_up.dim(1) / 2;
  return moe_packed::packed_widths(H, I) && H <= kMoeSmallBatchMaxWidth &&
         I <= kMoeSmallBatchMaxWidth &&
         E <= (int64_t{1} << (30 - moe_small::Tables<moe_small::kMaxRows>::kSlotBits)) &&
         // a packed tile's k32 steps are int indices in the kernels (tile_step0)
         E * 2 * I * H / moe_packed::kStepElems <= INT32_MAX && aligned16(x.data) &&
         aligned16(gate_up.data) && aligned16(down.data);
}

void moe_experts(CudaContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& out, MoeExpertsPath path, const MoeLora* lora) {
  const Problem pb{x.dim(0),           x.dim(1),   gate_up.dim(0),
                   gate_up.dim(1) / 2, ids.dim(1), x.dim(0) * ids.dim(1)};
  if (pb.T == 0 || pb.H == 0) return;
  if (pb.rows == 0) {  // no experts per token: the sum is empty
    CUDA_OK(cudaMemsetAsync(out.data, 0, out.nbytes(), ctx.stream));
    return;
  }
  BEAM_CHECK(pb.E > 0 && pb.rows + pb.E < INT32_MAX)
      << "moe_experts (CUDA): " << pb.rows << " routed rows over " << pb.E << " experts";
  const bool small_fits = moe_small_batch_supports(x, gate_up, down);
  switch (path) {
    case MoeExpertsPath::kAuto:
      if (pb.rows <= kMoeSmallBatchMaxRows && small_fits) {
        run_small_batch(ctx, pb, x, gate_up, down, ids, weights, out, lora);
        return;
      }
      [[fallthrough]];
    case MoeExpertsPath::kGrouped:
      run_grouped(ctx, pb, x, gate_up, down, ids, weights, out, auto_plan(pb), lora);
      return;
    case MoeExpertsPath::kGroupedCpAsync:
      run_grouped(ctx, pb, x, gate_up, down, ids, weights, out,
                  GroupedPlan{.use_tma = false, .tiles = auto_plan(pb).tiles}, lora);
      return;
    case MoeExpertsPath::kGroupedShortTiles:
      run_grouped(ctx, pb, x, gate_up, down, ids, weights, out, {.tiles = GroupedTiles::kShort},
                  lora);
      return;
    case MoeExpertsPath::kGroupedWideTiles:
      run_grouped(ctx, pb, x, gate_up, down, ids, weights, out, {.tiles = GroupedTiles::kWide},
                  lora);
      return;
    case MoeExpertsPath::kGroupedLongTiles:
      run_grouped(ctx, pb, x, gate_up, down, ids, weights, out, {.tiles = GroupedTiles::kLong},
                  lora);
      return;
    case MoeExpertsPath::kSmallBatch:
      BEAM_CHECK(pb.rows <= kMoeSmallBatchRowLimit && small_fits)
          << "moe_experts (CUDA): small-batch path forced for " << pb.rows << " routed rows (limit "
          << kMoeSmallBatchRowLimit << "), hidden " << pb.H << ", expert width " << pb.I
          << " (multiples of 64 up to " << kMoeSmallBatchMaxWidth << ", 16-byte aligned)";
      run_small_batch(ctx, pb, x, gate_up, down, ids, weights, out, lora);
      return;
  }
}

}  // namespace cuda
}  // namespace beam
