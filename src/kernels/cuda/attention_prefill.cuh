// Device side of the tensor-core prefill attention (kernels/cuda/attention.cu): a FlashAttention-3
// style kernel for head_dim 128 on sm_90a with warpgroup MMAs (wgmma, bf16 inputs, fp32
// accumulation). One CTA serves 128 query rows of one sequence and one q head: two consumer
// warpgroups of 64 rows each and one producer warpgroup (registers moved to the consumers with
// setmaxnreg). The producer copies the 128-key K/V tiles of the head's KV head (through the block
// table: by TMA, a box per paged block, where the block size allows and the box holds a visible key
// and no key past the item's last; by cp.async, zero-filled, for the rest) into a three-stage ring
// of 128B-swizzled shared tiles, each stage signalled on its `full` mbarrier by the TMA bytes and
// asynchronous cp.async arrivals (up to three tiles in flight); the consumers compute S = Q·Kᵀ
// (wgmma, Q and K from shared memory, both K-major), the online softmax in registers and O += P·V
// (wgmma with P from registers and V from shared memory, MN-major), then release the stage on its
// `empty` mbarrier. The two consumer warpgroups take turns on the tensor cores (one's softmax under
// the other's wgmmas). A CTA only loads and computes the key tiles some row of it can see (causal
// future and keys slid out of the window are skipped), and per-key masks are applied only on tiles
// that cut some row's visible range, checking only the bound (first or last visible key) the tile
// cuts. A warpgroup whose 64 rows are all live writes its out rows into rows of the item's last K
// tile that no wgmma reads any more and stores them by TMA (one thread, two boxes; rows of a
// partial warpgroup are stored by the threads). The CTAs are persistent (one per SM): each loops
// over work items (row tile, q head) of a list that runs the q heads of one row tile side by side
// (the G q heads of a KV head share its K/V tiles through L2) and the row tiles heaviest first (the
// host lists a sequence's tiles last-first); the producer prefetches each item's Q into L2 when it
// starts the item and loads the next item's K/V tiles and Q (by TMA where a map exists) while the
// current item finishes. A consumer issues the next item's first S with its item's last P·V and
// runs the epilogue under it, and the TMA store of out rows releases its stage only after that S,
// so the per-item fill and epilogue overlap other work.
//
// Numerics: s = fp32(q·k); p = exp2(s * scale * log2(e) - max * scale * log2(e)) (ex2.approx, the
// CPU's exp(s * scale - max) to fp32 rounding), fp32 online softmax per 128-key tile; the row sum l
// is the fp32 sum of p, and P enters the P·V wgmma as bf16 hi + bf16 lo (P - hi), so P is carried
// to ~2^-17 relative, as the CPU reference's fp32 P (kernels/cpu/attention.cpp): no bf16 rounding
// point the reference lacks. With kBf16P (AttentionProbs::kBf16) P enters as bf16(P), as in
// FlashAttention: a third less tensor work, 1.2x (sliding) to 1.4x (full causal) faster at 8K on
// the H200 (docs/benchmarks.md), each output within 2^-8 · max|v| of the fp32-P result; l stays
// the fp32 sum of the unrounded p. A row keeps its running max until a tile raises it by more than
// 2^8 in p (as FlashAttention-4 does): p <= 2^8 and most tiles leave o unscaled (hi + lo still
// carries such p to ~2^-17 relative).
// out = bf16(o / l), one rounding. A row's result depends only on its own q, its visible keys and
// the fixed 128-slot key-tile grid: tiles it cannot see leave its state unchanged, so neither the
// other rows of its tile nor the batch move its bits.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/exact_divide.cuh"
#include "kernels/cuda/moe_wgmma.cuh"

namespace beam::cuda::attention_detail {

constexpr int kPrefillRows = 128;      // query rows per CTA
constexpr int kPrefillWgRows = 64;     // query rows per consumer warpgroup
constexpr int kPrefillConsumers = kPrefillRows / kPrefillWgRows;
constexpr int kPrefillKeys = 128;      // keys per K/V tile
constexpr int kPrefillDim = 128;       // the head_dim this kernel serves
constexpr int kPrefillMinRows = 64;    // sequences with at least this many query rows use it
constexpr int kPrefillStages = 3;      // K/V ring depth
constexpr int kPrefillConsumerThreads = kPrefillConsumers * 128;
constexpr int kPrefillThreads = kPrefillConsumerThreads + 128;  // + the producer warpgroup
// Registers per thread after setmaxnreg (the 384-thread CTA starts at 168; 2 x 128 x 232 +
// 128 x 40 <= 64K).
constexpr int kPrefillProducerRegs = 40;
constexpr int kPrefillConsumerRegs = 232;

// Shared memory (1024-byte aligned): the Q tile (per consumer warpgroup 64 rows), then the
// stages (K tile, V tile), then the mbarriers full[stage], empty[stage], q_full, q_empty. Every
// tile is stored as two 64-dim halves of rows x 128 bytes, 16-byte chunk c of row r at chunk c ^ (r
// % 8) (SWIZZLE_128B, the layout wgmma::sw128_desc describes). 225 KB: one CTA per SM.
constexpr uint32_t kPrefillQWgBytes = kPrefillWgRows * kPrefillDim * 2;  // 16 KB
constexpr uint32_t kPrefillQBytes = kPrefillConsumers * kPrefillQWgBytes;
constexpr uint32_t kPrefillTileBytes = kPrefillKeys * kPrefillDim * 2;  // 32 KB (K or V)
constexpr uint32_t kPrefillStageBytes = 2 * kPrefillTileBytes;
constexpr uint32_t kPrefillBarOffset = kPrefillQBytes + kPrefillStages * kPrefillStageBytes;
constexpr size_t kPrefillSmemBytes = 1024 + kPrefillBarOffset + (2 * kPrefillStages + 2) * 8;
// Byte offsets from the first mbarrier of the Q tile's barriers: q_full (the producer's Q copies
// landed), q_empty (both consumer warpgroups' last S of the item read the Q tile).
constexpr uint32_t kPrefillQFull = 8 * (2 * kPrefillStages), kPrefillQEmpty = kPrefillQFull + 8;
static_assert(kPrefillSmemBytes <= 227 * 1024, "prefill shared memory over the sm_90 opt-in limit");
constexpr float kLog2e = 1.4426950408889634f;

// A tile of query rows [row0, row0 + rows) of sequence seq (rows <= kPrefillRows).
struct PrefillItem {
  int32_t seq, row0, rows, pad;
};

// Byte offset of 16-byte chunk c (0-15) of row r in a swizzled tile of `rows` rows.
__device__ __forceinline__ uint32_t sw128_offset(int rows, int r, int c) {
  return static_cast<uint32_t>((c / 8) * rows * 128 + r * 128 + (((c % 8) ^ (r % 8)) << 4));
}

// mbarriers: wgmma::mbar_init / mbar_arrive / mbar_try_wait (moe_wgmma.cuh). The wait spins
// without wgmma::mbar_wait's hang counter: the consumers have no register to spare for it.
using wgmma::mbar_arrive;
using wgmma::mbar_init;
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!wgmma::mbar_try_wait(bar, parity)) {
  }
}

