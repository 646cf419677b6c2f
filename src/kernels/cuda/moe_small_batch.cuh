// Weight-streaming routed experts (kernels/cuda/moe_experts.cu's decode path, up to kMaxRows
// routed rows): every selected expert's weights cross HBM once, at the bandwidth floor, and the
// rows routed to an expert are computed from the same weight tile on tensor cores.
//
// Work: a unit is one m16 weight tile of one selected expert (gate_up: the gate and up rows of 8
// act columns; down: 16 output rows) for one pass of its routed rows, over the whole K. The
// weights are packed (moe_packed.cuh: widths multiples of 64), so each two k32 steps of a tile are
// one contiguous 2 KB. A pass is 8 rows (narrow kernels: one mma n8 half) or, above
// kWidePassMinRows routed rows, 16 (wide: two n8 halves on the same A fragments, the second only
// when the pass has more than 8 rows), so at batch 128 (~4 rows per expert, ~16 on the hottest with
// uniform routing) nearly every expert takes one pass, whose units stream their tiles from HBM
// once, as at batch 32. The units (group-major, then tile, then pass) are dealt in contiguous
// ranges of equal cost to one persistent block per SM: every unit streams the same bytes, so with
// one pass per expert the SMs would finish together whatever the row counts if they streamed at
// one speed; an expert with more rows than a pass re-reads its tile from L2 for each further pass,
// right after the first, and its units (which reload their activation fragments) count 7/4
// (gate_up) or 10/4 (down) of the others (unit_cost), so skewed routing does not leave the SMs
// holding them behind. The wide kernels deal only the first 90% of the cost so and let the blocks
// draw the rest at run time in chunks (make_pool), which evens out the SMs' speeds. The 16 warps
// of a block split K: warp w owns a sixteenth of the k32 steps of every unit (WarpSteps:
// interleaved over the warps in gate_up, a contiguous slice in down) and streams them through its
// own 8-step shared-memory ring with 16-byte cp.async, a k32 step's 16 x 64 bytes per warp
// instruction pair (128 KB in flight per SM, ~4x the 32 KB that 4.3 TB/s x ~1 us of latency needs,
// so stalls at unit boundaries are absorbed), across unit boundaries. Each lane copies exactly the
// 16-byte chunks it later feeds to mma.sync m16n8k16 as A fragments (k order inside a k32 step
// permuted identically for A and B, so no barrier guards the ring); the B fragments (the pass's 8
// or 16 activation rows over the warp's k32 steps) stay in registers; when the next unit changes
// group or pass, each is reloaded right after its last use in the current unit (an expert with more
// rows than a pass alternates passes per tile: no L2 round trip stalls a unit). Per unit and n8
// half the 16 warps' fp32 partials are summed in warp order in shared memory by one warp (the two
// halves by two different warps), which applies the epilogue: act = bf16(silu(bf16 g) * bf16 u)
// (gate_up) or y = bf16(sum) (down). Rounding points as kernels/cpu/moe_experts.cpp; fixed
// summation order and no atomic sums, so results are run-to-run identical, and an output depends
// neither on the pass width nor on the other rows of its pass (each mma output column is its own
// dot product). Each block groups the routed slots itself (a stable bitonic sort of expert << 10 |
// slot, << 11 past 1024 slots; up to 32 slots one warp ranks them), so the kernels need no grouping
// launch. Every launch is a programmatic dependent of the one before (the gate_up kernel of the
// router's: it is resident when the router finishes). The down kernel groups, fills its ring with
// down weights and prefetches two more tiles into L2 while the gate_up kernel drains, then waits
// for act.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "kernels/api/moe.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/mma_sync.cuh"
#include "kernels/cuda/moe_lora.cuh"
#include "kernels/cuda/moe_packed.cuh"
#include "kernels/cuda/torch_exp.cuh"

namespace beam::cuda::moe_small {

using bf16_t = __nv_bfloat16;

// Routed rows T * top_k: the kernels' tables hold kCompactRows (two slots per thread in the
// grouping, ~176 KB of shared memory) or kMaxRows (four, ~192 KB); the compact ones run up to
// their size (H200 run 167: the larger tables, then 200 KB with a 228 KB carveout, cost 3% there).
constexpr int kCompactRows = 1024;
constexpr int kMaxRows = 2048;
constexpr int kWarps = 16;      // K shares of a unit (WarpSteps)
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 8;     // ring depth per warp, in k32 steps of 1 KB (16 rows x 64 bytes)
constexpr int kMaxSteps = 10;  // k32 steps per warp per unit (B fragments held in registers)
// The down kernels' B-fragment capacity when K (the expert width) needs no more steps per warp
// (Beam's 2560: 5): the wide down kernel then holds half the fragments and does not spill.
constexpr int kShortSteps = 5;
constexpr int kStepCols = 32;  // a k32 step: two mma k16 steps; half a packed step's columns
static_assert(moe_packed::kTileRows == 16 && moe_packed::kStepCols == 2 * kStepCols,
              "a unit is one mma m16 tile; a packed step holds two k32 steps");
constexpr int64_t kMaxK = int64_t{kWarps} * kMaxSteps * kStepCols;  // 5120: Beam's hidden width
constexpr int kHalfRows = 8;  // routed rows of one n8 half of a pass (the mma's n = 8)
// Routed rows from which the wide kernels (passes of 2 halves = 16 rows) run; below, the narrow
// ones (8-row passes, half the B-fragment registers): batch <= 32 at top-8 keeps its code.
constexpr int kWidePassMinRows = 257;

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
  const bf16_t* w;    // packed (moe_packed.cuh) gate_up [E, 2 I, H] or down [E, H, I]
  int64_t n;          // output columns: gate_up I, down H (multiples of 64)
  int64_t k;          // gate_up H, down I: multiples of 64, at most kMaxK
  bf16_t* out;        // gate_up: act [rows, I]; down: y [rows, H]; grouped rows
  int32_t* entry_of;  // [rows] grouped row of each slot, written by block 0 (nullptr: not)
  int32_t* pool;      // the wide kernels' pool counter, 0 between launches (nullptr: no pool)
};

