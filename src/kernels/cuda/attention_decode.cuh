// Device side of the CUDA decode attention (kernels/cuda/attention.cu): one CTA per work item (one
// query row and a run of its splits) and KV head, so each K/V tile is read from memory once for
// the G q heads that share it. Warp layouts (DecodeLayout): at head_dim 128 and G <= 8, tensor
// cores (attention_decode_mma.cuh: each warp computes whole splits through its own ring of K/V
// stages, filled by TMA boxes and cp.async, a CTA of four warps or two); otherwise CUDA cores, G /
// HPW warps, warp w serving the HPW q heads kvh * G + w * HPW + i. HPW = 1 (a warp per head) gives
// the shortest latency; HPW = 2 (batches of many rows) reads and widens each K/V value from shared
// memory once for two heads, since with a warp per head the kernel is bound by shared-memory reads
// and instruction issue, not by HBM. CUDA-core tiles stream through a kDecodeStages-deep cp.async
// pipeline in shared memory. The KV head is the grid's x (fastest) index, so the CTAs of the first
// items are the first ones dispatched and land on distinct SMs: a batch-1 plan of 16 one-tile items
// x 8 KV heads in a fixed grid of 66 x 8 CTAs runs one item per SM, not four (item-major, blocks i
// and i + 132 shared an SM).
//
// Numerics: on CUDA cores exactly the per-row arithmetic of attention_kernels.cuh (attend_tile per
// 32-key tile, the row's split grid of split_grid.h, RowState::fold of the split states in order),
// so a row has the same bits here as in the attend kernel; on tensor cores decode_mma's split step
// on the same split grid, folded with the same fold_state() in split order. An item that covers
// the whole row folds and writes it. Otherwise the row's items form a group: the first item writes
// its folded prefix as one record, the others one record per split, and the last CTA of the group
// to finish (a ticket counter per group and KV head, reset by that CTA so graph replays find it
// zero) folds the records in split order and writes the row: one launch, no float atomics. That
// CTA loads the gate inputs before the records and derives every record's fold weights at once (a
// running max across lanes; the same fmaxf / expf operands as RowState::fold), leaving only the
// fmaf chains serial. In a clustered launch of the four-warp layout (decode_kernel<..., true>, in
// clusters of decode_clusters::kDecodeCluster CTAs along y), a group whose items the planner put
// in one cluster (DecodeItem::leader) skips that chain: the other items store their fold-group
// states into landing slots of the prefix item's CTA through distributed shared memory, the
// cluster meets at a barrier, and that CTA folds them in the same order (the same bits; H200
// runs 213-216: the records, ticket and last-CTA fold cost 3.5-4.7 us of a 1-8 row call).
//
// The plan (a header, the items, the block tables and the uncovered rows) comes from device memory
// and CTAs stride over its items, so a grid sized from the SM count serves any batch (CUDA
// graphs); after the items, the CTAs zero the output rows the plan lists as uncovered (padding
// rows of a graph's batch). With a gate (fixed plans only), each row's bf16 output is gated as it
// is written: out = bf16(bf16(o) * factor), gate_math.cuh's arithmetic, as output_gate after it.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "core/host_device.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention_decode_mma.cuh"
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/cluster.cuh"
#include "kernels/cuda/decode_clusters.h"
#include "kernels/cuda/gate_math.cuh"

