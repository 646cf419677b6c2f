// DFlash2DraftGraphs: bucket choice and the warm / capture / replay cycle of the drafter's graphs.
#include "model/dflash2/dflash2_draft_graphs.h"

#include <string>

#include "core/check.h"
#include "core/logging.h"

namespace beam {

int64_t DFlash2DraftGraphs::bucket_of(int64_t blocks) {
  for (int64_t b : kBuckets)
    if (b >= blocks) return b;
  return -1;
}

void DFlash2DraftGraphs::drop() {
  for (Bucket& b : buckets_) b.graph = StepGraph();
}

Status DFlash2DraftGraphs::run(const KernelContext& ctx, int64_t bucket, uint64_t fingerprint,
                               const std::function<void()>& enqueue) {
  size_t i = 0;
  while (i < kBuckets.size() && kBuckets[i] != bucket) ++i;
  BEAM_CHECK(i < kBuckets.size()) << "DFlash2DraftGraphs: " << bucket << " is not a bucket";
  if (fingerprint != fingerprint_) {
    drop();
    fingerprint_ = fingerprint;
  }
  Bucket& b = buckets_[i];
  if (!b.warmed || b.capture_failed) {
    enqueue();
    b.warmed = true;
    return ok_status();
  }
  if (!b.graph.valid()) {
    begin_graph_capture(ctx);
    enqueue();
    Expected<StepGraph> graph = end_graph_capture(ctx);
    if (!graph.ok()) {  // the same kernels, run eagerly from now on
      log_warning("DFlash2 draft graph of " + std::to_string(bucket) +
                  " blocks: " + graph.error().message + "; drafting without a graph");
      b.capture_failed = true;
      enqueue();
      return ok_status();
    }
    b.graph = std::move(*graph);
    ++captures_;
  }
  launch_graph(ctx, b.graph);
  ++replays_;
  return ok_status();
}

}  // namespace beam
