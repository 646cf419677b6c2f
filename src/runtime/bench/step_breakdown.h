// BreakdownProfiler: the StepProfiler of `bench step --breakdown` — a CUDA event (or, on the CPU,
// the host clock) at every op boundary of one eager step, summed per op kind.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "kernels/api/step_profiler.h"

namespace beam {

// Milliseconds and boundary count per op kind of one step (index = StepOp).
struct StepBreakdown {
  std::array<double, kNumStepOps> ms{};
  std::array<int64_t, kNumStepOps> calls{};
  double total_ms = 0;  // start() to the last mark
};

// Owned by one thread. Usage: set KernelContext::profiler (and cuda_graphs = false), then per
// step start(); <forward>; finish(). Marks outside start()..finish() are ignored (e.g. prefill).
class BreakdownProfiler final : public StepProfiler {
 public:
  explicit BreakdownProfiler(const KernelContext& ctx);
  ~BreakdownProfiler() override;
  BreakdownProfiler(const BreakdownProfiler&) = delete;
  BreakdownProfiler& operator=(const BreakdownProfiler&) = delete;

  void start();
  void mark(StepOp op) override;
  // Waits for the step's work; the time between consecutive marks, summed per op kind.
  StepBreakdown finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace beam
