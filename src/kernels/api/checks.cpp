// Argument checks and device dispatch helpers for the op entry points.
#include "kernels/api/checks.h"

#include <cstdlib>

namespace beam::kernel_checks {
namespace {

#if BEAMSERVE_CUDA
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;  // the dispatch reports cuda_backend_not_built instead
#endif

}  // namespace

void expect_tensor(const KernelContext& ctx, const TensorView& t, DType dtype, int rank,
                   const char* op, const char* name) {
  expect_tensor(ctx, t, {dtype}, rank, op, name);
}

void expect_tensor(const KernelContext& ctx, const TensorView& t,
                   std::initializer_list<DType> dtypes, int rank, const char* op,
                   const char* name) {
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok = dtype_ok || t.dtype == d;
  BEAM_CHECK(dtype_ok) << op << ": " << name << " has dtype " << dtype_name(t.dtype);
  BEAM_CHECK(t.rank() == rank) << op << ": " << name << " has shape " << t.shape.str()
                               << ", expected rank " << rank;
  BEAM_CHECK(t.device == ctx.device) << op << ": " << name << " is on another device than the op";
  BEAM_CHECK(t.data != nullptr || t.numel() == 0) << op << ": " << name << " has no data";
  BEAM_CHECK(ctx.device != Device::kCuda || !kCudaBuilt || ctx.cuda != nullptr)
      << op << ": Device::kCuda without a CUDA context (KernelContext::cuda; create_cuda_context)";
}

ThreadPool& cpu_pool(const KernelContext& ctx, const char* op) {
  BEAM_CHECK(ctx.pool != nullptr) << op << ": CPU kernels need KernelContext::pool";
  return *ctx.pool;
}

void cuda_backend_not_built(const char* op) {
  BEAM_CHECK(false) << op << ": Device::kCuda requested but the CUDA backend is not built "
                    << "(configure with -DBEAMSERVE_CUDA=ON)";
  std::abort();  // unreachable: the failed check aborts
}

}  // namespace beam::kernel_checks
