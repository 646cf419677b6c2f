// Device side of the CUDA paged attention (kernels/cuda/attention.cu) for tiles of query rows
// (prefill chunks): the attend kernel (one CTA per work item and KV head) and the reduce kernel
// that folds split-KV partial states, plus the per-row arithmetic that the decode kernel
// (attention_decode.cuh) shares. Both kernels here read their item / group counts from device
// memory and loop over them with a grid stride: extra CTAs of a larger grid exit at once.
//
// Numerics (match kernels/cpu/attention.cpp): scores s = fp32(q·k) * scale, fp32 online softmax,
// P kept in fp32 (never rounded) for the fp32 P·V accumulation, one bf16 rounding of acc / sum.
// Keys are visited in 32-key tiles on a fixed grid of logical slots; a row's tiles are grouped into
// at most 64 splits of whole tiles (split_grid.h, set by the row's own visible slots: power-of-two
// sizes on the slot grid up to 65,536 keys, 64 balanced splits beyond); each split's softmax state
// (attend_tile over its tiles) is folded into the row's total with fold_state(), in split order.
// Split-KV items compute splits and the reduce kernel (or the decode kernel's last CTA) folds the
// partials with the same fold_state() in the same order. The split grid of a row depends only on
// its own visible keys, so a row's bits do not depend on whether its item was split, on its tile of
// rows, on the kernel (attend or decode), or on the rest of the batch (batch invariance and
// split/unsplit bit-identity). At head_dim 128 with G <= 8 the decode kernel computes each split on
// tensor cores instead (attention_decode_mma.cuh: its own per-tile arithmetic on the same split
// grid and fold), and such geometries send every row outside the tensor-core prefill kernel to the
// decode kernel, which keeps these properties.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/split_grid.h"