// Warpgroup register reallocation (every warp of the warpgroup executes it): the producer gives
// registers back, the consumers take them.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// ---- wgmma with A from registers (the P·V product) ----
// Descriptor of an MN-major B operand (N contiguous) in 128B-swizzled atoms of 64 N x 8 k: row k
// of an atom (64 bf16, 128 bytes) at +128 k, its 16-byte chunks swizzled by k % 8; 8-k groups
// `k_group_bytes` apart (the stride byte offset), 64-wide N blocks `n_block_bytes` apart (the
// leading byte offset, PTX ISA "matrix descriptor": MN-major swizzled layouts).
__device__ __forceinline__ uint64_t sw128_mn_desc(uint32_t addr, uint32_t n_block_bytes,
                                                  uint32_t k_group_bytes) {
  constexpr uint64_t kSwizzle128B = 1;
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>((n_block_bytes & 0x3FFFF) >> 4) << 16) |
         (static_cast<uint64_t>((k_group_bytes & 0x3FFFF) >> 4) << 32) | (kSwizzle128B << 62);
}
// d[64 x 128] += A[64 x 16] · B[16 x 128]: A as the thread's four bf16x2 registers (the mma.sync
// m16n8k16 A fragment of the warp's 16 rows), B MN-major in shared memory (descriptor b), d as
// in wgmma::Mma<128>.
__device__ __forceinline__ void mma_rs_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
// Keeps the compiler from moving A-fragment writes past wgmma::arrive() or reusing the registers
// of in-flight wgmmas before the wait.
template <int kSteps>
__device__ __forceinline__ void fence_a_operands(uint32_t (&a)[kSteps][4]) {
#pragma unroll
  for (int i = 0; i < kSteps; ++i)
    asm volatile("" : "+r"(a[i][0]), "+r"(a[i][1]), "+r"(a[i][2]), "+r"(a[i][3])::"memory");
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 2^x (ex2.approx: -inf gives +0).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Logical slots [lo, hi] visible to the query whose own slot is `self` (slots of one sequence fit
// int32: 2^31 slots of one KV head alone would take 1 TB). window <= 0: full attention.
struct PrefillRange {
  int lo, hi;
};
__device__ __forceinline__ PrefillRange prefill_visible(int self, int window) {
  return {window > 0 ? max(0, self - window + 1) : 0, self};
}

// Asynchronous arrival on `bar` once every earlier cp.async of this thread completed (.noinc:
// the arrival counts against the barrier's expected count).
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// TMA maps of the paged K and V caches, each as {D, Nkv, slots} (slots = num_blocks x block_size)
// with a box of {64 dims, 1 KV head, box_rows slots}: box_rows = min(block_size, 128) when
// block_size is a multiple of 8 that divides 128 or is a multiple of it, else 0 (every key by
// cp.async). A box at slot coordinate `slots` lies wholly out of bounds and loads zeros. And of q
// and out, each as {D, Nq, rows} with a box of {64 dims, 1 q head, 64 rows}, or q_rows / o_rows 0
// (no map: the producer copies Q rows by cp.async, the threads store every out row).
struct PrefillMaps {
  CUtensorMap k, v, q, o;
  int box_rows, slots, q_rows, o_rows;
};

// Producer warpgroup: queues the K and V rows of keys [t0, t0 + 128) of KV head kvh into one
// stage whose full barrier is `bar`. Keys of the boxes that reach into [lo, hi] and end by hi
// come by TMA: thread b reads the block of box b_lo + b and queues its two 64-dim halves of K and
// V, expecting their bytes on `bar` (an unmapped block's box lands as zeros). A box holding lo
// also brings the keys of its block before lo: slots the sequence wrote (attention.h: slots
// [0, kv_len) are written and a block with a visible key is mapped), which every row masks to
// probability 0. The other keys come by cp.async:
// thread t copies 16-byte chunk t % 16 of keys t / 16 + 8i; keys outside [lo, hi] or in an
// unmapped block are zero-filled and never read. Each of the 128 threads then arrives on `bar`
// once its cp.asyncs landed. bs_shift = log2(block_size), or -1 when it is no power of two.
__device__ __forceinline__ void prefill_load_kv(const Params& p, const PrefillMaps& maps,
                                                const int32_t* table, int kvh, int bs_shift,
                                                int t0, int lo, int hi, uint32_t k_s, uint32_t v_s,
                                                uint32_t bar) {
  const int t = threadIdx.x % 128, c = t % 16;
  auto slot_of = [&](int key) {  // the key's physical slot, or -1 when its block is unmapped
    const int bs = static_cast<int>(p.block_size);
    const int logical = bs_shift >= 0 ? key >> bs_shift : key / bs;
    const int64_t block = table[logical];
    return block >= 0 && block < p.num_blocks ? block * bs + (key - logical * bs) : int64_t{-1};
  };
  // Boxes [b_lo, b_hi] of this tile reach into [lo, hi] and end by hi (none without maps).
  const int r = maps.box_rows;
  int b_lo = 1, b_hi = 0;
  if (r > 0) {
    b_lo = lo > t0 ? (lo - t0) / r : 0;
    b_hi = min(kPrefillKeys, hi - t0 + 1) / r - 1;
  }
  const int box = b_lo + t;
  if (box <= b_hi) {
    const int key0 = t0 + box * r;
    const int64_t slot0 = slot_of(key0);
    const int slot = slot0 < 0 ? maps.slots : static_cast<int>(slot0);
    wgmma::mbar_expect_tx(bar, 4 * r * 128);
    const uint32_t row = static_cast<uint32_t>(box * r * 128);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t off = half * (kPrefillKeys * 128) + row;
      wgmma::tma_load_3d(k_s + off, &maps.k, bar, half * 64, kvh, slot);
      wgmma::tma_load_3d(v_s + off, &maps.v, bar, half * 64, kvh, slot);
    }
  }
  const int tma_lo = r > 0 ? b_lo * r : kPrefillKeys, tma_hi = r > 0 ? (b_hi + 1) * r : 0;
  if (tma_lo == 0 && tma_hi == kPrefillKeys) {  // the whole tile by TMA: no row to copy
    mbar_arrive(bar);
    return;
  }
#pragma unroll 4
  for (int i = 0; i < kPrefillKeys / 8; ++i) {
    const int j = t / 16 + 8 * i;
    if (j >= tma_lo && j < tma_hi) continue;
    const int key = t0 + j;
    int64_t src = 0;
    int bytes = 0;
    if (key >= lo && key <= hi) {
      const int64_t slot = slot_of(key);
      if (slot >= 0) {
        src = (slot * p.num_kv_heads + kvh) * kPrefillDim + c * 8;
        bytes = 16;
      }
    }
    const uint32_t dst = sw128_offset(kPrefillKeys, j, c);
    cp_async16(k_s + dst, p.k_cache + src, bytes);
    cp_async16(v_s + dst, p.v_cache + src, bytes);
  }
  mbar_arrive_cp_async(bar);
}

__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// Producer warpgroup: fills ring slot g0 + tile (stage % kPrefillStages) with each tile of one
// work item once the consumers released it; its full barrier (count 128) completes when every
// producer thread's copies of the tile landed and the tile's TMA bytes arrived (the producer does
// not wait, so up to kPrefillStages tiles are in flight, across work items). The consumers fence
// the async proxy after their wait.
__device__ __forceinline__ void prefill_produce(const Params& p, const PrefillMaps& maps,
                                                const int32_t* table, int kvh, int bs_shift,
                                                int first_tile, int num_tiles, int lo, int hi,
                                                int g0, uint32_t kv_s, uint32_t bars) {
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = (g0 + tile) % kPrefillStages;
    const uint32_t round = static_cast<uint32_t>((g0 + tile) / kPrefillStages);
    mbar_wait(bars + 8 * (kPrefillStages + stage), (round & 1) ^ 1);  // empty[stage]
    const uint32_t k_s = kv_s + stage * kPrefillStageBytes;
    prefill_load_kv(p, maps, table, kvh, bs_shift, first_tile + tile * kPrefillKeys, lo, hi, k_s,
                    k_s + kPrefillTileBytes, bars + 8 * stage);
  }
}