// The kLora kernels' parameter: Args with per-request LoRA terms (gate_up parts gate, up). The
// kernels without LoRA keep plain Args, so their code is what it was before LoRA.
struct LoraArgs : Args {
  moe_lora::SlotTerms lora;
};
template <bool kLora>
using KernelArgs = std::conditional_t<kLora, LoraArgs, Args>;

// The routed slots (up to kRows) grouped by expert, built by every block (build_groups from
// their sort keys, expert << kSlotBits | slot, in a scratch that the ring reuses).
template <int kRows>
struct Tables {
  static constexpr int kSlotBits = std::countr_zero(unsigned{kRows});
  static constexpr int kRowsPerThread = kRows / kThreads;    // grouped rows (and groups) each
  static_assert((1 << kSlotBits) == kRows && kRows % kThreads == 0);
  int32_t row_token[kRows];  // token of each grouped row
  int32_t expert[kRows];     // expert of group g (ascending)
  int32_t begin[kRows + 1];  // first grouped row of group g; begin[num_groups] = rows with an
                             // expert (kNoExpert slots sort after them and have no group)
  // Of the groups before g (g = num_groups: all): their passes (low 16 bits) and their dealing
  // cost per m tile (unit_cost; the bits above). passes_before / cost_before read them.
  int32_t prefix[kRows + 1];
  int32_t scan[kWarps + 1];  // block_exclusive_sum's warp totals
  int32_t num_groups;
  // The pool (make_pool): units [pool_first, units) in chunks of chunk_units (the last one takes
  // the remainder); next_chunk[r & 1]: the chunk of the block's range r (>= 1), -1 for none.
  int32_t units, pool_first, chunk_units, chunks;
  int32_t next_chunk[2];
};

template <int kRows>
struct Shared {
  union {
    uint4 ring[kWarps][kStages][2][32];  // [warp][stage][row r / r + 8][lane]: A fragments
    // build_groups' sort keys; sorted, grouped row r holds slot key[r] & (kRows - 1). Unused once
    // the tables are built, before the ring's first copy: sharing its bytes keeps the 2,048-slot
    // kernels' shared memory under 195 KB, so the SM keeps 60 KB of L1 (196 KB carveout).
    int32_t key[kRows];
  };
  float4 partial[2][2][kWarps][32];  // [unit parity][half][warp][lane]: per-warp accumulators
  Tables<kRows> t;
};
// Dynamic shared memory of the kernels with kRows-slot tables (~176 / ~192 KB: one block per SM).
template <int kRows>
constexpr size_t smem_bytes() {
  return sizeof(Shared<kRows>);
}
// A block's shared memory in the SM's 196 KB carveout (1 KB of it is the system's).
static_assert(smem_bytes<kMaxRows>() <= 195 * 1024, "the experts' kernels keep 60 KB of L1");

// 16 bytes global -> shared, through L2 only, L2 fetching the whole 128-byte line: a k32 step
// reads half of each 128-byte row of a packed step, the next step the other half (H200 run 101:
// without the hint the experts took 3-7% longer; the row-major layout's .L2::256B made packed
// weights slower, run 97).
__device__ __forceinline__ void cp_async16_cg(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src)
               : "memory");
}

// Hint: bring `bytes` (a multiple of 16, src 16-byte aligned) of global memory into L2.
__device__ __forceinline__ void prefetch_l2_bulk(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}

// Inclusive prefix sum of v over the warp's lanes (the whole warp calls).
__device__ __forceinline__ int warp_inclusive_sum(int v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += y;
  }
  return v;
}

// Exclusive prefix sum of v over the block's threads in thread order; *total = the sum of all.
template <class Tab>
__device__ __forceinline__ int block_exclusive_sum(int v, Tab& t, int* total) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int incl = warp_inclusive_sum(v, lane);
  if (lane == 31) t.scan[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const int s = lane < kWarps ? t.scan[lane] : 0;
    const int si = warp_inclusive_sum(s, lane);
    if (lane < kWarps) t.scan[lane] = si - s;
    if (lane == kWarps - 1) t.scan[kWarps] = si;
  }
  __syncthreads();
  const int result = t.scan[warp] + incl - v;
  *total = t.scan[kWarps];
  __syncthreads();  // t.scan is rewritten by the next call
  return result;
}

// Dealing cost of one unit of a group with `passes` passes. A group with more than one pass
// alternates its passes per tile, so each of its units reloads its B fragments (an L2 round trip
// of the pass's activation rows per unit) and, after the first pass, reads its tile from L2: such
// a unit keeps its SM ~1.46x as long as a single-pass one (H200 run 77, routing with a 46-row
// expert at T = 128: the SM dealt only such units was active 1.41x the average; run 83 halved the
// reloads by ordering such units in two-tile blocks and gained < 1%, so the reloads are not the
// whole of it). The blocks take equal shares of the summed cost, not of the unit count. gate_up:
// 7 : 4, between the 3 : 2 and 2 : 1 that runs 78-79 measured (the first better on that routing,
// the second in bench step); down, whose 80 KB units make the extra relatively larger (run 84:
// busiest SM 1.16x the average at 7 : 4 against gate_up's 1.09x): 10 : 4 (run 85: skewed T = 128
// 4.48-4.62 → 4.39-4.40 ms, 8 : 4 4.48-4.49; T = 96 and bench step within 0.5%).
constexpr int kUnitCost = 4;
constexpr int kGateUpReloadUnitCost = 7;
constexpr int kDownReloadUnitCost = 10;
static_assert(kMaxRows < (1 << 16) &&
                  std::max(kGateUpReloadUnitCost, kDownReloadUnitCost) * kMaxRows < (1 << 15),
              "build_groups packs a group's passes and cost into one int");
