// CUDA RMSNorm: fp32 sum of squares (block or warp reduction, so the order differs from the CPU's),
// fp32 normalisation and affine multiply, one bf16 rounding after the weight multiply; the fused
// post-norm residual (and post-norm residual + next pre-norm) keep every rounding point of
// kernels/cpu/norm.cpp.
//
// Two kernel families with one summation order: rows that are 8-wide and 16-byte aligned, whose
// packs fit kMaxCachedPacks per thread, run the cached kernels (every input pack loaded into
// registers once, up front, so a row costs one memory round trip); other rows run the general
// kernels (any width and alignment, x re-read for the normalisation). In both, a row's packs are
// dealt to its threads (one warp for rows up to kWarpRowMaxWidth, else one block of
// block_threads()) as packs t, t + stride, ...; each thread sums its packs in that order with
// fmaf, and the warp / block sum combines the threads. Every kernel triggers its programmatic
// dependents at its start (launch.h): the router after the post-norm loads its weights meanwhile.
#include "kernels/cuda/norm.h"

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/norm_math.cuh"

namespace beam::cuda {
namespace {

// Rows of at most this width get one warp each (8 rows per block); wider rows one block each.
constexpr int64_t kWarpRowMaxWidth = 1024;
constexpr int kWarpsPerBlock = 8;
constexpr int kMaxBlockThreads = 512;
constexpr int kMaxCachedPacks = 4;  // 8-wide packs per thread the cached kernels hold

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Threads of a block-per-row launch: the packs balanced over at most kMaxBlockThreads threads
// (5120 wide: 320 threads x 2 packs).
int block_threads(int64_t num_packs) {
  const int64_t per_thread = ceil_div(num_packs, kMaxBlockThreads);
  return static_cast<int>(ceil_div(ceil_div(num_packs, per_thread), 32) * 32);
}

struct BlockReduce {
  __device__ float operator()(float v) const { return block_sum(v); }
};
struct WarpReduce {
  __device__ float operator()(float v) const { return warp_sum(v); }
};

// ---- General kernels (any width, scalar or 8-wide packs) ----------------------------------------

// rms_norm's epilogue: out = bf16(y).
struct StoreNormalized {
  bf16_t* out;
  template <int N>
  __device__ void operator()(int64_t offset, const Pack<N>& y) const {
    store_bf16<N>(out + offset, y);
  }
};

// post_norm_residual's epilogue: residual = bf16(bf16(residual * r) + bf16(bf16(y) * c)).
struct DepthScaledResidual {
  bf16_t* residual;
  float r, c;
  template <int N>
  __device__ void operator()(int64_t offset, const Pack<N>& y) const {
    Pack<N> res = load_bf16<N>(residual + offset);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float scaled_branch = round_bf16(round_bf16(y.v[i]) * c);
      const float scaled_res = round_bf16(res.v[i] * r);
      res.v[i] = scaled_res + scaled_branch;
    }
    store_bf16<N>(residual + offset, res);
  }
};

// This thread's share (packs first, first + stride, ...) of the row's sum of squares.
template <int N>
__device__ float partial_sum_sq(const bf16_t* row, int64_t num_packs, int first, int stride) {
  float sum = 0.0f;
  for (int64_t g = first; g < num_packs; g += stride) {
    const Pack<N> p = load_bf16<N>(row + g * N);
#pragma unroll
    for (int i = 0; i < N; ++i) sum = fmaf(p.v[i], p.v[i], sum);
  }
  return sum;
}

// y = f32(x) * inv_rms * f32(w) (left to right) for this thread's packs, handed to the epilogue.
// Reads each x pack before the epilogue writes it, so out may alias x.
template <int N, typename Epilogue>
__device__ void normalize_packs(const bf16_t* x, const bf16_t* w, int64_t row, int64_t n,
                                float inv_rms, int first, int stride, const Epilogue& epilogue) {
  const int64_t num_packs = n / N;
  for (int64_t g = first; g < num_packs; g += stride) {
    const Pack<N> xp = load_bf16<N>(x + row * n + g * N);
    const Pack<N> wp = load_bf16<N>(w + g * N);
    Pack<N> y;
#pragma unroll
    for (int i = 0; i < N; ++i) y.v[i] = xp.v[i] * inv_rms * wp.v[i];
    epilogue(row * n + g * N, y);
  }
}

// One block per row (rows wider than kWarpRowMaxWidth).
template <int N, typename Epilogue>
__global__ void __launch_bounds__(kMaxBlockThreads)
    rms_norm_block_rows(const bf16_t* x, const bf16_t* w, int64_t n, float eps, Epilogue epilogue) {
  pdl_launch_dependents();  // a programmatic successor (the router) loads its weights meanwhile
  const int64_t row = blockIdx.x;
  const float sum_sq =
      block_sum(partial_sum_sq<N>(x + row * n, n / N, threadIdx.x, blockDim.x));
  normalize_packs<N>(x, w, row, n, inv_rms_of(sum_sq, n, eps), threadIdx.x, blockDim.x,
                     epilogue);
}

// One warp per row, kWarpsPerBlock rows per block (per-head Q/K norms, narrow rows).
template <int N, typename Epilogue>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    rms_norm_warp_rows(const bf16_t* x, const bf16_t* w, int64_t rows, int64_t n, float eps,
                       Epilogue epilogue) {
  pdl_launch_dependents();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together; no block-wide barrier follows
  const int lane = threadIdx.x % 32;
  const float sum_sq = warp_sum(partial_sum_sq<N>(x + row * n, n / N, lane, 32));
  normalize_packs<N>(x, w, row, n, inv_rms_of(sum_sq, n, eps), lane, 32, epilogue);
}

template <int N, typename Epilogue>
void launch_rows(CudaContext& ctx, const bf16_t* x, const bf16_t* w, int64_t rows, int64_t n,
                 float eps, const Epilogue& epilogue) {
  if (n <= kWarpRowMaxWidth) {
    const int64_t blocks = ceil_div(rows, kWarpsPerBlock);
    rms_norm_warp_rows<N><<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, ctx.stream>>>(
        x, w, rows, n, eps, epilogue);
  } else {
    rms_norm_block_rows<N><<<static_cast<unsigned>(rows), block_threads(n / N), 0, ctx.stream>>>(
        x, w, n, eps, epilogue);
  }
  CUDA_LAUNCH_OK();
}

template <typename Epilogue>
void launch_norm(CudaContext& ctx, const TensorView& x, const TensorView& w, float eps,
                 bool aligned_outputs, const Epilogue& epilogue) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  if (rows == 0) return;
  const auto* xp = static_cast<const bf16_t*>(x.data);
  const auto* wp = static_cast<const bf16_t*>(w.data);
  if (n % 8 == 0 && aligned_outputs && all_aligned16(xp, wp)) {
    launch_rows<8>(ctx, xp, wp, rows, n, eps, epilogue);
  } else {
    launch_rows<1>(ctx, xp, wp, rows, n, eps, epilogue);
  }
}

