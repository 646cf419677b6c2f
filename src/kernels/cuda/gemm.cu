// CUDA linear() on cuBLASLt. Row-major out[M, N] = x[M, K] · w[N, K]ᵀ is the column-major
// outᵀ[N, M] = op(w)[N, K] · xᵀ[K, M] with w read as a K x N column-major matrix (op = T) and x as
// K x M (op = N), i.e. a "TN" GEMM with m = N, n = M, k = K. Plans are cached per shape in
// CudaContext::linear, so a decode step never re-runs the heuristic. linear() and linear_split()
// dispatch here between this path and the skinny kernel (gemm_skinny.cu); linear_split's
// one-GEMM path scatters a packed output into its outputs here.
#include "kernels/cuda/gemm.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <span>

#include "core/bf16.h"
#include "kernels/api/gemm.h"
#include "kernels/cuda/check.h"

namespace beam {

LinearPlan::~LinearPlan() {
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (desc) cublasLtMatmulDescDestroy(desc);
}

namespace cuda {
namespace {

// Exact bf16 -> fp32 widening of n elements.
__global__ void widen_bf16_kernel(const __nv_bfloat16* __restrict__ src, float* __restrict__ dst,
                                  int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = __bfloat162float(src[i]);
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kI32:
    case DType::kI64:
    case DType::kU8:
      break;
  }
  BEAM_CHECK(false) << "linear: no cuBLASLt type for " << dtype_name(t);
  return CUDA_R_32F;
}

// Largest power of two <= 256 dividing the address.
int32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int32_t align = 1;
  while (align < 256 && a % (2 * align) == 0) align *= 2;
  return align;
}

void set_min_alignment(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                       int32_t bytes) {
  const uint32_t v = static_cast<uint32_t>(bytes);
  CUBLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)));
}

// The descriptors of a TN GEMM (see the file comment) for key's shapes and types.
std::unique_ptr<LinearPlan> make_descriptors(const LinearPlanKey& key) {
  auto plan = std::make_unique<LinearPlan>();
  const auto ab = static_cast<cudaDataType_t>(key.ab_type);
  const auto out = static_cast<cudaDataType_t>(key.out_type);
  // Plain CUBLAS_COMPUTE_32F: fp32 accumulation; fp32 operands stay fp32 (no TF32).
  CUBLAS_OK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  CUBLAS_OK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t,
                                           sizeof(op_t)));
  CUBLAS_OK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n,
                                           sizeof(op_n)));
  CUBLAS_OK(cublasLtMatrixLayoutCreate(&plan->a, ab, key.k, key.n, key.k));    // w: K x N
  CUBLAS_OK(cublasLtMatrixLayoutCreate(&plan->b, ab, key.k, key.m, key.k));    // x: K x M
  CUBLAS_OK(cublasLtMatrixLayoutCreate(&plan->c, out, key.n, key.m, key.n));  // out: N x M
  return plan;
}

// The heuristic's algorithms for plan (made from key) into `out`, best first; returns how many
// (at least one: aborts with the problem named when there is none).
int heuristic(CudaContext& ctx, const LinearPlan& plan, const LinearPlanKey& key,
              std::span<cublasLtMatmulHeuristicResult_t> out) {
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = ctx.lt_workspace_bytes;
  CUBLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws, sizeof(ws)));
  set_min_alignment(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w);
  set_min_alignment(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x);
  set_min_alignment(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_out);
  set_min_alignment(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_out);
  // Split-K partial sums are added in fp32 (or K is not split): by default cuBLASLt may add them
  // in the output type, rounding each partial to bf16 (the in-place and output-type schemes).
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  CUBLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                 &reduction, sizeof(reduction)));
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(ctx.lt, plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
                                     static_cast<int>(out.size()), out.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  BEAM_CHECK(st == CUBLAS_STATUS_SUCCESS && found > 0)
      << "linear: cuBLASLt has no algorithm for M " << key.m << " N " << key.n << " K " << key.k
      << " (A/B type " << key.ab_type << ", out type " << key.out_type << ", status "
      << static_cast<int>(st) << ")";
  return found;
}

// algo with K summed in one part (no split-K, whose parts' order of addition varies with the
// problem): the heuristic's configuration with its split count set to 1.
cublasLtMatmulAlgo_t without_split_k(cublasLtMatmulAlgo_t algo) {
  uint32_t splits = 1;
  size_t written = 0;
  CUBLAS_OK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                 sizeof(splits), &written));
  if (splits <= 1) return algo;
  splits = 1;
  const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
  CUBLAS_OK(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                 sizeof(splits)));
  CUBLAS_OK(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                 &none, sizeof(none)));
  return algo;
}

// Whether cuBLASLt runs plan's problem on algo within the context's workspace.
bool runs(CudaContext& ctx, const LinearPlan& plan, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t result{};
  return cublasLtMatmulAlgoCheck(ctx.lt, plan.desc, plan.a, plan.b, plan.c, plan.c, &algo,
                                 &result) == CUBLAS_STATUS_SUCCESS &&
         result.workspaceSize <= ctx.lt_workspace_bytes;
}

