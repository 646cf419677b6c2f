// Grouped bf16 GEMM of the routed experts (kernels/cuda/moe_experts.cu): for the grouped rows r of
// each expert e, out[r, :] = A[r, :] · W_e ᵀ with W_e [w_rows, K] row-major, on Hopper's warpgroup
// MMA (wgmma, fp32 accumulation) and one bf16 rounding per output. A tile is 192 weight rows (the
// wgmma M side, three warpgroups of 64) by up to 256 of one expert's rows (the N side, a multiple
// of 16 fitted to the rows, so a short tile does no padded work); both stream through a 4-stage
// cp.async pipeline of 128-byte-swizzled shared tiles (moe_wgmma.cuh). The SwiGLU flavour puts
// the gate and up rows of one act column into one thread's accumulators and applies the CPU's
// SwiGLU in the epilogue. Shapes whose rows are 16-byte multiples run on the warp-specialized TMA
// kernel at the end (namespace tma: persistent clusters of two blocks sharing their grouped rows
// by TMA multicast, a producer warp, tiles of 128 weight rows by up to 256 grouped rows, 256 weight
// rows by up to 128 (chunked prefill), or 128 by up to 64 on a deeper ring (decode)); the cp.async
// kernel takes the others.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/cluster.cuh"
#include "kernels/cuda/moe_lora.cuh"
#include "kernels/cuda/moe_packed.cuh"
#include "kernels/cuda/moe_wgmma.cuh"
#include "kernels/cuda/torch_exp.cuh"

