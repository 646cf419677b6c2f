// The tensor-core split step of the decode kernel (attention_decode.cuh) at head_dim 128 and
// G <= 8 q heads per KV head: each warp of a CTA computes whole splits of a row's keys on its own,
// streaming their 32-key K/V tiles through its own ring, so every K and V value crosses shared
// memory once and feeds the tensor cores once. A tile's keys come by TMA where the block size
// gives whole boxes (DecodeMaps: lane 0 queues a box's four 64-dim halves of K and V; a stage's
// mbarrier counts their bytes) and by the lanes' cp.asyncs for the rest (edge keys, odd block
// sizes), into the TMA's 128-byte-swizzled layout either way.
//
// Per tile (fragment layouts are PTX's for mma.sync m16n8k16; lane t, r = t / 4, c = 2 (t % 4)):
//   Sᵀ = K · Qᵀ   keys as the 16 mma rows (2 row tiles), the G heads as the 8 columns (zero
//                 columns from G on), d as k (8 steps); K fragments by ldmatrix, Qᵀ fragments in
//                 registers for the whole item.
//   softmax       per head (a column: 4 values a lane, lanes t, t ^ 4, t ^ 8, t ^ 16 hold one
//                 head's 32 keys), in fp32, on the accumulator fragments.
//   Oᵀ += Vᵀ · Pᵀ  d as the 16 mma rows (8 row tiles), heads as columns, keys as k (2 steps); V
//                 fragments by ldmatrix.trans, Pᵀ fragments from the softmax's accumulators by
//                 movmatrix.trans, P as bf16 hi + lo (hi = bf16(p), lo = bf16(p - hi)): two mmas.
// Numerics (the same instructions whatever the batch, the split layout or the warp, so a row's
// bits depend on neither): s = fp32(k · q) summed by the tensor core, times scale; per tile
// m' = max(m, max s), alpha = expf(m - m'), p = expf(s - m') (0 for masked keys), l = l * alpha +
// the tile's sum of p (a lane's four in a fixed order, then xor-4, 8, 16 shuffles); o = o * alpha,
// then o += Vᵀ · p_hi, o += Vᵀ · p_lo. Splits are folded with fold_state() in split order within
// groups of kMmaFoldSplits, the groups' states in order (attention_decode.cuh's fold_splits).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "core/host_device.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/mma_sync.cuh"
#include "kernels/cuda/moe_wgmma.cuh"

