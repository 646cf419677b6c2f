// LoRA kernels on tensor cores over tiles of rows that come in runs of shared factors
// (moe_lora_args.cuh): the routed experts' grouped path, its rows visited by expert, then adapter
// (launch_sort_by_adapter), and the dense lora_add of a prefill chunk, its tokens in order as one
// expert (lora.cu). A block takes a tile of consecutive rows (32 for the shrink, 16 for the
// expand) and, for each (expert, adapter slot) among them, one pass of mma.sync m16n8k16 over
// all its rows whose results it keeps for that pair's rows only (a row's sums do not depend on
// the other rows of its tile, so on the batch). k runs in a fixed permutation of its order within
// each k-step, the same on both operands: lane q of a quad loads 8 consecutive bf16 (shrink) or 4
// consecutive values (expand) of its row and column and feeds them as the fragment's k pairs {2q,
// 2q + 1} and {2q + 8, 2q + 9}, so every load is 16 or 8 bytes (the router's fp32 GEMM does the
// same, moe_route.cu).
//   Shrink: h[i, q] = scale · Σ_c in[row_i, c] · A[e, s, q, c] for the (part, j) columns q of a
// 32-wide chunk (grid y); each of 4 warps sums every 4th 32-element k-chunk, the warps' partials
// added in warp order through shared memory.
//   Expand: each warp takes 64 columns of one part; h (fp32) enters as its exact hi + mid + lo bf16
// terms (split3), three products a k-step into the same fp32 accumulators; the deltas are stored
// fp32 (gate_up) or added to y's rounded rows and rounded again (down, dense), 16 bytes a lane
// and 64 contiguous bytes a row per store instruction.
#include "kernels/cuda/check.h"
#include "kernels/cuda/mma_sync.cuh"
#include "kernels/cuda/moe_lora_args.cuh"

namespace beam::cuda::moe_lora {
namespace {

constexpr int kTile = 16;      // grouped rows an expand block: the mma's M
constexpr int kShrinkSub = 2;  // 16-row sub-tiles a shrink block (each load of A feeds them all)
constexpr int kShrinkRows = 16 * kShrinkSub;
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kShrinkCols = 32;  // (part, j) columns a shrink block: 4 n-tiles of 8
constexpr int kShrinkNTiles = kShrinkCols / 8;
constexpr int kKChunk = 32;                              // k elements a shrink step: 2 mma k-steps
constexpr int kExpandNTiles = 8;                         // n-tiles of 8 columns an expand warp
constexpr int kExpandCols = kWarps * kExpandNTiles * 8;  // columns of one part an expand block
constexpr int kShrinkSums = kShrinkRows * kShrinkCols / kThreads;  // the shrink's sums a thread
static_assert(kShrinkRows * kShrinkCols % kThreads == 0);

// A tile's kRows (<= 32) rows and the passes over their (expert, slot) pairs.
template <int kRows>
struct TileRows {
  static_assert(kRows <= 32, "rows as the bits of a 32-bit mask");
  Slot row[kRows];

  // Bit r set where row r has LoRA.
  __device__ uint32_t with_lora() const {
    uint32_t m = 0;
#pragma unroll
    for (int r = 0; r < kRows; ++r) m |= row[r].has_lora() ? 1u << r : 0u;
    return m;
  }

  // The first row of a nonempty mask of rows.
  __device__ const Slot& first(uint32_t rows) const {
    return row[__ffs(static_cast<int>(rows)) - 1];
  }

