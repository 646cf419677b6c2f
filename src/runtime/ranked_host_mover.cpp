// RankedHostMover: rank 0's copy at once, the workers' at the next flush.
#include "runtime/ranked_host_mover.h"

namespace beam {

void RankedHostMover::save(AttentionKind pool, BlockId block, int32_t slot) {
  rank0_.save(pool, block, slot);
  pending_.push_back(HostCopy{HostCopy::kToHost, pool, block, slot});
}

void RankedHostMover::load(AttentionKind pool, int32_t slot, BlockId block) {
  rank0_.load(pool, slot, block);
  pending_.push_back(HostCopy{HostCopy::kToDevice, pool, block, slot});
}

void RankedHostMover::flush() {
  if (pending_.empty()) return;
  ranks_.host_copies(pending_);
  pending_.clear();
}

}  // namespace beam
