// CUDA DFlash2 block attention (kernels/api/dflash2.h): tensor cores over a paged context, split
// over a thread-block cluster when the blocks are few.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cluster.cuh"
#include "kernels/cuda/dflash2.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/mma_sync.cuh"

namespace beam::cuda {
namespace {

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

constexpr unsigned kFullMask = 0xffffffffu;

// ---- Block attention ----------------------------------------------------------------------------
//
// A CTA serves one (block b, KV head g) and up to kMaxMTiles tiles of 16 query rows, row
// m = t * G + j being block row t's query head g * G + j (G = Nq / Nkv); two warps per row tile,
// each taking 16 of every 32-key stage. The keys of block b are a list: its context positions
// [lo, p) (lo = max(0, p - window + 1), 0 without a window), then its B rows. A cluster of
// `splits` CTAs (gridDim.x) divides the list's 32-key tiles; each CTA merges its two warps'
// states in shared memory, and the cluster's states are combined through distributed shared
// memory, each CTA writing rows m with m % splits == its rank.
//
// Per key: the page-table lookup (held: the entry is in the table, not -1, and the slot records
// the position) gives its slot and the last block row that sees it (-1: none; absent keys load as
// zeros). Fragment layouts are PTX's for mma.sync m16n8k16 (lane l: gid = l / 4, c = 2 (l % 4)).
//   S = Q Kᵀ  rows as M, 8 keys per n tile (two n tiles), d as k; fp32 accumulation
//   softmax   masked (-inf), scaled by fp32(1 / sqrt(D)), online in fp32 per row
//   O += P V  P from S's accumulators as bf16 hi + lo (two mmas: P keeps ~16 significant bits),
//             V rows as k, d as n
// out = bf16(O / l) after the merges. Shared rows are padded by 16 bytes: fragment loads are
// conflict-free.
namespace attention {

constexpr int kTileKeys = 32;                     // keys per stage: 16 for each warp of a tile
constexpr int kMaxMTiles = 4;                     // 16-row query tiles per CTA
constexpr int kMaxThreads = kMaxMTiles * 2 * 32;  // two warps per query tile
constexpr int kLookupTiles = 16;                  // tiles whose keys are looked up at once
constexpr int kLookupKeys = kLookupTiles * kTileKeys;
constexpr int kMaxSplits = 8;  // CTAs of a cluster (the portable cluster size)

struct Params {
  const bf16_t* q;       // [S * B, Nq, D]
  const bf16_t* k;       // [S * B, Nkv, D]
  const bf16_t* v;       // [S * B, Nkv, D]
  bf16_t* out;           // [S * B, Nq, D]
  const bf16_t* keys;    // [num_slots, Nkv, D]
  const bf16_t* values;  // [num_slots, Nkv, D]
  const int64_t* slot_positions;
  const int32_t* pages;
  const int32_t* table_offsets;
  const int32_t* table_lengths;
  const int64_t* block_positions;
  int64_t num_slots, page_size, ring_pages, window;
  int block_size, num_q_heads, num_kv_heads, group;
  int mtiles;  // query row tiles per CTA
  float scale;
};

// Keys [first, first + count) of block b's list: slot[i] the context key's slot (-1: absent or
// a block row), last_row[i] the last block row that sees it (-1: none, beyond the list too).
__device__ void lookup_keys(const Params& a, int b, int64_t p, int64_t lo, int64_t num_ctx,
                            int64_t first, int count, int32_t* slot, int32_t* last_row) {
  const int32_t table_offset = a.table_offsets[b], table_length = a.table_lengths[b];
  const int64_t num_keys = num_ctx + a.block_size;
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    const int64_t key = first + i;
    int32_t s = -1, last = -1;
    if (key < num_ctx) {
      const int64_t pos = lo + key;
      int64_t entry = pos / a.page_size;
      if (a.ring_pages > 0) entry %= a.ring_pages;
      const int32_t page = entry < table_length ? a.pages[table_offset + entry] : -1;
      if (page >= 0) {
        const int64_t at = int64_t{page} * a.page_size + pos % a.page_size;
        if (at >= a.num_slots) {
          printf("dflash2_block_attention: page %d of block %d outside the pool of %lld slots\n",
                 page, b, static_cast<long long>(a.num_slots));
          __trap();
        }
        if (a.slot_positions[at] == pos) {
          s = static_cast<int32_t>(at);
          last = a.block_size - 1;  // q_pos - pos < window: rows t <= pos - p + window - 1
          if (a.window > 0)
            last = static_cast<int32_t>(std::min<int64_t>(last, pos - p + a.window - 1));
        }
      }
    } else if (key < num_keys) {
      last = a.block_size - 1;
    }
    slot[i] = s;
    last_row[i] = last;
  }
}

// Queues the cp.asyncs of the CTA's query rows [row0, row0 + row_count) into q_s [rows_pad][D + 8]
// (row m: block row m / G's query head g * G + m % G; padding rows zeros).
template <int D>
__device__ void load_queries(const Params& a, int b, int g, int row0, int row_count, int rows_pad,
                             bf16_t* q_s) {
  constexpr int kRow = D + 8, kChunks = D / 8;
  for (int i = threadIdx.x; i < rows_pad * kChunks; i += blockDim.x) {
    const int r = i / kChunks, chunk = i % kChunks, m = row0 + r;
    const bf16_t* src = a.q;
    int bytes = 0;
    if (r < row_count) {
      const int64_t row = int64_t{b} * a.block_size + m / a.group;
      src = a.q + (row * a.num_q_heads + g * a.group + m % a.group) * D + chunk * 8;
      bytes = 16;
    }
    cp_async16(q_s + r * kRow + chunk * 8, src, bytes);
  }
}

// Queues the cp.asyncs of key tile `tile` (K rows, then V rows) into `stage`; slots are the
// lookups of keys from lookup_first on.
template <int D>
__device__ void load_tile(const Params& a, int b, int g, int64_t num_ctx, int64_t tile,
                          int64_t lookup_first, const int32_t* slots, bf16_t* stage) {
  constexpr int kRow = D + 8, kChunks = D / 8;
  const int64_t num_keys = num_ctx + a.block_size;
  for (int i = threadIdx.x; i < kTileKeys * 2 * kChunks; i += blockDim.x) {
    const int chunk = i % kChunks, is_v = i / kChunks % 2, kk = i / (2 * kChunks);
    const int64_t key = tile * kTileKeys + kk;
    const bf16_t* src = a.k;
    int bytes = 0;  // absent keys and the tile's tail: zeros (their P is 0, and 0 * V must be 0)
    if (key < num_ctx) {
      const int32_t slot = slots[key - lookup_first];
      if (slot >= 0) {
        src = (is_v ? a.values : a.keys) + (int64_t{slot} * a.num_kv_heads + g) * D + chunk * 8;
        bytes = 16;
      }
    } else if (key < num_keys) {
      const int64_t row = int64_t{b} * a.block_size + (key - num_ctx);
      src = (is_v ? a.v : a.k) + (row * a.num_kv_heads + g) * D + chunk * 8;
      bytes = 16;
    }
    cp_async16(stage + (is_v * kTileKeys + kk) * kRow + chunk * 8, src, bytes);
  }
}

__device__ __forceinline__ uint32_t lds32(const bf16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

__device__ __forceinline__ uint32_t bits_of(__nv_bfloat162 h) {
  return *reinterpret_cast<const uint32_t*>(&h);
}

// (x, y) as two bf16 pairs, hi = bf16(x, y) and lo = bf16(x - hi, y - hi) (low half: x).
__device__ __forceinline__ void split_pair(float x, float y, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  const float2 hf = __bfloat1622float2(h);
  hi = bits_of(h);
  lo = bits_of(__floats2bfloat162_rn(x - hf.x, y - hf.y));
}

// One warp's 16 query rows (q: [16][D + 8]) against 16 keys of a stage (k, v: [16][D + 8];
// last_row: theirs): this lane's rows are gid (row_t[0], its block row) and gid + 8 (row_t[1]);
// o, m, l: its online softmax state (l: this lane's share of the row sum).
template <int D>
__device__ __forceinline__ void attend_keys(const bf16_t* q, const bf16_t* k, const bf16_t* v,
                                            const int32_t* last_row, const int (&row_t)[2],
                                            float scale, float (&o)[D / 8][4], float (&m)[2],
                                            float (&l)[2]) {
  constexpr int kRow = D + 8;
  const int lane = threadIdx.x % 32, gid = lane / 4, c = 2 * (lane % 4);
  bool seen[2][4];
  bool any = false;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      seen[nt][e] = row_t[e / 2] <= last_row[8 * nt + c + e % 2];
      any |= seen[nt][e];
    }
  if (!__any_sync(kFullMask, any)) return;  // no row sees these keys

  float s[2][4] = {};
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const bf16_t* qa = q + gid * kRow + 16 * ks + c;
    const uint32_t a0 = lds32(qa), a1 = lds32(qa + 8 * kRow);
    const uint32_t a2 = lds32(qa + 8), a3 = lds32(qa + 8 * kRow + 8);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const bf16_t* kb = k + (8 * nt + gid) * kRow + 16 * ks + c;
      mma_bf16(s[nt], a0, a1, a2, a3, lds32(kb), lds32(kb + 8));
    }
  }

