// LazyGraph: the warm / capture / replay cycle.
#include "model/lazy_graph.h"

#include "core/logging.h"

namespace beam {

LazyGraph::Ran LazyGraph::run(const KernelContext& ctx, const std::function<void()>& enqueue,
                              const std::string& what) {
  if (!warmed_ || capture_failed_) {
    enqueue();
    warmed_ = true;
    return Ran::kEager;
  }
  Ran ran = Ran::kReplayed;
  if (!graph_.valid()) {
    begin_graph_capture(ctx);
    enqueue();
    Expected<StepGraph> graph = end_graph_capture(ctx);
    if (!graph.ok()) {
      log_warning(what + ": " + graph.error().message + "; running it without a graph");
      capture_failed_ = true;
      enqueue();
      return Ran::kEager;
    }
    graph_ = std::move(*graph);
    ran = Ran::kCaptured;
  }
  launch_graph(ctx, graph_);
  return ran;
}

}  // namespace beam