template <Phase kPhase>
__device__ __forceinline__ int unit_cost(int passes) {
  if (passes == 1) return kUnitCost;
  return kPhase == Phase::kGateUp ? kGateUpReloadUnitCost : kDownReloadUnitCost;
}

// A group's passes (low 16 bits) and their dealing cost per m tile (the bits above), as
// Tables::prefix sums them.
template <Phase kPhase>
__device__ __forceinline__ int packed_passes(int rows, int pass_rows) {
  const int passes = (rows + pass_rows - 1) / pass_rows;
  return passes | (passes * unit_cost<kPhase>(passes)) << 16;
}

// The sort key of a kNoExpert slot i is kNoExpertKey | i: above every expert's keys (experts
// below 2^(30 - 11), moe_small_batch_supports, at up to 11 slot bits) and below the bitonic
// padding's INT32_MAX.
constexpr int kNoExpertKey = 1 << 30;

// Slot i's sort key, expert << Tab::kSlotBits | i (i < p.rows), or kNoExpertKey | i. Any other id
// outside [0, E) traps (the CPU op aborts).
template <class Tab>
__device__ __forceinline__ int slot_key(const Args& p, int i) {
  const int e = __ldcg(p.ids + i);
  if (e == kNoExpert) return kNoExpertKey | i;
  if (e < 0 || e >= p.num_experts) __trap();
  return (e << Tab::kSlotBits) | i;
}

// Whether a sorted key (of a slot, not the bitonic padding) has an expert.
__device__ __forceinline__ bool has_expert(int key) {
  return key < kNoExpertKey;
}

// Grouped row r holds the slot of sorted key `key`: its token, and (block 0) entry_of, -1 for a
// kNoExpert slot (the combine skips it).
template <class Tab>
__device__ __forceinline__ void place_row(const Args& p, Tab& t, int r, int key) {
  const int slot = key & ((1 << Tab::kSlotBits) - 1);
  t.row_token[r] = slot / p.top_k;
  if (p.entry_of != nullptr && blockIdx.x == 0) p.entry_of[slot] = has_expert(key) ? r : -1;
}

// Group g starts at grouped row r, whose sorted key is `key`.
template <class Tab>
__device__ __forceinline__ void start_group(Tab& t, int g, int r, int key) {
  t.expert[g] = key >> Tab::kSlotBits;
  t.begin[g] = r;
}

// The group count and the end of the last group, the rows with an expert (one thread).
template <class Tab>
__device__ __forceinline__ void end_groups(Tab& t, int num_groups, int expert_rows) {
  t.num_groups = num_groups;
  t.begin[num_groups] = expert_rows;
}

// build_groups for up to kWarpGroupRows routed rows (batch <= 4 at top-8): warp 0 alone, lane r
// ranks slot r's key among the others and then owns grouped row r and group r, so one block
// barrier remains of the bitonic path's ~15 (H200 runs 150-151: the batch-1 gate_up kernel's
// grouping 2.7 -> 0.85 us). The tables are the bitonic path's.
constexpr int kWarpGroupRows = 32;
static_assert(kWarpGroupRows < kWidePassMinRows, "the narrow kernels alone carry the warp path");
template <Phase kPhase, class Tab>
__device__ __forceinline__ void build_groups_warp(const Args& p, int pass_rows, int32_t* keys,
                                                  Tab& t) {
  constexpr int kSlotBits = Tab::kSlotBits;
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x);
  if (lane < 32) {
    const int key = lane < p.rows ? slot_key<Tab>(p, lane) : INT32_MAX;  // no slot: after all
    int rank = 0;  // keys are unique below INT32_MAX: slot lane's grouped row
#pragma unroll
    for (int j = 0; j < 32; ++j) rank += __shfl_sync(kAll, key, j) < key;
    if (lane < p.rows) keys[rank] = key;
    __syncwarp();
    const int row_key = lane < p.rows ? keys[lane] : INT32_MAX;
    const int prev_key = __shfl_up_sync(kAll, row_key, 1);
    const bool real = lane < p.rows && has_expert(row_key);
    const bool first = real && (lane == 0 || (prev_key >> kSlotBits) != (row_key >> kSlotBits));
    const unsigned starts = __ballot_sync(kAll, first);
    const int num_groups = __popc(starts);
    const int expert_rows = __popc(__ballot_sync(kAll, real));
    if (lane < p.rows) place_row(p, t, lane, row_key);
    if (first) start_group(t, __popc(starts & ((1u << lane) - 1u)), lane, row_key);
    if (lane == 0) end_groups(t, num_groups, expert_rows);
    __syncwarp();
    const int packed =
        lane < num_groups ? packed_passes<kPhase>(t.begin[lane + 1] - t.begin[lane], pass_rows) : 0;
    const int incl = warp_inclusive_sum(packed, lane);
    if (lane < num_groups) t.prefix[lane] = incl - packed;
    if (lane == 31) t.prefix[num_groups] = incl;
  }
  __syncthreads();
}