namespace beam::cuda::attention_detail::decode_mma {

constexpr int kDim = 128;                     // the head_dim this step serves
constexpr int kMaxGroup = 8;                  // q heads per KV head: the mma's n = 8 columns
constexpr int kDSteps = kDim / 16;            // k16 steps of k · q
constexpr int kDTiles = kDim / 16;            // m16 row tiles of Oᵀ
constexpr int kKeyTiles = kTile / 16;         // m16 row tiles of Sᵀ (= k16 steps of Vᵀ · Pᵀ)
constexpr int kChunks = kDim / 8;             // 16-byte chunks of a K or V row
constexpr int kHalf = 64;                     // dims of a 128-byte swizzle row (a TMA box row)
constexpr int kHalfElems = kTile * kHalf;     // bf16 of a tile's K (V) rows of one 64-dim half
constexpr int kTileElems = 2 * kTile * kDim;  // bf16 of one ring stage: K rows, then V rows
constexpr int kBoxRowBytes = 4 * kHalf * 2;   // TMA bytes a key of a box brings: K and V halves
// Fold slots: a warp's split state, [head][kSlotStride] accumulators (the 4-float pad spreads a
// lane's stores over the banks), then (m, l) per head.
constexpr int kSlotStride = kDim + 4;
constexpr int kSlotFloats = kMaxGroup * kSlotStride + 2 * kMaxGroup;
constexpr int kMaxRingStages = 4 * 3;  // mbarriers a CTA's rings need (Cta<W>: W x kStages)
constexpr size_t kRingAlignSlack = 1024;  // bytes that put TMA-filled rings on a 1024-byte boundary

// TMA maps of the paged K and V caches, each {D, Nkv, slots} (slots = num_blocks x block_size)
// with a box of {64 dims, 1 KV head, box_rows slots}: box_rows = min(block_size, kTile) when the
// block size is a multiple of 8 that divides kTile or is a multiple of it, else 0 (every key by
// cp.async). A box at slot coordinate `slots` lies wholly out of bounds and loads zeros.
struct DecodeMaps {
  CUtensorMap k, v;
  int box_rows, slots;
};

// A CTA of W warps computing splits side by side, each streaming its tiles through its own ring
// (W = 4: one CTA an SM, 3-stage rings, the shortest latency for few rows; W = 2: three CTAs an
// SM on 2-stage rings, so one CTA's item start and fold overlap the others' streaming, and six
// warps share the four schedulers: a warp's own dependency chain, ~1,470 instructions a tile,
// set the pace with one warp a scheduler; H200 run 190: batch 128 at 512 keys 1.66 -> 1.44x of
// the K/V floor, sliding at 8K context alike, full 8K keys 1.21 -> 1.18x).
template <int W>
struct Cta {
  static constexpr int kWarps = W;
  // Tiles in each warp's ring: two-warp CTAs keep one tile in flight beside the one computed, so
  // that three CTAs fit an SM's shared memory (and 238 registers a thread its register file).
  static constexpr int kStages = W == 2 ? 2 : 3;
  static constexpr int kRingElems = W * kStages * kTileElems;  // bf16 of the warps' rings
  // Dynamic shared memory: the warps' rings (from the first 1024-byte boundary, the swizzle's
  // span, when TMA fills them: kRingAlignSlack more), then their fold slots.
  static constexpr size_t kSmemBytes =
      kRingAlignSlack + sizeof(__nv_bfloat16) * kRingElems + sizeof(float) * W * kSlotFloats;
  // As many as an H100/H200 SM's 228 KB hold (1 KB a CTA reserved by the system).
  static constexpr int kCtasPerSm = static_cast<int>(228 * 1024 / (kSmemBytes + 1024));
  // Fold runs a thread keeps: the CTA's threads share G <= 8 heads x 16 runs of 8 dims.
  static constexpr int kFoldsPerThread = kMaxGroup * kDim / 8 / (W * 32);
  static_assert(kFoldsPerThread >= 1 && kMaxGroup * kDim / 8 % (W * 32) == 0);
  static_assert(W * kStages <= kMaxRingStages);
};
static_assert(Cta<4>::kCtasPerSm == 1 && Cta<2>::kCtasPerSm == 3, "the layouts run 190 measured");

// The running state of one split in one warp: this lane's (m, l) of heads c and c + 1, and its Oᵀ
// fragments: o[i][0 / 1] = dim 16 i + r, heads c / c + 1; o[i][2 / 3] = dim 16 i + r + 8.
struct State {
  float m[2], l[2];
  float o[kDTiles][4];
  __device__ void reset() {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < kDTiles; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  }
};

// Element offset of 16-byte chunk `chunk` of key row `key` in a K or V tile: TMA's 128-byte
// swizzle layout, dims [0, 64) of the tile's keys as kTile rows of 128 bytes, then dims [64, 128),
// chunks swizzled by the key's low three bits, so the eight rows an ldmatrix phase reads hit
// distinct banks.
BEAM_HOST_DEVICE constexpr int tile_offset(int key, int chunk) {
  return (chunk / 8) * kHalfElems + key * kHalf + ((chunk % 8) ^ (key & 7)) * 8;
}

// tile_offset(j, c) for load_tile's key j = 2 i + half of its pass i: the key's low three bits
// are the pass's (2 i & 7) and the lane's (half), so (c % 8) ^ half is a lane constant.
BEAM_HOST_DEVICE constexpr int pass_offset(int i, int half, int c) {
  return (c / 8) * kHalfElems + (2 * i + half) * kHalf + 8 * (((c % 8) ^ half) ^ ((2 * i) & 7));
}
constexpr bool pass_offsets_are_tile_offsets() {
  for (int i = 0; i < kTile / 2; ++i)
    for (int half = 0; half < 2; ++half)
      for (int c = 0; c < kChunks; ++c)
        if (pass_offset(i, half, c) != tile_offset(2 * i + half, c)) return false;
  return true;
}
static_assert(pass_offsets_are_tile_offsets());

// Queues this warp's cp.async copy of a 32-key tile's keys [0, below) outside [tma_lo, tma_hi)
// (tile-relative; the TMA boxes bring those) into a ring stage (K rows, then V rows): `mine` is
// the cache row ((block * block_size + offset) * Nkv + kvh, below 2^31: the host's check) of the
// tile's key `lane`, or -1 for a key to zero (outside the visible range or in an unmapped block;
// the step masks it). Keys from `below` on are left to copy_keys_from(). Lane t copies chunk
// t % 16 of keys 2 i + t / 16: every row gathered first (one shuffle each, all in flight
// together), then the copies, at pass_offset()s.
__device__ __forceinline__ void load_tile(const __nv_bfloat16* k_cache,
                                          const __nv_bfloat16* v_cache, int32_t mine,
                                          __nv_bfloat16* stage, int below, int tma_lo, int tma_hi) {
  constexpr int kKeysPerPass = 32 / kChunks;  // a lane per 16-byte chunk of a row
  constexpr int kPasses = kTile / kKeysPerPass;
  static_assert(kKeysPerPass == 2, "pass_offset's keys: 2 i + half");
  if (tma_lo <= 0 && tma_hi >= min(below, kTile)) return;  // the boxes bring every key
  const int lane = threadIdx.x % 32;
  const int c = lane % kChunks, half = lane / kChunks;
  int32_t rows[kPasses];
#pragma unroll
  for (int i = 0; i < kPasses; ++i)
    rows[i] = __shfl_sync(0xffffffffu, mine, kKeysPerPass * i + half);
  const __nv_bfloat16* k = k_cache + c * 8;
  const __nv_bfloat16* v = v_cache + c * 8;
  const uint32_t base = smem_u32(stage);
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int key = kKeysPerPass * i + half;
    if (key >= below || (key >= tma_lo && key < tma_hi)) continue;
    const int32_t row = rows[i];
    const int64_t src = int64_t{max(row, 0)} * kDim;  // row 0 for a key to zero: no bytes read
    const int bytes = row >= 0 ? 16 : 0;
    const uint32_t dst = base + 2 * pass_offset(i, half, c);
    cp_async16(dst, k + src, bytes);
    cp_async16(dst + 2 * (kTile * kDim), v + src, bytes);
  }
}