  float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nt][e] = seen[nt][e] ? s[nt][e] * scale : -INFINITY;
      row_max[e / 2] = fmaxf(row_max[e / 2], s[nt][e]);
    }
  float shift[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // a row's 16 keys lie in the 4 lanes of a quad
    row_max[i] = fmaxf(row_max[i], __shfl_xor_sync(kFullMask, row_max[i], 1));
    row_max[i] = fmaxf(row_max[i], __shfl_xor_sync(kFullMask, row_max[i], 2));
    const float m_new = fmaxf(m[i], row_max[i]);
    shift[i] = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: p = 0, no NaN
    const float alpha = expf(m[i] - shift[i]);
    m[i] = m_new;
    l[i] *= alpha;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[j][2 * i] *= alpha;
      o[j][2 * i + 1] *= alpha;
    }
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nt][e] = expf(s[nt][e] - shift[e / 2]);
      l[e / 2] += s[nt][e];
    }

  // P's A fragment (keys as k): S's n tile 0 holds keys c, c + 1; n tile 1 keys c + 8, c + 9.
  uint32_t hi[4], lo[4];
  split_pair(s[0][0], s[0][1], hi[0], lo[0]);
  split_pair(s[0][2], s[0][3], hi[1], lo[1]);
  split_pair(s[1][0], s[1][1], hi[2], lo[2]);
  split_pair(s[1][2], s[1][3], hi[3], lo[3]);
  const uint16_t* vb = reinterpret_cast<const uint16_t*>(v) + c * kRow + gid;
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    const uint16_t* col = vb + 8 * j;  // V[c][8j + gid], the B fragment's k rows c, c+1, c+8, c+9
    const uint32_t b0 = uint32_t{col[0]} | uint32_t{col[kRow]} << 16;
    const uint32_t b1 = uint32_t{col[8 * kRow]} | uint32_t{col[9 * kRow]} << 16;
    mma_bf16(o[j], hi[0], hi[1], hi[2], hi[3], b0, b1);
    mma_bf16(o[j], lo[0], lo[1], lo[2], lo[3], b0, b1);
  }
}