namespace beam::cuda::attention_detail {

constexpr int kDecodeStages = 3;     // K/V tiles in flight per CTA
constexpr int kMaxDecodeGroup = 16;  // q heads per KV head the decode kernel serves

// DecodeItem::leader: kGlobalFold for a whole row or a group folded through its records and ticket;
// kPaddingItem for a clustered plan's unused CTA (no work); >= 0 for a group whose items all run in
// one cluster of the four-warp tensor-core layout (decode_clusters.h): the cluster rank of the CTA
// of its prefix item, which folds the other items' fold-group states from its landing slots.
constexpr int32_t kGlobalFold = -1, kPaddingItem = -2;
// Landing slots of a clustered CTA: one fold slot (decode_mma's layout) per record of a cluster
// group but its prefix.
constexpr int kClusterLandingSlots = static_cast<int>(decode_clusters::kDecodeCluster) - 1;

// One query row and splits [split0, split0 + count) of its split grid (split_grid(lo, hi), of
// num_splits splits). group < 0: the item covers the whole row and writes out.
// Otherwise it is one of num_items items of combine group `group`, whose records for q head h
// are record + i * Nq + h: i = 0 the first item's folded prefix (splits [0, first_count)), then
// i = j / F - first_count / F + 1 the state of fold group j / F for the splits j >= first_count,
// F = fold_splits(layout) (items start on fold-group boundaries). `leader` (kGlobalFold, or a
// cluster rank) says how a group's states meet.
struct alignas(16) DecodeItem {
  int32_t row;     // query row of q and out
  int32_t table;   // offset of the sequence's block table in the plan's tables
  int32_t lo, hi;  // logical slots visible to the row
  int32_t fresh;   // the first slot the launch's predecessors write (keys of this step)
  int32_t num_splits;
  int32_t split0, count;
  int32_t group, num_items, first_count, record;
  int32_t leader = kGlobalFold;
};

// Records of the combine group of an item with F-split fold groups: its first item's prefix, then
// one for each later fold group.
BEAM_HOST_DEVICE int group_records(const DecodeItem& it, int F) {
  return (it.num_splits + F - 1) / F - it.first_count / F + 1;
}

// The head of a plan in device memory: counts, and the byte offsets from the header of its block
// tables (int32) and uncovered rows (int32[zero_rows]). The items (DecodeItem[num_items])
// follow the header directly, so a CTA can fetch its first item while it reads the header.
struct alignas(16) DecodePlanHeader {
  int32_t num_items, zero_rows, planned_rows, reserved;
  int64_t tables, zero;
};
static_assert(sizeof(DecodePlanHeader) % alignof(DecodeItem) == 0, "items follow the header");

struct DecodeParams {
  const __nv_bfloat16* q;        // [T, Nq, D]
  __nv_bfloat16* out;            // [out_rows, Nq, D]
  const __nv_bfloat16* k_cache;  // [num_blocks, block_size, Nkv, D]
  const __nv_bfloat16* v_cache;
  const DecodePlanHeader* plan;  // zero rows: rows below planned_rows that no item covers
  float* part_acc;               // [records, D]
  float* part_ml;                // [records, 2]: running max, sum
  uint32_t* counters;            // [groups, Nkv]: finished items; zero between launches
  int64_t num_blocks;
  int32_t block_size, block_shift;  // block_shift: log2(block_size), or -1 (not a power of two)
  int64_t out_rows;                 // rows [planned_rows, out_rows) are zeroed as well
  int num_heads, num_kv_heads, group;
  float scale;
  const __nv_bfloat16* gate;       // [T, Nq, D] gate input g, or null (no gate)
  const __nv_bfloat16* gate_bias;  // [Nq] bias of the gate (with gate)
  decode_mma::DecodeMaps maps;     // tensor-core layouts' TMA maps (box_rows 0: none)
};

// How a decode CTA's warps share the work of a KV head's G q heads. The two tensor-core layouts
// compute the same splits with the same instructions and fold them in the same order, so a row's
// bits do not depend on which of them runs (nor do they between the two CUDA-core layouts).
enum class DecodeLayout {
  kHeadPerWarp,      // CUDA cores, a warp per q head (G warps): the shortest latency
  kTwoHeadsPerWarp,  // CUDA cores, a warp per two q heads (G / 2 warps): many rows, G even
  kMmaFourWarps,     // head_dim 128, G <= 8: decode_mma::Cta<4>, one CTA an SM (few rows)
  kMmaTwoWarps,      // the same as decode_mma::Cta<2>, three CTAs an SM (many rows)
};
// Splits a CTA folds into one state before they meet the row's other states: a row's state is the
// fold, in order, of the states of its consecutive groups of F splits, each the fold of its
// splits in order (F = 1: of its splits). The tensor-core layouts fold four (their CTAs compute
// splits side by side and fold them through shared memory anyway), so a split row's later items
// write a record per four splits; CUDA-core CTAs one per split (their split states in registers
// match the attend kernel's).
constexpr int kMmaFoldSplits = 4;

// Warps of a tensor-core layout's CTA (0: a CUDA-core layout).
constexpr int mma_warps(DecodeLayout layout) {
  return layout == DecodeLayout::kMmaFourWarps ? 4 : layout == DecodeLayout::kMmaTwoWarps ? 2 : 0;
}
constexpr bool is_mma(DecodeLayout layout) {
  return mma_warps(layout) > 0;
}
// CTAs an SM holds in a tensor-core layout (decode_mma::Cta::kCtasPerSm).
constexpr int mma_ctas_per_sm(DecodeLayout layout) {
  return layout == DecodeLayout::kMmaFourWarps ? decode_mma::Cta<4>::kCtasPerSm
                                               : decode_mma::Cta<2>::kCtasPerSm;
}
constexpr int fold_splits(DecodeLayout layout) {
  return is_mma(layout) ? kMmaFoldSplits : 1;
}
constexpr int decode_warps(DecodeLayout layout, int group) {
  return layout == DecodeLayout::kHeadPerWarp       ? group
         : layout == DecodeLayout::kTwoHeadsPerWarp ? group / 2
                                                    : mma_warps(layout);
}
// The decode kernel's launch bounds: most threads of a CTA and the CTAs an SM must fit.
constexpr int decode_max_threads(DecodeLayout layout) {
  return is_mma(layout) ? mma_warps(layout) * 32 : decode_warps(layout, kMaxDecodeGroup) * 32;
}
constexpr int decode_min_ctas(DecodeLayout layout) {
  return is_mma(layout) ? mma_ctas_per_sm(layout) : 2;
}
// bf16 elements of one CUDA-core pipeline stage: a K tile (rows of k_stride(D)) then a V tile.
constexpr int decode_stage_elems(int head_dim) {
  return kTile * k_stride(head_dim) + kTile * head_dim;
}
// Floats of a CTA's K/V stage memory (the combine's buffer once the tiles are consumed).
constexpr int decode_stage_floats(DecodeLayout layout, int head_dim) {
  if (layout == DecodeLayout::kMmaFourWarps) return decode_mma::Cta<4>::kRingElems / 2;
  if (layout == DecodeLayout::kMmaTwoWarps) return decode_mma::Cta<2>::kRingElems / 2;
  return kDecodeStages * decode_stage_elems(head_dim) / 2;
}
// Whether a decode kernel's tiles may come by TMA: the tensor-core layouts' unclustered launches
// (clustered ones, short sliding rows at batches 1-2, measured no faster with it: H200 run 225).
constexpr bool decode_tma(DecodeLayout layout, bool clustered) {
  return is_mma(layout) && !clustered;
}
// Dynamic shared memory of a decode CTA: q of its G heads in fp32, then the stages (CUDA cores);
// the warps' rings and fold slots (tensor cores; without TMA, no alignment slack), then, in
// clusters (four warps), the landing slots.
constexpr size_t decode_smem_bytes(DecodeLayout layout, int head_dim, int group,
                                   bool clustered = false) {
  if (layout == DecodeLayout::kMmaFourWarps)
    return decode_mma::Cta<4>::kSmemBytes +
           (clustered ? sizeof(float) * kClusterLandingSlots * decode_mma::kSlotFloats -
                            decode_mma::kRingAlignSlack
                      : 0);
  if (layout == DecodeLayout::kMmaTwoWarps) return decode_mma::Cta<2>::kSmemBytes;
  return sizeof(float) * static_cast<size_t>(group) * head_dim +
         sizeof(__nv_bfloat16) * kDecodeStages * static_cast<size_t>(decode_stage_elems(head_dim));
}
static_assert(decode_smem_bytes(DecodeLayout::kMmaFourWarps, 128, kMaxDecodeGroup, true) <=
                  227 * 1024,
              "the landing slots fit the shared memory of one four-warp CTA an SM");

namespace decode {

// Queues the copy of keys [t0, t0 + kTile) of KV head kvh into a stage; keys outside [lo, hi] or
// in an unmapped block become zeros (attend_tile masks them). Slots fit int32 (planner's check).
template <int D>
__device__ __forceinline__ void load_tile(const DecodeParams& p, const int32_t* table, int kvh,
                                          int t0, int lo, int hi, __nv_bfloat16* stage) {
  constexpr int kVecs = D / 8;  // 16-byte vectors per key row
  __nv_bfloat16* k_s = stage;
  __nv_bfloat16* v_s = stage + kTile * k_stride(D);
  for (int idx = threadIdx.x; idx < kTile * kVecs; idx += blockDim.x) {
    const int j = idx / kVecs, c = idx % kVecs;
    const int key = t0 + j;
    int64_t src = 0;
    int bytes = 0;
    if (key >= lo && key <= hi) {
      const int logical = p.block_shift >= 0 ? key >> p.block_shift : key / p.block_size;
      const int offset = p.block_shift >= 0 ? key & (p.block_size - 1) : key % p.block_size;
      const int64_t block = table[logical];
      if (block >= 0 && block < p.num_blocks) {
        src = ((block * p.block_size + offset) * p.num_kv_heads + kvh) * D + c * 8;
        bytes = 16;
      }
    }
    cp_async16(k_s + j * k_stride(D) + c * 8, p.k_cache + src, bytes);
    cp_async16(v_s + j * D + c * 8, p.v_cache + src, bytes);
  }
}

// Stores DPL consecutive floats of this lane (16- or 8-byte aligned).
template <int DPL>
__device__ __forceinline__ void store_lane(float* dst, const float (&v)[DPL]) {
  if constexpr (DPL % 4 == 0) {
#pragma unroll
    for (int c = 0; c < DPL; c += 4)
      *reinterpret_cast<float4*>(dst + c) = make_float4(v[c], v[c + 1], v[c + 2], v[c + 3]);
  } else {
#pragma unroll
    for (int c = 0; c < DPL; c += 2)
      *reinterpret_cast<float2*>(dst + c) = make_float2(v[c], v[c + 1]);
  }
}
// This lane's part of a record: acc dims [lane * DPL, +DPL), and (m, l) from lane 0.
template <int D>
__device__ __forceinline__ void store_record(const DecodeParams& p, int64_t rec,
                                             const RowState<D / 32>& st) {
  constexpr int DPL = D / 32;
  const int lane = threadIdx.x % 32;
  store_lane<DPL>(p.part_acc + rec * D + lane * DPL, st.acc);
  if (lane == 0) *reinterpret_cast<float2*>(p.part_ml + rec * 2) = make_float2(st.m, st.l);
}

// n consecutive bf16 as one 2n-byte vector (n = 2, 4, 8: one 4-, 8- or 16-byte access).
template <int N>
struct alignas(2 * N) Bf16Vec {
  __nv_bfloat16 v[N];
};

// The gate inputs of this lane's dims of one output row (unused without a gate).
template <int DPL>
struct GateIn {
  Bf16Vec<DPL> g;
  float b;
};

// True when out (and the gate) allow this lane's DPL bf16 as one vector access.
template <int DPL>
__device__ __forceinline__ bool vector_rows(const DecodeParams& p) {
  const auto bits = reinterpret_cast<uintptr_t>(p.out) | reinterpret_cast<uintptr_t>(p.gate);
  return bits % (2 * DPL) == 0;
}

// Element offset of this lane's first dim of q head h in row `row` of out (and of the gate).
template <int D>
__device__ __forceinline__ int64_t out_offset(const DecodeParams& p, int32_t row, int h) {
  return (int64_t{row} * p.num_heads + h) * D + threadIdx.x % 32 * (D / 32);
}

// This lane's gate inputs of q head h in `row` (nothing without a gate): issued early, they
// overlap the loads that precede the write.
template <int D>
__device__ __forceinline__ GateIn<D / 32> load_gate(const DecodeParams& p, int32_t row, int h) {
  constexpr int DPL = D / 32;
  GateIn<DPL> in{};
  if (p.gate == nullptr) return in;
  const __nv_bfloat16* src = p.gate + out_offset<D>(p, row, h);
  if (vector_rows<DPL>(p)) {
    in.g = *reinterpret_cast<const Bf16Vec<DPL>*>(src);
  } else {
#pragma unroll
    for (int c = 0; c < DPL; ++c) in.g.v[c] = src[c];
  }
  in.b = __bfloat162float(p.gate_bias[h]);
  return in;
}

// This lane's dims of q head h's output row: bf16(acc / l), gated when p.gate is set (the bf16
// value times output_gate_factor(g, bias[h]), rounded to bf16 again: output_gate's arithmetic).
template <int D>
__device__ __forceinline__ void write_out(const DecodeParams& p, int32_t row, int h,
                                          const RowState<D / 32>& st, const GateIn<D / 32>& gate) {
  constexpr int DPL = D / 32;
  Bf16Vec<DPL> o;
#pragma unroll
  for (int c = 0; c < DPL; ++c) {
    o.v[c] = __float2bfloat16_rn(st.acc[c] / st.l);
    if (p.gate != nullptr)
      o.v[c] = __float2bfloat16_rn(apply_output_gate(__bfloat162float(o.v[c]),
                                                     __bfloat162float(gate.g.v[c]), gate.b));
  }
  __nv_bfloat16* dst = p.out + out_offset<D>(p, row, h);
  if (vector_rows<DPL>(p)) {
    *reinterpret_cast<Bf16Vec<DPL>*>(dst) = o;
  } else {
#pragma unroll
    for (int c = 0; c < DPL; ++c) dst[c] = o.v[c];
  }
}

// Record of q head h for split j's fold group of the item's group (j = first_count - 1: the
// prefix).
template <DecodeLayout kLayout>
__device__ __forceinline__ int64_t record_of(const DecodeParams& p, const DecodeItem* it, int j,
                                             int h) {
  constexpr int F = fold_splits(kLayout);
  return it->record + int64_t{j / F - it->first_count / F + 1} * p.num_heads + h;
}

// This lane's DPL consecutive floats from shared memory (16- or 8-byte aligned).
template <int DPL>
__device__ __forceinline__ void load_lane(const float* src, float (&v)[DPL]) {
  if constexpr (DPL % 4 == 0) {
#pragma unroll
    for (int c = 0; c < DPL; c += 4) {
      const float4 x = *reinterpret_cast<const float4*>(src + c);
      v[c] = x.x;
      v[c + 1] = x.y;
      v[c + 2] = x.z;
      v[c + 3] = x.w;
    }
  } else {
#pragma unroll
    for (int c = 0; c < DPL; c += 2) {
      const float2 x = *reinterpret_cast<const float2*>(src + c);
      v[c] = x.x;
      v[c + 1] = x.y;
    }
  }
}

// How combine() applies a record (the w field of its weights).
constexpr float kFoldRecord = 0.f, kSkipRecord = 1.f, kFirstRecord = 2.f;

// Replaces (m, l) of this warp's records [0, count) of a chunk (float4 each at w_s + i * G) by
// their fold weights (old_w, new_w, l * new_w, kind): lane j serves records j, j + 32, ... The
// running max M before record i is the max of the m of every earlier record (`run` carries it
// across chunks; records of m = -inf leave it as fold_state leaves it), so old_w = expf(M - mx),
// new_w = expf(m - mx) with mx = fmaxf(M, m) are fold_state's values, computed for all records at
// once. `first`: the chunk starts with the group's record 0, which the fold takes as it is.
__device__ __forceinline__ void fold_weights(float4* w_s, int G, int count, bool first,
                                             float& run) {
  const int lane = threadIdx.x % 32;
  for (int i1 = 0; i1 < count; i1 += 32) {
    const int i = i1 + lane;
    float m = -INFINITY, l = 0.f;
    if (i < count) {
      const float4 v = w_s[i * G];
      m = v.x;
      l = v.y;
    }
    float incl = m;  // max of m over this round's records up to i
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float up = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl = fmaxf(incl, up);
    }
    const float before = __shfl_up_sync(0xffffffffu, incl, 1);
    const float M = lane == 0 ? run : fmaxf(run, before);
    const float mx = fmaxf(M, m);
    const float new_w = expf(m - mx);
    float4 out = make_float4(expf(M - mx), new_w, __fmul_rn(l, new_w), kFoldRecord);
    if (first && i == 0) {
      out = make_float4(0.f, 0.f, l, kFirstRecord);
    } else if (m == -INFINITY) {
      out.w = kSkipRecord;
    }
    if (i < count) w_s[i * G] = out;
    run = fmaxf(run, __shfl_sync(0xffffffffu, incl, 31));
  }
  __syncwarp();
}

// Most q heads one warp of `layout` folds in the combine.
constexpr int combine_heads(DecodeLayout layout) {
  return layout == DecodeLayout::kHeadPerWarp       ? 1
         : layout == DecodeLayout::kTwoHeadsPerWarp ? 2
                                                    : decode_mma::kMaxGroup / mma_warps(layout);
}

// The i-th q head (within the KV head's group) warp `warp` folds in the combine, and whether the
// CTA has it (the tensor-core layout deals G <= kMaxGroup heads over its fixed warps).
template <DecodeLayout kLayout>
__device__ __forceinline__ int combine_head(int warp, int i) {
  if constexpr (is_mma(kLayout)) {
    return warp + i * mma_warps(kLayout);
  } else {
    return warp * combine_heads(kLayout) + i;
  }
}
template <DecodeLayout kLayout>
__device__ __forceinline__ bool has_head(int g, int group) {
  return !is_mma(kLayout) || g < group;
}

// Writes the group's row for the CTA's q heads: record 0 (the first item's prefix) folded with
// records 1, 2, ... (splits first_count, first_count + 1, ...) in order; record i of q head h is
// it->record + i * Nq + h. The records, written by other CTAs of this launch, come through L2
// into the (free) stage memory, as many at once as it holds; warp w of W folds q heads
// kvh * G + w, + w + W, ... one after the other: fold_weights() for the chunk, then the fmaf chains
// of l and acc (RowState::fold's operations).
template <int D, DecodeLayout kLayout>
__device__ void combine(const DecodeParams& p, const DecodeItem* it, int kvh, float* buf) {
  constexpr int DPL = D / 32, kHeads = combine_heads(kLayout);
  constexpr int kBufFloats = decode_stage_floats(kLayout, D);
  const int G = p.group, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // The gate inputs are in flight with the records (D = 256 loads them at the end: 8 more live
  // registers spill).
  constexpr bool kEarlyGate = DPL <= 4;
  GateIn<DPL> gate[kHeads]{};
  if constexpr (kEarlyGate) {
#pragma unroll
    for (int i = 0; i < kHeads; ++i) {
      const int g = combine_head<kLayout>(warp, i);
      if (has_head<kLayout>(g, G)) gate[i] = load_gate<D>(p, it->row, kvh * G + g);
    }
  }
  const int per_record = G * (D + 4);  // accumulators [G][D], then (m, l) / weights [G][4]
  const int chunk = kBufFloats / per_record;
  const int64_t first = it->record + int64_t{kvh} * G;  // record 0 of the CTA's first q head
  constexpr int F = fold_splits(kLayout);
  const int n = group_records(*it, F);
  RowState<DPL> total[kHeads];
  float run[kHeads];  // running max of the records folded so far
#pragma unroll
  for (int i = 0; i < kHeads; ++i) {
    total[i].reset();
    run[i] = -INFINITY;
  }
  for (int i0 = 0; i0 < n; i0 += chunk) {
    const int count = min(chunk, n - i0);
    float* acc_s = buf;                                                // [count][G][D]
    auto* w_s = reinterpret_cast<float4*>(buf + int64_t{count} * G * D);  // [count][G]
    __syncthreads();                    // the stages (or the previous chunk) are consumed
    for (int idx = threadIdx.x; idx < count * G * (D / 4); idx += blockDim.x) {
      const int i = idx / (G * (D / 4)), rest = idx % (G * (D / 4));  // rest: head g, 4-vector
      const int64_t rec = first + int64_t{i0 + i} * p.num_heads;
      cp_async16(acc_s + i * G * D + rest * 4, p.part_acc + rec * D + rest * 4, 16);
    }
    for (int idx = threadIdx.x; idx < count * G; idx += blockDim.x) {  // L2, not a stale L1 line
      const int i = idx / G, g = idx % G;
      const int64_t rec = first + int64_t{i0 + i} * p.num_heads + g;
      const float2 ml = __ldcg(reinterpret_cast<const float2*>(p.part_ml) + rec);
      w_s[idx] = make_float4(ml.x, ml.y, 0.f, 0.f);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
      const int g = combine_head<kLayout>(warp, hh);
      if (!has_head<kLayout>(g, G)) break;
      fold_weights(w_s + g, G, count, i0 == 0, run[hh]);
#pragma unroll 4
      for (int i = 0; i < count; ++i) {
        const float4 w = w_s[i * G + g];
        float a[DPL];
        load_lane<DPL>(acc_s + (i * G + g) * D + lane * DPL, a);
        if (w.w == kSkipRecord) continue;
        if (w.w == kFirstRecord) {  // the prefix as the first item left it
          total[hh].l = w.z;
#pragma unroll
          for (int c = 0; c < DPL; ++c) total[hh].acc[c] = a[c];
          continue;
        }
        total[hh].l = __fmaf_rn(total[hh].l, w.x, w.z);
#pragma unroll
        for (int c = 0; c < DPL; ++c)
          total[hh].acc[c] = fold_acc(total[hh].acc[c], a[c], {w.x, w.y});
      }
    }
  }
#pragma unroll
  for (int hh = 0; hh < kHeads; ++hh) {
    const int g = combine_head<kLayout>(warp, hh);
    if (!has_head<kLayout>(g, G)) break;
    if constexpr (!kEarlyGate) gate[hh] = load_gate<D>(p, it->row, kvh * G + g);
    write_out<D>(p, it->row, kvh * G + g, total[hh], gate[hh]);
  }
}

// The keys of an item: slots [a, b] of its splits [split0, split0 + count) of its row's grid, in
// `tiles` tiles of kTile from t_first (a split holds whole tiles).
struct ItemKeys {
  SplitGrid grid;
  int split0, a, b, t_first, tiles;
  __device__ int t0(int i) const { return t_first + i * kTile; }
};

__device__ __forceinline__ ItemKeys item_keys(const DecodeItem* it) {
  ItemKeys k;
  k.grid = split_grid(it->lo, it->hi);
  k.split0 = it->split0;
  const auto tile = [&](int i) { return static_cast<int>(k.grid.begin(i)); };
  k.a = max(it->lo, tile(k.split0) * kTile);  // below 2^26 tiles: int
  k.b = min(it->hi, (tile(k.split0 + it->count) - 1) * kTile + kTile - 1);
  k.t_first = k.a / kTile * kTile;
  k.tiles = k.b / kTile - k.a / kTile + 1;
  return k;
}

// After a split item of a combine group wrote its records: counts the item on the group's ticket
// and, in the group's last CTA to finish, folds the records and writes the row. `last` is shared.
template <int D, DecodeLayout kLayout>
__device__ void finish_group(const DecodeParams& p, const DecodeItem* it, int kvh,
                             __nv_bfloat16* stages, bool* last) {
  __threadfence();  // this thread's records are visible device-wide before the ticket
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t* counter = p.counters + int64_t{it->group} * p.num_kv_heads + kvh;
    *last = atomicAdd(counter, 1u) == static_cast<uint32_t>(it->num_items - 1);
    if (*last) *counter = 0;  // every item of the group has counted: ready for the next launch
  }
  __syncthreads();
  if (!*last) return;
  __threadfence();
  combine<D, kLayout>(p, it, kvh, reinterpret_cast<float*>(stages));
}

