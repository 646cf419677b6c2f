// Weight-streaming routed experts (kernels/cuda/moe_experts.cu's decode path, up to kMaxRows
// routed rows): every selected expert's weights cross HBM once, at the bandwidth floor, and the
// rows routed to an expert are computed from the same weight tile on tensor cores.
//
// Work: a unit is one m16 weight tile of one selected expert (gate_up: the gate and up rows of 8
// act columns; down: 16 output rows) for one pass of up to 8 of its routed rows, over the whole K.
// The units (group-major, then tile, then pass) are dealt in equal contiguous ranges to one
// persistent block per SM: every unit streams the same bytes, so the SMs finish together whatever
// the row counts (an expert with more than 8 rows re-reads its tile from L2 for each further
// pass, right after the first). The 16 warps of a block split K: warp w owns k32 steps
// [w * spw, (w + 1) * spw) of every unit and streams them through its own 8-step shared-memory
// ring with 16-byte cp.async (128 KB in flight per SM, ~4x the 32 KB that 4.3 TB/s x ~1 us of
// latency needs, so stalls at unit boundaries are absorbed), across unit boundaries. Each lane
// copies exactly the 16-byte chunks it later feeds to mma.sync m16n8k16 as A fragments (k order
// inside a k32 step permuted identically for A and B, so no barrier guards the ring); the B
// fragments (the pass's 8 activation rows over the warp's K slice) stay in registers; when the
// next unit changes group or pass, each is reloaded right after its last use in the current unit
// (an expert with more than 8 rows alternates passes per tile: no L2 round trip stalls a unit).
// Per unit the 16 warps' fp32 partials are summed in warp order in shared memory by one warp,
// which applies the epilogue: act = bf16(silu(bf16 g) * bf16 u) (gate_up) or y = bf16(sum)
// (down). Rounding points as kernels/cpu/moe_experts.cpp; fixed summation order and no atomics,
// so results are run-to-run identical. Each block groups the routed slots itself
// (stable bitonic sort of expert << 10 | slot), so the kernels need no grouping launch.
// Every launch is a programmatic dependent of the one before (the gate_up kernel of the router's:
// it is resident when the router finishes). The down kernel groups, fills its ring with down
// weights and prefetches two more tiles into L2 while the gate_up kernel drains, then waits for
// act.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/torch_exp.cuh"

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
constexpr int kPassRows = 8;  // routed rows per pass (the mma's n = 8)
static_assert(kMaxRows == 2 * kThreads && (1 << kSlotBits) == kMaxRows);

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
};

struct Shared {
  uint4 ring[kWarps][kStages][2][32];  // [warp][stage][row r / r + 8][lane]: A fragments
  float4 partial[2][kWarps][32];       // [unit parity][warp][lane]: per-warp accumulators
  Tables t;
};
constexpr size_t kSmemBytes = sizeof(Shared);  // ~164 KB: one block per SM

// 16 bytes global -> shared (L2 only, 256-byte L2 prefetch), or 16 zero bytes when !valid (src is
// then not read).
__device__ __forceinline__ void cp_async16_l2_256(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

// Hint: bring `bytes` (a multiple of 16, src 16-byte aligned) of global memory into L2.
__device__ __forceinline__ void prefetch_l2_bulk(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}

// c += a . b for one m16n8k16 bf16 tile, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

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
// CPU's bucket order), every group split into passes of kPassRows rows. An id outside [0, E)
// traps (the CPU op aborts). Block 0 also writes p.entry_of when given.
__device__ __forceinline__ void build_groups(const Args& p, Tables& t) {
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
    passes[c] = g < num_groups ? (t.begin[g + 1] - t.begin[g] + kPassRows - 1) / kPassRows : 0;
  }
  int total_passes = 0;
  const int passes_before = block_exclusive_sum(passes[0] + passes[1], t, &total_passes);
  if (2 * tid < num_groups) t.pass_prefix[2 * tid] = passes_before;
  if (2 * tid + 1 < num_groups) t.pass_prefix[2 * tid + 1] = passes_before + passes[0];
  if (tid == 0) t.pass_prefix[num_groups] = total_passes;
  __syncthreads();
}