// A float of split `split`'s shared memory at this CTA's address `local`.
__device__ __forceinline__ float load_split(const float* local, int split, int num_splits) {
  if (num_splits == 1) return *local;
  return __uint_as_float(cluster::load_u32(cluster::map(local, static_cast<uint32_t>(split))));
}

// The CTA's state of its rows (o_s [rows_pad][D + 4], m_s, l_s [rows_pad]) from its warps'
// after the key loop: half 1 of each row tile stores its state, half 0 merges its own into it.
template <int D>
__device__ __forceinline__ void merge_halves(bool active, int half, int mtile,
                                             const float (&o)[D / 8][4], const float (&m)[2],
                                             float (&l)[2], float* o_s, float* m_s, float* l_s) {
  constexpr int kORow = D + 4;
  const int lane = threadIdx.x % 32, gid = lane / 4, c = 2 * (lane % 4);
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // the rows' sums over their quads
    l[i] += __shfl_xor_sync(kFullMask, l[i], 1);
    l[i] += __shfl_xor_sync(kFullMask, l[i], 2);
  }
  if (active && half == 1) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = mtile * 16 + gid + 8 * i;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        o_s[r * kORow + 8 * j + c] = o[j][2 * i];
        o_s[r * kORow + 8 * j + c + 1] = o[j][2 * i + 1];
      }
      if (lane % 4 == 0) {
        m_s[r] = m[i];
        l_s[r] = l[i];
      }
    }
  }
  __syncthreads();
  if (!active || half != 0) return;
  float other_m[2], other_l[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    other_m[i] = m_s[mtile * 16 + gid + 8 * i];
    other_l[i] = l_s[mtile * 16 + gid + 8 * i];
  }
  __syncwarp();  // every lane of a quad read its rows' (m, l) before lane 0 rewrites them
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = mtile * 16 + gid + 8 * i;
    const float m_new = fmaxf(m[i], other_m[i]);
    const float w_self = m_new == -INFINITY ? 0.0f : expf(m[i] - m_new);
    const float w_other = m_new == -INFINITY ? 0.0f : expf(other_m[i] - m_new);
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& dst = o_s[r * kORow + 8 * j + c + e];
        dst = o[j][2 * i + e] * w_self + dst * w_other;
      }
    if (lane % 4 == 0) {
      m_s[r] = m_new;
      l_s[r] = l[i] * w_self + other_l[i] * w_other;
    }
  }
}