// Queues the TMA boxes of a tile's keys [tma_lo, tma_hi) (tile-relative, whole boxes of r =
// maps.box_rows keys, each in one block) into a ring stage at shared address `stage` and arms the
// stage's mbarrier `bar` for their bytes (none: the phase completes at once). `entry` is lane j's
// block-table entry of the tile's key j (-1 outside the visible range, from `visible` on); a box's
// block is that of its first visible key. Lane 0 queues; every lane takes part in the shuffles.
__device__ __forceinline__ void load_boxes(const DecodeMaps& maps, int kvh, int t0, int32_t entry,
                                           int visible, int tma_lo, int tma_hi, int block_size,
                                           int block_shift, int64_t num_blocks, uint32_t stage,
                                           uint32_t bar) {
  const int lane = threadIdx.x % 32, r = maps.box_rows;
  if (lane == 0) wgmma::mbar_arrive_expect_tx(bar, (tma_hi - tma_lo) * kBoxRowBytes);
  for (int j = tma_lo; j < tma_hi; j += r) {
    const int32_t block = __shfl_sync(0xffffffffu, entry, max(j, visible));
    if (lane != 0) continue;
    const int key = t0 + j;
    const int offset = block_shift >= 0 ? key & (block_size - 1) : key % block_size;
    const int slot = block >= 0 && block < num_blocks ? block * block_size + offset : maps.slots;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t dst = stage + 2 * (h * kHalfElems + j * kHalf);
      wgmma::tma_load_3d(dst, &maps.k, bar, h * kHalf, kvh, slot);
      wgmma::tma_load_3d(dst + 2 * (kTile * kDim), &maps.v, bar, h * kHalf, kvh, slot);
    }
  }
}

// Copies (or zeroes, for `mine` = -1) the K and V rows of the tile's keys from `from` on
// (tile-relative) into a ring stage with plain loads and stores: lane j its key j's rows.
__device__ __forceinline__ void copy_keys_from(const __nv_bfloat16* k_cache,
                                               const __nv_bfloat16* v_cache, int32_t mine, int from,
                                               __nv_bfloat16* stage) {
  const int lane = threadIdx.x % 32;
  if (lane < from) return;
  const uint4* k = reinterpret_cast<const uint4*>(k_cache + int64_t{max(mine, 0)} * kDim);
  const uint4* v = reinterpret_cast<const uint4*>(v_cache + int64_t{max(mine, 0)} * kDim);
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    *reinterpret_cast<uint4*>(stage + tile_offset(lane, c)) = mine >= 0 ? __ldcg(k + c) : zero;
    *reinterpret_cast<uint4*>(stage + kTile * kDim + tile_offset(lane, c)) =
        mine >= 0 ? __ldcg(v + c) : zero;
  }
}