  // The rows of `left` (those without a pass yet) that share the factors of its first row.
  __device__ uint32_t next_pass(uint32_t left) const {
    const Slot& lead = first(left);
    uint32_t m = 0;
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      m |= (left >> r & 1u) && row[r].same_factors(lead) ? 1u << r : 0u;
    return m;
  }
};

// Block tile `tile`'s rows into shared memory (threads 0 .. kRows - 1; the caller syncs).
template <int kRows>
__device__ __forceinline__ void load_tile(TileRows<kRows>& t, const Rows& rows, int64_t tile) {
  const int r = static_cast<int>(threadIdx.x);
  if (r < kRows) t.row[r] = slot_or_none(rows, tile * kRows + r);
}

__device__ __forceinline__ uint4 load16_or_zero(const bf16_t* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

// A column's factor row, or nullptr past the parts' columns: column q = part * rank + j.
__device__ __forceinline__ const bf16_t* factor_row(const ShrinkArgs& p, int q, const Slot& v) {
  if (q >= p.parts * p.rank) return nullptr;
  const int part = q / p.rank, j = q % p.rank;
  return pick(p.a, part) + ((static_cast<int64_t>(v.e) * p.num_slots + v.s) * p.rank + j) * p.k;
}

// Grid: x = tile of kShrinkRows grouped rows, y = chunk of 32 (part, j) columns.
__global__ void __launch_bounds__(kThreads) shrink_mma_kernel(const ShrinkArgs p) {
  __shared__ TileRows<kShrinkRows> tile;
  __shared__ float partial[kWarps][kShrinkRows][kShrinkCols];
  load_tile(tile, p.rows, blockIdx.x);
  if (threadIdx.x < kShrinkRows) {  // a slot outside [kNoLoraSlot, S) is a caller's bug
    const Slot& v = tile.row[threadIdx.x];
    if (v.i >= 0 && (v.s < kNoLoraSlot || v.s >= p.num_slots)) __trap();
  }
  __syncthreads();
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q4 = lane % 4;  // fragment row / column group, lane in the quad
  const int col0 = static_cast<int>(blockIdx.y) * kShrinkCols;
  const int64_t chunks = (p.k + kKChunk - 1) / kKChunk;
  for (uint32_t left = tile.with_lora(); left != 0;) {
    const uint32_t pass = tile.next_pass(left);
    left &= ~pass;
    const Slot& lead = tile.first(pass);
    // the pass's input rows g and g + 8 of each sub-tile (nullptr: not in the pass)
    const bf16_t* x[kShrinkSub][2];
#pragma unroll
    for (int st = 0; st < kShrinkSub; ++st) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = 16 * st + g + 8 * h;
        const Slot& v = tile.row[row];
        x[st][h] = nullptr;
        if (pass >> row & 1u) x[st][h] = p.in + (p.in_row_of ? p.in_row_of[v.i] : v.t) * p.k;
      }
    }
    const bf16_t* a[kShrinkNTiles];
#pragma unroll
    for (int nt = 0; nt < kShrinkNTiles; ++nt) a[nt] = factor_row(p, col0 + 8 * nt + g, lead);
    float acc[kShrinkSub][kShrinkNTiles][4] = {};
#pragma unroll 2
    for (int64_t c = warp; c < chunks; c += kWarps) {
      const int64_t kk = c * kKChunk + 8 * q4;
      const bool in_k = kk < p.k;  // k % 8 == 0: a 16-byte piece is all in or all out
      uint4 xv[kShrinkSub][2];
#pragma unroll
      for (int st = 0; st < kShrinkSub; ++st) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
          xv[st][h] = load16_or_zero(x[st][h] + kk, in_k && x[st][h] != nullptr);
      }
#pragma unroll
      for (int nt = 0; nt < kShrinkNTiles; ++nt) {
        const uint4 w = load16_or_zero(a[nt] + kk, in_k && a[nt] != nullptr);
#pragma unroll
        for (int st = 0; st < kShrinkSub; ++st) {
          const uint4 &x0 = xv[st][0], &x1 = xv[st][1];
          mma_bf16(acc[st][nt], x0.x, x1.x, x0.y, x1.y, w.x, w.y);
          mma_bf16(acc[st][nt], x0.z, x1.z, x0.w, x1.w, w.z, w.w);
        }
      }
    }
#pragma unroll
    for (int st = 0; st < kShrinkSub; ++st) {
#pragma unroll
      for (int nt = 0; nt < kShrinkNTiles; ++nt) {
        const int col = 8 * nt + 2 * q4, row = 16 * st + g;
        partial[warp][row][col] = acc[st][nt][0];
        partial[warp][row][col + 1] = acc[st][nt][1];
        partial[warp][row + 8][col] = acc[st][nt][2];
        partial[warp][row + 8][col + 1] = acc[st][nt][3];
      }
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kShrinkSums; ++u) {
      const int o = tid + u * kThreads, r = o / kShrinkCols, col = o % kShrinkCols;
      const int q = col0 + col;
      if (!(pass >> r & 1u) || q >= p.parts * p.rank) continue;
      float sum = partial[0][r][col];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) sum += partial[w][r][col];
      const float scale = pick(p.scale, q / p.rank)[lead.s];
      p.h[tile.row[r].i * p.parts * p.rank + q] = __fmul_rn(scale, sum);
    }
    __syncthreads();  // partial is the next pass's
  }
}