// A unit's place: group g, m tile m, pass (of kPassRows rows) p; units are ordered (g, m, p).
struct Cursor {
  int g, m, p;
};

__device__ __forceinline__ int passes_of(const Tables& t, int g) {
  return t.pass_prefix[g + 1] - t.pass_prefix[g];
}

// The cursor of unit u (< m_tiles * total passes).
__device__ __forceinline__ Cursor cursor_at(const Tables& t, int64_t m_tiles, int64_t u) {
  int lo = 0, hi = t.num_groups - 1;  // the last g whose first unit is <= u
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (m_tiles * t.pass_prefix[mid] <= u) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int passes = passes_of(t, lo);
  const auto local = static_cast<int>(u - m_tiles * t.pass_prefix[lo]);
  return {lo, local / passes, local % passes};
}

__device__ __forceinline__ void advance(Cursor& c, const Tables& t, int64_t m_tiles) {
  if (++c.p < passes_of(t, c.g)) return;
  c.p = 0;
  if (++c.m < m_tiles) return;
  c.m = 0;
  ++c.g;
}

// The weight rows this lane copies for the tile of cursor c: row lane / 4 (a) and row lane / 4 + 8
// (b) of the m16 tile; nullptr for rows past the output columns (zero-filled).
template <Phase kPhase>
__device__ __forceinline__ void tile_rows(const Args& p, const Tables& t, const Cursor& c, int r,
                                          const bf16_t*& a, const bf16_t*& b) {
  const int64_t e = t.expert[c.g];
  if constexpr (kPhase == Phase::kGateUp) {
    const int64_t j = static_cast<int64_t>(c.m) * tile_cols<kPhase>() + r;  // < I (I % 8 == 0)
    a = p.w + (e * 2 * p.n + j) * p.k;
    b = p.w + (e * 2 * p.n + p.n + j) * p.k;
  } else {
    const int64_t h = static_cast<int64_t>(c.m) * tile_cols<kPhase>() + r;
    a = h < p.n ? p.w + (e * p.n + h) * p.k : nullptr;
    b = h + 8 < p.n ? p.w + (e * p.n + h + 8) * p.k : nullptr;
  }
}

// Rounds and stores the block's sums s of one unit (reducing warp; lane = 4 r + q): rows r and
// r + 8 of the tile, routed rows 2 q and 2 q + 1 of the pass (mma accumulator layout).
template <Phase kPhase>
__device__ __forceinline__ void store_unit(const Args& p, const Tables& t, const Cursor& c, int r,
                                           int q, const float4& s) {
  const int begin = t.begin[c.g], count = t.begin[c.g + 1] - begin;
  const float lo[2] = {s.x, s.y}, hi[2] = {s.z, s.w};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int within = c.p * kPassRows + 2 * q + i;
    if (within >= count) continue;
    bf16_t* row = p.out + static_cast<int64_t>(begin + within) * p.n;
    const int64_t col = static_cast<int64_t>(c.m) * tile_cols<kPhase>() + r;
    if constexpr (kPhase == Phase::kGateUp) {  // lo = gate, hi = up of act column col
      const float g = __bfloat162float(__float2bfloat16_rn(lo[i]));
      const float u = __bfloat162float(__float2bfloat16_rn(hi[i]));
      row[col] = __float2bfloat16_rn(__fmul_rn(torch_exp::siluf(g), u));
    } else {  // lo = output column col, hi = col + 8
      if (col < p.n) row[col] = __float2bfloat16_rn(lo[i]);
      if (col + 8 < p.n) row[col + 8] = __float2bfloat16_rn(hi[i]);
    }
  }
}