namespace beam::cuda::moe_gemm {

using bf16_t = __nv_bfloat16;

constexpr int kBM = 256;      // most grouped rows per tile (moe_experts.cu's M-tile scan unit)
constexpr int kRowStep = 16;  // a tile's rows are rounded up to this (the wgmma N step)
constexpr int kWRows = 192;   // weight rows per tile: 3 warpgroups x wgmma M 64
constexpr int kBK = 64;       // K per stage: one 128-byte swizzled shared row
static_assert(moe_packed::kStepCols == kBK, "a packed step is one stage's K slice (TMA box)");
constexpr int kStages = 4;
constexpr int kThreads = kWRows / 64 * 128;  // one warpgroup per 64 weight rows
constexpr int kRowBytes = kBK * 2;
constexpr int kStageRows = kWRows + kBM;             // weight rows, then grouped rows
constexpr int kStageBytes = kStageRows * kRowBytes;  // 56 KB
constexpr int kTableOffset = kStages * kStageBytes;  // row index table after the stages
constexpr int kSmemAlign = 1024;                     // the 128-byte swizzle repeats every 1 KB
constexpr int kSmemLimit = 227 * 1024;               // H200: dynamic shared memory per block
constexpr int kSmemBytes = kTableOffset + kStageRows * 4 + kSmemAlign;  // + slack to align
constexpr int kLoadRowsPerPass = kThreads / 8;  // rows a stage load covers per pass (8 chunks each)
static_assert(kThreads >= kBM && kThreads >= kWRows, "row-table fill: one thread per row");
static_assert(kWRows % kLoadRowsPerPass == 0, "a load pass reads weight rows or grouped rows");
static_assert(kStageBytes % kSmemAlign == 0 && kWRows * kRowBytes % kSmemAlign == 0);
static_assert(kSmemBytes <= kSmemLimit, "H200: 227 KB of shared memory per block");

enum class Epilogue {
  kStore,   // out [rows, n] = bf16(acc)
  kSwiGLU,  // W_e = [gate (n rows); up (n rows)]; out [rows, n] = bf16(silu(bf16 g) * bf16 u)
};

struct Args {
  const bf16_t* a;              // A row q starts at a + q * k
  const int32_t* a_row_of;      // grouped row -> A row q (nullptr: q is the grouped row)
  const bf16_t* w;              // [E, w_rows, k], w_rows = n (kStore) or 2 n (kSwiGLU)
  bool packed_w;                // w in moe_packed.cuh's layout (else row-major)
  const int32_t* offsets;       // [E + 1] first grouped row of each expert
  const int32_t* tile_offsets;  // [E + 1] first M tile of each expert (ceil(rows / kBM) each)
  int32_t num_experts;
  int64_t n;  // output columns
  int64_t k;
  bool async_loads;  // k % 8 == 0 and a, w 16-byte aligned: 16-byte cp.async chunks
  bf16_t* out;       // [grouped rows, n]
  // Per-request LoRA's gate / up deltas by grouped row, which the kSwiGLU kLora epilogues read.
  moe_lora::RowTerms lora = {};
};

// Output columns per tile of w_rows weight rows.
constexpr int tile_cols(Epilogue ep, int w_rows = kWRows) {
  return ep == Epilogue::kSwiGLU ? w_rows / 2 : w_rows;
}

// Eight elements [col, col + 8) of a row into shared memory at dst, from src (the row's element
// col; nullptr: zeros), zeros past k.
__device__ __forceinline__ void load_chunk(uint8_t* dst, const bf16_t* src, int64_t col,
                                           const Args& p) {
  if (p.async_loads) {  // col and k are multiples of 8: the chunk is all in or all out
    const bool valid = src != nullptr && col < p.k;
    cp_async16(smem_u32(dst), valid ? src : p.w, valid ? 16 : 0);
    return;
  }
  bf16_t* d = reinterpret_cast<bf16_t*>(dst);
  for (int i = 0; i < 8; ++i)
    d[i] = src != nullptr && col + i < p.k ? src[i] : __float2bfloat16_rn(0.0f);
}

// Element offset of (row, col) in one expert's weights (packed: col's chunk of 8 stays within
// one packed step's row, so its 8 elements are contiguous there too).
template <Epilogue kEp>
__device__ __forceinline__ int64_t weight_offset(const Args& p, int64_t row, int64_t col) {
  if (!p.packed_w) return row * p.k + col;
  int64_t m = 0;
  int i = 0;
  moe_packed::tile_of_row(kEp == Epilogue::kSwiGLU, p.n, row, m, i);
  return moe_packed::offset(p.k, m, i, col);
}

// The expert owning M tile `tile` (< tile_offsets[E]): the last e with tile_offsets[e] <= tile,
// which has tiles (an empty expert shares its offset with the next one).
__device__ __forceinline__ int expert_of_tile(const int32_t* tile_offsets, int num_experts,
                                              int64_t tile) {
  int lo = 0, hi = num_experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_offsets[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// One block's work: `rows` grouped rows from row0 (0: nothing) against the weight rows of output
// columns [n0, n0 + tile_cols) of expert weights w_e.
struct TileJob {
  int64_t row0 = 0;
  int rows = 0;
  int64_t n0 = 0;
  const bf16_t* w_e = nullptr;
  int expert = 0;
};

// Blocks run expert by expert; within an expert, column band by band, and within a band its M
// tiles back to back (they share the band's weights, hot in L2). An expert's tiles split its rows
// evenly, rounded up to kRowStep (at most kBM each). Tiles of kTileRows weight rows.
template <Epilogue kEp, int kTileRows = kWRows>
__device__ __forceinline__ TileJob tile_job(const Args& p, int64_t block) {
  constexpr int kCols = tile_cols(kEp, kTileRows);
  const int64_t n_tiles = (p.n + kCols - 1) / kCols;
  const int64_t m_tile = block / n_tiles;
  TileJob job;
  if (m_tile >= p.tile_offsets[p.num_experts]) return job;
  const int e = expert_of_tile(p.tile_offsets, p.num_experts, m_tile);
  const int64_t first = p.tile_offsets[e], tiles = p.tile_offsets[e + 1] - first;
  const int64_t local = block - first * n_tiles;  // in [0, tiles * n_tiles)
  const int64_t band = local / tiles, mt = local % tiles;
  const int64_t expert_rows = p.offsets[e + 1] - p.offsets[e];
  const int64_t chunk = ((expert_rows + tiles - 1) / tiles + kRowStep - 1) / kRowStep * kRowStep;
  const int64_t begin = mt * chunk;
  const int64_t left = expert_rows - begin;
  job.row0 = p.offsets[e] + begin;
  job.rows = static_cast<int>(left < 0 ? 0 : left < chunk ? left : chunk);
  job.n0 = band * kCols;
  const int64_t w_rows = kEp == Epilogue::kSwiGLU ? 2 * p.n : p.n;
  job.w_e = p.w + static_cast<int64_t>(e) * w_rows * p.k;
  job.expert = e;
  return job;
}

// Row of W_e held by shared tile row rho = 16 g + i (g = warp: 4 warpgroup + warp in group, the
// accumulator rows of one warp), -1 past n. The warp's thread with lane l holds rows i = l / 4 and
// l / 4 + 8: SwiGLU gives them the gate and up rows of act column n0 + 8 g + l / 4; kStore the
// output columns n0 + 16 g + 2 (l / 4) and the next one (a bf16 pair).
template <Epilogue kEp>
__device__ __forceinline__ int32_t weight_row(const Args& p, const TileJob& job, int rho) {
  const int g = rho / 16, i = rho % 16;
  if constexpr (kEp == Epilogue::kSwiGLU) {
    const int64_t j = job.n0 + 8 * g + i % 8;
    if (j >= p.n) return -1;
    return static_cast<int32_t>(i < 8 ? j : p.n + j);
  } else {
    const int64_t j = job.n0 + 16 * g + (i < 8 ? 2 * i : 2 * (i - 8) + 1);
    return j < p.n ? static_cast<int32_t>(j) : -1;
  }
}

// K slice kt of the weight rows and the first kN grouped rows into one stage (shared row r,
// 16-byte chunk c at chunk c ^ (r % 8)); thread t copies chunk t % 8 of rows t / 8 + pass *
// kLoadRowsPerPass. rows[r]: row of W_e (r < kWRows) or of A, -1 for zeros.
template <Epilogue kEp, int kN>
__device__ __forceinline__ void load_stage(const Args& p, const TileJob& job, uint8_t* stage,
                                           const int32_t* rows, int64_t kt, int tid) {
  const int c = tid % 8;
  const int64_t col = kt * kBK + c * 8;
#pragma unroll
  for (int pass = 0; pass < (kWRows + kN + kLoadRowsPerPass - 1) / kLoadRowsPerPass; ++pass) {
    const int r = tid / 8 + kLoadRowsPerPass * pass;
    if (r < kWRows + kN) {
      const int32_t row = rows[r];
      const bf16_t* src = nullptr;
      if (row >= 0) {
        src = pass < kWRows / kLoadRowsPerPass ? job.w_e + weight_offset<kEp>(p, row, col)
                                               : p.a + static_cast<int64_t>(row) * p.k + col;
      }
      load_chunk(stage + r * kRowBytes + ((c ^ (r % 8)) << 4), src, col, p);
    }
  }
}

// Issues and commits one wgmma group over a K slice for each of kM column bands: d[m] += the
// warpgroup's 64 weight rows of band m (at a_tile + m kBandBytes) x kN grouped rows (at b_tile),
// kBK / 16 k16 steps each; the caller waits for it.
template <int kN, int kM, int kBandBytes>
__device__ __forceinline__ void issue_k_slice_bands(float (&d)[kM][kN / 2], uint32_t a_tile,
                                                    uint32_t b_tile) {
#pragma unroll
  for (int m = 0; m < kM; ++m) wgmma::fence_operands(d[m]);
  wgmma::arrive();
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks)
      wgmma::Mma<kN>::run(d[m], wgmma::sw128_desc(a_tile + m * kBandBytes + ks * 32),
                          wgmma::sw128_desc(b_tile + ks * 32));
  wgmma::commit();
}

// issue_k_slice_bands of one band.
template <int kN>
__device__ __forceinline__ void issue_k_slice(float (&d)[kN / 2], uint32_t a_tile,
                                              uint32_t b_tile) {
  issue_k_slice_bands<kN, 1, 0>(reinterpret_cast<float(&)[1][kN / 2]>(d), a_tile, b_tile);
}

// Stores v0 (column col) and v1 (col + 1) of one output row, within n.
__device__ __forceinline__ void store_pair(bf16_t* row, int64_t col, int64_t n, float v0,
                                           float v1) {
  if (col + 1 < n && n % 2 == 0) {
    *reinterpret_cast<__nv_bfloat162*>(row + col) = __floats2bfloat162_rn(v0, v1);
  } else {
    if (col < n) row[col] = __float2bfloat16_rn(v0);
    if (col + 1 < n) row[col + 1] = __float2bfloat16_rn(v1);
  }
}

// Rounds and stores the thread's accumulators: d[4j + q] (weight row i = lane / 4) and
// d[4j + 2 + q] (row i + 8) of grouped row 8j + 2 (lane % 4) + q (weight_row's pairing).
template <Epilogue kEp, bool kLora, int kN>
__device__ __forceinline__ void store_tile(const Args& p, const TileJob& job, int tid,
                                           const float (&d)[kN / 2]) {
  const int g = tid / 32, lane = tid % 32;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int r = 8 * j + 2 * (lane % 4) + q;
      if (r >= job.rows) continue;
      bf16_t* out_row = p.out + (job.row0 + r) * p.n;
      if constexpr (kEp == Epilogue::kSwiGLU) {
        const int64_t col = job.n0 + 8 * g + lane / 4;
        float gate = __bfloat162float(__float2bfloat16_rn(d[4 * j + q]));
        float up = __bfloat162float(__float2bfloat16_rn(d[4 * j + 2 + q]));
        if (col >= p.n) continue;
        if constexpr (kLora) {
          const float2 v = moe_lora::gate_up_with_lora(p.lora, job.row0 + r, p.n, col, gate, up);
          gate = v.x;
          up = v.y;
        }
        out_row[col] = __float2bfloat16_rn(__fmul_rn(torch_exp::siluf(gate), up));
      } else {
        store_pair(out_row, job.n0 + 16 * g + 2 * (lane / 4), p.n, d[4 * j + q], d[4 * j + 2 + q]);
      }
    }
}

// The tile with kN (>= job.rows) grouped rows: pipeline over K, then the epilogue. Stage s holds
// K slice kt (s = kt % kStages); slice kt + kStages - 2 is loaded while slice kt is multiplied,
// into the stage slice kt - 2 used (its wgmma group has completed in every warpgroup by then).
template <Epilogue kEp, bool kLora, int kN>
__device__ __forceinline__ void run_tile(const Args& p, const TileJob& job, uint8_t* smem,
                                         const int32_t* rows) {
  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128;
  const uint32_t base = smem_u32(smem);
  const int64_t num_k = (p.k + kBK - 1) / kBK;
#pragma unroll
  for (int s = 0; s < kStages - 2; ++s) {
    if (s < num_k) load_stage<kEp, kN>(p, job, smem + s * kStageBytes, rows, s, tid);
    cp_async_commit();
  }
  float d[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) d[i] = 0.0f;
  for (int64_t kt = 0; kt < num_k; ++kt) {
    cp_async_wait<kStages - 3>();  // slice kt has landed (this thread's copies)
    wgmma::fence_proxy_async();    // ... visible to wgmma
    __syncthreads();               // ... everyone's; and slice kt - 2's wgmma done everywhere
    const int64_t next = kt + kStages - 2;
    if (next < num_k)
      load_stage<kEp, kN>(p, job, smem + (next % kStages) * kStageBytes, rows, next, tid);
    cp_async_commit();
    const uint32_t stage = base + static_cast<uint32_t>(kt % kStages) * kStageBytes;
    issue_k_slice<kN>(d, stage + wg * 64 * kRowBytes, stage + kWRows * kRowBytes);
    wgmma::wait<1>();  // slice kt - 1's group done: its stage is free after the next barrier
    wgmma::fence_operands(d);
  }
  wgmma::wait<0>();
  wgmma::fence_operands(d);
  store_tile<kEp, kLora, kN>(p, job, tid, d);
}

// run_tile with the smallest kN = 16 s >= rows.
template <Epilogue kEp, bool kLora, int kSteps = 1>
__device__ __forceinline__ void run_fitted_tile(const Args& p, const TileJob& job, uint8_t* smem,
                                                const int32_t* rows) {
  if constexpr (kSteps * kRowStep < kBM) {
    if (job.rows > kSteps * kRowStep) {
      run_fitted_tile<kEp, kLora, kSteps + 1>(p, job, smem, rows);
      return;
    }
  }
  run_tile<kEp, kLora, kSteps * kRowStep>(p, job, smem, rows);
}

// Grid: one block per (M tile, column band) pair that may exist (tile_job's order; blocks past
// the real tiles exit). Dynamic shared memory: kSmemBytes. kLora: the epilogue adds p.lora's
// deltas (an instantiation of its own, so the kernels without LoRA keep their registers).
template <Epilogue kEp, bool kLora>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm_kernel(Args p) {
  static_assert(!kLora || kEp == Epilogue::kSwiGLU,
                "down's LoRA is moe_lora::launch_expand_add, after the GEMM");
  extern __shared__ uint8_t smem_raw[];
  const TileJob job = tile_job<kEp>(p, blockIdx.x);
  if (job.rows <= 0) return;
  const uint32_t raw = smem_u32(smem_raw);
  uint8_t* smem = smem_raw + ((raw + kSmemAlign - 1) / kSmemAlign * kSmemAlign - raw);
  auto* rows = reinterpret_cast<int32_t*>(smem + kTableOffset);
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kWRows) rows[tid] = weight_row<kEp>(p, job, tid);
  if (tid < kBM) {  // A row of the tile's grouped row tid
    const int64_t g = job.row0 + tid;
    rows[kWRows + tid] = tid >= job.rows ? -1
                         : p.a_row_of    ? p.a_row_of[g]
                                         : static_cast<int32_t>(g);
  }
  __syncthreads();
  run_fitted_tile<kEp, kLora>(p, job, smem, rows);
}

