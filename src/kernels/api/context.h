// KernelContext: where an op runs. CPU ops use the thread pool; CUDA ops (later) a stream and handles.
#pragma once

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace beam {

struct KernelContext {
  Device device = Device::kCpu;
  ThreadPool* pool = nullptr;  // CPU: required; owned by the caller
  // Every output row depends only on its own inputs, whatever else is in the batch (fixed-order
  // GEMM), so a request's tokens never depend on batch composition. false lets large-M CPU GEMMs
  // take OpenBLAS's faster path, whose summation order differs from the small-M kernel's.
  bool batch_invariant = true;
};

}  // namespace beam