// One item (read field by field: few registers stay live) for KV head kvh on CUDA cores; warp w
// computes the HPW q heads kvh * G + w * HPW + i. `last` is shared scratch.
template <int D, DecodeLayout kLayout>
__device__ void run_item(const DecodeParams& p, const DecodeItem* it, const int32_t* tables,
                         int kvh, float* q_s, __nv_bfloat16* stages, bool* last) {
  constexpr int DPL = D / 32, HPW = kLayout == DecodeLayout::kTwoHeadsPerWarp ? 2 : 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h0 = kvh * p.group + warp * HPW;  // the warp's first q head
  const __nv_bfloat16* q_rows = p.q + (int64_t{it->row} * p.num_heads + h0) * D;
  // q's dims lane, lane + 32, ... of the warp's heads: loaded here, stored to q_s after the
  // prologue's copies are queued, so their latencies overlap (D = 256 loads them there: 8 more
  // live registers spill).
  constexpr bool kEarlyQ = DPL <= 4;
  __nv_bfloat16 q_in[HPW * DPL];
  if constexpr (kEarlyQ) {
#pragma unroll
    for (int c = 0; c < HPW * DPL; ++c) q_in[c] = q_rows[lane + 32 * c];
  }
  const ItemKeys keys = item_keys(it);
  const int32_t* table = tables + it->table;
  constexpr int kStageElems = decode_stage_elems(D);
#pragma unroll
  for (int s = 0; s < kDecodeStages - 1; ++s) {
    if (s < keys.tiles)
      load_tile<D>(p, table, kvh, keys.t0(s), keys.a, keys.b, stages + s * kStageElems);
    cp_async_commit();
  }
  float* q_w = q_s + warp * HPW * D;  // the warp's HPW rows (its heads are consecutive)
#pragma unroll
  for (int c = 0; c < HPW * DPL; ++c)
    q_w[lane + 32 * c] = __bfloat162float(kEarlyQ ? q_in[c] : q_rows[lane + 32 * c]);
  RowState<DPL> total[HPW], cur[HPW];
#pragma unroll
  for (int i = 0; i < HPW; ++i) {
    total[i].reset();
    cur[i].reset();
  }
  int split = keys.split0;                                       // the split of tile i (of the row)
  int split_end = static_cast<int>(keys.grid.begin(split + 1));  // and the tile after it
  for (int i = 0; i < keys.tiles; ++i) {
    cp_async_wait<kDecodeStages - 2>();  // this thread's copies of tile i landed
    __syncthreads();  // everyone's did, q_s is written, and tile i - 1's stage is free
    const int next = i + kDecodeStages - 1;
    if (next < keys.tiles)
      load_tile<D>(p, table, kvh, keys.t0(next), keys.a, keys.b,
                   stages + (next % kDecodeStages) * kStageElems);
    cp_async_commit();
    const __nv_bfloat16* k_s = stages + (i % kDecodeStages) * kStageElems;
    attend_tile<D, HPW>(p.scale, q_w, k_s, k_s + kTile * k_stride(D), keys.t0(i), keys.a, keys.b,
                        cur);
    if (keys.t0(i) / kTile + 1 == split_end) {  // the split's last tile (the item's ends one)
#pragma unroll
      for (int hh = 0; hh < HPW; ++hh) {
        if (keys.split0 == 0) {
          total[hh].fold(cur[hh]);
        } else {
          store_record<D>(p, record_of<kLayout>(p, it, split, h0 + hh), cur[hh]);
        }
        cur[hh].reset();
      }
      split_end = static_cast<int>(keys.grid.begin(++split + 1));
    }
  }
  cp_async_wait<0>();  // no copy may land in a stage the next item reuses
  if (it->group < 0) {
#pragma unroll
    for (int hh = 0; hh < HPW; ++hh)
      write_out<D>(p, it->row, h0 + hh, total[hh], load_gate<D>(p, it->row, h0 + hh));
    return;
  }
  if (keys.split0 == 0) {
#pragma unroll
    for (int hh = 0; hh < HPW; ++hh)
      store_record<D>(p, record_of<kLayout>(p, it, it->first_count - 1, h0 + hh), total[hh]);
  }
  finish_group<D, kLayout>(p, it, kvh, stages, last);
}