// ---- Warp-specialized TMA kernel (k % 8 == 0, k > 0; n % 8 == 0 for kSwiGLU, n % 16 for kStore;
// the grouped rows contiguous: A row g is grouped row g) ------------------------------------------
// Persistent clusters of kCluster blocks (one block per SM) take jobs from a global counter: a
// job is one M tile's grouped rows against kCluster R::kBands adjacent column bands (tile_job's
// order with bands that many times as wide), block rank r computing bands [r kBands, (r + 1)
// kBands) of it, each of kWRows = 128 weight rows. Warp 8 is the producer: one thread fills a
// kStages ring with TMA loads (a band's weight rows as one box of a 5-d tensor map that lists them
// in weight_row's order; the grouped
// rows as kBoxRows-row boxes of a 2-d map, box b issued by rank b % kCluster and multicast to every
// block of the cluster, so each block reads 1 / kCluster of them from L2; zeros past k and past
// the tensors) and passes each tile to the consumers in the ring's job slots. Rank 0's producer
// takes the tickets and hands each to the others through their mailboxes. Warpgroups 0-1 run
// wgmma on 64 weight rows of each band (M-block) each, keep one wgmma group in flight (each warp
// frees a stage once its group retired there, in every block of the cluster, as any of them may
// multicast into it: 8 kCluster arrivals per stage), and store the tile (store_tile_stepped;
// store_tile_swiglu through a shared staging area) while the producer already loads the next one.
// Every output element is one fp32 dot product in fixed K order, whatever kCluster.
namespace tma {

constexpr int kConsumers = 2;            // consumer warpgroups, 64 weight rows each
constexpr int kWRows = kConsumers * 64;  // weight rows per tile
constexpr int kConsumerThreads = kConsumers * 128;
constexpr int kThreads = kConsumerThreads + 32;              // + the producer warp
// Grouped rows per TMA box (runs 145-146 at T = 8192: 64 is 1% faster than 32, 16 7% slower).
constexpr int kBoxRows = 64;
constexpr int kWeightBytes = kWRows * kRowBytes;             // a stage's weight box (16 KB)
constexpr int kBoxBytes = kBoxRows * kRowBytes;              // one grouped-row box (8 KB)
constexpr int kWeightGroups = kWRows / 16;                   // the weight box's 16-row groups
static_assert(kWeightBytes % kSmemAlign == 0 && kBoxBytes % kSmemAlign == 0);
// Blocks of a cluster (H200, 8K-token prefill, runs 136-137: 2 is 5.5% faster than 1; 4 fits 30
// clusters, 120 SMs, and loses that again).
constexpr int kCluster = 2;

// The tile a ring slot starts (written by the producer before the stage's full barrier completes,
// read by the consumers after it); rows < 0: no tiles left.
struct StageJob {
  int32_t row0, rows, n0, expert;
};

// Shared-memory layout of a kernel whose tiles hold up to kTileRows grouped rows against
// kTileBands column bands (weight boxes; the M-blocks of each consumer warpgroup): as many ring
// stages (the weight boxes and kTileRows grouped rows each) as fit beside the SwiGLU staging area,
// at most kMaxStages. Long tiles (kBM = 256, one band: 4 stages, 64 KB of weights in flight) serve
// 8K prefills; wide ones (128 rows, two bands: 4 stages, 128 KB) prefill chunks whose experts get
// ~64 rows each, where the grouped rows read again for each band load L2 as much as the weights
// stream through it; short ones (64 rows, one band: 9 stages, 144 KB) serve decode batches past
// the small-batch path, whose experts get ~16 rows each and whose weights must stream at HBM rate.
template <int kTileRows, int kTileBands>
struct Ring {
  static constexpr int kRows = kTileRows;
  static constexpr int kBands = kTileBands;  // weight boxes a stage, wgmma M-blocks a warpgroup
  static constexpr int kWeightsBytes = kBands * kWeightBytes;  // a stage's weight boxes
  static constexpr int kStageBytes = kWeightsBytes + kTileRows * kRowBytes;
  // The SwiGLU epilogue's staging area: a consumer thread's gate/up pairs of one band as bf16x2
  // words, half a band's kTileRows / 4 pairs a thread at a time (one band: 4 stages of 256-row
  // tiles leave no more room) or all of them (two bands: a whole band's staging keeps the other
  // band's accumulators the only ones live beside the SiLUs, run 247: no spill), word i of
  // consumer thread t at word i * kConsumerThreads + t (private to t; consecutive threads,
  // consecutive banks).
  static constexpr int kStagedPairs = kTileRows / 8 * kBands;
  static constexpr int kStagingBytes = kStagedPairs * kConsumerThreads * 4;
  // Per stage beside its bytes: full, empty and two mailbox barriers (8 bytes each), a StageJob
  // and two mailboxes (a ticket each).
  static constexpr int kStageOverhead = 4 * 8 + static_cast<int>(sizeof(StageJob)) + 2 * 4;
  static constexpr int kMaxStages = 9;
  static constexpr int kFit =
      (kSmemLimit - kSmemAlign - kStagingBytes) / (kStageBytes + kStageOverhead);
  static constexpr int kStages = kFit < kMaxStages ? kFit : kMaxStages;
  // Mailboxes: rank 0 posts job J's ticket as soon as it takes it, when every rank has consumed a
  // stage of job J - 1 - kStages or later (rank 0's ring waits; each job has a stage), so has
  // read that job's ticket: 2 kStages slots keep each posted ticket until it is read.
  static constexpr int kMailboxes = 2 * kStages;
  // Barriers full[kStages], empty[kStages], mailbox_full[kMailboxes] (8 bytes each), then a
  // StageJob per stage, then the mailboxes, then the staging area.
  static constexpr int kBarOffset = kStages * kStageBytes;
  static constexpr int kJobOffset = kBarOffset + (2 * kStages + kMailboxes) * 8;
  static constexpr int kMailboxOffset = kJobOffset + kStages * static_cast<int>(sizeof(StageJob));
  static constexpr int kStagingOffset = kMailboxOffset + kMailboxes * 4;
  // Dynamic shared memory of kEp's kernel (+ slack to align the stages).
  static constexpr int smem_bytes(Epilogue ep) {
    return (ep == Epilogue::kSwiGLU ? kStagingOffset + kStagingBytes : kStagingOffset) + kSmemAlign;
  }
  static_assert(kTileRows % kBoxRows == 0 && kTileRows % kRowStep == 0 && kTileRows <= kBM);
  static_assert(kStages >= 3 && kStageBytes % kSmemAlign == 0);
  static_assert(smem_bytes(Epilogue::kSwiGLU) <= kSmemLimit, "H200: 227 KB of shared memory");
};
using LongTiles = Ring<kBM, 1>;  // 8K prefill: 4 stages of up to 256 rows and one band
using WideTiles = Ring<128, 2>;  // prefill chunks: 4 stages of up to 128 rows and two bands
using ShortTiles = Ring<64, 1>;  // decode past the small-batch path: 9 stages of up to 64 rows
static_assert(LongTiles::kStages == 4 && WideTiles::kStages == 4 && ShortTiles::kStages == 9);

struct Args {
  CUtensorMap w_map;  // weights as {k, 8, 2, groups, E}, box {kBK, 8, 2, kWeightGroups, 1};
                      // packed: {kBK, 16, groups, k / kBK, E}, box {kBK, 16, kWeightGroups, 1, 1}
  CUtensorMap a_map;      // grouped rows [rows, k] as {k, rows}, box {kBK, kBoxRows}
  moe_gemm::Args p;       // offsets, tile_offsets, num_experts, n, k, out (a, a_row_of, w unused)
  int32_t* tile_counter;  // 0 at launch; each cluster's rank-0 producer takes its next job from it
};

template <class R>
__device__ __forceinline__ uint32_t full_bar(uint32_t base, uint32_t s) {
  return base + R::kBarOffset + 8 * s;
}
template <class R>
__device__ __forceinline__ uint32_t empty_bar(uint32_t base, uint32_t s) {
  return base + R::kBarOffset + 8 * (R::kStages + s);
}
template <class R>
__device__ __forceinline__ uint32_t mailbox_bar(uint32_t base, uint32_t s) {
  return base + R::kBarOffset + 8 * (2 * R::kStages + s);
}

// The job of `ticket` for cluster rank `rank`: tile_job over bands kCluster R::kBands times as
// wide, this rank's first band of it (past n: no columns, its weight boxes all zeros and nothing
// stored); the rank's other bands follow it.
template <class R, Epilogue kEp>
__device__ __forceinline__ TileJob rank_job(const moe_gemm::Args& p, int64_t ticket,
                                            uint32_t rank) {
  TileJob job = tile_job<kEp, kWRows * R::kBands * kCluster>(p, ticket);
  job.n0 += static_cast<int64_t>(rank) * R::kBands * tile_cols(kEp, kWRows);
  return job;
}

// Producer thread of cluster rank `rank`: for each job, num_k stages (its weight boxes, and its
// share of the ceil(rows / kBoxRows) grouped-row boxes multicast to the cluster), each into the
// slot every consumer of the cluster freed; then one stage announcing the end. Rank 0 takes the
// tickets and posts each in the other ranks' mailboxes right away (slot = job count % kMailboxes),
// so that they find their job (tile_job's search) while the ring drains, as rank 0 does.
template <class R, Epilogue kEp>
__device__ __forceinline__ void produce(const Args& a, uint32_t base, StageJob* jobs,
                                        const int32_t* mailbox, uint32_t rank) {
  const moe_gemm::Args& p = a.p;
  wgmma::prefetch_tensor_map(&a.w_map);
  wgmma::prefetch_tensor_map(&a.a_map);
  constexpr int kCols = tile_cols(kEp, kWRows);
  constexpr int kJobCols = kCols * R::kBands * kCluster;
  constexpr auto kAllRanks = static_cast<uint16_t>((1u << kCluster) - 1);
  const int64_t total =
      static_cast<int64_t>(p.tile_offsets[p.num_experts]) * ((p.n + kJobCols - 1) / kJobCols);
  const int num_k = static_cast<int>((p.k + kBK - 1) / kBK);
  uint32_t it = 0;  // stages filled so far
  uint32_t jobs_taken = 0;
  for (;; ++jobs_taken) {
    // This job's mailbox slot and the phase of its barrier.
    const uint32_t mail = jobs_taken % R::kMailboxes,
                   mail_parity = (jobs_taken / R::kMailboxes) & 1;
    int64_t ticket;
    if (rank == 0) {
      ticket = atomicAdd(a.tile_counter, 1);
      const int32_t posted = static_cast<int32_t>(ticket < total ? ticket : total);
      const uint32_t mailbox_addr = base + R::kMailboxOffset + 4 * mail;
      for (uint32_t r = 1; r < kCluster; ++r) {
        cluster::store(cluster::map(mailbox_addr, r), posted);
        cluster::mbar_arrive(cluster::map(mailbox_bar<R>(base, mail), r));
      }
    } else {
      cluster::mbar_wait(mailbox_bar<R>(base, mail), mail_parity);
      ticket = mailbox[mail];
    }
    const TileJob job =
        ticket < total ? rank_job<R, kEp>(p, ticket, rank) : TileJob{};  // before waiting
    const uint32_t first = it % R::kStages;
    wgmma::mbar_wait(empty_bar<R>(base, first), ((it / R::kStages) & 1) ^ 1);
    if (ticket >= total) {
      jobs[first] = StageJob{0, -1, 0, 0};
      wgmma::mbar_arrive(full_bar<R>(base, first));
      return;
    }
    jobs[first] = StageJob{static_cast<int32_t>(job.row0), job.rows, static_cast<int32_t>(job.n0),
                           job.expert};
    const int boxes = (job.rows + kBoxRows - 1) / kBoxRows;
    const auto bytes = static_cast<uint32_t>(R::kWeightsBytes + boxes * kBoxBytes);
    const auto group0 = static_cast<int32_t>(job.n0 / (kCols / kWeightGroups));
    const auto row0 = static_cast<int32_t>(job.row0);
    for (int kt = 0; kt < num_k; ++kt, ++it) {
      const uint32_t s = it % R::kStages;
      if (kt > 0) wgmma::mbar_wait(empty_bar<R>(base, s), ((it / R::kStages) & 1) ^ 1);
      const uint32_t stage = base + s * R::kStageBytes, full = full_bar<R>(base, s);
      wgmma::mbar_arrive_expect_tx(full, bytes);
#pragma unroll
      for (int m = 0; m < R::kBands; ++m) {  // band m's weight box
        const uint32_t dst = stage + m * kWeightBytes;
        const int32_t group = group0 + m * kWeightGroups;
        if (p.packed_w) {  // map {kBK, 16, groups, k / kBK, E}: packed step kt of the tiles
          wgmma::tma_load_5d(dst, &a.w_map, full, 0, 0, group, kt, job.expert);
        } else {
          wgmma::tma_load_5d(dst, &a.w_map, full, kt * kBK, 0, 0, group, job.expert);
        }
      }
      for (int b = static_cast<int>(rank); b < boxes; b += kCluster) {
        cluster::tma_load_2d_multicast(stage + R::kWeightsBytes + b * kBoxBytes, &a.a_map, full,
                                       kt * kBK, row0 + b * kBoxRows, kAllRanks);
      }
    }
  }
}

// store_tile for kStore (n % 16 == 0, so a column pair is whole and aligned when its first column
// is < n): the same values and roundings, with one row pointer stepped by 8 rows instead of an
// address per row, to keep registers free next to the accumulators.
template <int kN>
__device__ __forceinline__ void store_tile_stepped(const moe_gemm::Args& p, const TileJob& job,
                                                   int ctid, const float (&d)[kN / 2]) {
  const int g = ctid / 32, lane = ctid % 32, r0 = 2 * (lane % 4);
  const int64_t col = job.n0 + 16 * g + 2 * (lane / 4);
  if (col >= p.n) return;
  bf16_t* out = p.out + (job.row0 + r0) * p.n + col;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j, out += 8 * p.n)
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      if (8 * j + r0 + q >= job.rows) continue;
      *reinterpret_cast<__nv_bfloat162*>(out + q * p.n) =
          __floats2bfloat162_rn(d[4 * j + q], d[4 * j + 2 + q]);
    }
}

