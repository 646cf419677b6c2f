// Small-batch routed experts' shared pieces (moe_small_batch.cuh): sizes, launch arguments, the
// per-block grouping of the routed slots by expert (stable bitonic sort in shared memory), and the
// unit order over (group, m tile, pass) that the weight-streaming kernels and their combine walk.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace beam::cuda::moe_small {

using bf16_t = __nv_bfloat16;

constexpr int kMaxRows = 1024;  // routed rows T * top_k (two slots per thread in the grouping)
constexpr int kSlotBits = 10;   // sort key = expert << kSlotBits | slot
constexpr int kWarps = 16;      // K slices of a unit
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 8;     // ring depth per warp, in k32 steps of 1 KB (16 rows x 64 bytes)
constexpr int kMaxSteps = 10;  // k32 steps per warp per unit (B fragments held in registers)
constexpr int kStepCols = 32;
constexpr int64_t kMaxK = int64_t{kWarps} * kMaxSteps * kStepCols;  // 5120: Beam's hidden width
constexpr int kHalfRows = 8;  // routed rows of one n8 half of a pass (the mma's n = 8)
// Routed rows from which the wide kernels (passes of 2 halves = 16 rows) run; below, the narrow
// ones (8-row passes, half the B-fragment registers): batch <= 32 at top-8 keeps its code.
constexpr int kWidePassMinRows = 257;
static_assert(kMaxRows == 2 * kThreads && (1 << kSlotBits) == kMaxRows);

// Whether the kernels of `rows` routed rows run 16-row passes (else 8-row passes).
constexpr bool wide_passes(int64_t rows) {
  return rows >= kWidePassMinRows;
}
// Routed rows up to which the (narrow) down kernel combines itself instead of a combine launch
// following it: batch <= 32 at top-8, the whole narrow range (the combine's launch and latency
// are what it saves; above, the wide kernels stream milliseconds of weights group-major).
constexpr int64_t kCombineMaxRows = 256;
static_assert(kCombineMaxRows < kWidePassMinRows, "the combining down kernel has 8-row passes");
constexpr bool down_combines(int64_t rows) {
  return rows <= kCombineMaxRows;
}

enum class Phase {
  kGateUp,  // act [rows, I] = SwiGLU(x[token] . gate_up[e]^T); tile = 8 gate + 8 up rows
  kDown,    // y [rows, H] = act . down[e]^T; tile = 16 output rows
};

// Output columns of one m16 tile.
template <Phase kPhase>
constexpr int tile_cols() {
  return kPhase == Phase::kGateUp ? 8 : 16;
}

struct Args {
  const int32_t* ids;  // [rows] expert of slot t * top_k + k
  int rows, top_k, num_experts;
  const bf16_t* a;    // gate_up: x [T, H]; down: act [rows, I] in grouped row order
  const bf16_t* w;    // gate_up: [E, 2 I, H] (gate rows, then up rows); down: [E, H, I]
  int64_t n;          // output columns: gate_up I (a multiple of 8), down H
  int64_t k;          // gate_up H, down I: multiples of 8, at most kMaxK
  bf16_t* out;        // gate_up: act [rows, I]; down: y [rows, H]; grouped rows
  int32_t* entry_of;  // [rows] grouped row of each slot, written by block 0 (nullptr: not)
  // The combining down kernel's (down_combines; nullptr for the other kernels):
  const float* weights;  // [rows] routing weight of each slot
  bf16_t* combined;      // out [T, H] = sum_k weights[t, k] * y[slot (t, k)]
  // [num_tickets = ceil(H / 16)] units arrived per column tile: the gate_up kernel zeroes them
  // (when set), the combining down kernel counts partial tiles in them.
  int32_t* tickets;
  int num_tickets;
};

// The routed slots grouped by expert, built by every block (build_groups).
struct Tables {
  int32_t key[kMaxRows];        // sorted keys; grouped row r holds slot key[r] & (kMaxRows - 1)
  int32_t row_token[kMaxRows];  // token of each grouped row
  int32_t expert[kMaxRows];     // expert of group g (ascending)
  int32_t begin[kMaxRows + 1];  // first grouped row of group g; begin[num_groups] = rows
  int32_t pass_prefix[kMaxRows + 1];  // passes of the groups before g; [num_groups] = total
  int32_t scan[kWarps + 1];           // block_exclusive_sum's warp totals
  int32_t num_groups;
  // Combining down kernel only (build_groups<true>):
  int32_t entry[kMaxRows];  // grouped row of each slot
  float weight[kMaxRows];   // routing weight of each slot
  int32_t split_done[2];    // partial tiles this block completed (-1: none)
};

// Exclusive prefix sum of v over the block's threads in thread order; *total = the sum of all.
__device__ __forceinline__ int block_exclusive_sum(int v, Tables& t, int* total) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  int incl = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += y;
  }
  if (lane == 31) t.scan[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const int s = lane < kWarps ? t.scan[lane] : 0;
    int si = s;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, si, d);
      if (lane >= d) si += y;
    }
    if (lane < kWarps) t.scan[lane] = si - s;
    if (lane == kWarps - 1) t.scan[kWarps] = si;
  }
  __syncthreads();
  const int result = t.scan[warp] + incl - v;
  *total = t.scan[kWarps];
  __syncthreads();  // t.scan is rewritten by the next call
  return result;
}

