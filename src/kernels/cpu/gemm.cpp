// CPU GEMM: blocks of output columns (rows of w) are spread over the pool; inside a block,
// register tiles of MR x-rows by NR w-rows stream the weights once per MR rows of x.
#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/vec.h"

namespace beam::cpu {
namespace {

// Output columns per parallel task: small enough to balance 2 threads on narrow layers, large
// enough that a task streams a sizeable contiguous slice of w.
constexpr int64_t kBlockN = 32;

// Computes out[0:M, 0:n] for the w rows [0, n) of one block with MR x NR register tiles.
template <int MR, int NR, typename W, typename O>
void gemm_block(const float* x, int64_t M, int64_t K, const W* w, int64_t n, O* out, int64_t ldo) {
  float res[MR * NR];
  int64_t j = 0;
  for (; j + NR <= n; j += NR) {
    int64_t i = 0;
    for (; i + MR <= M; i += MR) {
      dot_tile<MR, NR>(x + i * K, K, w + j * K, K, K, res);
      for (int a = 0; a < MR; ++a)
        for (int b = 0; b < NR; ++b) store_out(res[a * NR + b], out + (i + a) * ldo + j + b);
    }
    for (; i < M; ++i) {
      dot_tile<1, NR>(x + i * K, K, w + j * K, K, K, res);
      for (int b = 0; b < NR; ++b) store_out(res[b], out + i * ldo + j + b);
    }
  }
  for (; j < n; ++j) {
    for (int64_t i = 0; i < M; ++i) {
      dot_tile<1, 1>(x + i * K, K, w + j * K, K, K, res);
      store_out(res[0], out + i * ldo + j);
    }
  }
}

// Picks the register tile for the number of rows: decode (M = 1..3) keeps more w rows in flight,
// larger M reuses each loaded w vector across 4 rows of x (4 x 3 measured fastest for M = 8..32).
template <typename W, typename O>
void gemm_block_any(const float* x, int64_t M, int64_t K, const W* w, int64_t n, O* out,
                    int64_t ldo) {
  switch (M) {
    case 1:
      gemm_block<1, 8>(x, M, K, w, n, out, ldo);
      return;
    case 2:
      gemm_block<2, 4>(x, M, K, w, n, out, ldo);
      return;
    case 3:
      gemm_block<3, 3>(x, M, K, w, n, out, ldo);
      return;
    default:
      gemm_block<4, 3>(x, M, K, w, n, out, ldo);
      return;
  }
}

// Multiply-adds a pool task does at least: a smaller GEMM (a decode step's projections of a
// small model, one expert's few rows) costs less on one thread than split over the pool.
constexpr int64_t kMinTaskMacs = int64_t{1} << 16;

// Blocks of block_n w rows per task so that a task does at least kMinTaskMacs.
int64_t min_blocks_per_task(int64_t M, int64_t K, int64_t block_n) {
  return std::max<int64_t>(1, kMinTaskMacs / std::max<int64_t>(1, M * K * block_n));
}

template <typename W, typename O>
void gemm_tiles(ThreadPool& pool, const float* x, int64_t M, int64_t K, const W* w, int64_t N,
                O* out, int64_t ldo) {
  const int64_t num_blocks = (N + kBlockN - 1) / kBlockN;
  pool.parallel_for(num_blocks, min_blocks_per_task(M, K, kBlockN), [&](int64_t b0, int64_t b1) {
    int64_t n0 = b0 * kBlockN, n1 = std::min(N, b1 * kBlockN);
    gemm_block_any(x, M, K, w + n0 * K, n1 - n0, out + n0, ldo);
  });
}

// w rows per OpenBLAS call: large enough that repacking x (once per call) stays cheap next to
// the block's flops, small enough that the fp32 copy of the block (4 MiB at K = 4096) fits L3.
constexpr int64_t kBlasBlockN = 256;

// Each pool task widens blocks of w to fp32 and runs a single-threaded sgemm on them: the pool
// already owns the cores, so OpenBLAS must not start threads of its own.
template <typename W, typename O>
void gemm_blas(ThreadPool& pool, const float* x, int64_t M, int64_t K, const W* w, int64_t N,
               O* out, int64_t ldo) {
  openblas_set_num_threads(1);
  const int64_t num_blocks = (N + kBlasBlockN - 1) / kBlasBlockN;
  pool.parallel_for(num_blocks, min_blocks_per_task(M, K, kBlasBlockN), [&](int64_t b0, int64_t b1) {
    std::vector<float> wf(static_cast<size_t>(kBlasBlockN * K));
    std::vector<float> c(static_cast<size_t>(M * kBlasBlockN));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * kBlasBlockN, nb = std::min(N, n0 + kBlasBlockN) - n0;
      for (int64_t j = 0; j < nb; ++j) widen_row(w + (n0 + j) * K, wf.data() + j * K, K);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(M),
                  static_cast<blasint>(nb), static_cast<blasint>(K), 1.0f, x,
                  static_cast<blasint>(K), wf.data(), static_cast<blasint>(K), 0.0f, c.data(),
                  static_cast<blasint>(nb));
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < nb; ++j) store_out(c[i * nb + j], out + i * ldo + n0 + j);
    }
  });
}

