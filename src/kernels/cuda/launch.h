// Kernel launches with an explicit stream dependency: full serialization (<<<>>>'s) or as a
// programmatic dependent of the previous kernel (PDL), also inside captured CUDA graphs.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// How a launch depends on the kernel queued before it on the stream.
enum class After {
  kComplete,      // starts once the previous kernel completed (a plain launch)
  kProgrammatic,  // may start once every block of the previous kernel called
                  // griddepcontrol.launch_dependents (or exited): the kernel runs only work that
                  // needs nothing of the previous kernel (weights, host-staged plans) before its
                  // griddepcontrol.wait, and must call that wait before reading or writing
                  // anything the previous kernels touch. Everything queued before the previous
                  // kernel has completed when it starts (every PDL kernel here waits before it
                  // triggers; the plainly launched RMSNorm and q/k norm + KV store kernels
                  // trigger at their start, which keeps this: they start only after everything
                  // before them completed).
};

// Queues kernel<<<grid, block, smem, ctx.stream>>>(args...) with the dependency `after` (a plain
// launch when ctx.programmatic_launch is off).
template <typename... Params, typename... Actual>
void launch_kernel(CudaContext& ctx, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   After after, Actual&&... args) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = ctx.stream;
  const bool programmatic = after == After::kProgrammatic && ctx.programmatic_launch;
  config.attrs = programmatic ? &attr : nullptr;
  config.numAttrs = programmatic ? 1 : 0;
  CUDA_OK(cudaLaunchKernelEx(&config, kernel, std::forward<Actual>(args)...));
}

}  // namespace beam::cuda