// SwiGLU pairs [first, first + kCount) of a consumer thread (pair w: grouped row 8 (w / 2) +
// 2 (lane % 4) + w % 2, gate d[4 (w / 2) + w % 2], up d[4 (w / 2) + 2 + w % 2]) rounded to bf16
// into the staging area at `staging` (Ring::kStagingOffset's layout).
template <int kN, int kFirst, int kCount>
__device__ __forceinline__ void stage_pairs(const float (&d)[kN / 2], uint32_t staging, int ctid) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const int w = kFirst + i, j = w / 2, q = w % 2;
    const __nv_bfloat162 pair = __floats2bfloat162_rn(d[4 * j + q], d[4 * j + 2 + q]);
    st_shared_u32(staging + 4 * (i * kConsumerThreads + ctid),
                  *reinterpret_cast<const uint32_t*>(&pair));
  }
}

// act = bf16(silu(gate) * up) of the staged pairs [first, first + count) whose grouped rows are
// below job.rows, in one rolled loop (a pair's row grows with w, so they are the first ones).
// kLora: gate and up with p.lora's deltas.
template <bool kLora>
__device__ __forceinline__ void store_staged_swiglu(const moe_gemm::Args& p, const TileJob& job,
                                                    int ctid, uint32_t staging, int first,
                                                    int count) {
  const int lane = ctid % 32;
  // The thread's pairs within job.rows: q = 0 rows 8 j + r0 and q = 1 rows 8 j + r0 + 1 below it.
  const int below = job.rows - 2 * (lane % 4);
  const int valid = below <= 0 ? 0 : (below + 7) / 8 + (below + 6) / 8;
  const int end = valid - first < count ? valid - first : count;
  const int64_t col = job.n0 + 8 * (ctid / 32) + lane / 4;
  bf16_t* out = p.out + (job.row0 + 2 * (lane % 4)) * p.n + col;
#pragma unroll 2
  for (int i = 0; i < end; ++i) {
    const int w = first + i;
    const uint32_t word = ld_shared_u32(staging + 4 * (i * kConsumerThreads + ctid));
    const __nv_bfloat162 pair = *reinterpret_cast<const __nv_bfloat162*>(&word);
    float gate = __low2float(pair), up = __high2float(pair);
    const int row = 8 * (w / 2) + w % 2;  // past the thread's first row
    if constexpr (kLora) {
      const float2 v =
          moe_lora::row_with_lora(p.lora, job.row0 + 2 * (lane % 4) + row, p.n, col, gate, up);
      gate = v.x;
      up = v.y;
    }
    out[row * p.n] = __float2bfloat16_rn(__fmul_rn(torch_exp::siluf(gate), up));
  }
}

