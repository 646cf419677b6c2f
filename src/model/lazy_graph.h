// LazyGraph: one CUDA graph of a fixed piece of device work, captured lazily. The first run()
// enqueues the work eagerly (it grows the ops' scratch and plans), the second captures and
// launches it, later ones replay it; a failed capture is logged once and the work runs eagerly
// from then on (the same kernels, the same results). The decode graphs' buckets and the DFlash2
// drafter's each hold one.
#pragma once

#include <functional>
#include <string>

#include "kernels/api/context.h"
#include "kernels/api/device_memory.h"

namespace beam {

class LazyGraph {
 public:
  enum class Ran { kEager, kCaptured, kReplayed };  // kCaptured: captured, then launched
  // Queues `enqueue`'s work on ctx's stream as above; `what` names the graph in the log.
  // ctx.device must be kCuda.
  Ran run(const KernelContext& ctx, const std::function<void()>& enqueue, const std::string& what);
  // Drops the graph; the next run captures again (the work stays warm).
  void drop() { graph_ = StepGraph(); }

 private:
  bool warmed_ = false;          // ran once uncaptured; scratch only grows, so this stays true
  bool capture_failed_ = false;  // logged once; then always uncaptured
  StepGraph graph_;
};

}  // namespace beam
