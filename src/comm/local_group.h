// LocalGroup: a group of ranks that are threads of one process (the CPU backend, tests), their
// collectives run on host memory through a barrier the ranks meet at.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace beam {

// Shared by its ranks' threads: rank(r)'s communicator is used by rank r's thread only; abort()
// and aborted() may be called from any thread; the owner constructs, reset()s and destroys it
// while no rank is inside a collective.
class LocalGroup final : public CommGroup {
 public:
  // size >= 1 ranks.
  explicit LocalGroup(int size);
  ~LocalGroup() override;
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  int size() const override { return size_; }
  // Rank r's communicator, r in [0, size()); owned by the group. Collectives take host tensors.
  Communicator& rank(int r) override;

  // Every collective waiting now or called later throws CommAborted(why) until reset(). A
  // collective whose ranks all arrived finishes its copies first (peers still read its buffers).
  void abort(std::string why) override;
  // Makes an aborted group usable again (always succeeds); only while no rank is inside a
  // collective.
  Status reset() override;
  bool aborted() const override;

 private:
  class Rank;
  enum class Op { kAllReduceSum, kAllGather };
  // What one rank brought to the collective in progress (all_reduce_sum: in == out); read by
  // every rank between the collective's two barriers.
  struct Slot {
    Op op = Op::kAllReduceSum;
    TensorView in;
    TensorView out;
  };

  void all_reduce_sum(int rank, const TensorView& t);
  void all_gather(int rank, const TensorView& in, const TensorView& out);
  // Publishes slot, meets the other ranks, does this rank's part of the work, meets them again.
  void exchange(int rank, const Slot& slot);
  // Counts this rank in at the barrier; true when all size_ ranks arrived, false when the group
  // was aborted first (abortable waits only).
  bool arrive_and_wait(std::unique_lock<std::mutex>& lock, bool abortable);
  void check_matches_rank0(int rank) const;
  void reduce_share(int rank);
  void gather(int rank);

  const int size_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  // Written by rank r under mu_ before the first barrier of a collective; stable until the second.
  std::vector<Slot> slots_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int num_arrived_ = 0;      // ranks waiting at the current barrier
  uint64_t generation_ = 0;  // barriers completed
  int num_inside_ = 0;       // ranks inside a collective (reset() requires none)
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace beam