// Per-thread state of two query rows of the warpgroup: rows 16 (warp % 4) + lane / 4 + 8 i
// (i = 0, 1); o[4j + 2i + q] is dim 8j + 2 (lane % 4) + q. l is the sum over
// this thread's keys only (the quad's partial sums are added at the end).
struct PrefillState {
  float o[64];
  float m[2], l[2];
};

// A shared-memory wgmma descriptor moved on by `bytes` (a multiple of 16): its address field holds
// address / 16 and shared addresses stay below 2^18, so the add never carries out of the field
// (one add per wgmma instead of rebuilding the descriptor).
__device__ __forceinline__ uint64_t desc_add(uint64_t desc, uint32_t bytes) {
  return desc + (bytes >> 4);
}

// Issues S = Q Kᵀ for the warpgroup's 64 rows and the 128 keys of the K tile at k_s into s
// (overwritten: the first k-step does not accumulate): s[4j + 2i + q] is key 8j + 2 (lane % 4) + q
// of row i (PrefillState's row numbering).
__device__ __forceinline__ void prefill_issue_scores(uint32_t q_wg, uint32_t k_s, float (&s)[64]) {
  const uint64_t q_desc = wgmma::sw128_desc(q_wg), k_desc = wgmma::sw128_desc(k_s);
#pragma unroll
  for (int kk = 0; kk < kPrefillDim / 16; ++kk) {
    const uint32_t half = kk / 4, step = (kk % 4) * 32;
    wgmma::Mma<kPrefillKeys>::run(s, desc_add(q_desc, half * (kPrefillWgRows * 128) + step),
                                  desc_add(k_desc, half * (kPrefillKeys * 128) + step),
                                  kk == 0 ? 0u : 1u);
  }
}