// The running fold of one q head's states over 8 dims [d0, d0 + 8), kept by one thread.
struct FoldRun {
  float m = -INFINITY, l = 0.f, acc[8] = {};
  // this = fold(this, s) (RowState::fold's operations; skipped when s saw no key).
  __device__ void fold(const FoldRun& s) {
    if (s.m == -INFINITY) return;
    const FoldWeights w = fold_state(m, l, s.m, s.l);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = fold_acc(acc[i], s.acc[i], w);
  }
  // The split state a warp left in `slot` (store_slot's layout), for q head `head`.
  __device__ static FoldRun from_slot(const float* slot, int head, int d0) {
    const float* ml = slot + decode_mma::kMaxGroup * decode_mma::kSlotStride + 2 * head;
    const float* a = slot + head * decode_mma::kSlotStride + d0;
    const float4 x = *reinterpret_cast<const float4*>(a),
                 y = *reinterpret_cast<const float4*>(a + 4);
    return {ml[0], ml[1], {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w}};
  }
};

// Dims [d0, d0 + 8) of q head h's output row: bf16(acc / l), gated as write_out gates.
__device__ __forceinline__ void write_out8(const DecodeParams& p, int32_t row, int h, int d0,
                                           const FoldRun& f) {
  const int64_t off = (int64_t{row} * p.num_heads + h) * decode_mma::kDim + d0;
  const bool vec = vector_rows<8>(p);
  Bf16Vec<8> g{}, o;
  float bias = 0.f;
  if (p.gate != nullptr) {
    if (vec) {
      g = *reinterpret_cast<const Bf16Vec<8>*>(p.gate + off);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) g.v[i] = p.gate[off + i];
    }
    bias = __bfloat162float(p.gate_bias[h]);
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    o.v[i] = __float2bfloat16_rn(f.acc[i] / f.l);
    if (p.gate != nullptr)
      o.v[i] = __float2bfloat16_rn(
          apply_output_gate(__bfloat162float(o.v[i]), __bfloat162float(g.v[i]), bias));
  }
  if (vec) {
    *reinterpret_cast<Bf16Vec<8>*>(p.out + off) = o;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) p.out[off + i] = o.v[i];
  }
}

