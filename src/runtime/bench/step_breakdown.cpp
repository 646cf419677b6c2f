// BreakdownProfiler: cudaEvents recorded on ctx.cuda->stream in CUDA builds (reused across
// steps, created outside any op), steady_clock after each (synchronous) CPU op otherwise.
#include "runtime/bench/step_breakdown.h"

#include <chrono>
#include <vector>

#include "core/check.h"
#if BEAMSERVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_context.h"
#endif

namespace beam {

struct BreakdownProfiler::Impl {
  KernelContext ctx;
  bool active = false;
  std::vector<StepOp> ops;  // ops[i] ends at boundary i + 1; boundary 0 is start()
  std::vector<std::chrono::steady_clock::time_point> host;  // CPU: one per boundary
#if BEAMSERVE_CUDA
  std::vector<cudaEvent_t> events;  // CUDA: events[i] = boundary i; grows, reused per step
#endif

  // Records boundary number `i` (= ops.size() after the push).
  void record(size_t i) {
    switch (ctx.device) {
      case Device::kCpu:
        host.resize(i + 1);
        host[i] = std::chrono::steady_clock::now();
        return;
      case Device::kCuda:
#if BEAMSERVE_CUDA
        while (events.size() <= i) {
          cudaEvent_t e = nullptr;
          BEAM_CHECK(cudaEventCreate(&e) == cudaSuccess) << "BreakdownProfiler: cudaEventCreate";
          events.push_back(e);
        }
        BEAM_CHECK(cudaEventRecord(events[i], ctx.cuda->stream) == cudaSuccess)
            << "BreakdownProfiler: cudaEventRecord";
        return;
#else
        BEAM_CHECK(false) << "BreakdownProfiler: CUDA backend not built";
#endif
    }
  }

  // Milliseconds between boundaries i and i + 1 (the CUDA events have completed).
  double interval_ms(size_t i) const {
    switch (ctx.device) {
      case Device::kCpu:
        return std::chrono::duration<double, std::milli>(host[i + 1] - host[i]).count();
      case Device::kCuda: {
#if BEAMSERVE_CUDA
        float ms = 0;
        BEAM_CHECK(cudaEventElapsedTime(&ms, events[i], events[i + 1]) == cudaSuccess)
            << "BreakdownProfiler: cudaEventElapsedTime";
        return ms;
#else
        BEAM_CHECK(false) << "BreakdownProfiler: CUDA backend not built";
        return 0;
#endif
      }
    }
    return 0;
  }
};

BreakdownProfiler::BreakdownProfiler(const KernelContext& ctx) : impl_(std::make_unique<Impl>()) {
  impl_->ctx = ctx;
  impl_->ctx.profiler = nullptr;
}

BreakdownProfiler::~BreakdownProfiler() {
#if BEAMSERVE_CUDA
  for (cudaEvent_t e : impl_->events) cudaEventDestroy(e);
#endif
}

void BreakdownProfiler::start() {
  impl_->ops.clear();
  impl_->active = true;
  impl_->record(0);
}

void BreakdownProfiler::mark(StepOp op) {
  if (!impl_->active) return;
  impl_->ops.push_back(op);
  impl_->record(impl_->ops.size());
}

StepBreakdown BreakdownProfiler::finish() {
  BEAM_CHECK(impl_->active) << "BreakdownProfiler: finish() without start()";
  impl_->active = false;
#if BEAMSERVE_CUDA
  if (impl_->ctx.device == Device::kCuda) {
    BEAM_CHECK(cudaEventSynchronize(impl_->events[impl_->ops.size()]) == cudaSuccess)
        << "BreakdownProfiler: cudaEventSynchronize";
  }
#endif
  StepBreakdown b;
  for (size_t i = 0; i < impl_->ops.size(); ++i) {
    const double ms = impl_->interval_ms(i);
    const auto k = static_cast<size_t>(impl_->ops[i]);
    b.ms[k] += ms;
    ++b.calls[k];
    b.total_ms += ms;
  }
  return b;
}

}  // namespace beam