// Sets the raw scores of the keys of the 128-key tile at slot t0 that the thread's rows cannot see
// to -inf, checking only the bounds the caller says some row's range ends within the tile: its
// first visible key (kLo) and its last (kHi). row_self0: own slot of the warp's first row.
template <bool kLo, bool kHi>
__device__ __forceinline__ void prefill_mask(int window, int row_self0, int t0, float (&sc)[64]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    // Key 8j + q of the thread's columns is visible when lo <= 8j + q <= hi (tile-relative, less
    // the thread's column offset 2 (lane % 4)).
    const PrefillRange vis = prefill_visible(row_self0 + lane / 4 + 8 * i, window);
    const int lo = vis.lo - t0 - 2 * (lane % 4), hi = vis.hi - t0 - 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kPrefillKeys / 8; ++j) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int key = j * 8 + q;
        if ((kLo && key < lo) || (kHi && key > hi)) sc[4 * j + 2 * i + q] = -INFINITY;
      }
    }
  }
}

// A row's max moves only when a tile raises it by more than this, in log2 units of p: its
// probabilities stay at most 2^8.
constexpr float kLazyMaxLog2 = 8.f;

// Online-softmax step for one 128-key tile at slot t0: masks s (raw scores) at the bounds the tile
// cuts (cut_lo, cut_hi: see prefill_mask), replaces it by probabilities and rescales the state (o
// untouched when every row of the warp keeps factor 1: the same bits). A row keeps its max while
// the tile raises it by at most kLazyMaxLog2 / c, so most tiles rescale nothing.
// row_self0: own slot of the warp's first row.
__device__ __forceinline__ void prefill_softmax(const Params& p, int window, int row_self0, int t0,
                                                bool cut_lo, bool cut_hi, float (&sc)[64],
                                                PrefillState& st) {
  const float c = p.scale * kLog2e;
  if (cut_lo && cut_hi)
    prefill_mask<true, true>(window, row_self0, t0, sc);
  else if (cut_hi)
    prefill_mask<false, true>(window, row_self0, t0, sc);
  else if (cut_lo)
    prefill_mask<true, false>(window, row_self0, t0, sc);
  float alpha[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPrefillKeys / 8; ++j)
      mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * i], sc[4 * j + 2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    float m_new = fmaxf(st.m[i], mx);
    // (A row with no key yet: -inf - -inf is NaN, not <= the bound.)
    if ((m_new - st.m[i]) * c <= kLazyMaxLog2) m_new = st.m[i];
    const float m_base = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet
    const float m_scaled = m_base * c;
    // 0 on the first visible tile; exactly 1 (ex2(0)) when the max did not move, so a tile the
    // row cannot see leaves its state unchanged.
    alpha[i] = exp2_approx((st.m[i] - m_base) * c);
    st.m[i] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kPrefillKeys / 8; ++j) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        float& v = sc[4 * j + 2 * i + q];
        v = exp2_approx(fmaf(v, c, -m_scaled));
        sum += v;
      }
    }
    st.l[i] = st.l[i] * alpha[i] + sum;
  }
  if (__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;
#pragma unroll
  for (int e = 0; e < 64; ++e) st.o[e] *= alpha[(e / 2) % 2];
}

// P as wgmma A fragments: step kk covers keys 16 kk + 0-15, registers (row, keys 0-7), (row + 8,
// 0-7), (row, 8-15), (row + 8, 8-15) of the thread's rows; hi = bf16(P), lo = bf16(P - hi)
// (kBf16P: P rounded to bf16, hi alone; lo is never written or read).
struct PrefillP {
  uint32_t hi[kPrefillKeys / 16][4];
  uint32_t lo[kPrefillKeys / 16][4];
};
template <bool kBf16P>
__device__ __forceinline__ void prefill_pack(const float (&sc)[64], PrefillP& pf) {
#pragma unroll
  for (int kk = 0; kk < kPrefillKeys / 16; ++kk) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float* c = &sc[4 * (2 * kk + r / 2) + 2 * (r % 2)];
      pf.hi[kk][r] = pack_bf16(c[0], c[1]);
      if constexpr (!kBf16P) {
        const __nv_bfloat162 h2 = *reinterpret_cast<const __nv_bfloat162*>(&pf.hi[kk][r]);
        pf.lo[kk][r] = pack_bf16(c[0] - __low2float(h2), c[1] - __high2float(h2));
      }
    }
  }
}
// Keeps the P·V operands' registers (P and o) in place across wgmma issue (before: the writes stay
// ahead of wgmma::arrive(); after the wait: no reuse while the wgmmas run); alone after a wait
// that covered the P·V but not a later S (whose accumulators stay untouched).
template <bool kBf16P>
__device__ __forceinline__ void prefill_fence_pv(PrefillP& pf, PrefillState& st) {
  fence_a_operands(pf.hi);
  if constexpr (!kBf16P) fence_a_operands(pf.lo);
  wgmma::fence_operands(st.o);
}
// The same for the P·V and the S accumulators sc.
template <bool kBf16P>
__device__ __forceinline__ void prefill_fence(PrefillP& pf, float (&sc)[64], PrefillState& st) {
  prefill_fence_pv<kBf16P>(pf, st);
  wgmma::fence_operands(sc);
}
// Issues o += P·V for the warpgroup's 64 rows and the 128 keys of the V tile at v_s.
template <bool kBf16P>
__device__ __forceinline__ void prefill_issue_pv(const PrefillP& pf, uint32_t v_s,
                                                 PrefillState& st) {
  const uint64_t v_desc = sw128_mn_desc(v_s, kPrefillKeys * 128, 8 * 128);
#pragma unroll
  for (int kk = 0; kk < kPrefillKeys / 16; ++kk) {  // V rows 16 kk + 0-15, both 64-dim halves
    const uint64_t b = desc_add(v_desc, kk * 16 * 128);
    mma_rs_n128(st.o, pf.hi[kk], b);
    if constexpr (!kBf16P) mma_rs_n128(st.o, pf.lo[kk], b);
  }
}