// ---- Cached kernels (8-wide aligned rows, at most kMaxCachedPacks packs per thread) -------------

enum class RowOp {
  kRmsNorm,               // out = rms_norm(x, w)
  kPostNormResidual,      // residual = bf16(bf16(residual * r) + bf16(rms_norm(x, w) * c))
  kPostNormResidualNorm,  // the above, then out = rms_norm(residual, w_next)
};

// Operands of one cached launch (unused pointers null): x [rows, n] is the normalised input
// (the branch for the post-norm ops), out [rows, n], residual [rows, n], w and w_next [n].
struct RowArgs {
  const bf16_t* x;
  const bf16_t* w;
  bf16_t* out;
  bf16_t* residual;
  const bf16_t* w_next;
  int64_t n;
  float eps, r, c;
};

// 8 bf16 as raw bits (4 registers), widened exactly / narrowed to nearest even as load_bf16<8> /
// store_bf16<8> do.
__device__ __forceinline__ uint4 load_raw(const bf16_t* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ Pack<8> widen(const uint4& raw) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  Pack<8> out;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out.v[2 * i] = f.x;
    out.v[2 * i + 1] = f.y;
  }
  return out;
}
__device__ __forceinline__ uint4 narrow(const Pack<8>& p) {
  uint4 raw;
  bf16_t* h = reinterpret_cast<bf16_t*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) h[i] = to_bf16_rn(p.v[i]);
  return raw;
}

