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
// launch when ctx.programmatic_launch is off), in thread-block clusters of `cluster` blocks when
// cluster is not (1, 1, 1) (grid a multiple of it).
template <typename... Params, typename... Actual>
void launch_kernel_in_clusters(CudaContext& ctx, void (*kernel)(Params...), dim3 grid, dim3 cluster,
                               dim3 block, size_t smem, After after, Actual&&... args) {
  cudaLaunchAttribute attrs[2]{};
  unsigned count = 0;
  if (after == After::kProgrammatic && ctx.programmatic_launch) {
    attrs[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attrs[count].id = cudaLaunchAttributeClusterDimension;
    attrs[count++].val.clusterDim = {cluster.x, cluster.y, cluster.z};
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = ctx.stream;
  config.attrs = count > 0 ? attrs : nullptr;
  config.numAttrs = count;
  CUDA_OK(cudaLaunchKernelEx(&config, kernel, std::forward<Actual>(args)...));
}

// Queues kernel<<<grid, block, smem, ctx.stream>>>(args...) with the dependency `after` (a plain
// launch when ctx.programmatic_launch is off).
template <typename... Params, typename... Actual>
void launch_kernel(CudaContext& ctx, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   After after, Actual&&... args) {
  launch_kernel_in_clusters(ctx, kernel, grid, dim3(1, 1, 1), block, smem, after,
                            std::forward<Actual>(args)...);
}

// Thread-block clusters of `cluster` blocks of `kernel` (`block` threads and `smem` bytes of
// dynamic shared memory each; its shared-memory limit raised before) that the GPU holds at once:
// it depends on how the SMs split over the GPCs, not only on their count. 0 when none fits or the
// driver refuses the query (its error cleared).
template <typename... Params>
int max_active_clusters(void (*kernel)(Params...), dim3 cluster, dim3 block, size_t smem) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim = {cluster.x, cluster.y, cluster.z};
  cudaLaunchConfig_t config{};
  config.gridDim = cluster;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.attrs = &attr;
  config.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return clusters;
}

}  // namespace beam::cuda