namespace beam::cuda::attention_detail {

constexpr int kTile = 32;  // keys per online-softmax step: lane j scores key j
constexpr int kWarps = 8;  // warps of an attend CTA
constexpr int kReduceThreads = 128;
static_assert(kTile == kGridTile, "the split grid's tiles are the kernels' tiles");

// Row stride (bf16 elements) of a K tile in shared memory: 16-byte rows for cp.async and 16-byte
// reads, and lanes 8 apart (one quarter-warp phase of a 16-byte read) on distinct banks.
constexpr int k_stride(int head_dim) { return head_dim + 8; }

// Query rows (row, q head) per warp: state lives in registers, 2 * D / 32 + 4 floats per row.
constexpr int rows_per_warp(int head_dim) { return head_dim <= 128 ? 8 : 4; }
constexpr int max_query_rows(int head_dim) { return kWarps * rows_per_warp(head_dim); }

// One sequence on the device (positions are absolute, slots logical).
struct SeqDesc {
  int64_t q_begin, q_pos0, kv_pos0, table_offset;
};

// Query rows [row0, row0 + rows) of a sequence. partial < 0: the item covers every key its rows
// see and writes out; otherwise it covers exactly the slots [key0, key1] of one split of the grid
// every row of the item shares and writes records partial + r * Nq + h for its row r and q head h.
struct WorkItem {
  int32_t seq, row0, rows, key0, key1, partial;
};

// The split items of one tile of rows: record of split s (0-based within the group), row r and
// q head h is partial + (s * rows + r) * Nq + h.
struct ReduceGroup {
  int32_t seq, row0, rows, num_splits, partial;
};

struct Params {
  const __nv_bfloat16* q;  // [T, Nq, D]
  __nv_bfloat16* out;      // [T, Nq, D]
  const __nv_bfloat16* k_cache;  // [num_blocks, block_size, Nkv, D]
  const __nv_bfloat16* v_cache;
  const int32_t* counts;  // [2]: work items, reduce groups
  const SeqDesc* seqs;
  const int32_t* tables;  // every sequence's block table, concatenated
  const WorkItem* items;
  const ReduceGroup* groups;
  float* part_acc;  // [records, D]
  float* part_ml;   // [records, 2]: running max, sum
  int64_t block_size, num_blocks, window;
  int num_heads, num_kv_heads, group;
  float scale;
};

// Folds a (max m, sum l) state into the running (M, L); returns the weights that rescale the
// running and the new accumulators. The caller skips empty states (m = -inf). Explicit
// intrinsics so the attend and reduce kernels round identically.
struct FoldWeights {
  float old_w, new_w;
};
__device__ __forceinline__ FoldWeights fold_state(float& M, float& L, float m, float l) {
  const float mx = fmaxf(M, m);
  const FoldWeights w{expf(M - mx), expf(m - mx)};  // M = -inf: old_w = 0
  L = __fmaf_rn(L, w.old_w, __fmul_rn(l, w.new_w));
  M = mx;
  return w;
}
__device__ __forceinline__ float fold_acc(float A, float a, FoldWeights w) {
  return __fmaf_rn(A, w.old_w, __fmul_rn(a, w.new_w));
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Logical slots [lo, hi] visible to the query at absolute position p.
struct SlotRange {
  int64_t lo, hi;
};
__device__ __forceinline__ SlotRange visible(const SeqDesc& s, int64_t p, int64_t window) {
  const int64_t hi = p - s.kv_pos0;
  return {window > 0 ? max(int64_t{0}, hi - window + 1) : int64_t{0}, hi};
}

// Copies keys [t0, t0 + kTile) of KV head kvh into shared memory; keys outside [lo, hi] (or in
// an unmapped block) are zero and never read from the cache. K rows have a stride of k_stride(D)
// (the per-lane row reads of the score loop hit distinct banks); V rows are read across lanes.
template <int D>
__device__ void load_tile(const Params& p, const SeqDesc& s, int kvh, int64_t t0, int64_t lo,
                          int64_t hi, __nv_bfloat16* k_s, __nv_bfloat16* v_s) {
  constexpr int kVecs = D / 8;  // 16-byte vectors per key row
  for (int idx = threadIdx.x; idx < kTile * kVecs; idx += blockDim.x) {
    const int j = idx / kVecs, c = idx % kVecs;
    const int64_t key = t0 + j;
    uint4 kv4 = make_uint4(0, 0, 0, 0), vv4 = make_uint4(0, 0, 0, 0);
    if (key >= lo && key <= hi) {
      const int64_t block = p.tables[s.table_offset + key / p.block_size];
      if (block >= 0 && block < p.num_blocks) {
        const int64_t slot = block * p.block_size + key % p.block_size;
        const int64_t src = (slot * p.num_kv_heads + kvh) * D + c * 8;
        kv4 = *reinterpret_cast<const uint4*>(p.k_cache + src);
        vv4 = *reinterpret_cast<const uint4*>(p.v_cache + src);
      }
    }
    *reinterpret_cast<uint4*>(k_s + j * k_stride(D) + c * 8) = kv4;
    *reinterpret_cast<uint4*>(v_s + j * D + c * 8) = vv4;
  }
}

// fp32 q · k of H query rows (q + i * D, shared fp32) for the key of this lane (its 16-byte
// aligned bf16 tile row, read once for all H): per row, dims d = i (mod 4) accumulate in chain i in
// ascending d, then (c0 + c1) + (c2 + c3), whatever H is.
template <int D, int H>
__device__ __forceinline__ void dot_qk(const float* q, const __nv_bfloat16* k, float (&s)[H]) {
  float c[H][4];
#pragma unroll
  for (int h = 0; h < H; ++h) c[h][0] = c[h][1] = c[h][2] = c[h][3] = 0.f;
#pragma unroll 4
  for (int d = 0; d < D; d += 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(k + d);
    const float k0 = __uint_as_float(raw.x << 16), k1 = __uint_as_float(raw.x & 0xffff0000u);
    const float k2 = __uint_as_float(raw.y << 16), k3 = __uint_as_float(raw.y & 0xffff0000u);
    const float k4 = __uint_as_float(raw.z << 16), k5 = __uint_as_float(raw.z & 0xffff0000u);
    const float k6 = __uint_as_float(raw.w << 16), k7 = __uint_as_float(raw.w & 0xffff0000u);
#pragma unroll
    for (int h = 0; h < H; ++h) {
      const float4 qa = *reinterpret_cast<const float4*>(q + h * D + d);
      const float4 qb = *reinterpret_cast<const float4*>(q + h * D + d + 4);
      c[h][0] = fmaf(qa.x, k0, c[h][0]);
      c[h][1] = fmaf(qa.y, k1, c[h][1]);
      c[h][2] = fmaf(qa.z, k2, c[h][2]);
      c[h][3] = fmaf(qa.w, k3, c[h][3]);
      c[h][0] = fmaf(qb.x, k4, c[h][0]);
      c[h][1] = fmaf(qb.y, k5, c[h][1]);
      c[h][2] = fmaf(qb.z, k6, c[h][2]);
      c[h][3] = fmaf(qb.w, k7, c[h][3]);
    }
  }
#pragma unroll
  for (int h = 0; h < H; ++h)
    s[h] = __fadd_rn(__fadd_rn(c[h][0], c[h][1]), __fadd_rn(c[h][2], c[h][3]));
}

// Running softmax state of one query row in one warp: lane owns dims [lane * DPL, +DPL).
template <int DPL>
struct RowState {
  float m, l, acc[DPL];
  __device__ void reset() {
    m = -INFINITY;
    l = 0.f;
#pragma unroll
    for (int c = 0; c < DPL; ++c) acc[c] = 0.f;
  }
  // total = fold(total, split) (skipped when the split saw no key).
  __device__ void fold(const RowState& split) {
    if (split.m == -INFINITY) return;
    const FoldWeights w = fold_state(m, l, split.m, split.l);
#pragma unroll
    for (int c = 0; c < DPL; ++c) acc[c] = fold_acc(acc[c], split.acc[c], w);
  }
};

// One online-softmax step over the tile at t0 of H query rows that see the same keys [lo, hi]
// (at least one of them in the tile): rows q_rows + i * D (shared fp32), states st[i], i < H. Each
// K and V value is read from shared memory and widened once for all H rows; a row's arithmetic does
// not depend on H (every rounding is an explicit intrinsic, so no instantiation contracts
// differently), so the attend kernel (H = 1) and the decode kernel (H = 1 or 2) agree bit for
// bit.
template <int D, int H>
__device__ __forceinline__ void attend_tile(float scale, const float* q_rows,
                                            const __nv_bfloat16* k_s, const __nv_bfloat16* v_s,
                                            int64_t t0, int64_t lo, int64_t hi,
                                            RowState<D / 32>* st) {
  constexpr int DPL = D / 32;
  const int lane = threadIdx.x % 32;
  const int64_t key = t0 + lane;
  const bool vis = key >= lo && key <= hi;
  float s[H];
  if (vis) dot_qk<D, H>(q_rows, k_s + lane * k_stride(D), s);
  float prob[H];
#pragma unroll
  for (int h = 0; h < H; ++h) {
    const float sh = vis ? __fmul_rn(s[h], scale) : -INFINITY;
    // Finite: the caller checked that a key of the tile is visible.
    const float new_m = fmaxf(st[h].m, warp_max(sh));
    const float alpha = expf(__fsub_rn(st[h].m, new_m));  // 0 on the first step (m = -inf)
    prob[h] = vis ? expf(__fsub_rn(sh, new_m)) : 0.f;
    st[h].l = __fmaf_rn(st[h].l, alpha, warp_sum(prob[h]));
    st[h].m = new_m;
#pragma unroll
    for (int c = 0; c < DPL; ++c) st[h].acc[c] = __fmul_rn(st[h].acc[c], alpha);
  }
  const __nv_bfloat16* v_col = v_s + lane * DPL;  // 2 * DPL-byte aligned
#pragma unroll 4
  for (int j = 0; j < kTile; ++j) {
    const __nv_bfloat16* v = v_col + j * D;
    float vals[DPL];
    if constexpr (DPL % 4 == 0) {  // 8-byte reads of 4 bf16
#pragma unroll
      for (int c = 0; c < DPL; c += 4) {
        const uint2 raw = *reinterpret_cast<const uint2*>(v + c);
        vals[c] = __uint_as_float(raw.x << 16);
        vals[c + 1] = __uint_as_float(raw.x & 0xffff0000u);
        vals[c + 2] = __uint_as_float(raw.y << 16);
        vals[c + 3] = __uint_as_float(raw.y & 0xffff0000u);
      }
    } else {
#pragma unroll
      for (int c = 0; c < DPL; c += 2) {
        const float2 v2 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(v + c));
        vals[c] = v2.x;
        vals[c + 1] = v2.y;
      }
    }
#pragma unroll
    for (int h = 0; h < H; ++h) {
      const float pj = __shfl_sync(0xffffffffu, prob[h], j);
#pragma unroll
      for (int c = 0; c < DPL; ++c) st[h].acc[c] = fmaf(pj, vals[c], st[h].acc[c]);
    }
  }
}

// Writes a row's final state: the bf16 output (partial < 0) or a partial record.
template <int D>
__device__ void write_row(const Params& p, const WorkItem& it, const SeqDesc& s, int r, int h,
                          const RowState<D / 32>& st) {
  constexpr int DPL = D / 32;
  const int lane = threadIdx.x % 32;
  if (it.partial < 0) {
    const int64_t t = s.q_begin + it.row0 + r;
    __nv_bfloat16* dst = p.out + (t * p.num_heads + h) * D + lane * DPL;
#pragma unroll
    for (int c = 0; c < DPL; ++c) dst[c] = __float2bfloat16_rn(st.acc[c] / st.l);
    return;
  }
  const int64_t rec = it.partial + int64_t{r} * p.num_heads + h;
#pragma unroll
  for (int c = 0; c < DPL; ++c) p.part_acc[rec * D + lane * DPL + c] = st.acc[c];
  if (lane == 0) {
    p.part_ml[rec * 2] = st.m;
    p.part_ml[rec * 2 + 1] = st.l;
  }
}

// One work item of an attend CTA (KV head kvh). Query row i of the CTA is row i / G of the item
// and q head kvh * G + i % G; warp w owns rows w, w + kWarps, ...
template <int D>
__device__ __forceinline__ void attend_item(const Params& p, const WorkItem& it, int kvh, float* q_s,
                            __nv_bfloat16* k_s, __nv_bfloat16* v_s) {
  constexpr int DPL = D / 32, R = rows_per_warp(D);
  const SeqDesc s = p.seqs[it.seq];
  const int G = p.group, qrows = it.rows * G;
  const int warp = threadIdx.x / 32;
  for (int idx = threadIdx.x; idx < qrows * D; idx += blockDim.x) {
    const int i = idx / D, d = idx % D;
    const int64_t t = s.q_begin + it.row0 + i / G;
    q_s[idx] = __bfloat162float(p.q[(t * p.num_heads + kvh * G + i % G) * D + d]);
  }
  const int64_t p_first = s.q_pos0 + it.row0;
  const int64_t cta_lo = visible(s, p_first, p.window).lo;
  const int64_t cta_hi = visible(s, p_first + it.rows - 1, p.window).hi;

  int64_t lo = cta_lo, hi = cta_hi;
  if (it.partial >= 0) {
    lo = max(lo, int64_t{it.key0});
    hi = min(hi, int64_t{it.key1});
  }
  RowState<DPL> total[R], cur[R];
#pragma unroll
  for (int u = 0; u < R; ++u) {
    total[u].reset();
    cur[u].reset();
  }
  for (int64_t t0 = lo / kTile * kTile; t0 <= hi; t0 += kTile) {
    __syncthreads();  // previous tile consumed (and q_s written, on the first pass)
    load_tile<D>(p, s, kvh, t0, lo, hi, k_s, v_s);
    __syncthreads();
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int i = warp + kWarps * u;
      if (i >= qrows) continue;
      const SlotRange vis = visible(s, p_first + i / G, p.window);
      if (t0 <= vis.hi && t0 + kTile - 1 >= vis.lo)
        attend_tile<D, 1>(p.scale, q_s + i * D, k_s, v_s, t0, vis.lo, vis.hi, &cur[u]);
      if (split_grid(vis.lo, vis.hi).ends_split(t0 / kTile)) {  // the split's last tile: fold it
        total[u].fold(cur[u]);
        cur[u].reset();
      }
    }
  }
#pragma unroll
  for (int u = 0; u < R; ++u) total[u].fold(cur[u]);  // an item ending inside a split
#pragma unroll
  for (int u = 0; u < R; ++u) {
    const int i = warp + kWarps * u;
    if (i < qrows) write_row<D>(p, it, s, i / G, kvh * G + i % G, total[u]);
  }
}