// Groups the p.rows slots by expert into t, slots of one expert in increasing slot order (the
// CPU's bucket order), every group split into passes of pass_rows rows; kNoExpert slots sort
// last and join no group. keys: [Tab's slots] shared scratch (Shared::key). Any other id outside
// [0, E) traps (the CPU op aborts). Block 0 also writes p.entry_of when given.
template <Phase kPhase, class Tab>
__device__ __forceinline__ void build_groups(const Args& p, int pass_rows, int32_t* keys, Tab& t) {
  constexpr int kSlotBits = Tab::kSlotBits, kRowsPerThread = Tab::kRowsPerThread;
  const int tid = static_cast<int>(threadIdx.x);
  int n = 1;  // bitonic size: the next power of two >= rows
  while (n < p.rows) n <<= 1;
  for (int i = tid; i < n; i += kThreads) {
    keys[i] = i < p.rows ? slot_key<Tab>(p, i) : INT32_MAX;  // padding sorts last
  }
  __syncthreads();
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = tid; i < n; i += kThreads) {
        const int j = i ^ stride;
        if (j > i) {
          const int a = keys[i], b = keys[j];
          if ((a > b) == ((i & size) == 0)) {
            keys[i] = b;
            keys[j] = a;
          }
        }
      }
      __syncthreads();
    }
  }
  // Thread tid owns grouped rows kRowsPerThread tid + c, c < kRowsPerThread; a row with an expert
  // starts a group when its expert differs from the previous row's. One scan counts the group
  // starts (low 16 bits) and the rows with an expert (the bits above; at most kMaxRows < 2^16).
  bool first[kRowsPerThread];
  int counts = 0;
#pragma unroll
  for (int c = 0; c < kRowsPerThread; ++c) {
    const int r = kRowsPerThread * tid + c;
    const bool real = r < p.rows && has_expert(keys[r]);
    first[c] = real && (r == 0 || (keys[r - 1] >> kSlotBits) != (keys[r] >> kSlotBits));
    counts += int{first[c]} + (int{real} << 16);
  }
  int totals = 0;
  int group = block_exclusive_sum(counts, t, &totals) & 0xffff;  // the next group it starts
  const int num_groups = totals & 0xffff;
#pragma unroll
  for (int c = 0; c < kRowsPerThread; ++c) {
    const int r = kRowsPerThread * tid + c;
    if (r >= p.rows) continue;
    const int key = keys[r];
    place_row(p, t, r, key);
    if (first[c]) start_group(t, group++, r, key);
  }
  if (tid == 0) end_groups(t, num_groups, totals >> 16);
  __syncthreads();
  // Passes (low 16 bits: at most kMaxRows in all) and dealing cost (the bits above: at most the
  // larger reload cost times kMaxRows) of this thread's groups, prefix-summed in one scan.
  int packed[kRowsPerThread];
  int mine = 0;
#pragma unroll
  for (int c = 0; c < kRowsPerThread; ++c) {
    const int g = kRowsPerThread * tid + c;
    packed[c] = g < num_groups ? packed_passes<kPhase>(t.begin[g + 1] - t.begin[g], pass_rows) : 0;
    mine += packed[c];
  }
  int total = 0;
  int before_g = block_exclusive_sum(mine, t, &total);
#pragma unroll
  for (int c = 0; c < kRowsPerThread; ++c) {
    const int g = kRowsPerThread * tid + c;
    if (g < num_groups) t.prefix[g] = before_g;
    before_g += packed[c];
  }
  if (tid == 0) t.prefix[num_groups] = total;
  __syncthreads();
}

// A unit's place: group g, m tile m, pass (of the kernel's pass rows) p; units are ordered
// (g, m, p).
struct Cursor {
  int g, m, p;
};

template <class Tab>
__device__ __forceinline__ int passes_before(const Tab& t, int g) {
  return t.prefix[g] & 0xffff;
}
template <class Tab>
__device__ __forceinline__ int cost_before(const Tab& t, int g) {
  return t.prefix[g] >> 16;
}
template <class Tab>
__device__ __forceinline__ int passes_of(const Tab& t, int g) {
  return passes_before(t, g + 1) - passes_before(t, g);
}

// The cursor of unit u (< m_tiles * total passes).
template <class Tab>
__device__ __forceinline__ Cursor cursor_at(const Tab& t, int m_tiles, int u) {
  int lo = 0, hi = t.num_groups - 1;  // the last g whose first unit is <= u
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (m_tiles * passes_before(t, mid) <= u) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int passes = passes_of(t, lo);
  const int local = u - m_tiles * passes_before(t, lo);
  return {lo, local / passes, local % passes};
}