// fmaf of each value's square into sum, values in order.
__device__ __forceinline__ float add_squares(const Pack<8>& p, float sum) {
#pragma unroll
  for (int i = 0; i < 8; ++i) sum = fmaf(p.v[i], p.v[i], sum);
  return sum;
}

// One row for this thread's packs first + i * stride (i < kCache): every input pack loaded first,
// then the statistics and epilogues from registers. Each thread reads and writes only its own
// packs, so out may alias x.
template <int kCache, RowOp kOp, typename Reduce>
__device__ __forceinline__ void cached_row(const RowArgs& a, int64_t row, int first, int stride,
                                           const Reduce& reduce) {
  const int64_t num_packs = a.n / 8, row_off = row * a.n;
  uint4 xr[kCache], wr[kCache], rr[kCache], nr[kCache];
#pragma unroll
  for (int i = 0; i < kCache; ++i) {
    const int64_t g = first + int64_t{i} * stride;
    if (g < num_packs) {
      xr[i] = load_raw(a.x + row_off + g * 8);
      wr[i] = load_raw(a.w + g * 8);
      if constexpr (kOp != RowOp::kRmsNorm) rr[i] = load_raw(a.residual + row_off + g * 8);
      if constexpr (kOp == RowOp::kPostNormResidualNorm) nr[i] = load_raw(a.w_next + g * 8);
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kCache; ++i)
    if (first + int64_t{i} * stride < num_packs) sum = add_squares(widen(xr[i]), sum);
  const float inv_rms = inv_rms_of(reduce(sum), a.n, a.eps);
  float next_sum = 0.0f;  // kPostNormResidualNorm: the new residual's sum of squares
#pragma unroll
  for (int i = 0; i < kCache; ++i) {
    const int64_t g = first + int64_t{i} * stride;
    if (g >= num_packs) continue;
    const Pack<8> xp = widen(xr[i]), wp = widen(wr[i]);
    Pack<8> y;
#pragma unroll
    for (int j = 0; j < 8; ++j) y.v[j] = xp.v[j] * inv_rms * wp.v[j];
    if constexpr (kOp == RowOp::kRmsNorm) {
      *reinterpret_cast<uint4*>(a.out + row_off + g * 8) = narrow(y);
    } else {
      Pack<8> res = widen(rr[i]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float scaled_branch = round_bf16(round_bf16(y.v[j]) * a.c);
        const float scaled_res = round_bf16(res.v[j] * a.r);
        res.v[j] = scaled_res + scaled_branch;
      }
      rr[i] = narrow(res);
      *reinterpret_cast<uint4*>(a.residual + row_off + g * 8) = rr[i];
      if constexpr (kOp == RowOp::kPostNormResidualNorm) next_sum = add_squares(widen(rr[i]), next_sum);
    }
  }
  if constexpr (kOp == RowOp::kPostNormResidualNorm) {
    const float next_inv_rms = inv_rms_of(reduce(next_sum), a.n, a.eps);
#pragma unroll
    for (int i = 0; i < kCache; ++i) {
      const int64_t g = first + int64_t{i} * stride;
      if (g >= num_packs) continue;
      const Pack<8> xp = widen(rr[i]), wp = widen(nr[i]);
      Pack<8> y;
#pragma unroll
      for (int j = 0; j < 8; ++j) y.v[j] = xp.v[j] * next_inv_rms * wp.v[j];
      *reinterpret_cast<uint4*>(a.out + row_off + g * 8) = narrow(y);
    }
  }
}

template <int kCache, RowOp kOp>
__global__ void __launch_bounds__(kMaxBlockThreads) cached_block_rows(RowArgs a) {
  pdl_launch_dependents();
  cached_row<kCache, kOp>(a, blockIdx.x, threadIdx.x, blockDim.x, BlockReduce{});
}

template <int kCache, RowOp kOp>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) cached_warp_rows(RowArgs a, int64_t rows) {
  pdl_launch_dependents();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together; no block-wide barrier follows
  cached_row<kCache, kOp>(a, row, threadIdx.x % 32, 32, WarpReduce{});
}