// Four consecutive fp32 values (16-byte aligned), or zeros.
__device__ __forceinline__ float4 load4_or_zero(const float* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// Four consecutive bf16 (8-byte aligned), or zeros.
__device__ __forceinline__ uint2 load8_or_zero(const bf16_t* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const uint2*>(p)) : make_uint2(0, 0);
}

// The 8 bf16 of a 16-byte word as fp32 plus d[0..7], each sum rounded back to bf16.
__device__ __forceinline__ uint4 add_rounded8(uint4 y, const float* d) {
  auto* pairs = reinterpret_cast<__nv_bfloat162*>(&y);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const float2 f = __bfloat1622float2(pairs[u]);
    pairs[u] = __floats2bfloat162_rn(__fadd_rn(f.x, d[2 * u]), __fadd_rn(f.y, d[2 * u + 1]));
  }
  return y;
}

// Grid: x = tile of 16 grouped rows, y = (part, chunk of kExpandCols columns), the part slowest.
// A warp's 64 columns are permuted across its n-tiles so that each store instruction writes 64
// contiguous bytes of each of 8 rows, a 16-byte word a lane: with W columns a word (4 fp32, 8
// bf16) and G = W / 2, n-tile nt's column m is column 4 W (nt / G) + W (m / 2) + 2 (nt % G) +
// m % 2 of the warp's, so lane q's word u holds columns 4 W u + W q .. + W - 1 (n-tiles G u ..).
template <bool kAdd>
__global__ void __launch_bounds__(kThreads) expand_mma_kernel(const ExpandArgs p) {
  constexpr int kWordCols = kAdd ? 8 : 4;
  constexpr int kGroup = kWordCols / 2;
  constexpr int kWords = kExpandNTiles / kGroup;  // a lane's words a row
  __shared__ TileRows<kTile> tile;
  load_tile(tile, p.rows, blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  if (!kAdd && p.has != nullptr && blockIdx.y == 0 && tid < kTile && tile.row[tid].i >= 0)
    p.has[p.out_row_of[tile.row[tid].i]] = tile.row[tid].has_lora() ? 1 : 0;
  __syncthreads();
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, q4 = lane % 4;
  const int64_t chunks_per_part = (p.n + kExpandCols - 1) / kExpandCols;
  const int part = static_cast<int>(blockIdx.y / chunks_per_part);
  const int64_t col0 =
      static_cast<int64_t>(blockIdx.y % chunks_per_part) * kExpandCols + warp * kExpandNTiles * 8;
  if (col0 >= p.n) return;  // no block-wide syncs below
  // column m of n-tile nt (the map above)
  const auto col_of = [col0](int nt, int m) -> int64_t {
    return col0 + 4 * kWordCols * (nt / kGroup) + kWordCols * (m / 2) + 2 * (nt % kGroup) + m % 2;
  };
  const bf16_t* b_part = pick(p.b, part);
  for (uint32_t left = tile.with_lora(); left != 0;) {
    const uint32_t pass = tile.next_pass(left);
    left &= ~pass;
    const Slot& lead = tile.first(pass);
    const float* h[2];  // the pass's h rows g and g + 8 of this part (nullptr: not in the pass)
    uint4 y_old[2][kWords] = {};  // kAdd: the rows' current words, loaded before the products
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = g + 8 * r;
      h[r] = nullptr;
      if (!(pass >> row & 1u)) continue;
      h[r] = p.h + tile.row[row].i * p.h_stride + part * p.rank;
      if constexpr (kAdd) {
        const int64_t i = tile.row[row].i;
        const bf16_t* y = p.y + (p.out_row_of != nullptr ? p.out_row_of[i] : i) * p.y_stride;
#pragma unroll
        for (int u = 0; u < kWords; ++u) {
          const int64_t col = col_of(kGroup * u, 2 * q4);
          y_old[r][u] = load16_or_zero(y + col, col < p.n);
        }
      }
    }
    const bf16_t* b = b_part + (static_cast<int64_t>(lead.e) * p.num_slots + lead.s) * p.n * p.rank;
    float acc[kExpandNTiles][4] = {};
    for (int j0 = 0; j0 < p.rank; j0 += 16) {
      const int j = j0 + 4 * q4;
      const bool in_r = j < p.rank;  // r % 4 == 0
      const float4 h0 = load4_or_zero(h[0] + j, in_r && h[0] != nullptr);
      const float4 h1 = load4_or_zero(h[1] + j, in_r && h[1] != nullptr);
      // the A fragment's registers: rows g, g + 8 of k pair 0, then of k pair 1
      const Split3 s[4] = {split3(h0.x, h0.y), split3(h1.x, h1.y), split3(h0.z, h0.w),
                           split3(h1.z, h1.w)};
#pragma unroll
      for (int nt = 0; nt < kExpandNTiles; ++nt) {
        const int64_t col = col_of(nt, g);
        const uint2 w = load8_or_zero(b + col * p.rank + j, in_r && col < p.n);
        mma_bf16(acc[nt], s[0].lo, s[1].lo, s[2].lo, s[3].lo, w.x, w.y);
        mma_bf16(acc[nt], s[0].mid, s[1].mid, s[2].mid, s[3].mid, w.x, w.y);
        mma_bf16(acc[nt], s[0].hi, s[1].hi, s[2].hi, s[3].hi, w.x, w.y);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = g + 8 * r;
      if (!(pass >> row & 1u)) continue;
      const int64_t out_row =
          p.out_row_of != nullptr ? p.out_row_of[tile.row[row].i] : tile.row[row].i;
#pragma unroll
      for (int u = 0; u < kWords; ++u) {
        const int64_t col = col_of(kGroup * u, 2 * q4);
        if (col >= p.n) continue;  // n % 8 == 0: a word's columns are all in or all out
        float d[kWordCols];
#pragma unroll
        for (int t = 0; t < kGroup; ++t) {
          d[2 * t] = acc[kGroup * u + t][2 * r];
          d[2 * t + 1] = acc[kGroup * u + t][2 * r + 1];
        }
        if constexpr (kAdd) {
          *reinterpret_cast<uint4*>(p.y + out_row * p.y_stride + col) =
              add_rounded8(y_old[r][u], d);
        } else {
          *reinterpret_cast<float4*>(p.delta + (out_row * p.parts + part) * p.n + col) =
              make_float4(d[0], d[1], d[2], d[3]);
        }
      }
    }
  }
}

bool aligned(const void* ptr, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

// Tiles of `rows` rows over the visited rows.
int64_t tiles(const Rows& r, int rows) {
  return (r.count + rows - 1) / rows;
}

// The rows come in runs of shared factors, so that a tile takes few passes: the grouped order (by
// expert, then adapter), or one expert (the dense lora_add's tokens in order). Slot order, a
// token's top_k experts in a row, would give each of them a pass of its own.
bool rows_share_factors(const Rows& r) {
  return r.order != nullptr || r.ids == nullptr;
}

}  // namespace

bool shrink_mma_fits(const ShrinkArgs& p) {
  return rows_share_factors(p.rows) && p.vector_loads;
}

void launch_shrink_mma(CudaContext& ctx, const ShrinkArgs& p) {
  const int64_t chunks = (p.parts * p.rank + kShrinkCols - 1) / kShrinkCols;
  const int64_t blocks = tiles(p.rows, kShrinkRows);
  BEAM_CHECK(blocks <= INT32_MAX && chunks <= kMaxGridY)
      << "moe_lora: shrink grid " << blocks << " x " << chunks << " too large";
  shrink_mma_kernel<<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(chunks)), kThreads,
                      0, ctx.stream>>>(p);
  CUDA_LAUNCH_OK();
}

bool expand_mma_fits(const ExpandArgs& p) {
  bool fits = rows_share_factors(p.rows) && p.rank % 4 == 0 && p.n % 8 == 0 &&
              p.y_stride % 8 == 0 && aligned(p.h, 16) && aligned(p.delta, 16) && aligned(p.y, 16);
  for (int i = 0; i < p.parts; ++i) fits = fits && aligned(p.b[i], 8);
  return fits;
}

void launch_expand_mma(CudaContext& ctx, const ExpandArgs& p, bool add) {
  const int64_t chunks = p.parts * ((p.n + kExpandCols - 1) / kExpandCols);
  const int64_t blocks = tiles(p.rows, kTile);
  BEAM_CHECK(blocks <= INT32_MAX && chunks <= kMaxGridY)
      << "moe_lora: expand grid " << blocks << " x " << chunks << " too large";
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(chunks));
  if (add) {
    expand_mma_kernel<true><<<grid, kThreads, 0, ctx.stream>>>(p);
  } else {
    expand_mma_kernel<false><<<grid, kThreads, 0, ctx.stream>>>(p);
  }
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda::moe_lora