// Rows r == rank (mod splits) of the CTA's chunk: the splits' states combined, a warp per row
// with lane s holding split s's weight; out = bf16(O / l).
template <int D>
__device__ __forceinline__ void write_rows(const Params& a, int b, int g, int row0, int row_count,
                                           const float* o_s, const float* m_s, const float* l_s) {
  constexpr int kORow = D + 4;
  const int split = static_cast<int>(blockIdx.x), num_splits = static_cast<int>(gridDim.x);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int num_warps = static_cast<int>(blockDim.x) / 32, G = a.group;
  for (int r = split + num_splits * warp; r < row_count; r += num_splits * num_warps) {
    const float m_i = lane < num_splits ? load_split(m_s + r, lane, num_splits) : -INFINITY;
    float m_max = m_i;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
      m_max = fmaxf(m_max, __shfl_xor_sync(kFullMask, m_max, off));
    const float w = m_i == -INFINITY ? 0.0f : expf(m_i - m_max);
    const float l_i = lane < num_splits ? load_split(l_s + r, lane, num_splits) : 0.0f;
    const float total = warp_sum(w * l_i);  // > 0: every row sees its block's rows
    const int m = row0 + r;
    bf16_t* dst = a.out + ((int64_t{b} * a.block_size + m / G) * a.num_q_heads + g * G + m % G) * D;
    for (int d = lane; d < D; d += 32) {  // D % 32 == 0: the shuffles see every lane
      float acc = 0.0f;
      for (int s = 0; s < num_splits; ++s)
        acc += __shfl_sync(kFullMask, w, s) * load_split(o_s + r * kORow + d, s, num_splits);
      dst[d] = to_bf16_rn(__fdiv_rn(acc, total));
    }
  }
}