// Qᵀ as this lane's B fragments: column r = head kvh * G + r of `row` (zero from G on), rows
// (dims) 16 k + c, + 1 and + 8, + 9.
__device__ __forceinline__ void load_q(const __nv_bfloat16* q, int64_t row, int num_heads, int kvh,
                                       int group, uint32_t (&qb)[kDSteps][2]) {
  const int lane = threadIdx.x % 32, r = lane / 4, c = (lane % 4) * 2;
  const __nv_bfloat16* src = q + (row * num_heads + int64_t{kvh} * group + r) * kDim + c;
#pragma unroll
  for (int k = 0; k < kDSteps; ++k) {
    qb[k][0] = r < group ? *reinterpret_cast<const uint32_t*>(src + 16 * k) : 0u;
    qb[k][1] = r < group ? *reinterpret_cast<const uint32_t*>(src + 16 * k + 8) : 0u;
  }
}

// ldmatrix (.trans) of four 8 x 8 matrices at shared address `at` (bytes).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&a)[4], uint32_t at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(at));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&a)[4], uint32_t at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(at));
}

// tile_offset(16 i + row, 2 (4 h + q) + half) for an ldmatrix lane whose row of a 16-key tile is
// `row` = lane_part(q, row, half) + 16 i kHalf + h kHalfElems: the chunk's bit 3 (h) picks the
// half, so only q takes part in the swizzle and four lane parts serve a tile's 16 ldmatrix.
BEAM_HOST_DEVICE constexpr int lane_part(int q, int row, int half) {
  return row * kHalf + 8 * ((2 * q + half) ^ (row & 7));
}
// The offset lane_part() leaves out: 16-key row tile i, half h.
BEAM_HOST_DEVICE constexpr int part_base(int i, int h) {
  return 16 * i * kHalf + h * kHalfElems;
}
constexpr bool lane_parts_are_tile_offsets() {
  for (int row = 0; row < 16; ++row)
    for (int half = 0; half < 2; ++half)
      for (int i = 0; i < kTile / 16; ++i)
        for (int k = 0; k < kChunks / 2; ++k)
          if (lane_part(k % 4, row, half) + part_base(i, k / 4) !=
              tile_offset(16 * i + row, 2 * k + half))
            return false;
  return true;
}
static_assert(lane_parts_are_tile_offsets());
// The 8 x 8 bf16 matrix whose standard fragment this lane holds, transposed (its fragment).
__device__ __forceinline__ uint32_t transpose8x8(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}
// Two floats as bf16 (x in the low half).
__device__ __forceinline__ uint32_t pack_bf16(float x, float y) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&v);
}
// The rounding error of pack_bf16(x, y), as bf16.
__device__ __forceinline__ uint32_t pack_bf16_lo(float x, float y, uint32_t hi) {
  const __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&hi);
  return pack_bf16(__fsub_rn(x, __low2float(h)), __fsub_rn(y, __high2float(h)));
}

// One online-softmax step of a split over the tile at t0 in ring stage `stage` (swizzled K rows,
// then V rows) for keys [lo, hi], at least one of them in the tile.
__device__ __forceinline__ void tile_step(float scale, const uint32_t (&qb)[kDSteps][2],
                                          const __nv_bfloat16* stage, int t0, int lo, int hi,
                                          State& st) {
  const int lane = threadIdx.x % 32, r = lane / 4;
  static_assert(kDSteps == 8 && kDTiles == 8, "chunks 2 (4 h + q) + half: q < 4, h < 2");
  const uint32_t k_s = smem_u32(stage), v_s = k_s + 2 * (kTile * kDim);  // bytes
  // Sᵀ: s[i][0 / 1] = key 16 i + r, heads c / c + 1; s[i][2 / 3] = key 16 i + r + 8. This lane's
  // ldmatrix row: key 16 i + lane % 8 + 8 (lane / 8 % 2), chunk 2 k + lane / 16.
  uint32_t k_at[4];
#pragma unroll
  for (int q = 0; q < 4; ++q)
    k_at[q] = k_s + 2 * lane_part(q, lane % 8 + 8 * (lane / 8 % 2), lane / 16);
  float s[kKeyTiles][4];
#pragma unroll
  for (int i = 0; i < kKeyTiles; ++i) {
    s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int k = 0; k < kDSteps; ++k) {
      uint32_t a[4];
      ldmatrix_x4(a, k_at[k % 4] + 2 * part_base(i, k / 4));
      mma_bf16(s[i], a[0], a[1], a[2], a[3], qb[k][0], qb[k][1]);
    }
  }
  // s becomes p in place; per head h of the lane's two (column c + h).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kKeyTiles; ++i) {