// The SwiGLU epilogue (n % 8 == 0): the same values and roundings as store_tile, its SiLUs in a
// rolled loop over pairs staged in shared memory (run 141: the unrolled epilogue took a quarter
// of the consumers' samples, mostly waiting for instructions), all the thread's kN / 4 pairs at
// once where the staging area holds them, else half at a time.
template <class R, bool kLora, int kN>
__device__ __forceinline__ void store_tile_swiglu(const moe_gemm::Args& p, const TileJob& job,
                                                  int ctid, const float (&d)[kN / 2],
                                                  uint32_t staging) {
  constexpr int kPairs = kN / 4;
  constexpr int kRound = kPairs <= R::kStagedPairs ? kPairs : kPairs / 2;  // pairs staged at once
  static_assert(kRound <= R::kStagedPairs && kPairs % kRound == 0 && kPairs / kRound <= 2);
  if (job.n0 + 8 * (ctid / 32) + (ctid % 32) / 4 >= p.n) return;
  stage_pairs<kN, 0, kRound>(d, staging, ctid);
  store_staged_swiglu<kLora>(p, job, ctid, staging, 0, kRound);
  if constexpr (kRound < kPairs) {
    stage_pairs<kN, kRound, kRound>(d, staging, ctid);
    store_staged_swiglu<kLora>(p, job, ctid, staging, kRound, kRound);
  }
}

