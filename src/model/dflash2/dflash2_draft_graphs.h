// DFlash2DraftGraphs: CUDA graphs of one piece of the drafter's device work, one LazyGraph per
// bucket of its size, replayed over metadata uploaded to fixed addresses first (docs/dflash2.md
// "On the GPU"). A DFlash2Drafter holds two: its block forward's (buckets of blocks) and its
// context feed's (buckets of rows); it pads a call to the bucket. Graphs are dropped when what
// they point into moved (the fingerprint).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "kernels/api/context.h"
#include "model/lazy_graph.h"

namespace beam {

// Owned by a DFlash2Drafter (one thread).
class DFlash2DraftGraphs {
 public:
  static constexpr std::array<int64_t, 9> kBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};

  // `what` and `unit` name a bucket's graph in the log: ("DFlash2 draft graph", "blocks") names
  // bucket 4's "DFlash2 draft graph of 4 blocks".
  DFlash2DraftGraphs(std::string what, std::string unit)
      : what_(std::move(what)), unit_(std::move(unit)) {}

  // The smallest bucket holding `n` (>= 1) blocks or rows, or -1 past the largest.
  static int64_t bucket_of(int64_t n);

  // Queues `enqueue` (the device work for `bucket` blocks or rows over the drafter's fixed
  // scratch and metadata) through the bucket's LazyGraph. `fingerprint` names the memory the
  // work points into (graph_fingerprint of ctx mixed with the drafter's buffers); a new one drops
  // every graph. ctx.device must be kCuda.
  void run(const KernelContext& ctx, int64_t bucket, uint64_t fingerprint,
           const std::function<void()>& enqueue);

  // Drops every captured graph (sleep mode frees what they point into).
  void drop();

  int64_t num_captures() const { return captures_; }  // tests
  int64_t num_replays() const { return replays_; }    // tests

 private:
  std::string what_, unit_;
  std::array<LazyGraph, kBuckets.size()> graphs_;
  uint64_t fingerprint_ = 0;
  int64_t captures_ = 0, replays_ = 0;
};

}  // namespace beam