template <typename W, typename O>
void gemm_impl(ThreadPool& pool, const float* x, int64_t M, int64_t K, const W* w, int64_t N,
               O* out, int64_t ldo, GemmPath path) {
  if (M == 0 || N == 0) return;
  if (path == GemmPath::kAuto) path = M >= kBlasMinRows ? GemmPath::kBlas : GemmPath::kTiles;
  switch (path) {
    case GemmPath::kTiles:
      gemm_tiles(pool, x, M, K, w, N, out, ldo);
      return;
    case GemmPath::kBlas:
      gemm_blas(pool, x, M, K, w, N, out, ldo);
      return;
    case GemmPath::kAuto:  // resolved above
      break;
  }
}

// Widens x to fp32 once so the tiles read one layout.
std::vector<float> widen_x(const TensorView& x) {
  std::vector<float> xf(static_cast<size_t>(x.numel()));
  switch (x.dtype) {
    case DType::kBF16:
      widen_bf16(x.as<bf16>(), xf.data(), x.numel());
      break;
    case DType::kF32:
      std::copy_n(x.as<float>(), x.numel(), xf.data());
      break;
    case DType::kF16:
    case DType::kI32:
    case DType::kI64:
    case DType::kU8:
      BEAM_CHECK(false) << "linear: x dtype " << dtype_name(x.dtype);
  }
  return xf;
}

template <typename W>
void linear_w(ThreadPool& pool, const float* x, int64_t M, int64_t K, const W* w, int64_t N,
              const TensorView& out, GemmPath path) {
  if (out.dtype == DType::kBF16) {
    gemm(pool, x, M, K, w, N, out.as<bf16>(), N, path);
  } else {
    gemm(pool, x, M, K, w, N, out.as<float>(), N, path);
  }
}

}  // namespace

void gemm(ThreadPool& pool, const float* x, int64_t M, int64_t K, const bf16* w, int64_t N,
          bf16* out, int64_t ldo, GemmPath path) {
  gemm_impl(pool, x, M, K, w, N, out, ldo, path);
}
void gemm(ThreadPool& pool, const float* x, int64_t M, int64_t K, const bf16* w, int64_t N,
          float* out, int64_t ldo, GemmPath path) {
  gemm_impl(pool, x, M, K, w, N, out, ldo, path);
}
void gemm(ThreadPool& pool, const float* x, int64_t M, int64_t K, const float* w, int64_t N,
          bf16* out, int64_t ldo, GemmPath path) {
  gemm_impl(pool, x, M, K, w, N, out, ldo, path);
}
void gemm(ThreadPool& pool, const float* x, int64_t M, int64_t K, const float* w, int64_t N,
          float* out, int64_t ldo, GemmPath path) {
  gemm_impl(pool, x, M, K, w, N, out, ldo, path);
}

void gemm_serial(const float* x, int64_t M, int64_t K, const bf16* w, int64_t N, float* out,
                 int64_t ldo) {
  if (M > 0 && N > 0) gemm_block_any(x, M, K, w, N, out, ldo);
}
void gemm_serial(const float* x, int64_t M, int64_t K, const float* w, int64_t N, float* out,
                 int64_t ldo) {
  if (M > 0 && N > 0) gemm_block_any(x, M, K, w, N, out, ldo);
}

void linear(ThreadPool& pool, const TensorView& x, const TensorView& w, const TensorView& out,
            GemmPath path) {
  linear_split(pool, x, w, std::span<const TensorView>(&out, 1), path);
}

void linear_split(ThreadPool& pool, const TensorView& x, const TensorView& w,
                  std::span<const TensorView> outs, GemmPath path) {
  const int64_t M = x.dim(0), K = x.dim(1);
  std::vector<float> xf = widen_x(x);
  int64_t row0 = 0;
  for (const TensorView& out : outs) {
    const int64_t n = out.dim(1);
    if (w.dtype == DType::kBF16) {
      linear_w(pool, xf.data(), M, K, w.as<bf16>() + row0 * K, n, out, path);
    } else {
      linear_w(pool, xf.data(), M, K, w.as<float>() + row0 * K, n, out, path);
    }
    row0 += n;
  }
}

}  // namespace beam::cpu