#pragma unroll
      for (int e = h; e < 4; e += 2) {
        const int key = t0 + 16 * i + r + 8 * (e / 2);
        const float v = key >= lo && key <= hi ? __fmul_rn(s[i][e], scale) : -INFINITY;
        s[i][e] = v;
        mx = fmaxf(mx, v);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
    const float new_m = fmaxf(st.m[h], mx);               // finite: a key of the tile is visible
    const float alpha = expf(__fsub_rn(st.m[h], new_m));  // 0 on the first step (m = -inf)
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kKeyTiles; ++i) {
#pragma unroll
      for (int e = h; e < 4; e += 2) {
        const float v = s[i][e];
        s[i][e] = v == -INFINITY ? 0.f : expf(__fsub_rn(v, new_m));
        sum = __fadd_rn(sum, s[i][e]);
      }
    }
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 4));
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 8));
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 16));
    st.l[h] = __fmaf_rn(st.l[h], alpha, sum);
    st.m[h] = new_m;
#pragma unroll
    for (int i = 0; i < kDTiles; ++i) {
      st.o[i][h] = __fmul_rn(st.o[i][h], alpha);
      st.o[i][h + 2] = __fmul_rn(st.o[i][h + 2], alpha);
    }
  }
  // Oᵀ += Vᵀ · Pᵀ over the tile's two k16 steps of keys; key step i's Pᵀ fragment is the
  // transpose of Sᵀ row tile i's 8 x 8 blocks (keys r and r + 8).
  uint32_t v_at[4];
#pragma unroll
  for (int q = 0; q < 4; ++q)
    v_at[q] = v_s + 2 * lane_part(q, lane % 8 + 8 * (lane / 16), lane / 8 % 2);
#pragma unroll
  for (int i = 0; i < kKeyTiles; ++i) {
    const uint32_t hi0 = pack_bf16(s[i][0], s[i][1]), hi1 = pack_bf16(s[i][2], s[i][3]);
    const uint32_t lo0 = pack_bf16_lo(s[i][0], s[i][1], hi0);
    const uint32_t lo1 = pack_bf16_lo(s[i][2], s[i][3], hi1);
    const uint32_t bh0 = transpose8x8(hi0), bh1 = transpose8x8(hi1);
    const uint32_t bl0 = transpose8x8(lo0), bl1 = transpose8x8(lo1);
    // ldmatrix.trans rows: matrix m = lane / 8 holds keys 16 i + 8 (m / 2) + lane % 8, dims of
    // chunk 2 d + m % 2.
#pragma unroll
    for (int d = 0; d < kDTiles; ++d) {
      uint32_t a[4];
      ldmatrix_x4_trans(a, v_at[d % 4] + 2 * part_base(i, d / 4));
      mma_bf16(st.o[d], a[0], a[1], a[2], a[3], bh0, bh1);
      mma_bf16(st.o[d], a[0], a[1], a[2], a[3], bl0, bl1);
    }
  }
}

// Writes this lane's part of a split state to a fold slot ([head][kSlotStride], then (m, l)).
__device__ __forceinline__ void store_slot(float* slot, const State& st) {
  const int lane = threadIdx.x % 32, r = lane / 4, c = (lane % 4) * 2;
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      slot[(c + e % 2) * kSlotStride + 16 * i + r + 8 * (e / 2)] = st.o[i][e];
  }
  if (r == 0) {
    float* ml = slot + kMaxGroup * kSlotStride;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      ml[2 * (c + h)] = st.m[h];
      ml[2 * (c + h) + 1] = st.l[h];
    }
  }
}

}  // namespace beam::cuda::attention_detail::decode_mma