// The first unit whose dealing cost starts at or after x (a group's units cost unit_cost(its
// passes) each, in unit order); the total cost gives the unit count. Block b of n takes the units
// from unit_at_cost(total * b / n) up to unit_at_cost(total * (b + 1) / n).
template <Phase kPhase, class Tab>
__device__ __forceinline__ int unit_at_cost(const Tab& t, int m_tiles, int64_t x) {
  int lo = 0, hi = t.num_groups - 1;  // the last g whose first unit's cost starts at or before x
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (int64_t{m_tiles} * cost_before(t, mid) <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int c = unit_cost<kPhase>(passes_of(t, lo));
  const int64_t units = int64_t{m_tiles} * passes_of(t, lo);
  const int64_t local = min((x - int64_t{m_tiles} * cost_before(t, lo) + c - 1) / c, units);
  return m_tiles * passes_before(t, lo) + static_cast<int>(local);
}

template <class Tab>
__device__ __forceinline__ void advance(Cursor& c, const Tab& t, int m_tiles) {
  if (++c.p < passes_of(t, c.g)) return;
  c.p = 0;
  if (++c.m < m_tiles) return;
  c.m = 0;
  ++c.g;
}

// The first packed step of the tile of cursor c, in moe_packed::kStepElems from p.w (an int:
// moe_small_batch_supports keeps E * n * k / kStepElems small). The tile and step counts come
// from p (shifts), not registers held across the loops.
template <Phase kPhase, class Tab>
__device__ __forceinline__ int tile_step0(const Args& p, const Tab& t, const Cursor& c) {
  const auto m_tiles = static_cast<int>(p.n / tile_cols<kPhase>());
  const auto steps = static_cast<int>(p.k / moe_packed::kStepCols);
  return (t.expert[c.g] * m_tiles + c.m) * steps;
}

// Rounds and stores the block's sums s of one n8 half of a unit (reducing warp; lane = 4 r + q):
// rows r and r + 8 of the packed tile, routed rows 2 q and 2 q + 1 of the half (mma accumulator
// layout). kLora: with p.lora's deltas.
template <Phase kPhase, int kPassRows, bool kLora, class Tab>
__device__ __forceinline__ void store_unit(const KernelArgs<kLora>& p, const Tab& t,
                                           const Cursor& c, int half, int r, int q,
                                           const float4& s) {
  const int begin = t.begin[c.g], count = t.begin[c.g + 1] - begin;
  const float lo[2] = {s.x, s.y}, hi[2] = {s.z, s.w};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int within = c.p * kPassRows + half * kHalfRows + 2 * q + i;
    if (within >= count) continue;
    bf16_t* row = p.out + static_cast<int64_t>(begin + within) * p.n;
    // gate_up: act column 8 m + r; down: output columns 16 m + 2 r and 16 m + 2 r + 1
    const int64_t col =
        static_cast<int64_t>(c.m) * tile_cols<kPhase>() + (kPhase == Phase::kGateUp ? r : 2 * r);
    if constexpr (kPhase == Phase::kGateUp) {  // lo = gate, hi = up of act column col
      float g = __bfloat162float(__float2bfloat16_rn(lo[i]));
      float u = __bfloat162float(__float2bfloat16_rn(hi[i]));
      if constexpr (kLora) {
        const float2 v = moe_lora::gate_up_with_lora(p.lora, t.row_token[begin + within],
                                                     t.expert[c.g], p.n, col, g, u);
        g = v.x;
        u = v.y;
      }
      row[col] = __float2bfloat16_rn(__fmul_rn(torch_exp::siluf(g), u));
    } else {  // lo, hi = output columns 16 m + 2 r and the next (moe_packed.cuh's row order)
      *reinterpret_cast<__nv_bfloat162*>(row + col) = __floats2bfloat162_rn(lo[i], hi[i]);
    }
  }
}

// The element offset in p.a of the activation row that lane row r feeds as B fragments in n8 half
// `half` of the pass at cursor c (gate_up: x row of its token; down: act row of the grouped row);
// -1 past the group's rows (zeros). An int (< kMaxRows * kMaxK): one register, not a pointer's two.
template <Phase kPhase, int kPassRows, class Tab>
__device__ __forceinline__ int fragment_row(const Args& p, const Tab& t, const Cursor& c, int half,
                                            int r) {
  const int begin = t.begin[c.g], count = t.begin[c.g + 1] - begin;
  const int within = c.p * kPassRows + half * kHalfRows + r;
  if (within >= count) return -1;
  const int src = kPhase == Phase::kGateUp ? t.row_token[begin + within] : begin + within;
  return src * static_cast<int>(p.k);
}

// B fragment of k32 step `step` of the activation row at offset `row` (fragment_row): 8
// activations at columns step * 32 + 8 (lane % 4) + [0, 8) (< K: K is a multiple of 32), zeros
// for row -1.
__device__ __forceinline__ uint4 load_fragment(const Args& p, int row, int step, int q) {
  return row >= 0 ? __ldcg(reinterpret_cast<const uint4*>(p.a + row + step * kStepCols + 8 * q))
                  : make_uint4(0, 0, 0, 0);
}

// Down kernel, before it waits for act: the weight tiles of units u_begin + 1 ..
// u_begin + kL2PrefetchUnits (the ring holds the first unit and part of the second) into L2, each
// packed tile (contiguous) as 16 bulk prefetches, so the HBM stream runs on while the gate_up
// kernel drains (~21 MB over 132 SMs at Beam widths, well inside the 60 MB L2).
constexpr int kL2PrefetchUnits = 2;
template <class Tab>
__device__ __forceinline__ void prefetch_next_tiles(const Args& p, const Tab& t, Cursor c,
                                                    int m_tiles, int units_left) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid >= 16 * kL2PrefetchUnits || p.k == 0) return;  // (a zero-size prefetch is not defined)
  const int ahead = 1 + tid / 16, part = tid % 16;
  if (ahead >= units_left) return;
  for (int j = 0; j < ahead; ++j) advance(c, t, m_tiles);
  const auto steps = static_cast<int>(p.k / moe_packed::kStepCols);
  const int64_t part_elems = int64_t{steps} * moe_packed::kStepElems / 16;  // 16-byte multiple
  prefetch_l2_bulk(
      p.w + int64_t{tile_step0<Phase::kDown>(p, t, c)} * moe_packed::kStepElems + part * part_elems,
      static_cast<uint32_t>(part_elems * static_cast<int64_t>(sizeof(bf16_t))));
}

