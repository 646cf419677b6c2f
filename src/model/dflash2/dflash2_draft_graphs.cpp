// DFlash2DraftGraphs: bucket choice, the fingerprint rule and the counts.
#include "model/dflash2/dflash2_draft_graphs.h"

#include <string>

#include "core/check.h"

namespace beam {

int64_t DFlash2DraftGraphs::bucket_of(int64_t n) {
  for (int64_t b : kBuckets)
    if (b >= n) return b;
  return -1;
}

void DFlash2DraftGraphs::drop() {
  for (LazyGraph& g : graphs_) g.drop();
}

void DFlash2DraftGraphs::run(const KernelContext& ctx, int64_t bucket, uint64_t fingerprint,
                             const std::function<void()>& enqueue) {
  size_t i = 0;
  while (i < kBuckets.size() && kBuckets[i] != bucket) ++i;
  BEAM_CHECK(i < kBuckets.size()) << what_ << ": " << bucket << " is not a bucket";
  if (fingerprint != fingerprint_) {
    drop();
    fingerprint_ = fingerprint;
  }
  const LazyGraph::Ran ran =
      graphs_[i].run(ctx, enqueue, what_ + " of " + std::to_string(bucket) + " " + unit_);
  captures_ += ran == LazyGraph::Ran::kCaptured ? 1 : 0;
  replays_ += ran != LazyGraph::Ran::kEager ? 1 : 0;
}

}  // namespace beam