template <int kCache, RowOp kOp>
void launch_cached_as(CudaContext& ctx, const RowArgs& a, int64_t rows, int block_size) {
  if (a.n <= kWarpRowMaxWidth) {
    cached_warp_rows<kCache, kOp><<<static_cast<unsigned>(ceil_div(rows, kWarpsPerBlock)),
                                    kWarpsPerBlock * 32, 0, ctx.stream>>>(a, rows);
  } else {
    cached_block_rows<kCache, kOp><<<static_cast<unsigned>(rows), block_size, 0, ctx.stream>>>(a);
  }
  CUDA_LAUNCH_OK();
}

// Queues the cached kernel of kOp when it applies (n % 8 == 0, every row and vector 16-byte
// aligned: `aligned`, and at most kMaxCachedPacks packs per thread); false when it does not.
// The fused op holds four operands per pack: 4 packs of each would spill at 512 threads.
template <RowOp kOp>
constexpr int64_t max_cached_packs() {
  return kOp == RowOp::kPostNormResidualNorm ? 2 : kMaxCachedPacks;
}

template <RowOp kOp>
bool launch_cached(CudaContext& ctx, const RowArgs& a, int64_t rows, bool aligned) {
  if (a.n % 8 != 0 || !aligned) return false;
  const int64_t num_packs = a.n / 8;
  const int block_size = a.n <= kWarpRowMaxWidth ? 32 * kWarpsPerBlock : block_threads(num_packs);
  const int64_t per_thread = ceil_div(num_packs, a.n <= kWarpRowMaxWidth ? 32 : block_size);
  if (per_thread > max_cached_packs<kOp>()) return false;
  if (per_thread <= 1) {
    launch_cached_as<1, kOp>(ctx, a, rows, block_size);
  } else if (per_thread <= 2) {
    launch_cached_as<2, kOp>(ctx, a, rows, block_size);
  } else if constexpr (max_cached_packs<kOp>() >= 4) {
    launch_cached_as<4, kOp>(ctx, a, rows, block_size);
  }
  return true;
}

const bf16_t* cbf16(const TensorView& t) { return static_cast<const bf16_t*>(t.data); }
bf16_t* mbf16(const TensorView& t) { return static_cast<bf16_t*>(t.data); }

}  // namespace

void rms_norm(CudaContext& ctx, const TensorView& x, const TensorView& w, float eps,
              const TensorView& out) {
  const int64_t rows = x.dim(0);
  if (rows == 0) return;
  const RowArgs a{cbf16(x), cbf16(w), mbf16(out), nullptr, nullptr, x.dim(1), eps, 0.0f, 0.0f};
  if (launch_cached<RowOp::kRmsNorm>(ctx, a, rows, all_aligned16(x.data, w.data, out.data)))
    return;
  launch_norm(ctx, x, w, eps, aligned16(out.data), StoreNormalized{mbf16(out)});
}

void post_norm_residual(CudaContext& ctx, const TensorView& branch, const TensorView& w_post,
                        float eps, float r, float c, const TensorView& residual) {
  const int64_t rows = branch.dim(0);
  if (rows == 0) return;
  const RowArgs a{cbf16(branch), cbf16(w_post), nullptr, mbf16(residual), nullptr,
                  branch.dim(1), eps, r, c};
  if (launch_cached<RowOp::kPostNormResidual>(
          ctx, a, rows, all_aligned16(branch.data, w_post.data, residual.data)))
    return;
  launch_norm(ctx, branch, w_post, eps, aligned16(residual.data),
              DepthScaledResidual{mbf16(residual), r, c});
}

void post_norm_residual_norm(CudaContext& ctx, const TensorView& branch, const TensorView& w_post,
                             float eps, float r, float c, const TensorView& residual,
                             const TensorView& w_next, const TensorView& out) {
  const int64_t rows = branch.dim(0);
  if (rows == 0) return;
  const RowArgs a{cbf16(branch), cbf16(w_post), mbf16(out), mbf16(residual), cbf16(w_next),
                  branch.dim(1), eps, r, c};
  const bool aligned =
      all_aligned16(branch.data, w_post.data, residual.data, w_next.data, out.data);
  if (launch_cached<RowOp::kPostNormResidualNorm>(ctx, a, rows, aligned)) return;
  post_norm_residual(ctx, branch, w_post, eps, r, c, residual);
  rms_norm(ctx, residual, w_next, eps, out);
}

}  // namespace beam::cuda
