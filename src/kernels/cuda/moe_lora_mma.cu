// The routed experts' LoRA kernels on tensor cores, for the grouped path (moe_lora_args.cuh): a
// block takes a tile of 16 consecutive grouped rows and, for each (expert, adapter slot) among
// them, one pass of mma.sync m16n8k16 over all 16 rows whose results it keeps for that pair's rows
// only (a row's sums do not depend on the other rows of its tile, so on the batch). k runs in a
// fixed permutation of its order within each k-step, the same on both operands: lane q of a quad
// loads 8 consecutive bf16 (shrink) or 4 consecutive values (expand) of its row and column and
// feeds them as the fragment's k pairs {2q, 2q + 1} and {2q + 8, 2q + 9}, so every load is 16 or
// 8 bytes (the router's fp32 GEMM does the same, moe_route.cu).
//   Shrink: h[i, q] = scale · Σ_c in[row_i, c] · A[e, s, q, c] for the (part, j) columns q of a
// 32-wide chunk (grid y); each of 4 warps sums every 4th 32-element k-chunk, the warps' partials
// added in warp order through shared memory.
//   Expand: each warp takes 64 columns of one part; h (fp32) enters as its exact hi + mid + lo bf16
// terms (split3), three products a k-step into the same fp32 accumulators; the deltas are stored
// fp32 (gate_up) or added to y's rounded rows and rounded again (down).
#include "kernels/cuda/check.h"
#include "kernels/cuda/mma_sync.cuh"
#include "kernels/cuda/moe_lora_args.cuh"

namespace beam::cuda::moe_lora {
namespace {

constexpr int kTile = 16;  // grouped rows a block: the mma's M
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kShrinkCols = 32;  // (part, j) columns a shrink block: 4 n-tiles of 8
constexpr int kShrinkNTiles = kShrinkCols / 8;
constexpr int kKChunk = 32;                              // k elements a shrink step: 2 mma k-steps
constexpr int kExpandNTiles = 8;                         // n-tiles of 8 columns an expand warp
constexpr int kExpandCols = kWarps * kExpandNTiles * 8;  // columns of one part an expand block
static_assert(kTile * kShrinkCols == 4 * kThreads, "the shrink's sum: 4 outputs a thread");

// The tile's rows and the passes over their (expert, slot) pairs.
struct TileRows {
  Slot row[kTile];

  // Bit r set where row r has LoRA.
  __device__ uint32_t with_lora() const {
    uint32_t m = 0;
#pragma unroll
    for (int r = 0; r < kTile; ++r) m |= row[r].has_lora() ? 1u << r : 0u;
    return m;
  }