// A CTA's part in its cluster's two barriers (a clustered launch of the four-warp layout): every
// CTA arrives on the first as it starts and waits on it before it stores into another CTA's shared
// memory (that CTA has then started, as distributed shared memory requires); each meets the second
// exactly once: a cluster group's item after its states are stored (the prefix CTA then folds
// them), any other CTA after its items.
struct ClusterBarriers {
  bool started = false, met = false;
  __device__ void wait_started() {
    if (started) return;
    cluster::wait();
    started = true;
  }
  __device__ void meet() {
    wait_started();
    cluster::sync();
    met = true;
  }
};

// A warp's ring of tensor-core K/V stages across the items of its CTA: the shared address of its
// first stage's mbarrier (one a stage, counting the stage's TMA bytes), the tiles it consumed so
// far (tile u lands in stage u % kStages, phase u / kStages of its mbarrier), and the stages whose
// last tile came partly by the lanes' copies (bit s: the async proxy's next TMA into stage s
// must follow a proxy fence).
struct WarpRing {
  uint32_t bars = 0, used = 0, generic = 0;
};

// One item for KV head kvh on tensor cores (decode_mma): warp w computes the item's splits w,
// w + W, ... one after the other, its tiles streaming through its own ring (the next split's first
// tiles load during the current split's last; each tile's block-table entries are read one tile
// before its copies are queued, so no warp waits on the table). The CTA folds the splits in
// order, W at a time, through the fold slots into the state of their fold group (kMmaFoldSplits
// splits; the item starts on a group boundary): fold run f of the CTA (threads t, t + 32 W, ...)
// folds q head f / 16 over dims 8 (f % 16) + [0, 8). The group's first item (or a whole row)
// folds its fold groups' states into its prefix (or the row); the other items store each fold
// group's state as a record, or, in a cluster group (it->leader >= 0), into landing slot
// record - 1 of the prefix CTA, which folds them after the cluster's second barrier (kClustered:
// a clustered launch, four warps only).
template <DecodeLayout kLayout, bool kClustered>
__device__ void run_item_mma(const DecodeParams& p, const DecodeItem* it, const int32_t* tables,
                             int kvh, __nv_bfloat16* rings, float* slots, float* landing,
                             bool* last, bool& waited, ClusterBarriers& barriers, WarpRing& rg) {
  namespace dm = decode_mma;
  constexpr int W = mma_warps(kLayout);
  constexpr bool kTma = decode_tma(kLayout, kClustered);
  using Cta = dm::Cta<W>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const ItemKeys keys = item_keys(it);
  const int first = keys.split0, n = it->count;  // the item's splits, of the row's grid
  const int32_t* table = tables + it->table;
  // A warp's place in its tile sequence: split j (of the item), tile at t0.
  struct Cursor {
    int j, t0;
  };
  // The tile after split j of the item (int: below 2^26 tiles).
  const auto split_end = [&](int j) { return static_cast<int>(keys.grid.begin(first + j + 1)); };
  const auto start = [&](int j) {  // j runs up to W past the last split: t0 kept in [a, b]'s tiles
    const int from = max(keys.a / kTile, static_cast<int>(keys.grid.begin(first + j)));
    return Cursor{j, min(from, keys.b / kTile) * kTile};
  };
  const auto advance = [&](Cursor& c) {
    c.t0 += kTile;
    if (c.t0 / kTile == split_end(c.j)) c = start(c.j + W);
  };
  // The block-table entry of key `lane` of the tile at c (-1: a key to zero), read early.
  const auto lookup = [&](const Cursor& c) -> int32_t {
    const int key = c.t0 + lane;
    if (c.j >= n || key < keys.a || key > keys.b) return -1;
    return table[p.block_shift >= 0 ? key >> p.block_shift : key / p.block_size];
  };
  // Its cache row, once the entry is needed (below 2^31: the host's check).
  const auto row_of = [&](const Cursor& c, int32_t block) -> int32_t {
    if (block < 0 || block >= p.num_blocks) return -1;
    const int key = c.t0 + lane;
    const int offset = p.block_shift >= 0 ? key & (p.block_size - 1) : key % p.block_size;
    return (block * p.block_size + offset) * p.num_kv_heads + kvh;
  };
  __nv_bfloat16* ring = rings + warp * Cta::kStages * dm::kTileElems;
  const auto stage_of = [&](uint32_t u) { return static_cast<int>(u % Cta::kStages); };
  // Queues tile c's keys below `below` (tile-relative) into the stage of ring tile u: the whole
  // boxes of its visible keys by TMA, the others by cp.async (the caller commits them).
  const auto queue = [&](const Cursor& c, int32_t entry, uint32_t u, int below) {
    const int s = stage_of(u);
    __nv_bfloat16* stage = ring + s * dm::kTileElems;
    const int lo = keys.a - c.t0, hi = min(keys.b - c.t0 + 1, min(below, kTile));  // [lo, hi)
    int tma_lo = 0, tma_hi = 0;
    if constexpr (kTma) {
      const int r = p.maps.box_rows;
      if (r > 0) {  // arms the stage's mbarrier even for no box
        if (hi > 0) {
          tma_lo = max(lo, 0) / r * r;
          tma_hi = max(hi / r * r, tma_lo);
        }
        dm::load_boxes(p.maps, kvh, c.t0, entry, max(lo, 0), tma_lo, tma_hi, p.block_size,
                       p.block_shift, p.num_blocks, smem_u32(stage), rg.bars + 8 * s);
        const bool copies = tma_lo > 0 || tma_hi < min(below, kTile);
        rg.generic = copies ? rg.generic | 1u << s : rg.generic & ~(1u << s);
      }
    }
    dm::load_tile(p.k_cache, p.v_cache, row_of(c, entry), stage, below, tma_lo, tma_hi);
  };
  // The first stages' tiles. Before the CTA's griddepcontrol.wait only keys older than `fresh`
  // (written before the predecessor kernel started) are copied; the wait's own keys follow it.
  const int before_wait = waited ? INT32_MAX : it->fresh;
  Cursor load = start(warp);  // the next tile to queue, and its entry
  int32_t entry = lookup(load);
  for (int s = 0; s < Cta::kStages - 1; ++s) {
    Cursor next = load;
    if (load.j < n) advance(next);
    const int32_t next_entry = lookup(next);
    if (load.j < n) queue(load, entry, rg.used + s, before_wait - load.t0);
    cp_async_commit();
    load = next;
    entry = next_entry;
  }
  if (!waited) {
    pdl_wait();
    waited = true;
    Cursor c = start(warp);
    for (int s = 0; s < Cta::kStages - 1 && c.j < n; ++s, advance(c)) {
      if (c.t0 + kTile > before_wait) {
        const int stage = stage_of(rg.used + s);
        dm::copy_keys_from(p.k_cache, p.v_cache, row_of(c, lookup(c)), before_wait - c.t0,
                           ring + stage * dm::kTileElems);
        rg.generic |= 1u << stage;
      }
    }
  }
  uint32_t qb[dm::kDSteps][2];
  dm::load_q(p.q, it->row, p.num_heads, kvh, p.group, qb);
  constexpr int F = fold_splits(kLayout);
  static_assert(F % W == 0, "a round of W splits lies in one fold group");
  const bool prefix = keys.split0 == 0;  // the row's first splits: folded here
  FoldRun group_run[Cta::kFoldsPerThread], total[Cta::kFoldsPerThread];
  // Stores a fold run as the record of the fold group holding split j (of the row).
  const auto store = [&](const FoldRun& f, int j, int head, int d0) {
    const int64_t rec = record_of<kLayout>(p, it, j, kvh * p.group + head);
    float* acc = p.part_acc + rec * dm::kDim + d0;
    *reinterpret_cast<float4*>(acc) = make_float4(f.acc[0], f.acc[1], f.acc[2], f.acc[3]);
    *reinterpret_cast<float4*>(acc + 4) = make_float4(f.acc[4], f.acc[5], f.acc[6], f.acc[7]);
    if (d0 == 0) *reinterpret_cast<float2*>(p.part_ml + rec * 2) = make_float2(f.m, f.l);
  };
  // A cluster group's later fold-group state (split j) into the prefix CTA's landing slot.
  const bool in_cluster = kClustered && it->leader >= 0;
  const auto send = [&](const FoldRun& f, int j, int head, int d0) {
    float* slot = landing + (j / F - it->first_count / F) * dm::kSlotFloats;
    const auto at = [&](const float* x) {
      return cluster::map(static_cast<uint32_t>(__cvta_generic_to_shared(x)),
                          static_cast<uint32_t>(it->leader));
    };
    const uint32_t acc = at(slot + head * dm::kSlotStride + d0);
    cluster::store(acc, make_float4(f.acc[0], f.acc[1], f.acc[2], f.acc[3]));
    cluster::store(acc + 16, make_float4(f.acc[4], f.acc[5], f.acc[6], f.acc[7]));
    if (d0 == 0)
      cluster::store(at(slot + dm::kMaxGroup * dm::kSlotStride + 2 * head), make_float2(f.m, f.l));
  };
  int tile = 0;  // tiles of this warp consumed
  for (int j0 = 0; j0 < n; j0 += W) {
    const int j = j0 + warp;
    if (j < n) {
      dm::State st;
      st.reset();
      for (Cursor cur = start(j); cur.j == j; advance(cur), ++tile) {
        const uint32_t u = rg.used + tile;
        cp_async_wait<Cta::kStages - 2>();  // this lane's copies of the tile landed
        if (kTma && p.maps.box_rows > 0) {  // its boxes landed; the copies before the next boxes
          wgmma::mbar_wait(rg.bars + 8 * stage_of(u), u / Cta::kStages & 1u);
          if (rg.generic >> stage_of(u + Cta::kStages - 1) & 1u) wgmma::fence_proxy_async();
        }
        __syncwarp();  // every lane's copies landed and were fenced; the refilled stage is consumed
        if (load.j < n) {
          queue(load, entry, u + Cta::kStages - 1, kTile);
          advance(load);
          entry = lookup(load);  // in flight during the step
        }
        cp_async_commit();
        dm::tile_step(p.scale, qb, ring + stage_of(u) * dm::kTileElems, cur.t0, keys.a, keys.b, st);
      }
      dm::store_slot(slots + warp * dm::kSlotFloats, st);
    }
    __syncthreads();  // the round's slots are written
    const bool group_ends = (j0 + W) % F == 0 || j0 + W >= n;
    if (in_cluster && !prefix && group_ends) barriers.wait_started();  // before the first send
#pragma unroll
    for (int f = 0; f < Cta::kFoldsPerThread; ++f) {
      const int run_index = threadIdx.x + f * W * 32, head = run_index / 16,
                d0 = run_index % 16 * 8;
      if (head >= p.group) continue;
      for (int w = 0; w < min(W, n - j0); ++w)
        group_run[f].fold(FoldRun::from_slot(slots + w * dm::kSlotFloats, head, d0));
      if (!group_ends) continue;
      if (prefix) {
        total[f].fold(group_run[f]);
      } else if (in_cluster) {
        send(group_run[f], keys.split0 + j0, head, d0);
      } else {
        store(group_run[f], keys.split0 + j0, head, d0);
      }
      group_run[f] = FoldRun{};
    }
    __syncthreads();  // the slots are free for the next round
  }
  cp_async_wait<0>();  // no copy may land in a ring the next item reuses (every box landed)
  rg.used += tile;
  if (prefix) {
#pragma unroll
    for (int f = 0; f < Cta::kFoldsPerThread; ++f) {
      const int run_index = threadIdx.x + f * W * 32, head = run_index / 16,
                d0 = run_index % 16 * 8;
      if (head >= p.group) continue;
      if (it->group < 0) {
        write_out8(p, it->row, kvh * p.group + head, d0, total[f]);
      } else if (!in_cluster) {
        store(total[f], it->first_count - 1, head, d0);
      }
    }
  }
  if (it->group < 0) return;
  if (!in_cluster) {
    finish_group<dm::kDim, kLayout>(p, it, kvh, rings, last);
    return;
  }
  barriers.meet();  // every state of the group is in the prefix CTA's landing slots
  if (!prefix) return;
  const int records = group_records(*it, F);
#pragma unroll
  for (int f = 0; f < Cta::kFoldsPerThread; ++f) {
    const int run_index = threadIdx.x + f * W * 32, head = run_index / 16, d0 = run_index % 16 * 8;
    if (head >= p.group) continue;
    for (int i = 1; i < records; ++i)  // combine()'s fold of records 1, 2, ... in order
      total[f].fold(FoldRun::from_slot(landing + (i - 1) * dm::kSlotFloats, head, d0));
    write_out8(p, it->row, kvh * p.group + head, d0, total[f]);
  }
}