// grid (any, Nkv), kWarps * 32 threads: CTA (x, kvh) runs items x, x + gridDim.x, ... < counts[0].
template <int D>
__global__ void __launch_bounds__(kWarps * 32, 1) attend_kernel(Params p) {
  extern __shared__ float4 smem[];
  float* q_s = reinterpret_cast<float*>(smem);  // [max_query_rows][D]
  __nv_bfloat16* k_s = reinterpret_cast<__nv_bfloat16*>(q_s + max_query_rows(D) * D);
  __nv_bfloat16* v_s = k_s + kTile * k_stride(D);
  const int num_items = p.counts[0];
  for (int item = blockIdx.x; item < num_items; item += gridDim.x) {
    __syncthreads();  // every warp is done with q_s and the tiles of the previous item
    attend_item<D>(p, p.items[item], static_cast<int>(blockIdx.y), q_s, k_s, v_s);
  }
}

// grid (any, Nq), kReduceThreads threads: CTA (x, h) folds groups x, x + gridDim.x, ... <
// counts[1]: out = bf16(A / L) of the fold of a row's partials in split order (the same
// fold_state as the attend kernel).
__global__ void __launch_bounds__(kReduceThreads) reduce_kernel(Params p, int head_dim) {
  const int h = blockIdx.y, D = head_dim;
  const int num_groups = p.counts[1];
  for (int gi = blockIdx.x; gi < num_groups; gi += gridDim.x) {
    const ReduceGroup g = p.groups[gi];
    const SeqDesc s = p.seqs[g.seq];
    for (int idx = threadIdx.x; idx < g.rows * D; idx += blockDim.x) {
      const int r = idx / D, d = idx % D;
      float M = -INFINITY, L = 0.f, A = 0.f;
      for (int split = 0; split < g.num_splits; ++split) {
        const int64_t rec = g.partial + (int64_t{split} * g.rows + r) * p.num_heads + h;
        const float m = p.part_ml[rec * 2], l = p.part_ml[rec * 2 + 1];
        if (m == -INFINITY) continue;
        const FoldWeights w = fold_state(M, L, m, l);
        A = fold_acc(A, p.part_acc[rec * D + d], w);
      }
      const int64_t t = s.q_begin + g.row0 + r;
      p.out[(t * p.num_heads + h) * D + d] = __float2bfloat16_rn(A / L);
    }
  }
}

}  // namespace beam::cuda::attention_detail
