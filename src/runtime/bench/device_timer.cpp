// DeviceTimer: cudaEvent pairs on ctx.cuda->stream in CUDA builds, steady_clock elsewhere.
#include "runtime/bench/device_timer.h"

#include <chrono>

#include "core/check.h"
#include "kernels/api/device_memory.h"
#if BEAMSERVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_context.h"
#endif

namespace beam {

struct DeviceTimer::Impl {
  KernelContext ctx;
  std::chrono::steady_clock::time_point host_start;
#if BEAMSERVE_CUDA
  cudaEvent_t begin = nullptr, end = nullptr;
#endif
};

DeviceTimer::DeviceTimer(const KernelContext& ctx) : impl_(std::make_unique<Impl>()) {
  impl_->ctx = ctx;
#if BEAMSERVE_CUDA
  if (ctx.device == Device::kCuda) {
    BEAM_CHECK(cudaEventCreate(&impl_->begin) == cudaSuccess &&
               cudaEventCreate(&impl_->end) == cudaSuccess)
        << "DeviceTimer: cudaEventCreate failed";
  }
#endif
}

DeviceTimer::~DeviceTimer() {
#if BEAMSERVE_CUDA
  if (impl_->begin) cudaEventDestroy(impl_->begin);
  if (impl_->end) cudaEventDestroy(impl_->end);
#endif
}

void DeviceTimer::start() {
  switch (impl_->ctx.device) {
    case Device::kCpu:
      impl_->host_start = std::chrono::steady_clock::now();
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      BEAM_CHECK(cudaEventRecord(impl_->begin, impl_->ctx.cuda->stream) == cudaSuccess)
          << "DeviceTimer: record";
      return;
#else
      BEAM_CHECK(false) << "DeviceTimer: CUDA backend not built";
#endif
  }
}

double DeviceTimer::stop() {
  switch (impl_->ctx.device) {
    case Device::kCpu:
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                       impl_->host_start)
          .count();
    case Device::kCuda: {
#if BEAMSERVE_CUDA
      cudaStream_t s = impl_->ctx.cuda->stream;
      BEAM_CHECK(cudaEventRecord(impl_->end, s) == cudaSuccess &&
                 cudaEventSynchronize(impl_->end) == cudaSuccess)
          << "DeviceTimer: record/synchronize";
      float ms = 0;
      BEAM_CHECK(cudaEventElapsedTime(&ms, impl_->begin, impl_->end) == cudaSuccess)
          << "DeviceTimer: elapsed";
      return ms;
#else
      BEAM_CHECK(false) << "DeviceTimer: CUDA backend not built";
      return 0;
#endif
    }
  }
  return 0;
}

std::string device_name(const KernelContext& ctx) {
  switch (ctx.device) {
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
#if BEAMSERVE_CUDA
      return ctx.cuda->props.name;
#else
      return "cuda (backend not built)";
#endif
  }
  return "";
}

}  // namespace beam