// Grid (splits, row chunks * Nkv, S), clusters of (splits, 1, 1); 64 * mtiles threads. Dynamic
// shared memory: Q [rows_pad][D + 8] bf16, then two stages of K and V [32][D + 8] bf16, which
// after the key loop hold the state: O [rows_pad][D + 4], m [rows_pad], l [rows_pad] fp32.
template <int D>
__global__ void __launch_bounds__(kMaxThreads) block_attention_kernel(const Params a) {
  constexpr int kRow = D + 8, kORow = D + 4;
  constexpr int kStageElems = 2 * kTileKeys * kRow;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int32_t lookup_slot[kLookupKeys], lookup_last[kLookupKeys];
  const int B = a.block_size, G = a.group, rows = B * G;
  const int split = static_cast<int>(blockIdx.x), num_splits = static_cast<int>(gridDim.x);
  const int g = static_cast<int>(blockIdx.y) % a.num_kv_heads;
  const int row0 = static_cast<int>(blockIdx.y) / a.num_kv_heads * a.mtiles * 16;
  const int b = static_cast<int>(blockIdx.z);
  const int rows_pad = a.mtiles * 16, row_count = std::min(rows_pad, rows - row0);
  const int warp = threadIdx.x / 32, gid = threadIdx.x % 32 / 4;
  const int mtile = warp / 2, half = warp % 2;  // half: keys [16 half, 16 half + 16) of a stage
  bf16_t* q_s = reinterpret_cast<bf16_t*>(smem);
  bf16_t* stages = q_s + rows_pad * kRow;

  load_queries<D>(a, b, g, row0, row_count, rows_pad, q_s);
  cp_async_commit();

  const int64_t p = a.block_positions[b];
  const int64_t lo = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0;
  const int64_t num_ctx = std::max<int64_t>(0, p - lo);
  const int64_t num_tiles = ceil_div(num_ctx + B, kTileKeys);
  const int64_t per_split = ceil_div(num_tiles, num_splits);
  const int64_t tile_begin = std::min(num_tiles, split * per_split);
  const int64_t tile_end = std::min(num_tiles, tile_begin + per_split);

  const bool active = mtile * 16 < row_count;  // warp-uniform
  int row_t[2];  // this lane's rows' block rows; padding rows see nothing
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int m = row0 + mtile * 16 + gid + 8 * i;
    row_t[i] = m < rows ? m / G : INT_MAX;
  }
  float o[D / 8][4] = {};
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  const bf16_t* q_warp = q_s + mtile * 16 * kRow;

  for (int64_t first = tile_begin; first < tile_end; first += kLookupTiles) {
    const int64_t last = std::min(tile_end, first + kLookupTiles);
    __syncthreads();  // the previous lookups are no longer read
    lookup_keys(a, b, p, lo, num_ctx, first * kTileKeys,
                static_cast<int>((last - first) * kTileKeys), lookup_slot, lookup_last);
    __syncthreads();
    load_tile<D>(a, b, g, num_ctx, first, first * kTileKeys, lookup_slot, stages);
    cp_async_commit();
    for (int64_t tile = first; tile < last; ++tile) {
      const int stage = static_cast<int>(tile - first) % 2;
      if (tile + 1 < last)
        load_tile<D>(a, b, g, num_ctx, tile + 1, first * kTileKeys, lookup_slot,
                     stages + (stage ^ 1) * kStageElems);
      cp_async_commit();
      cp_async_wait<1>();  // this tile (and Q) landed
      __syncthreads();
      if (active) {
        const bf16_t* ks = stages + stage * kStageElems + half * 16 * kRow;
        attend_keys<D>(q_warp, ks, ks + kTileKeys * kRow,
                       lookup_last + (tile - first) * kTileKeys + half * 16, row_t, a.scale, o,
                       m_run, l_run);
      }
      __syncthreads();  // the stage is free for the tile after next
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  float* o_s = reinterpret_cast<float*>(stages);
  float* m_s = o_s + rows_pad * kORow;
  float* l_s = m_s + rows_pad;
  merge_halves<D>(active, half, mtile, o, m_run, l_run, o_s, m_s, l_s);
  if (num_splits > 1) {
    cluster::sync();  // every split's state is written
  } else {
    __syncthreads();
  }
  write_rows<D>(a, b, g, row0, row_count, o_s, m_s, l_s);
  if (num_splits > 1) cluster::sync();  // no CTA leaves while another reads its state
}

template <int D>
void launch(CudaContext& ctx, const Params& p, int64_t num_blocks, int num_chunks) {
  const int rows_pad = p.mtiles * 16;
  const size_t q_bytes = size_t(rows_pad) * (D + 8) * sizeof(bf16_t);
  const size_t stage_bytes = size_t{2} * 2 * kTileKeys * (D + 8) * sizeof(bf16_t);
  const size_t state_bytes = size_t(rows_pad) * (D + 6) * sizeof(float);
  const size_t smem = q_bytes + std::max(stage_bytes, state_bytes);
  // Few (block, head) pairs: split their keys over a cluster so that the GPU fills.
  const int64_t ctas = num_blocks * p.num_kv_heads * num_chunks;
  const int64_t sms = ctx.props.multiProcessorCount;
  const int splits =
      ctas >= sms ? 1 : static_cast<int>(std::min<int64_t>(kMaxSplits, ceil_div(sms, ctas)));
  auto* kernel = block_attention_kernel<D>;
  CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(num_chunks * p.num_kv_heads),
                  static_cast<unsigned>(num_blocks));
  launch_kernel_in_clusters(ctx, kernel, grid, dim3(static_cast<unsigned>(splits), 1, 1),
                            dim3(static_cast<unsigned>(64 * p.mtiles)), smem, After::kComplete, p);
}

}  // namespace attention

}  // namespace