// Completes the row sums l (each thread's partial sum plus those of the other three threads of its
// quad, the same row), then o = fp32(o / l), each quotient correctly rounded as __fdiv_rn: by one
// reciprocal per row and exact_divide's two fmas per element where that is exact for all 64 (its
// domain needs l >= 1 on the rows written: the key holding a row's max has p >= 1; a row no key
// reaches is never written), else by __fdiv_rn.
__device__ __forceinline__ void prefill_normalize(PrefillState& st) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    st.l[i] += __shfl_xor_sync(0xffffffffu, st.l[i], 1);
    st.l[i] += __shfl_xor_sync(0xffffffffu, st.l[i], 2);
  }
  float min_abs = INFINITY, max_abs = 0.f;
#pragma unroll
  for (int e = 0; e < 64; ++e) {
    min_abs = fminf(min_abs, fabsf(st.o[e]));
    max_abs = fmaxf(max_abs, fabsf(st.o[e]));
  }
  // Element e of the accumulator belongs to row (e / 2) % 2 (wgmma's m64nNk16 fragment).
  if (exact_divide::reciprocal_exact(min_abs, max_abs, fmaxf(st.l[0], st.l[1]))) {
    const float y[2] = {exact_divide::reciprocal_rn(st.l[0]), exact_divide::reciprocal_rn(st.l[1])};
#pragma unroll
    for (int e = 0; e < 64; ++e)
      st.o[e] = exact_divide::divide_by_reciprocal(st.o[e], st.l[(e / 2) % 2], y[(e / 2) % 2]);
  } else {
#pragma unroll
    for (int e = 0; e < 64; ++e) st.o[e] = __fdiv_rn(st.o[e], st.l[(e / 2) % 2]);
  }
}

// bf16(o) of dims 8j + 2 (lane % 4) + 0-1 of the thread's row i, as one bf16x2 (o normalized).
__device__ __forceinline__ uint32_t prefill_out_pair(const PrefillState& st, int i, int j) {
  return pack_bf16(st.o[4 * j + 2 * i], st.o[4 * j + 2 * i + 1]);
}

// Writes out = bf16(o / l) for the thread's live rows (l summed over the quad first).
// warp_row0: the warp's first row within the item.
__device__ __forceinline__ void prefill_write(const Params& p, const SeqDesc& s,
                                              const PrefillItem& it, int h, int warp_row0,
                                              PrefillState& st) {
  const int lane = threadIdx.x % 32;
  prefill_normalize(st);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = warp_row0 + lane / 4 + 8 * i;
    if (r >= it.rows) continue;
    const int64_t tok = s.q_begin + it.row0 + r;
    __nv_bfloat16* dst = p.out + (tok * p.num_heads + h) * kPrefillDim + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kPrefillDim / 8; ++j)
      *reinterpret_cast<uint32_t*>(dst + 8 * j) = prefill_out_pair(st, i, j);
  }
}

// One work item of a CTA: its item, q head, the keys [lo, hi] its rows see in tiles from
// first_tile.
struct PrefillWork {
  PrefillItem it;
  SeqDesc s;
  int h, window, self0, lo, hi, first_tile, num_tiles;
};

// Work index idx = item * Nq + q head (the q heads of an item adjacent: they share K/V tiles
// through L2).
__device__ __forceinline__ PrefillWork prefill_work(const Params& p, const PrefillItem* items,
                                                    int idx) {
  PrefillWork w;
  w.h = idx % p.num_heads;
  w.it = items[idx / p.num_heads];
  w.s = p.seqs[w.it.seq];
  // A window wider than any int32 slot range is full attention.
  w.window = p.window > 0 && p.window <= INT32_MAX ? static_cast<int>(p.window) : 0;
  w.self0 = static_cast<int>(w.s.q_pos0 + w.it.row0 - w.s.kv_pos0);  // own slot of row 0
  w.lo = prefill_visible(w.self0, w.window).lo;
  w.hi = w.self0 + w.it.rows - 1;
  w.first_tile = w.lo / kPrefillKeys * kPrefillKeys;
  w.num_tiles = (w.hi - w.first_tile) / kPrefillKeys + 1;
  return w;
}

// Producer warpgroup: prefetches work item w's Q rows into L2 (thread 0, by TMA where the map
// exists), so prefill_load_q, which must wait for the item before to finish with the Q tile, finds
// them there.
__device__ __forceinline__ void prefill_prefetch_q(const PrefillMaps& maps, const PrefillWork& w) {
  if (maps.q_rows == 0 || threadIdx.x % 128 != 0) return;
  const int tok = static_cast<int>(w.s.q_begin + w.it.row0);
#pragma unroll
  for (int g = 0; g < kPrefillConsumers; ++g) {
#pragma unroll
    for (int half = 0; half < 2; ++half)
      wgmma::tma_prefetch_3d(&maps.q, half * 64, w.h, tok + g * kPrefillWgRows);
  }
}