// The k32 steps a warp takes of each unit's `steps`, its i-th being first + kStride * i. gate_up
// interleaves them over the warps (warp w: w, w + kWarps, ...); down keeps contiguous slices
// [w spw, (w + 1) spw). Chosen on row-major weights (H200 runs 93-96: interleaved gate_up 0.3-1.4%
// faster, interleaved down 3% slower at T = 128); with packed weights both phases interleaved
// time the same, and both contiguous take 32% longer under skewed routing at T = 128 (run 104).
// Fixed per phase, so a row's sums are the same in the narrow and wide kernels.
template <Phase kPhase>
struct WarpSteps {
  static constexpr int kStride = kPhase == Phase::kGateUp ? kWarps : 1;
  int first, count;
  __device__ __forceinline__ int step(int i) const { return first + kStride * i; }
};
template <Phase kPhase>
__device__ __forceinline__ WarpSteps<kPhase> warp_steps(int warp, int steps) {
  if constexpr (kPhase == Phase::kGateUp) {
    return {warp, warp < steps ? (steps - warp + kWarps - 1) / kWarps : 0};
  } else {
    const int spw = (steps + kWarps - 1) / kWarps;
    const int first = warp * spw;
    return {first, first < steps ? min(spw, steps - first) : 0};
  }
}

// The pool (the wide kernels): the SMs do not stream at one speed (H200 run 89: 24 of the 132
// finish an equal share in 3/4 of the others' time), so equal shares left the busiest SM 15-19%
// past the average at batch 256 (run 178). The first kPoolStaticPermille of the cost is dealt in
// equal shares as above; the remaining units are drawn at run time, in chunks of at least
// kPoolChunkUnits, from a counter that the launch's last draw resets. A block draws its next chunk
// on entering a chunk and publishes it in shared memory at the end of that chunk's first unit, so
// the atomic's round trip (behind the SM's queued loads, run 88) hides behind a unit and no barrier
// waits for it. Which block computes a unit changes no bits. Run 179: MoE layer at batch 256
// 1.158x -> 1.082x of its floor (1.105x without the pool: the restructured loop also removed the
// wide gate_up kernel's spills), 192 1.08x -> 1.04x; the narrow kernels (batch <= 32) keep equal
// shares (the start's draw and barrier cost batch 1 2.5%, and ~19 units an SM are too few to pool).
constexpr int kPoolStaticPermille = 900;
constexpr int kPoolChunkUnits = 8;
// The fewest k32 steps any warp with steps takes of a unit: its producer runs the most units
// ahead of its consumer.
template <Phase kPhase>
__device__ __forceinline__ int min_warp_steps(int steps) {
  int fewest = steps;
  for (int w = 0; w < kWarps; ++w) {
    const int c = warp_steps<kPhase>(w, steps).count;
    if (c > 0) fewest = min(fewest, c);
  }
  return max(fewest, 1);
}

// Thread 0, once the tables are built: the units, the static ones [0, pool_first) and the chunks.
// A chunk is long enough that every producer reaches its end only after the chunk's first unit
// has ended (when the next chunk is published): chunk * s - 1 - kStages >= s for the fewest steps
// s of a warp.
template <Phase kPhase, class Tab>
__device__ __forceinline__ void make_pool(const Args& p, Tab& t, int m_tiles, int steps) {
  const int units = m_tiles * passes_before(t, t.num_groups);
  const int s = min_warp_steps<kPhase>(steps);
  const int chunk = max(kPoolChunkUnits, 1 + (kStages + s) / s);
  int first = units, chunks = 0;
  if (p.pool != nullptr && units > 0) {
    const int64_t cost = int64_t{m_tiles} * cost_before(t, t.num_groups);
    const int pooled_from = unit_at_cost<kPhase>(t, m_tiles, cost * kPoolStaticPermille / 1000);
    chunks = (units - pooled_from) / chunk;
    if (chunks > 0) first = pooled_from;
  }
  t.units = units;
  t.pool_first = first;
  t.chunk_units = chunk;
  t.chunks = chunks;
}

// The static units' cost dealt in equal shares (all of it without chunks).
template <class Tab>
__device__ __forceinline__ int64_t static_cost(const Tab& t, int m_tiles) {
  const int64_t cost = int64_t{m_tiles} * cost_before(t, t.num_groups);
  return t.chunks > 0 ? cost * kPoolStaticPermille / 1000 : cost;
}

// Thread 0: a draw from the pool (a chunk index; past the chunks: none left).
__device__ __forceinline__ int draw_chunk(const Args& p) {
  return p.pool != nullptr ? atomicAdd(p.pool, 1) : INT32_MAX;
}

// Thread 0: publishes `drawn` as the chunk of the block's range r. Every block draws until it gets
// none, so a launch draws chunks + gridDim.x times, and the last draw resets the counter.
template <class Tab>
__device__ __forceinline__ void publish_chunk(const Args& p, Tab& t, int r, int drawn) {
  t.next_chunk[r & 1] = drawn < t.chunks ? drawn : -1;
  if (p.pool != nullptr && drawn == t.chunks + static_cast<int>(gridDim.x) - 1)
    atomicExch(p.pool, 0);
}

template <class Tab>
__device__ __forceinline__ int chunk_first(const Tab& t, int c) {
  return t.pool_first + c * t.chunk_units;
}
// The last chunk takes the remainder.
template <class Tab>
__device__ __forceinline__ int chunk_size(const Tab& t, int c) {
  return c + 1 < t.chunks ? t.chunk_units : t.units - chunk_first(t, c);
}
// The cursor of chunk c's first unit.
template <class Tab>
__device__ __forceinline__ Cursor chunk_start(const Tab& t, int m_tiles, int c) {
  return cursor_at(t, m_tiles, chunk_first(t, c));
}

// Whether the pass at cursor c has rows in its second n8 half (never for 8-row passes).
template <int kPassRows, class Tab>
__device__ __forceinline__ bool second_half(const Tab& t, const Cursor& c) {
  return kPassRows > kHalfRows && t.begin[c.g + 1] - t.begin[c.g] - c.p * kPassRows > kHalfRows;
}