// The algorithm a batch-invariant key's every M runs (cached per n, k, types and alignments): the
// heuristic's best at kInvariantPlanRows rows (else at one row) with split-K taken out, that runs
// at one row and at kInvariantPlanRows. One algorithm without split-K computes each output element
// in the same order whatever M is (a tile's K loop); the rows only decide how many tiles there
// are.
cublasLtMatmulAlgo_t invariant_algo(CudaContext& ctx, LinearPlanKey key) {
  key.m = 0;
  if (auto it = ctx.linear.invariant_algos.find(key); it != ctx.linear.invariant_algos.end())
    return it->second;
  LinearPlanKey at = key, one = key;
  at.m = kInvariantPlanRows;
  one.m = 1;
  const std::unique_ptr<LinearPlan> plan_at = make_descriptors(at), plan_one = make_descriptors(one);
  const std::pair<const LinearPlan*, LinearPlanKey> asks[] = {{plan_at.get(), at},
                                                               {plan_one.get(), one}};
  for (const auto& [asked, asked_key] : asks) {
    std::array<cublasLtMatmulHeuristicResult_t, 16> results{};
    const int found = heuristic(ctx, *asked, asked_key, results);
    for (int i = 0; i < found; ++i) {
      const cublasLtMatmulAlgo_t algo = without_split_k(results[static_cast<size_t>(i)].algo);
      if (!runs(ctx, *plan_one, algo) || !runs(ctx, *plan_at, algo)) continue;
      ctx.linear.invariant_algos.emplace(key, algo);
      return algo;
    }
  }
  BEAM_CHECK(false) << "linear: cuBLASLt offers no algorithm without split-K that runs every M for N "
                    << key.n << " K " << key.k << " (the batch-invariant mode needs one)";
  return {};
}

// The descriptors of key's problem and its algorithm: the heuristic's best for this M, or the
// shared one of a batch-invariant key.
std::unique_ptr<LinearPlan> make_plan(CudaContext& ctx, const LinearPlanKey& key) {
  std::unique_ptr<LinearPlan> plan = make_descriptors(key);
  if (!key.invariant) {
    std::array<cublasLtMatmulHeuristicResult_t, 1> best{};
    heuristic(ctx, *plan, key, best);
    plan->algo = best[0].algo;
    return plan;
  }
  plan->algo = invariant_algo(ctx, key);
  BEAM_CHECK(runs(ctx, *plan, plan->algo))
      << "linear: the batch-invariant algorithm of N " << key.n << " K " << key.k
      << " does not run at M " << key.m;
  return plan;
}

const LinearPlan& find_plan(CudaContext& ctx, const LinearPlanKey& key) {
  auto it = ctx.linear.plans.find(key);
  if (it == ctx.linear.plans.end()) it = ctx.linear.plans.emplace(key, make_plan(ctx, key)).first;
  return *it->second;
}

// x widened to fp32 in the context's scratch (grown stream-ordered, so no synchronization).
const float* widen_x(CudaContext& ctx, const TensorView& x) {
  auto* x_f32 = reinterpret_cast<float*>(ctx.linear.x_f32.reserve(
      static_cast<size_t>(x.numel()) * sizeof(float), ctx.stream, "linear (CUDA, fp32 router)"));
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((x.numel() + kThreads - 1) / kThreads, 4096);
  widen_bf16_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, ctx.stream>>>(
      static_cast<const __nv_bfloat16*>(x.data), x_f32, x.numel());
  CUDA_LAUNCH_OK();
  return x_f32;
}

// Where linear_split's packed output goes: columns [end[i-1], end[i]) of the packed row are
// out[i] ([M, end[i] - end[i-1]] row-major, end[-1] = 0), all in 16-byte packs of 8 bf16.
struct ScatterDst {
  uint4* out[kMaxLinearSplits];
  int64_t end_packs[kMaxLinearSplits];
  int count;
};

// Pack i of packed [M, row_packs] (16-byte packs) to its output. Grid-stride, one pack a thread.
__global__ void scatter_columns_kernel(const uint4* __restrict__ packed, ScatterDst dst,
                                       int64_t row_packs, int64_t total) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t m = i / row_packs, c = i % row_packs;
    uint4* base = dst.out[0];
    int64_t begin = 0, width = dst.end_packs[0];
#pragma unroll
    for (int j = 1; j < static_cast<int>(kMaxLinearSplits); ++j) {
      if (j < dst.count && c >= dst.end_packs[j - 1]) {
        base = dst.out[j];
        begin = dst.end_packs[j - 1];
        width = dst.end_packs[j] - begin;
      }
    }
    base[m * width + (c - begin)] = packed[i];
  }
}

// The outputs fit linear_split's one-GEMM path (up to kSplitGemmMaxRows rows): bf16 of widths %
// 8 == 0, 16-byte aligned, more than one.
bool split_gemm_outputs(std::span<const TensorView> outs) {
  if (outs.size() < 2) return false;
  for (const TensorView& out : outs)
    if (out.dtype != DType::kBF16 || out.dim(1) % 8 != 0 ||
        reinterpret_cast<uintptr_t>(out.data) % 16 != 0)
      return false;
  return true;
}