// Producer warpgroup: queues the Q rows of work item w (item rows 0-127 of q head w.h) into q_s,
// warpgroup g's 64 rows at q_s + g * kPrefillQWgBytes, signalled on `bar` (count 128). By TMA when
// the map exists (thread 0, four boxes; rows past the item bring other tokens' q or, past the
// tensor, zeros: rows whose results nobody writes), else by cp.async with rows past the item
// zero-filled.
__device__ __forceinline__ void prefill_load_q(const Params& p, const PrefillMaps& maps,
                                               const PrefillWork& w, uint32_t q_s, uint32_t bar) {
  const int t = threadIdx.x % 128;
  if (maps.q_rows > 0) {
    if (t == 0) {
      wgmma::mbar_expect_tx(bar, kPrefillQBytes);
      const int tok = static_cast<int>(w.s.q_begin + w.it.row0);
#pragma unroll
      for (int g = 0; g < kPrefillConsumers; ++g) {
#pragma unroll
        for (int half = 0; half < 2; ++half)
          wgmma::tma_load_3d(q_s + g * kPrefillQWgBytes + half * (kPrefillWgRows * 128), &maps.q,
                             bar, half * 64, w.h, tok + g * kPrefillWgRows);
      }
    }
    mbar_arrive(bar);
    return;
  }
  const int c = t % 16;
#pragma unroll 4
  for (int i = 0; i < kPrefillRows / 8; ++i) {
    const int r = t / 16 + 8 * i;
    const bool live = r < w.it.rows;
    const int64_t tok = w.s.q_begin + w.it.row0 + r;
    const int64_t src = live ? (tok * p.num_heads + w.h) * kPrefillDim + c * 8 : 0;
    const uint32_t dst = q_s + (r / kPrefillWgRows) * kPrefillQWgBytes +
                         sw128_offset(kPrefillWgRows, r % kPrefillWgRows, c);
    cp_async16(dst, p.q + src, live ? 16 : 0);
  }
  mbar_arrive_cp_async(bar);
}

// The persistent CTAs snake through the heaviest-first work list: in round r, CTA b takes index
// r * G + b (r even) or r * G + G - 1 - b (r odd), G = gridDim.x. Advances `round` to the CTA's
// next round with work and returns its index, or -1 when the CTA is done.
__device__ __forceinline__ int prefill_next_work(int& round, int num_work) {
  const int g = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
  for (;; ++round) {
    const int64_t base = int64_t{round} * g;
    if (base >= num_work) return -1;
    const int64_t idx = base + (round % 2 ? g - 1 - b : b);
    if (idx < num_work) {
      ++round;
      return static_cast<int>(idx);
    }
  }
}

// Named barriers (ids 1-2: a warpgroup's own Q load and out rows; 3-4: the ping-pong of the two
// warpgroups; 5: warpgroup 1's S of an item's last K tile completed, before warpgroup 0 writes its
// out rows over that tile).
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Stores out = bf16(o / l) of the warpgroup's 64 rows, all live, by TMA: the threads write them
// into o_s (two boxes of 64 rows x 64 dims, 16 KB apart, 128B-swizzled as the K tiles: rows of the
// last K tile no wgmma reads any more) and the warpgroup's thread 0 stores the boxes. That thread
// waits for the TMA to read them and releases the K/V stage later (prefill_release_stage), so the
// warpgroup moves on to its next item at once.
__device__ __forceinline__ void prefill_store_o(const PrefillMaps& maps, const PrefillWork& w,
                                                int wg, int warp_row0, uint32_t o_s,
                                                PrefillState& st) {
  const int lane = threadIdx.x % 32;
  prefill_normalize(st);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = warp_row0 % kPrefillWgRows + lane / 4 + 8 * i;  // row within the warpgroup
#pragma unroll
    for (int j = 0; j < kPrefillDim / 8; ++j) {  // 16-byte chunk j of the row, as the K tile's
      const uint32_t addr = o_s + sw128_offset(kPrefillKeys, r, j) + (lane % 4) * 4;
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(prefill_out_pair(st, i, j))
                   : "memory");
    }
  }
  wgmma::fence_proxy_async();  // the rows (generic proxy) visible to the TMA store ...
  named_sync(1 + wg, 128);     // ... everyone's
  if (threadIdx.x % 128 == 0) {
    const int tok = static_cast<int>(w.s.q_begin + w.it.row0 + wg * kPrefillWgRows);
    wgmma::tma_store_3d(&maps.o, o_s, 0, w.h, tok);
    wgmma::tma_store_3d(&maps.o, o_s + kPrefillKeys * 128, 64, w.h, tok);
    wgmma::bulk_commit();
  }
}

// The warpgroup's thread 0 releases the K/V stage whose `empty` barrier is `pending` (0: none) for
// the whole warpgroup once the TMA store of out rows from it read them (prefill_store_o).
__device__ __forceinline__ void prefill_release_stage(uint32_t& pending) {
  if (pending != 0 && threadIdx.x % 128 == 0) {
    wgmma::bulk_wait_read();
    wgmma::mbar_arrive_count(pending, 128);
  }
  pending = 0;
}

// Softmax step of tile `tile` of the work item for the warpgroup (masked where some live row of it
// does not see the whole tile), then P packed for P·V.
template <bool kBf16P>
__device__ __forceinline__ void prefill_softmax_pack(const Params& p, const PrefillWork& w,
                                                     PrefillRange w_first, PrefillRange w_last,
                                                     int warp_row0, int tile, float (&sc)[64],
                                                     PrefillState& st, PrefillP& pf) {
  const int t0 = w.first_tile + tile * kPrefillKeys;
  // Some row's range starts after t0 (the last row's lo is the largest) or ends before the tile
  // does (the first row's hi is the smallest).
  const bool cut_lo = t0 < w_last.lo;
  const bool cut_hi = t0 + kPrefillKeys - 1 > w_first.hi;
  prefill_softmax(p, w.window, w.self0 + warp_row0, t0, cut_lo, cut_hi, sc, st);
  prefill_pack<kBf16P>(sc, pf);
}

