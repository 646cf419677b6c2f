// KernelContext: where an op runs. CPU ops use the thread pool; CUDA ops (later) a stream and handles.
#pragma once

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace beam {

struct KernelContext {
  Device device = Device::kCpu;
  ThreadPool* pool = nullptr;  // CPU: required; owned by the caller
};

}  // namespace beam