// Groups the p.rows slots by expert into t, slots of one expert in increasing slot order (the
// CPU's bucket order), every group split into passes of pass_rows rows. An id outside [0, E)
// traps (the CPU op aborts). Block 0 also writes p.entry_of when given; kCombine: t.entry and
// t.weight.
template <bool kCombine>
__device__ __forceinline__ void build_groups(const Args& p, int pass_rows, Tables& t) {
  const int tid = static_cast<int>(threadIdx.x);
  int n = 1;  // bitonic size: the next power of two >= rows
  while (n < p.rows) n <<= 1;
  for (int i = tid; i < n; i += kThreads) {
    int key = INT32_MAX;  // padding sorts last
    if (i < p.rows) {
      const int e = __ldcg(p.ids + i);
      if (e < 0 || e >= p.num_experts) __trap();
      key = (e << kSlotBits) | i;
    }
    t.key[i] = key;
  }
  __syncthreads();
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = tid; i < n; i += kThreads) {
        const int j = i ^ stride;
        if (j > i) {
          const int a = t.key[i], b = t.key[j];
          if ((a > b) == ((i & size) == 0)) {
            t.key[i] = b;
            t.key[j] = a;
          }
        }
      }
      __syncthreads();
    }
  }
  // Thread tid owns grouped rows 2 tid and 2 tid + 1; a row starts a group when its expert differs
  // from the previous row's.
  bool first[2];
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int r = 2 * tid + c;
    first[c] = r < p.rows && (r == 0 || (t.key[r - 1] >> kSlotBits) != (t.key[r] >> kSlotBits));
  }
  int num_groups = 0;
  const int before = block_exclusive_sum(int{first[0]} + int{first[1]}, t, &num_groups);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int r = 2 * tid + c;
    if (r >= p.rows) continue;
    const int key = t.key[r], slot = key & (kMaxRows - 1);
    t.row_token[r] = slot / p.top_k;
    if (p.entry_of != nullptr && blockIdx.x == 0) p.entry_of[slot] = r;
    if constexpr (kCombine) {
      t.entry[slot] = r;
      t.weight[slot] = __ldcg(p.weights + slot);
    }
    if (first[c]) {
      const int g = before + (c == 1 ? int{first[0]} : 0);
      t.expert[g] = key >> kSlotBits;
      t.begin[g] = r;
    }
  }
  if (tid == 0) {
    t.num_groups = num_groups;
    t.begin[num_groups] = p.rows;
  }
  __syncthreads();
  int passes[2];
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int g = 2 * tid + c;
    passes[c] = g < num_groups ? (t.begin[g + 1] - t.begin[g] + pass_rows - 1) / pass_rows : 0;
  }
  int total_passes = 0;
  const int passes_before = block_exclusive_sum(passes[0] + passes[1], t, &total_passes);
  if (2 * tid < num_groups) t.pass_prefix[2 * tid] = passes_before;
  if (2 * tid + 1 < num_groups) t.pass_prefix[2 * tid + 1] = passes_before + passes[0];
  if (tid == 0) t.pass_prefix[num_groups] = total_passes;
  __syncthreads();
}

// m16 tiles over the output columns. Units, tiles and steps fit int: m_tiles <= 640 (widths <=
// kMaxK), passes <= kMaxRows.
template <Phase kPhase>
__device__ __forceinline__ int m_tiles_of(const Args& p) {
  return static_cast<int>((p.n + tile_cols<kPhase>() - 1) / tile_cols<kPhase>());
}

// Block b's units are [block_unit(b), block_unit(b + 1)): equal contiguous shares of the
// m_tiles * total passes units.
__device__ __forceinline__ int block_unit(const Tables& t, int m_tiles, unsigned b) {
  return static_cast<int>(int64_t{m_tiles} * t.pass_prefix[t.num_groups] * b / gridDim.x);
}

// A unit's place: group g, m tile m, pass (of the kernel's pass rows) p. Units are ordered
// group-major (g, m, p) or, kTileMajor (the combining down kernel), tile-major (m, g, p).
struct Cursor {
  int g, m, p;
};

__device__ __forceinline__ int passes_of(const Tables& t, int g) {
  return t.pass_prefix[g + 1] - t.pass_prefix[g];
}

// Units (g, p) of one m tile: the passes of all groups.
__device__ __forceinline__ int tile_units(const Tables& t) {
  return t.pass_prefix[t.num_groups];
}

// The cursor of unit u (< m_tiles * total passes).
template <bool kTileMajor>
__device__ __forceinline__ Cursor cursor_at(const Tables& t, int m_tiles, int u) {
  // Group-major: the last g whose first unit m_tiles * pass_prefix[g] is <= u; tile-major: the last
  // g whose first pass pass_prefix[g] is <= u's pass within its tile.
  const int scale = kTileMajor ? 1 : m_tiles;
  const int key = kTileMajor ? u % tile_units(t) : u;
  int lo = 0, hi = t.num_groups - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (scale * t.pass_prefix[mid] <= key) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  if constexpr (kTileMajor) return {lo, u / tile_units(t), key - t.pass_prefix[lo]};
  const int passes = passes_of(t, lo);
  const int local = u - m_tiles * t.pass_prefix[lo];
  return {lo, local / passes, local % passes};
}

template <bool kTileMajor>
__device__ __forceinline__ void advance(Cursor& c, const Tables& t, int m_tiles) {
  if (++c.p < passes_of(t, c.g)) return;
  c.p = 0;
  if constexpr (kTileMajor) {
    if (++c.g < t.num_groups) return;
    c.g = 0;
    ++c.m;
  } else {
    if (++c.m < m_tiles) return;
    c.m = 0;
    ++c.g;
  }
}

}  // namespace beam::cuda::moe_small