// Consumer warpgroup wg (rows wg * 64 + 0-63 of the item): runs every tile of work item w, the
// CTA's item number `item`, from ring slot g0 on (a tile a row cannot see leaves its state
// unchanged) and writes its live rows. The item's first S (into sc) was issued before: with the
// last P·V of the item before, or by prefill_first_scores. Its Q comes from the producer (q_full,
// phase item % 2); once the item's last S completed the warpgroup arrives on q_empty, so the
// producer can queue the next item's Q under the last softmax. The two warpgroups take turns on
// the tensor cores (FlashAttention-3's ping-pong, continued across work items): between bar.sync
// on its own barrier (3 + wg) and bar.arrive on the other's, a warpgroup issues P·V of tile t and
// S of tile t + 1 (no branch between issue and wait: ptxas would serialize the wgmmas), so one
// warpgroup's softmax runs under the other's wgmmas; it hands the turn over as soon as its wgmmas
// are issued (before its wait), so the other's queue behind them without a gap. The last turn
// issues the item's last P·V and the next item's first S (the CTA's last item: an S over the ring
// slot after its last tile, which no copy writes any more, never read), and the epilogue runs
// once the P·V completed, under that S. The stage of tile t is released once its P·V completed;
// the stage the item before stored its out rows from (`pending`) once this item's first S did.
template <bool kBf16P>
__device__ __forceinline__ void prefill_consume(const Params& p, const PrefillMaps& maps,
                                                const PrefillWork& w, int wg, uint32_t q_wg,
                                                uint32_t kv_s, uint32_t bars, int g0, int item,
                                                bool has_next, uint32_t& pending, float (&sc)[64]) {
  const int wg_row0 = wg * kPrefillWgRows;
  // The live rows see keys [w_first.lo, w_last.hi]; all of them see [w_last.lo, w_first.hi].
  const PrefillRange w_first = prefill_visible(w.self0 + wg_row0, w.window);
  const PrefillRange w_last =
      prefill_visible(w.self0 + max(min(wg_row0 + kPrefillWgRows, w.it.rows) - 1, wg_row0),
                      w.window);
  const int warp_row0 = wg_row0 + 16 * ((threadIdx.x / 32) % 4);
  const int own = 3 + wg, other = 4 - wg;  // 256 threads: one warpgroup syncs, the other arrives
  const uint32_t q_full = bars + kPrefillQFull, q_empty = bars + kPrefillQEmpty;
  auto full = [&](int tile) { return bars + 8 * ((g0 + tile) % kPrefillStages); };
  auto empty = [&](int tile) {
    return bars + 8 * (kPrefillStages + (g0 + tile) % kPrefillStages);
  };
  auto parity = [&](int tile) { return static_cast<uint32_t>((g0 + tile) / kPrefillStages) & 1; };
  auto k_tile = [&](int tile) {
    return kv_s + ((g0 + tile) % kPrefillStages) * kPrefillStageBytes;
  };

  PrefillState st;
#pragma unroll
  for (int e = 0; e < 64; ++e) st.o[e] = 0.f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.f;
  PrefillP pf;

  wgmma::wait<0>();  // the item's first S
  prefill_fence<kBf16P>(pf, sc, st);
  prefill_release_stage(pending);
  if (w.num_tiles == 1) mbar_arrive(q_empty);
  // Tiles before the last: softmax, then P·V of the tile and S of the next one.
  for (int tile = 0; tile + 1 < w.num_tiles; ++tile) {
    prefill_softmax_pack<kBf16P>(p, w, w_first, w_last, warp_row0, tile, sc, st, pf);
    named_sync(own, 256);
    mbar_wait(full(tile + 1), parity(tile + 1));
    wgmma::fence_proxy_async();
    prefill_fence<kBf16P>(pf, sc, st);
    wgmma::arrive();
    prefill_issue_pv<kBf16P>(pf, k_tile(tile) + kPrefillTileBytes, st);
    prefill_issue_scores(q_wg, k_tile(tile + 1), sc);
    wgmma::commit();
    named_arrive(other, 256);
    wgmma::wait<0>();
    prefill_fence<kBf16P>(pf, sc, st);
    mbar_arrive(empty(tile));
    if (tile + 2 == w.num_tiles) mbar_arrive(q_empty);
  }
  const int tile = w.num_tiles - 1;  // the last tile: softmax and P·V
  prefill_softmax_pack<kBf16P>(p, w, w_first, w_last, warp_row0, tile, sc, st, pf);
  // Warpgroup 0's rows all live: it stores them by TMA through the last K tile, once warpgroup 1's
  // S of it completed (barrier 5); warpgroup 1 likewise when its rows are all live.
  const bool wg0_tma = maps.o_rows > 0 && w.it.rows >= kPrefillWgRows;
  const bool tma = maps.o_rows > 0 && wg_row0 + kPrefillWgRows <= w.it.rows;
  if (wg == 1 && wg0_tma) named_arrive(5, 256);
  if (has_next) {  // the next item's Q and first K tile (ring slot g0 + num_tiles)
    mbar_wait(q_full, static_cast<uint32_t>(item + 1) & 1);
    mbar_wait(full(w.num_tiles), parity(w.num_tiles));
  }
  named_sync(own, 256);
  wgmma::fence_proxy_async();
  prefill_fence<kBf16P>(pf, sc, st);
  wgmma::arrive();
  prefill_issue_pv<kBf16P>(pf, k_tile(tile) + kPrefillTileBytes, st);
  wgmma::commit();
  prefill_issue_scores(q_wg, k_tile(w.num_tiles), sc);
  wgmma::commit();
  named_arrive(other, 256);
  wgmma::wait<1>();  // the P·V; the next S runs on
  prefill_fence_pv<kBf16P>(pf, st);
  if (tma) {
    if (wg == 0) named_sync(5, 256);
    prefill_store_o(maps, w, wg, warp_row0, k_tile(tile) + wg_row0 * 128, st);
    pending = empty(tile);
    return;
  }
  mbar_arrive(empty(tile));
  if (wg_row0 < w.it.rows) prefill_write(p, w.s, w.it, w.h, warp_row0, st);
}