// The activation row that lane row r feeds as B fragments in the pass at cursor c (gate_up: x row
// of its token; down: act row of the grouped row); nullptr past the group's rows (zeros).
template <Phase kPhase>
__device__ __forceinline__ const bf16_t* fragment_row(const Args& p, const Tables& t,
                                                      const Cursor& c, int r) {
  const int begin = t.begin[c.g], count = t.begin[c.g + 1] - begin;
  const int within = c.p * kPassRows + r;
  if (within >= count) return nullptr;
  const int64_t src = kPhase == Phase::kGateUp ? t.row_token[begin + within] : begin + within;
  return p.a + src * p.k;
}

// B fragment of k32 step `step` of activation row `row` (fragment_row): 8 activations at
// columns step * 32 + 8 (lane % 4) + [0, 8), zeros past K or for a null row.
__device__ __forceinline__ uint4 load_fragment(const Args& p, const bf16_t* row, int64_t step,
                                               int q) {
  const int64_t col = step * kStepCols + 8 * q;
  return row != nullptr && col < p.k ? __ldcg(reinterpret_cast<const uint4*>(row + col))
                                     : make_uint4(0, 0, 0, 0);
}

// Down kernel, before it waits for act: the weight tiles of units u_begin + 1 ..
// u_begin + kL2PrefetchUnits (the ring holds the first unit and part of the second) into L2, one
// bulk prefetch per 16 output rows' K bytes, so the HBM stream runs on while the gate_up kernel
// drains (~21 MB over 132 SMs at Beam widths, well inside the 60 MB L2).
constexpr int kL2PrefetchUnits = 2;
__device__ __forceinline__ void prefetch_next_tiles(const Args& p, const Tables& t, Cursor c,
                                                    int64_t m_tiles, int64_t units_left) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid >= 16 * kL2PrefetchUnits || p.k == 0) return;  // (a zero-size prefetch is not defined)
  const int ahead = 1 + tid / 16, row = tid % 16;
  if (ahead >= units_left) return;
  for (int j = 0; j < ahead; ++j) advance(c, t, m_tiles);
  const int64_t h = static_cast<int64_t>(c.m) * tile_cols<Phase::kDown>() + row;
  if (h >= p.n) return;
  prefetch_l2_bulk(p.w + (static_cast<int64_t>(t.expert[c.g]) * p.n + h) * p.k,
                   static_cast<uint32_t>(p.k * static_cast<int64_t>(sizeof(bf16_t))));
}