// A consumer warp's release of ring stage s: one arrival on its empty barrier in every block of
// the cluster (each may multicast into this block's copy of the stage), its own block's first.
// Order matters when a job's grouped rows are one box (rank 0's alone): the other block may then
// run a stage ahead, and its next arrivals here must not precede this block's own.
template <class R>
__device__ __forceinline__ void release_stage(uint32_t base, uint32_t s) {
  const uint32_t own = cluster::rank();
  wgmma::mbar_arrive(empty_bar<R>(base, s));
#pragma unroll
  for (uint32_t i = 1; i < kCluster; ++i)
    cluster::mbar_arrive_signal(cluster::map(empty_bar<R>(base, s), (own + i) % kCluster));
}

// Consumer warpgroup ctid / 128 (ctid: thread index over the consumers): the tile with kN (>=
// rows) grouped rows against R::kBands bands from ring stage `it` on; it advances past the
// tile's stages. Band m's outputs are those of the job shifted by m bands. kLora (kSwiGLU): the
// epilogue adds a.p.lora's deltas.
template <class R, Epilogue kEp, bool kLora, int kN>
__device__ __forceinline__ void consume_tile(const Args& a, const TileJob& job, uint32_t base,
                                             uint32_t& it, int ctid) {
  constexpr int kM = R::kBands;
  const int c = ctid / 128;
  const int num_k = static_cast<int>((a.p.k + kBK - 1) / kBK);
  float d[kM][kN / 2];
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) d[m][i] = 0.0f;
  uint32_t prev = 0;
  for (int kt = 0; kt < num_k; ++kt, ++it) {
    const uint32_t s = it % R::kStages;
    wgmma::mbar_wait(full_bar<R>(base, s), (it / R::kStages) & 1);
    const uint32_t stage = base + s * R::kStageBytes;
    issue_k_slice_bands<kN, kM, kWeightBytes>(d, stage + c * 64 * kRowBytes,
                                              stage + R::kWeightsBytes);
    wgmma::wait<1>();  // the previous stage's group retired in this warp: the warp frees its stage
#pragma unroll
    for (int m = 0; m < kM; ++m) wgmma::fence_operands(d[m]);
    if (kt > 0 && ctid % 32 == 0) release_stage<R>(base, prev);
    prev = s;
  }
  wgmma::wait<0>();