// Consumer warpgroup wg: the first S of the CTA's first work item (ring slot 0, phase 0 of q_full
// and full[0]), a turn of its own; every later item's comes with the last P·V of the item before.
__device__ __forceinline__ void prefill_first_scores(int wg, uint32_t q_wg, uint32_t kv_s,
                                                     uint32_t bars, float (&sc)[64]) {
  mbar_wait(bars + kPrefillQFull, 0);
  named_sync(3 + wg, 256);
  mbar_wait(bars, 0);  // full[0]
  wgmma::fence_proxy_async();
  wgmma::fence_operands(sc);
  wgmma::arrive();
  prefill_issue_scores(q_wg, kv_s, sc);
  wgmma::commit();
  named_arrive(4 - wg, 256);
}

// Consumer warpgroup wg: every work item of the CTA in turn (ring slots continue across items;
// the next item is read while the current one runs).
template <bool kBf16P>
__device__ __forceinline__ void prefill_consume_all(const Params& p, const PrefillMaps& maps,
                                                    const PrefillItem* items, int num_work, int wg,
                                                    uint32_t q_wg, uint32_t kv_s, uint32_t bars) {
  int round = 0, g0 = 0;
  uint32_t pending = 0;
  float sc[64];
  int idx = prefill_next_work(round, num_work);
  if (wg == 1) named_arrive(3, 256);  // warpgroup 0 takes the first turn
  if (idx >= 0) {
    PrefillWork w = prefill_work(p, items, idx);
    prefill_first_scores(wg, q_wg, kv_s, bars, sc);
    for (int item = 0;; ++item) {
      idx = prefill_next_work(round, num_work);
      const PrefillWork next = prefill_work(p, items, max(idx, 0));  // read under this item
      prefill_consume<kBf16P>(p, maps, w, wg, q_wg, kv_s, bars, g0, item, idx >= 0, pending, sc);
      if (idx < 0) break;
      g0 += w.num_tiles;
      w = next;
      // A warpgroup barrier between items (it costs ~nothing: the warps meet in the next turn
      // anyway). Without it ptxas spills 136-180 bytes of the fp32-P kernel's registers.
      wgmma::fence_proxy_async();
      named_sync(1 + wg, 128);
    }
    wgmma::wait<0>();  // the S after the last item (never read)
    wgmma::fence_operands(sc);
  }
  if (wg == 0) named_sync(3, 256);  // warpgroup 1's first arrival (it arrived once ahead)
  if (threadIdx.x % 128 == 0) wgmma::bulk_wait();  // the TMA stores of out rows completed
}

// Persistent: grid min(Nq * prefill items, SMs), each CTA looping over its work indices (see
// prefill_next_work; index b: item b / Nq, q head b % Nq, num_work = Nq * items).
// kPrefillThreads threads, kPrefillSmemBytes dynamic shared memory. kBf16P: P enters P·V rounded
// to bf16 (KernelContext::attention_probs).
template <bool kBf16P>
__global__ void __launch_bounds__(kPrefillThreads, 1)
    prefill_kernel(Params p, const PrefillItem* items, int num_work, int bs_shift,
                   const __grid_constant__ PrefillMaps maps) {
  extern __shared__ uint4 prefill_smem[];
  const uint32_t base = (smem_u32(prefill_smem) + 1023u) & ~1023u;  // swizzle atoms: 1024 B
  const uint32_t kv_s = base + kPrefillQBytes, bars = base + kPrefillBarOffset;
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kPrefillStages; ++stage) {
      mbar_init(bars + 8 * stage, 128);                                          // full
      mbar_init(bars + 8 * (kPrefillStages + stage), kPrefillConsumerThreads);  // empty
    }
    mbar_init(bars + kPrefillQFull, 128);
    mbar_init(bars + kPrefillQEmpty, kPrefillConsumerThreads);
  }
  __syncthreads();
  if (threadIdx.x >= kPrefillConsumerThreads) {
    setmaxnreg_dec<kPrefillProducerRegs>();
    if (threadIdx.x == kPrefillConsumerThreads) {
      if (maps.q_rows > 0) wgmma::prefetch_tensor_map(&maps.q);
      if (maps.box_rows > 0) {
        wgmma::prefetch_tensor_map(&maps.k);
        wgmma::prefetch_tensor_map(&maps.v);
      }
    }
    const uint32_t q_full = bars + kPrefillQFull, q_empty = bars + kPrefillQEmpty;
    int round = 0, g0 = 0;
    for (int idx = prefill_next_work(round, num_work), item = 0; idx >= 0;
         idx = prefill_next_work(round, num_work), ++item) {
      // Tile 0, then Q once both warpgroups' last S of the item before completed, then the rest.
      const PrefillWork w = prefill_work(p, items, idx);
      const int32_t* table = p.tables + w.s.table_offset;
      const int kvh = w.h / p.group;
      prefill_prefetch_q(maps, w);
      prefill_produce(p, maps, table, kvh, bs_shift, w.first_tile, 1, w.lo, w.hi, g0, kv_s, bars);
      if (item > 0) mbar_wait(q_empty, static_cast<uint32_t>(item - 1) & 1);
      prefill_load_q(p, maps, w, base, q_full);
      prefill_produce(p, maps, table, kvh, bs_shift, w.first_tile + kPrefillKeys, w.num_tiles - 1,
                      w.lo, w.hi, g0 + 1, kv_s, bars);
      g0 += w.num_tiles;
    }
    cp_async_wait_all();  // no copy outlives its thread
    return;
  }
  setmaxnreg_inc<kPrefillConsumerRegs>();
  const int wg = static_cast<int>(threadIdx.x / 128);
  prefill_consume_all<kBf16P>(p, maps, items, num_work, wg, base + wg * kPrefillQWgBytes, kv_s,
                              bars);
}

}  // namespace beam::cuda::attention_detail