// Grid: one block per SM (any count works). kHalves: n8 halves per pass (1: 8-row passes, for up
// to kWidePassMinRows - 1 routed rows; 2: 16-row passes, separate code as both together do not fit
// the 128 registers a thread has). kSteps: the k32 steps a warp can hold per unit (kMaxSteps, or
// kShortSteps when K allows). kRows: the tables' slots (kCompactRows or kMaxRows; p.rows at most
// that), with smem_bytes<kRows>() of dynamic shared memory. kLora: the epilogue adds p.lora's
// deltas (an instantiation of its own, so the kernels without LoRA keep their registers). See the
// top of this file.
template <Phase kPhase, int kHalves, int kSteps, int kRows, bool kLora>
__global__ void __launch_bounds__(kThreads, 1) expert_kernel(KernelArgs<kLora> p) {
  static_assert(kHalves == 1 || kHalves == 2);
  static_assert(kSteps <= kMaxSteps);
  static_assert(!kLora || kPhase == Phase::kGateUp,
                "down's LoRA is moe_lora::launch_expand_add, after the GEMM");
  constexpr int kPassRows = kHalves * kHalfRows;
  constexpr bool kPooled = kHalves == 2;  // (see make_pool)
  extern __shared__ __align__(16) unsigned char moe_small_smem[];
  Shared<kRows>& sh = *reinterpret_cast<Shared<kRows>*>(moe_small_smem);
  const Tables<kRows>& t = sh.t;
  // Both kernels let their dependents start only once every block has passed its wait (or
  // exited): gate_up waits first thing for the router's ids and weights (and x), so the down
  // kernel may read ids before its own wait; the combine reads entry_of (gate_up) and the
  // weights before its wait.
  if constexpr (kPhase == Phase::kGateUp) {
    pdl_wait();
    pdl_launch_dependents();
  }
  const int tid = static_cast<int>(threadIdx.x);
  const int first_draw = kPooled && tid == 0 ? draw_chunk(p) : 0;  // range 1's (during grouping)
  // (The wide kernels never see so few rows and do not carry the warp path: with it their
  // registers spill more, and T = 64 / 128 lost 1.5-5%, H200 run 154.)
  if (kHalves == 1 && p.rows <= kWarpGroupRows) {
    build_groups_warp<kPhase>(p, kPassRows, sh.key, sh.t);
  } else {
    build_groups<kPhase>(p, kPassRows, sh.key, sh.t);
  }

  const int warp = tid / 32, lane = tid % 32;
  const int r = lane / 4, q = lane % 4;
  // Units, tiles and steps fit int: m_tiles <= 640 (widths <= kMaxK), passes <= kMaxRows.
  const auto m_tiles = static_cast<int>(p.n / tile_cols<kPhase>());  // n, k: multiples of 64
  const auto steps = static_cast<int>(p.k / kStepCols);
  // Range 0: equal shares of the static units (all units in the narrow kernels) while every group
  // has one pass (their costs are equal), else of their cost. Ranges 1, 2, ...: the chunks the
  // block draws (the wide kernels).
  const int total_passes = passes_before(t, t.num_groups);
  int64_t static_units = int64_t{m_tiles} * total_passes;
  if constexpr (kPooled) {
    if (tid == 0) {
      make_pool<kPhase>(p, sh.t, m_tiles, steps);
      publish_chunk(p, sh.t, 1, first_draw);
    }
    __syncthreads();
    static_units = t.pool_first;
  }
  int u_begin, u_end;
  if (total_passes == t.num_groups) {
    u_begin = static_cast<int>(static_units * blockIdx.x / gridDim.x);
    u_end = static_cast<int>(static_units * (blockIdx.x + 1) / gridDim.x);
  } else {
    const int64_t cost =
        kPooled ? static_cost(t, m_tiles) : int64_t{m_tiles} * cost_before(t, t.num_groups);
    u_begin = unit_at_cost<kPhase>(t, m_tiles, cost * blockIdx.x / gridDim.x);
    u_end = unit_at_cost<kPhase>(t, m_tiles, cost * (blockIdx.x + 1) / gridDim.x);
  }
  int range = 0;           // the consumer's (and, when it starts, the producer's) range
  if (u_begin >= u_end) {  // uniform over the block: start at the drawn chunk, if any
    const int c = kPooled ? t.next_chunk[1] : -1;
    if (c < 0) return;
    range = 1;
    u_begin = chunk_first(t, c);
    u_end = u_begin + chunk_size(t, c);
  }
  const WarpSteps<kPhase> warp_k = warp_steps<kPhase>(warp, steps);
  const int my_steps = warp_k.count;  // <= kSteps (host-checked)

  // Producer: the warp's steps of the block's units in order, kStages ahead of the consumer.
  uint4(*ring)[2][32] = sh.ring[warp];
  Cursor pc = cursor_at(t, m_tiles, u_begin);
  const Cursor start = pc;
  int p_left = u_end - u_begin;  // units of its range the producer has not finished issuing
  int p_range = range;
  int pi = 0;
  int step0 = tile_step0<kPhase>(p, t, pc);  // the producer's tile
  auto issue = [&](int slot) {
    if (my_steps > 0 && p_left > 0) {
      // This lane's 16 bytes of k32 step s: in packed step s / 2, row lane / 4 (a) and
      // lane / 4 + 8 (b, 8 rows on), columns 32 (s % 2) + 8 (lane % 4) + [0, 8). (From lane, not
      // r and q: keeping those live here spills more in the wide kernels.)
      static_assert(moe_packed::kStepElems == 1 << 10);
      const int s = warp_k.step(pi);
      const bf16_t* a =
          p.w + ((static_cast<int64_t>(step0 + (s >> 1)) << 10) |
                 ((lane >> 2) * moe_packed::kStepCols + (s & 1) * kStepCols + 8 * (lane & 3)));
      cp_async16_cg(&ring[slot][0][lane], a);
      cp_async16_cg(&ring[slot][1][lane], a + 8 * moe_packed::kStepCols);
      if (++pi == my_steps) {
        pi = 0;
        if (--p_left > 0) {
          advance(pc, t, m_tiles);
        } else if (kPooled) {  // the next range's chunk is published by now (make_pool)
          const int c = t.next_chunk[(p_range + 1) & 1];
          if (c >= 0) {
            ++p_range;
            p_left = chunk_size(t, c);
            pc = chunk_start(t, m_tiles, c);
          }
        }
        if (p_left > 0) step0 = tile_step0<kPhase>(p, t, pc);
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
  // B fragments: xf[h][i] = step warp_k.step(i) of this lane's activation row in n8 half h of the
  // current pass (half 1 only loaded and used when the pass has rows there). When the next unit
  // changes group or pass (group boundaries, chunk starts, and every unit of an expert with more
  // rows than a pass, whose passes alternate per tile), xf is reloaded for it right after this
  // unit's mma consumed it, so the loads have a whole unit to land instead of stalling the next
  // unit's first mma (and with it the warp's ring) on an L2 round trip.
  Cursor cc = start;
  bool wide = second_half<kPassRows>(t, cc);  // uniform over the block
  uint4 xf[kHalves][kSteps];
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    if (h > 0 && !wide) break;
    const int row = fragment_row<kPhase, kPassRows>(p, t, cc, h, r);
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      if (i >= my_steps) break;
      xf[h][i] = load_fragment(p, row, warp_k.step(i), q);
    }
  }
  int slot = 0;
  int left = u_end - u_begin;  // units of the consumer's range, this one included
  // thread 0, entering a chunk: the draw for the range after it, published after its first unit
  int drawn = kPooled && range == 1 && tid == 0 ? draw_chunk(p) : -1;
  for (int unit = 0;; ++unit) {
    bool reload, next_wide;  // uniform over the block
    int next_row[kHalves];
    {  // (the next unit's cursor is not held across the k loop: registers)
      Cursor nc = cc;
      bool has_next = true;
      if (left > 1) {
        advance(nc, t, m_tiles);
      } else {
        const int c = kPooled ? t.next_chunk[(range + 1) & 1] : -1;
        has_next = c >= 0;
        if (has_next) nc = chunk_start(t, m_tiles, c);
      }
      reload = has_next && (nc.g != cc.g || nc.p != cc.p);
      next_wide = reload ? second_half<kPassRows>(t, nc) : wide;
#pragma unroll
      for (int h = 0; h < kHalves; ++h)
        next_row[h] = reload ? fragment_row<kPhase, kPassRows>(p, t, nc, h, r) : -1;
    }
    float acc[kHalves][4] = {};
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      if (i >= my_steps) break;
      cp_async_wait<kStages - 1>();  // this lane's copies of step i have landed
      const uint4 a_lo = ring[slot][0][lane], a_hi = ring[slot][1][lane];
      mma_bf16(acc[0], a_lo.x, a_hi.x, a_lo.y, a_hi.y, xf[0][i].x, xf[0][i].y);
      mma_bf16(acc[0], a_lo.z, a_hi.z, a_lo.w, a_hi.w, xf[0][i].z, xf[0][i].w);
      if (kHalves == 2 && wide) {
        mma_bf16(acc[kHalves - 1], a_lo.x, a_hi.x, a_lo.y, a_hi.y, xf[kHalves - 1][i].x,
                 xf[kHalves - 1][i].y);
        mma_bf16(acc[kHalves - 1], a_lo.z, a_hi.z, a_lo.w, a_hi.w, xf[kHalves - 1][i].z,
                 xf[kHalves - 1][i].w);
      }
      if (reload) {
        xf[0][i] = load_fragment(p, next_row[0], warp_k.step(i), q);
        if (kHalves == 2 && next_wide)
          xf[kHalves - 1][i] = load_fragment(p, next_row[kHalves - 1], warp_k.step(i), q);
      }
      issue(slot);  // after the mma consumed the slot's registers
      slot = slot + 1 == kStages ? 0 : slot + 1;
    }
    const int parity = unit & 1;  // consecutive units alternate
    const int halves = wide ? kHalves : 1;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      if (h < halves)
        sh.partial[parity][h][warp][lane] = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
    }
    if (kPooled && drawn >= 0) {  // thread 0, the first unit of a chunk
      publish_chunk(p, sh.t, range + 1, drawn);
      drawn = -1;
    }
    __syncthreads();  // double-buffered partials: one barrier per unit
    // Half h is summed by warp (unit + 8 h) % 16: the two halves by two warps.
    const int reducer = unit % kWarps;
    const int mine = warp == reducer ? 0 : 1;  // the half this warp may sum
    if (mine < halves && warp == (reducer + mine * (kWarps / 2)) % kWarps) {
      float4 s = sh.partial[parity][mine][0][lane];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) {
        const float4 v = sh.partial[parity][mine][w][lane];
        s.x += v.x;
        s.y += v.y;
        s.z += v.z;
        s.w += v.w;
      }
      store_unit<kPhase, kPassRows, kLora>(p, t, cc, mine, r, q, s);
    }
    wide = next_wide;
    if (--left > 0) {
      advance(cc, t, m_tiles);
      continue;
    }
    const int c = kPooled ? t.next_chunk[(range + 1) & 1] : -1;
    if (c < 0) break;
    ++range;
    left = chunk_size(t, c);
    cc = chunk_start(t, m_tiles, c);
    if (tid == 0) drawn = draw_chunk(p);
  }
  cp_async_wait<0>();
}

}  // namespace beam::cuda::moe_small