#pragma unroll
  for (int m = 0; m < kM; ++m) wgmma::fence_operands(d[m]);
  if (num_k > 0 && ctid % 32 == 0) release_stage<R>(base, prev);
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    TileJob band = job;
    band.n0 += static_cast<int64_t>(m) * tile_cols(kEp, kWRows);
    if constexpr (kEp == Epilogue::kSwiGLU) {
      store_tile_swiglu<R, kLora, kN>(a.p, band, ctid, d[m], base + R::kStagingOffset);
    } else {
      store_tile_stepped<kN>(a.p, band, ctid, d[m]);
    }
  }
}

// consume_tile with the smallest kN = 16 s >= rows.
template <class R, Epilogue kEp, bool kLora, int kSteps = 1>
__device__ __forceinline__ void consume_fitted_tile(const Args& a, const TileJob& job,
                                                    uint32_t base, uint32_t& it, int ctid) {
  if constexpr (kSteps * kRowStep < R::kRows) {
    if (job.rows > kSteps * kRowStep) {
      consume_fitted_tile<R, kEp, kLora, kSteps + 1>(a, job, base, it, ctid);
      return;
    }
  }
  consume_tile<R, kEp, kLora, kSteps * kRowStep>(a, job, base, it, ctid);
}

// Consumer warpgroups: tile after tile as the ring's job slots announce them, until the end.
template <class R, Epilogue kEp, bool kLora>
__device__ __forceinline__ void consume(const Args& a, uint32_t base, const StageJob* jobs,
                                        int ctid) {
  uint32_t it = 0;  // stages consumed so far
  for (;;) {
    const uint32_t first = it % R::kStages;
    wgmma::mbar_wait(full_bar<R>(base, first), (it / R::kStages) & 1);
    const StageJob sj = jobs[first];
    if (sj.rows < 0) return;
    TileJob job;
    job.row0 = sj.row0;
    job.rows = sj.rows;
    job.n0 = sj.n0;
    job.expert = sj.expert;
    consume_fitted_tile<R, kEp, kLora>(a, job, base, it, ctid);
  }
}

