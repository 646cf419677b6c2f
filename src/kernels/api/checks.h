// Argument checks and device dispatch helpers shared by the op entry points in kernels/api/*.cpp.
// A failed check is a caller bug (shapes are fixed by the model config), so it aborts with context.
#pragma once

#include <initializer_list>

#include "kernels/api/context.h"

namespace beam::kernel_checks {

// t has the dtype, the rank and the device of ctx; data is set unless t is empty.
void expect_tensor(const KernelContext& ctx, const TensorView& t, DType dtype, int rank,
                   const char* op, const char* name);
// Like expect_tensor with any of several dtypes.
void expect_tensor(const KernelContext& ctx, const TensorView& t,
                   std::initializer_list<DType> dtypes, int rank, const char* op, const char* name);
// The CPU thread pool of ctx (required for CPU ops).
ThreadPool& cpu_pool(const KernelContext& ctx, const char* op);
// Device::kCuda in a build without the CUDA backend.
[[noreturn]] void cuda_backend_not_built(const char* op);

}  // namespace beam::kernel_checks