  // The rows of `todo` that share the factors of its first row.
  __device__ uint32_t next_pass(uint32_t todo) const {
    const Slot& lead = row[__ffs(static_cast<int>(todo)) - 1];
    uint32_t m = 0;
#pragma unroll
    for (int r = 0; r < kTile; ++r)
      m |= (todo >> r & 1u) && row[r].same_factors(lead) ? 1u << r : 0u;
    return m;
  }
};

// Block tile `tile`'s rows into shared memory (threads 0..15; the caller syncs).
__device__ __forceinline__ void load_tile(TileRows& t, const Rows& rows, int64_t tile) {
  const int r = static_cast<int>(threadIdx.x);
  if (r < kTile) t.row[r] = slot_or_none(rows, tile * kTile + r);
}

__device__ __forceinline__ uint4 load16_or_zero(const bf16_t* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

// A column's factor row, or nullptr past the parts' columns: column q = part * rank + j.
__device__ __forceinline__ const bf16_t* factor_row(const ShrinkArgs& p, int q, const Slot& v) {
  if (q >= p.parts * p.rank) return nullptr;
  const int part = q / p.rank, j = q % p.rank;
  // (selects, not p.a[part]: a dynamic index into the parameters copies them to the stack)
  return (part == 0 ? p.a[0] : p.a[1]) +
         ((static_cast<int64_t>(v.e) * p.num_slots + v.s) * p.rank + j) * p.k;
}

// Grid: x = tile of 16 grouped rows, y = chunk of 32 (part, j) columns.
__global__ void __launch_bounds__(kThreads) shrink_mma_kernel(const ShrinkArgs p) {
  __shared__ TileRows tile;
  __shared__ float partial[kWarps][kTile][kShrinkCols];
  load_tile(tile, p.rows, blockIdx.x);
  __syncthreads();
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q4 = lane % 4;  // fragment row / column group, lane in the quad
  const int col0 = static_cast<int>(blockIdx.y) * kShrinkCols;
  const int64_t chunks = (p.k + kKChunk - 1) / kKChunk;
  for (uint32_t todo = tile.with_lora(); todo != 0;) {
    const uint32_t pass = tile.next_pass(todo);
    todo &= ~pass;
    const Slot& lead = tile.row[__ffs(static_cast<int>(pass)) - 1];
    // the pass's input rows g and g + 8 (nullptr: not in the pass)
    const bf16_t* x[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const Slot& v = tile.row[g + 8 * h];
      x[h] = nullptr;
      if (pass >> (g + 8 * h) & 1u) x[h] = p.in + (p.in_row_of ? p.in_row_of[v.i] : v.t) * p.k;
    }
    const bf16_t* a[kShrinkNTiles];
#pragma unroll
    for (int nt = 0; nt < kShrinkNTiles; ++nt) a[nt] = factor_row(p, col0 + 8 * nt + g, lead);
    float acc[kShrinkNTiles][4] = {};
#pragma unroll 4
    for (int64_t c = warp; c < chunks; c += kWarps) {
      const int64_t kk = c * kKChunk + 8 * q4;
      const bool in_k = kk < p.k;  // k % 8 == 0: a 16-byte piece is all in or all out
      const uint4 x0 = load16_or_zero(x[0] + kk, in_k && x[0] != nullptr);
      const uint4 x1 = load16_or_zero(x[1] + kk, in_k && x[1] != nullptr);
#pragma unroll
      for (int nt = 0; nt < kShrinkNTiles; ++nt) {
        const uint4 w = load16_or_zero(a[nt] + kk, in_k && a[nt] != nullptr);
        mma_bf16(acc[nt], x0.x, x1.x, x0.y, x1.y, w.x, w.y);
        mma_bf16(acc[nt], x0.z, x1.z, x0.w, x1.w, w.z, w.w);
      }
    }
#pragma unroll
    for (int nt = 0; nt < kShrinkNTiles; ++nt) {
      const int col = 8 * nt + 2 * q4;
      partial[warp][g][col] = acc[nt][0];
      partial[warp][g][col + 1] = acc[nt][1];
      partial[warp][g + 8][col] = acc[nt][2];
      partial[warp][g + 8][col + 1] = acc[nt][3];
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int o = tid + u * kThreads, r = o / kShrinkCols, col = o % kShrinkCols;
      const int q = col0 + col;
      if (!(pass >> r & 1u) || q >= p.parts * p.rank) continue;
      float sum = partial[0][r][col];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) sum += partial[w][r][col];
      const float scale = (q >= p.rank ? p.scale[1] : p.scale[0])[lead.s];
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

// Grid: x = tile of 16 grouped rows, y = (part, chunk of kExpandCols columns), the part slowest.
template <bool kAdd>
__global__ void __launch_bounds__(kThreads) expand_mma_kernel(const ExpandArgs p) {
  __shared__ TileRows tile;
  load_tile(tile, p.rows, blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  if (!kAdd && p.has != nullptr && blockIdx.y == 0 && tid < kTile) {
    const int64_t b = static_cast<int64_t>(blockIdx.x) * kTile + tid;
    if (b < p.rows.count) p.has[b] = tile.row[tid].has_lora() ? 1 : 0;
  }
  __syncthreads();
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, q4 = lane % 4;
  const int64_t chunks_per_part = (p.n + kExpandCols - 1) / kExpandCols;
  const int part = static_cast<int>(blockIdx.y / chunks_per_part);
  const int64_t col0 =
      static_cast<int64_t>(blockIdx.y % chunks_per_part) * kExpandCols + warp * kExpandNTiles * 8;
  if (col0 >= p.n) return;  // n % 8 == 0: an n-tile's columns are all in or all out
  const int width = p.parts * p.rank;
  const bf16_t* b_part = part == 0 ? p.b[0] : p.b[1];
  for (uint32_t todo = tile.with_lora(); todo != 0;) {
    const uint32_t pass = tile.next_pass(todo);
    todo &= ~pass;
    const Slot& lead = tile.row[__ffs(static_cast<int>(pass)) - 1];
    const float* h[2];  // the pass's h rows g and g + 8 of this part (nullptr: not in the pass)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = g + 8 * r;
      h[r] = (pass >> row & 1u) ? p.h + tile.row[row].i * width + part * p.rank : nullptr;
    }
    const bf16_t* b = b_part + (static_cast<int64_t>(lead.e) * p.num_slots + lead.s) * p.n * p.rank;
    float acc[kExpandNTiles][4] = {};
    for (int j0 = 0; j0 < p.rank; j0 += 16) {
      const int j = j0 + 4 * q4;
      const bool in_r = j < p.rank;  // r % 4 == 0
      const float4 h0 = load4_or_zero(h[0] + j, in_r && h[0] != nullptr);
      const float4 h1 = load4_or_zero(h[1] + j, in_r && h[1] != nullptr);
      // A fragment regs: (row g, k pair 0), (row g + 8, pair 0), (row g, pair 1), (row g + 8, pair
      // 1)
      const Split3 s[4] = {split3(h0.x, h0.y), split3(h1.x, h1.y), split3(h0.z, h0.w),
                           split3(h1.z, h1.w)};
#pragma unroll
      for (int nt = 0; nt < kExpandNTiles; ++nt) {
        const int64_t col = col0 + 8 * nt + g;
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
      const Slot& v = tile.row[row];
#pragma unroll
      for (int nt = 0; nt < kExpandNTiles; ++nt) {
        const int64_t col = col0 + 8 * nt + 2 * q4;
        if (col >= p.n) continue;
        const float d0 = acc[nt][2 * r], d1 = acc[nt][2 * r + 1];
        if constexpr (kAdd) {
          auto* y = reinterpret_cast<__nv_bfloat162*>(
              p.y + static_cast<int64_t>(p.out_row_of[v.i]) * p.n + col);
          const float2 old = __bfloat1622float2(*y);
          *y = __floats2bfloat162_rn(__fadd_rn(old.x, d0), __fadd_rn(old.y, d1));
        } else {
          const int64_t out_row =
              p.has != nullptr ? static_cast<int64_t>(blockIdx.x) * kTile + row : v.i;
          *reinterpret_cast<float2*>(p.delta + (out_row * p.parts + part) * p.n + col) =
              make_float2(d0, d1);
        }
      }
    }
  }
}

bool aligned(const void* ptr, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

int64_t tiles(const Rows& rows) {
  return (rows.count + kTile - 1) / kTile;
}

}  // namespace

bool shrink_mma_fits(const ShrinkArgs& p) {
  return p.rows.order != nullptr && p.vector_loads;
}

void launch_shrink_mma(CudaContext& ctx, const ShrinkArgs& p) {
  const int64_t chunks = (p.parts * p.rank + kShrinkCols - 1) / kShrinkCols;
  BEAM_CHECK(tiles(p.rows) <= INT32_MAX && chunks <= kMaxGridY)
      << "moe_lora: shrink grid " << tiles(p.rows) << " x " << chunks << " too large";
  shrink_mma_kernel<<<dim3(static_cast<unsigned>(tiles(p.rows)), static_cast<unsigned>(chunks)),
                      kThreads, 0, ctx.stream>>>(p);
  CUDA_LAUNCH_OK();
}

bool expand_mma_fits(const ExpandArgs& p) {
  bool fits = p.rows.order != nullptr && p.rank % 4 == 0 && p.n % 8 == 0 && aligned(p.h, 16) &&
              aligned(p.delta, 8) && aligned(p.y, 4);
  for (int i = 0; i < p.parts; ++i) fits = fits && aligned(p.b[i], 8);
  return fits;
}

void launch_expand_mma(CudaContext& ctx, const ExpandArgs& p, bool add) {
  const int64_t chunks = p.parts * ((p.n + kExpandCols - 1) / kExpandCols);
  BEAM_CHECK(tiles(p.rows) <= INT32_MAX && chunks <= kMaxGridY)
      << "moe_lora: expand grid " << tiles(p.rows) << " x " << chunks << " too large";
  const dim3 grid(static_cast<unsigned>(tiles(p.rows)), static_cast<unsigned>(chunks));
  if (add) {
    expand_mma_kernel<true><<<grid, kThreads, 0, ctx.stream>>>(p);
  } else {
    expand_mma_kernel<false><<<grid, kThreads, 0, ctx.stream>>>(p);
  }
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda::moe_lora