// Grid: clusters of kCluster blocks, one block per SM (or fewer); kThreads threads,
// R::smem_bytes(kEp) of dynamic shared memory. Every block's shared layout is the same (multicast
// and the mailboxes address a rank's copy by this block's offsets). kLora (kSwiGLU only): the
// epilogue adds a.p.lora's deltas, an instantiation of its own.
template <class R, Epilogue kEp, bool kLora>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm_kernel(const __grid_constant__ Args a) {
  static_assert(kCluster >= 2 && kCluster <= 16, "a multicast mask of 16 bits");
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  uint8_t* smem = smem_raw + ((raw + kSmemAlign - 1) / kSmemAlign * kSmemAlign - raw);
  const uint32_t base = smem_u32(smem);
  auto* jobs = reinterpret_cast<StageJob*>(smem + R::kJobOffset);
  const auto* mailbox = reinterpret_cast<const int32_t*>(smem + R::kMailboxOffset);
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    for (uint32_t s = 0; s < R::kStages; ++s) {
      wgmma::mbar_init(full_bar<R>(base, s), 1);  // the producer's expect_tx arrival
      // One arrival from each consumer warp of the cluster.
      wgmma::mbar_init(empty_bar<R>(base, s), kCluster * kConsumerThreads / 32);
    }
    for (uint32_t s = 0; s < R::kMailboxes; ++s) wgmma::mbar_init(mailbox_bar<R>(base, s), 1);
    wgmma::fence_barrier_init();
  }
  cluster::sync();  // the barriers exist in every block before any block arrives on them
  const uint32_t rank = cluster::rank();
  if (tid < kConsumerThreads) {
    static_assert(!kLora || kEp == Epilogue::kSwiGLU, "LoRA deltas join gate_up's epilogue only");
    consume<R, kEp, kLora>(a, base, jobs, tid);
  } else if (tid == kConsumerThreads) {
    produce<R, kEp>(a, base, jobs, mailbox, rank);
  }
  __syncwarp();
  cluster::sync();  // no block leaves while the others may still arrive on its barriers
}

}  // namespace tma

}  // namespace beam::cuda::moe_gemm