// Zeroes the q heads of KV head kvh in `row` of out.
template <int D>
__device__ void zero_row(const DecodeParams& p, int64_t row, int kvh) {
  const int n = p.group * D;
  __nv_bfloat16* dst = p.out + (row * p.num_heads + int64_t{kvh} * p.group) * D;
  for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = __float2bfloat16_rn(0.0f);
}

}  // namespace decode

// grid (Nkv, any), decode_warps(kLayout, G) * 32 threads (G <= kMaxDecodeGroup),
// decode_smem_bytes(kLayout, D, G) of dynamic shared memory: CTA (kvh, y) runs items y,
// y + gridDim.y, ... of the plan, then zeroes the uncovered rows y, y + gridDim.y, ... (the listed
// ones, then [planned_rows, out_rows)). The KV head is the fast index so that the CTAs of a small
// plan's items spread over the SMs. A warp per head: at most 64 registers a thread (two CTAs of
// kMaxDecodeGroup warps), four CTAs of Beam's six warps fit an SM (D = 128 keeps everything in
// registers); two heads a warp keep the same thread budget per SM for their fewer warps; the
// tensor-core layouts' CTAs per SM are set by their shared memory (decode_mma::Cta).
template <int D, DecodeLayout kLayout, bool kClustered = false>
__global__ void __launch_bounds__(decode_max_threads(kLayout), decode_min_ctas(kLayout))
    decode_kernel(const __grid_constant__ DecodeParams p) {
  static_assert(!is_mma(kLayout) || D == decode_mma::kDim,
                "the tensor-core decode step serves head_dim 128");
  static_assert(!kClustered || kLayout == DecodeLayout::kMmaFourWarps,
                "only the four-warp layout runs in clusters");
  extern __shared__ float4 decode_smem[];
  __shared__ bool last;
  __shared__ uint64_t ring_bars[decode_tma(kLayout, kClustered) ? decode_mma::kMaxRingStages : 1];
  float* q_s = reinterpret_cast<float*>(decode_smem);  // CUDA-core layouts
  // Tensor cores: the warps' rings (filled by TMA: from the first 1024-byte boundary, the
  // swizzle's span), then the fold slots, then (four warps) the landing slots.
  char* smem = reinterpret_cast<char*>(decode_smem);
  auto* stages = reinterpret_cast<__nv_bfloat16*>(
      decode_tma(kLayout, kClustered) ? smem + (-smem_u32(smem) & 1023u)
      : is_mma(kLayout)               ? smem
                                      : reinterpret_cast<char*>(q_s + p.group * D));
  float* fold_slots = reinterpret_cast<float*>(stages + decode_stage_floats(kLayout, D) * 2);
  float* landing = fold_slots + mma_warps(kLayout) * decode_mma::kSlotFloats;
  decode::WarpRing ring;
  const bool boxes = decode_tma(kLayout, kClustered) && p.maps.box_rows > 0;  // tiles by TMA
  if (boxes) {  // each warp's stage mbarriers, one arrival (lane 0's) a phase
    constexpr int kRingWarps = is_mma(kLayout) ? mma_warps(kLayout) : 2;  // (only mma layouts)
    constexpr int kStages = decode_mma::Cta<kRingWarps>::kStages;
    ring.bars = smem_u32(ring_bars + threadIdx.x / 32 * kStages);
    if (threadIdx.x % 32 == 0) {
      for (int s = 0; s < kStages; ++s) wgmma::mbar_init(ring.bars + 8 * s, 1);
      wgmma::fence_barrier_init();
    }
    __syncwarp();
    if (threadIdx.x == 0) {
      wgmma::prefetch_tensor_map(&p.maps.k);
      wgmma::prefetch_tensor_map(&p.maps.v);
    }
  }
  decode::ClusterBarriers barriers;
  if constexpr (kClustered) cluster::arrive_relaxed();  // this CTA has started
  const int kvh = static_cast<int>(blockIdx.x);
  const int slot = static_cast<int>(blockIdx.y), slots = static_cast<int>(gridDim.y);
  const char* base = reinterpret_cast<const char*>(p.plan);
  {
    const auto* items = reinterpret_cast<const DecodeItem*>(p.plan + 1);
    // The first item's lines reach L1 while the header is read (the plan's memory holds at least
    // gridDim.y items: the host's check).
    asm volatile("prefetch.global.L1 [%0];" ::"l"(items + slot));
    asm volatile("prefetch.global.L1 [%0];" ::"l"(
        reinterpret_cast<const char*>(items + slot + 1) - 1));
    const DecodePlanHeader hd = *p.plan;
    const auto* tables = reinterpret_cast<const int32_t*>(base + hd.tables);
    // Launched as a programmatic dependent of the q/k norm + KV store: the plan (uploaded before
    // that kernel) is read above while it runs; q, the new keys and values only after the wait
    // (on tensor cores the first item queues its older keys' copies first).
    bool waited = false;
    if constexpr (!is_mma(kLayout)) {
      pdl_wait();
      waited = true;
    }
    for (int item = slot; item < hd.num_items; item += slots) {
      if (kClustered && items[item].leader == kPaddingItem) continue;  // uniform across the CTA
      // Every warp is done with q_s, the stages and `last` of the previous item, and (tensor
      // cores) its writes to the stages precede the next boxes: a proxy fence, then the barrier.
      if (boxes) wgmma::fence_proxy_async();
      __syncthreads();
      if constexpr (is_mma(kLayout)) {
        decode::run_item_mma<kLayout, kClustered>(p, items + item, tables, kvh, stages, fold_slots,
                                                  landing, &last, waited, barriers, ring);
      } else {
        decode::run_item<D, kLayout>(p, items + item, tables, kvh, q_s, stages, &last);
      }
    }
    if (!waited) pdl_wait();  // before the zero rows: out may be read by earlier kernels
  }
  const DecodePlanHeader hd = *p.plan;
  const auto* zero_rows = reinterpret_cast<const int32_t*>(base + hd.zero);
  const int64_t listed = hd.zero_rows, planned = hd.planned_rows;
  const int64_t zero = listed + (p.out_rows > planned ? p.out_rows - planned : 0);
  for (int64_t z = slot; z < zero; z += slots)
    decode::zero_row<D>(p, z < listed ? int64_t{zero_rows[z]} : planned + (z - listed), kvh);
  if (kClustered && !barriers.met) barriers.meet();  // once per CTA, after its items
}

}  // namespace beam::cuda::attention_detail