// Grid: one block per SM (any count works). See the top of this file.
template <Phase kPhase>
__global__ void __launch_bounds__(kThreads, 1) expert_kernel(Args p) {
  extern __shared__ __align__(16) unsigned char moe_small_smem[];
  Shared& sh = *reinterpret_cast<Shared*>(moe_small_smem);
  const Tables& t = sh.t;
  // Both kernels let their dependents start only once every block has passed its wait (or
  // exited): gate_up waits first thing for the router's ids and weights (and x), so the down
  // kernel may read ids before its own wait; the combine reads entry_of (gate_up) and the
  // weights before its wait.
  if constexpr (kPhase == Phase::kGateUp) {
    pdl_wait();
    pdl_launch_dependents();
  }
  build_groups(p, sh.t);

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int r = lane / 4, q = lane % 4;
  const int64_t m_tiles = (p.n + tile_cols<kPhase>() - 1) / tile_cols<kPhase>();
  const int64_t units = m_tiles * t.pass_prefix[t.num_groups];
  const int64_t u_begin = units * blockIdx.x / gridDim.x;
  const int64_t u_end = units * (blockIdx.x + 1) / gridDim.x;
  if (u_begin >= u_end) return;  // uniform over the block
  const int64_t steps = (p.k + kStepCols - 1) / kStepCols;
  const int64_t spw = (steps + kWarps - 1) / kWarps;  // <= kMaxSteps (host-checked)
  const int64_t first_step = warp * spw;
  const int my_steps = static_cast<int>(first_step < steps ? min(spw, steps - first_step) : 0);

  // Producer: the warp's steps of units u_begin.. in order, kStages ahead of the consumer.
  uint4(*ring)[2][32] = sh.ring[warp];
  Cursor pc = cursor_at(t, m_tiles, u_begin);
  const Cursor start = pc;
  int64_t pu = u_begin;
  int pi = 0;
  const bf16_t *wa = nullptr, *wb = nullptr;
  if (my_steps > 0) tile_rows<kPhase>(p, t, pc, r, wa, wb);
  auto issue = [&](int slot) {
    if (my_steps > 0 && pu < u_end) {
      const int64_t col = (first_step + pi) * kStepCols + 8 * q;
      const bool in = col < p.k;
      cp_async16_l2_256(&ring[slot][0][lane], in && wa ? wa + col : p.w, in && wa);
      cp_async16_l2_256(&ring[slot][1][lane], in && wb ? wb + col : p.w, in && wb);
      if (++pi == my_steps) {
        pi = 0;
        if (++pu < u_end) {
          advance(pc, t, m_tiles);
          tile_rows<kPhase>(p, t, pc, r, wa, wb);
        }
      }
    }
    cp_async_commit();  // empty past the stream: one group per step keeps the wait count fixed
  };
#pragma unroll
  for (int s = 0; s < kStages; ++s) issue(s);

  if constexpr (kPhase == Phase::kDown) {
    prefetch_next_tiles(p, t, start, m_tiles, u_end - u_begin);
    pdl_wait();  // act comes from the gate_up kernel
    pdl_launch_dependents();
  }
  // B fragments: xf[i] = step first_step + i of this lane's activation row in the current pass.
  // When the next unit changes group or pass (group boundaries, and every unit of an expert with
  // more than kPassRows rows, whose passes alternate per tile), xf[i] is reloaded for it right
  // after this unit's mma consumed it, so the loads have a whole unit to land instead of stalling
  // the next unit's first mma (and with it the warp's ring) on an L2 round trip.
  Cursor cc = start;
  uint4 xf[kMaxSteps];
  {
    const bf16_t* row = fragment_row<kPhase>(p, t, cc, r);
#pragma unroll
    for (int i = 0; i < kMaxSteps; ++i) {
      if (i >= my_steps) break;
      xf[i] = load_fragment(p, row, first_step + i, q);
    }
  }
  int slot = 0;
  for (int64_t u = u_begin; u < u_end; ++u) {
    Cursor nc = cc;
    advance(nc, t, m_tiles);
    const bool reload = u + 1 < u_end && (nc.g != cc.g || nc.p != cc.p);  // uniform over the block
    const bf16_t* next_row = reload ? fragment_row<kPhase>(p, t, nc, r) : nullptr;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < kMaxSteps; ++i) {
      if (i >= my_steps) break;
      cp_async_wait<kStages - 1>();  // this lane's copies of step i have landed
      const uint4 a_lo = ring[slot][0][lane], a_hi = ring[slot][1][lane];
      mma_bf16(acc, a_lo.x, a_hi.x, a_lo.y, a_hi.y, xf[i].x, xf[i].y);
      mma_bf16(acc, a_lo.z, a_hi.z, a_lo.w, a_hi.w, xf[i].z, xf[i].w);
      if (reload) xf[i] = load_fragment(p, next_row, first_step + i, q);
      issue(slot);  // after the mma consumed the slot's registers
      slot = slot + 1 == kStages ? 0 : slot + 1;
    }
    const int parity = static_cast<int>((u - u_begin) & 1);
    sh.partial[parity][warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();  // double-buffered partials: one barrier per unit
    if (warp == static_cast<int>((u - u_begin) % kWarps)) {
      float4 s = sh.partial[parity][0][lane];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) {
        const float4 v = sh.partial[parity][w][lane];
        s.x += v.x;
        s.y += v.y;
        s.z += v.z;
        s.w += v.w;
      }
      store_unit<kPhase>(p, t, cc, r, q, s);
    }
    cc = nc;
  }
  cp_async_wait<0>();
}

}  // namespace beam::cuda::moe_small