// The one-GEMM path's packed output [kSplitGemmMaxRows, N], reserved on w's first linear_split
// whatever its M (the eager step before any capture), so a later step with more rows does not
// grow it and invalidate captured graphs (it is part of the graph fingerprint).
char* split_scratch(CudaContext& ctx, int64_t N) {
  return ctx.linear.split_out.reserve(static_cast<size_t>(kSplitGemmMaxRows * N) * 2, ctx.stream,
                                      "linear_split (CUDA)");
}

// One cuBLASLt GEMM over all of w into the scratch, then the column scatter into outs.
void linear_split_gemm(CudaContext& ctx, const TensorView& x, const TensorView& w,
                       std::span<const TensorView> outs) {
  const int64_t M = x.dim(0), N = w.dim(0);
  if (M == 0) return;
  const TensorView packed{split_scratch(ctx, N), DType::kBF16, Shape{M, N}, Device::kCuda};
  linear_cublaslt(ctx, x, w, packed);
  ScatterDst dst{};
  int64_t end = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    end += outs[i].dim(1) / 8;
    dst.out[i] = static_cast<uint4*>(outs[i].data);
    dst.end_packs[i] = end;
  }
  dst.count = static_cast<int>(outs.size());
  const int64_t total = M * (N / 8);
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 4096);
  if (blocks == 0) return;
  scatter_columns_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, ctx.stream>>>(
      static_cast<const uint4*>(packed.data), dst, N / 8, total);
  CUDA_LAUNCH_OK();
}

// linear()'s choice of the skinny kernel (same for every output of a linear_split).
bool takes_skinny(const TensorView& x, const TensorView& w, DType out_dtype) {
  return x.dtype == DType::kBF16 && w.dtype == DType::kBF16 &&
         (out_dtype == DType::kBF16 || out_dtype == DType::kF32) &&
         x.dim(0) <= kSkinnyDispatchRows;
}

}  // namespace

void linear(CudaContext& ctx, const TensorView& x, const TensorView& w, const TensorView& out,
            bool invariant) {
  if (!invariant && takes_skinny(x, w, out.dtype)) return linear_skinny(ctx, x, w, out);
  linear_cublaslt(ctx, x, w, out, invariant);
}

void linear_split(CudaContext& ctx, const TensorView& x, const TensorView& w,
                  std::span<const TensorView> outs, bool invariant) {
  if (!invariant) {
    const bool split_gemm = split_gemm_outputs(outs);
    if (split_gemm) split_scratch(ctx, w.dim(0));
    if (takes_skinny(x, w, outs.front().dtype)) return linear_skinny_split(ctx, x, w, outs);
    if (split_gemm && x.dim(0) <= kSplitGemmMaxRows) return linear_split_gemm(ctx, x, w, outs);
  }
  int64_t row0 = 0;
  for (const TensorView& out : outs) {
    linear(ctx, x, w.rows(row0, out.dim(1)), out, invariant);
    row0 += out.dim(1);
  }
}

void linear_cublaslt(CudaContext& ctx, const TensorView& x, const TensorView& w,
                     const TensorView& out, bool invariant) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  if (M == 0 || N == 0) return;
  const bool bf16_gemm = x.dtype == DType::kBF16 && w.dtype == DType::kBF16;
  const bool f32_gemm = w.dtype == DType::kF32 && out.dtype == DType::kF32;
  BEAM_CHECK(bf16_gemm || f32_gemm)
      << "linear: CUDA supports (x, w, out) = (bf16, bf16, bf16|f32) or (bf16|f32, f32, f32), got ("
      << dtype_name(x.dtype) << ", " << dtype_name(w.dtype) << ", " << dtype_name(out.dtype) << ")";
  if (K == 0) {  // the empty sum is 0 (cuBLASLt rejects k = 0)
    CUDA_OK(cudaMemsetAsync(out.data, 0, out.nbytes(), ctx.stream));
    return;
  }
  const void* x_data = x.data;
  if (f32_gemm && x.dtype == DType::kBF16) x_data = widen_x(ctx, x);

  LinearPlanKey key;
  key.m = M;
  key.n = N;
  key.k = K;
  key.ab_type = cuda_type(w.dtype);
  key.out_type = cuda_type(out.dtype);
  key.align_x = alignment(x_data);
  key.align_w = alignment(w.data);
  key.align_out = alignment(out.data);
  key.invariant = invariant;
  const LinearPlan& plan = find_plan(ctx, key);
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_OK(cublasLtMatmul(ctx.lt, plan.desc, &alpha, w.data, plan.a, x_data, plan.b, &beta,
                           out.data, plan.c, out.data, plan.c, &plan.algo, ctx.lt_workspace,
                           ctx.lt_workspace_bytes, ctx.stream));
}

}  // namespace cuda
}  // namespace beam