void dflash2_block_attention(CudaContext& ctx, const TensorView& q, const TensorView& k,
                             const TensorView& v, const DFlash2ContextView& context,
                             const TensorView& out) {
  constexpr const char* op = "dflash2_block_attention (CUDA)";
  const int64_t S = context.block_positions.dim(0), N = q.dim(0);
  if (S == 0 || N == 0) return;
  const int64_t B = N / S, Nq = q.dim(1), Nkv = k.dim(1), D = q.dim(2);
  const int64_t num_slots = context.keys.dim(0);
  BEAM_CHECK(D == 32 || D == 64 || D == 128 || D == 256)
      << op << ": head_dim " << D << " (the kernel serves 32, 64, 128 and 256)";
  BEAM_CHECK(Nkv > 0 && Nq % Nkv == 0) << op << ": " << Nq << " q heads, " << Nkv << " KV heads";
  BEAM_CHECK(all_aligned16(q.data, k.data, v.data, context.keys.data, context.values.data))
      << op << ": q, k, v, keys and values must be 16-byte aligned";
  BEAM_CHECK(num_slots <= INT32_MAX && S <= 65535 && B * (Nq / Nkv) <= INT32_MAX / 2)
      << op << ": " << num_slots << " slots, " << S << " blocks of " << B << " rows";
  BEAM_CHECK(context.page_size > 0) << op << ": page size " << context.page_size;
  attention::Params p{};
  p.q = static_cast<const bf16_t*>(q.data);
  p.k = static_cast<const bf16_t*>(k.data);
  p.v = static_cast<const bf16_t*>(v.data);
  p.out = static_cast<bf16_t*>(out.data);
  p.keys = static_cast<const bf16_t*>(context.keys.data);
  p.values = static_cast<const bf16_t*>(context.values.data);
  p.slot_positions = static_cast<const int64_t*>(context.slot_positions.data);
  p.pages = static_cast<const int32_t*>(context.pages.data);
  p.table_offsets = static_cast<const int32_t*>(context.table_offsets.data);
  p.table_lengths = static_cast<const int32_t*>(context.table_lengths.data);
  p.block_positions = static_cast<const int64_t*>(context.block_positions.data);
  p.num_slots = num_slots;
  p.page_size = context.page_size;
  p.ring_pages = context.ring_pages;
  p.window = context.window;
  p.block_size = static_cast<int>(B);
  p.num_q_heads = static_cast<int>(Nq);
  p.num_kv_heads = static_cast<int>(Nkv);
  p.group = static_cast<int>(Nq / Nkv);
  p.scale = 1.0f / std::sqrt(static_cast<float>(D));  // as kernels/cpu/dflash2.cpp computes it
  // Query rows B * G in tiles of 16, dealt to chunks of at most kMaxMTiles tiles (one CTA each).
  const int64_t mtiles = ceil_div(B * p.group, 16);
  const int64_t chunks = ceil_div(mtiles, attention::kMaxMTiles);
  p.mtiles = static_cast<int>(ceil_div(mtiles, chunks));
  BEAM_CHECK(chunks * Nkv <= 65535) << op << ": " << Nq << " q heads of " << B << " rows";
  switch (D) {
    case 32:
      return attention::launch<32>(ctx, p, S, static_cast<int>(chunks));
    case 64:
      return attention::launch<64>(ctx, p, S, static_cast<int>(chunks));
    case 128:
      return attention::launch<128>(ctx, p, S, static_cast<int>(chunks));
    case 256:
      return attention::launch<256>(ctx, p, S, static_cast<int>(chunks));
  }
}
}  // namespace beam::cuda
