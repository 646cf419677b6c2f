// LocalGroup: ranks publish their tensors, meet at a generation-counted barrier, each do their own
// share of the work (a slice of the elements to sum, or their own output to fill), and meet again
// so that no rank returns, and reuses its buffers, while a peer still reads them.
#include "comm/local_group.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/check.h"

namespace beam {

class LocalGroup::Rank final : public Communicator {
 public:
  Rank(LocalGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size_; }
  void all_reduce_sum(const TensorView& t) override { group_.all_reduce_sum(rank_, t); }
  void all_gather(const TensorView& in, const TensorView& out) override {
    group_.all_gather(rank_, in, out);
  }

 private:
  LocalGroup& group_;
  const int rank_;
};

LocalGroup::LocalGroup(int size) : size_(size) {
  BEAM_CHECK(size >= 1) << "LocalGroup of " << size << " ranks";
  ranks_.reserve(size);
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
  slots_.resize(size);
}

LocalGroup::~LocalGroup() = default;

Communicator& LocalGroup::rank(int r) {
  BEAM_CHECK(r >= 0 && r < size_) << "rank " << r << " of a group of " << size_;
  return *ranks_[r];
}

void LocalGroup::abort(std::string why) {
  std::lock_guard lock(mu_);
  if (!aborted_) abort_reason_ = std::move(why);  // the first reason is the cause
  aborted_ = true;
  cv_.notify_all();
}

Status LocalGroup::reset() {
  std::lock_guard lock(mu_);
  BEAM_CHECK(num_inside_ == 0) << "LocalGroup::reset() while " << num_inside_
                               << " ranks are inside a collective";
  aborted_ = false;
  abort_reason_.clear();
  num_arrived_ = 0;  // ranks that left an aborted barrier by throwing were counted in
  return ok_status();
}

bool LocalGroup::aborted() const {
  std::lock_guard lock(mu_);
  return aborted_;
}

void LocalGroup::all_reduce_sum(int rank, const TensorView& t) {
  BEAM_CHECK(t.dtype == DType::kF32) << "all_reduce_sum: rank " << rank << " passed "
                                     << dtype_name(t.dtype) << "; only f32 is summed";
  BEAM_CHECK(t.device == Device::kCpu)
      << "all_reduce_sum: rank " << rank << " passed a device tensor to a LocalGroup (host only)";
  BEAM_CHECK(t.data != nullptr || t.numel() == 0)
      << "all_reduce_sum: rank " << rank << " passed null data of " << t.shape.str();
  exchange(rank, Slot{Op::kAllReduceSum, t, t});
}

void LocalGroup::all_gather(int rank, const TensorView& in, const TensorView& out) {
  BEAM_CHECK(in.device == Device::kCpu && out.device == Device::kCpu)
      << "all_gather: rank " << rank << " passed a device tensor to a LocalGroup (host only)";
  BEAM_CHECK(out.dtype == in.dtype) << "all_gather: rank " << rank << " gathers "
                                    << dtype_name(in.dtype) << " into " << dtype_name(out.dtype);
  BEAM_CHECK(out.nbytes() == static_cast<size_t>(size_) * in.nbytes())
      << "all_gather: rank " << rank << " gathers " << size_ << " x " << in.shape.str() << " into "
      << out.shape.str();
  BEAM_CHECK((in.data != nullptr && out.data != nullptr) || in.numel() == 0)
      << "all_gather: rank " << rank << " passed null data";
  exchange(rank, Slot{Op::kAllGather, in, out});
}

void LocalGroup::exchange(int rank, const Slot& slot) {
  // A group of one meets itself: its barriers return at once, without waiting.
  std::unique_lock lock(mu_);
  if (aborted_) throw CommAborted(abort_reason_);
  slots_[rank] = slot;
  ++num_inside_;
  if (!arrive_and_wait(lock, /*abortable=*/true)) {
    --num_inside_;
    throw CommAborted(abort_reason_);
  }
  lock.unlock();
  check_matches_rank0(rank);
  switch (slot.op) {
    case Op::kAllReduceSum:
      reduce_share(rank);
      break;
    case Op::kAllGather:
      gather(rank);
      break;
  }
  // Not abortable: every rank passed the first barrier, so every rank comes here; leaving early
  // would let this rank's caller free buffers the others still read.
  lock.lock();
  arrive_and_wait(lock, /*abortable=*/false);
  --num_inside_;
  if (aborted_) throw CommAborted(abort_reason_);
}

bool LocalGroup::arrive_and_wait(std::unique_lock<std::mutex>& lock, bool abortable) {
  const uint64_t generation = generation_;
  if (++num_arrived_ == size_) {
    num_arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return true;
  }
  cv_.wait(lock, [&] { return generation_ != generation || (abortable && aborted_); });
  return generation_ != generation;
}

void LocalGroup::check_matches_rank0(int rank) const {
  const Slot& mine = slots_[rank];
  const Slot& first = slots_[0];
  auto name = [](Op op) {
    switch (op) {
      case Op::kAllReduceSum:
        return "all_reduce_sum";
      case Op::kAllGather:
        return "all_gather";
    }
    return "?";
  };
  BEAM_CHECK(mine.op == first.op) << "rank " << rank << " called " << name(mine.op)
                                  << " while rank 0 called " << name(first.op);
  BEAM_CHECK(mine.in.dtype == first.in.dtype)
      << name(mine.op) << ": rank " << rank << " passed " << dtype_name(mine.in.dtype)
      << " while rank 0 passed " << dtype_name(first.in.dtype);
  BEAM_CHECK(mine.in.shape == first.in.shape)
      << name(mine.op) << ": rank " << rank << " passed " << mine.in.shape.str()
      << " while rank 0 passed " << first.in.shape.str();
}

void LocalGroup::reduce_share(int rank) {
  if (size_ == 1) return;
  // Elements [begin, end) are this rank's: summed from every rank's buffer in rank order, in
  // blocks that stay in L1, and the sum written back into every rank's buffer.
  const int64_t n = slots_[0].in.numel();
  const int64_t begin = n * rank / size_;
  const int64_t end = n * (rank + 1) / size_;
  constexpr int64_t kBlock = 512;
  float acc[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t len = std::min(kBlock, end - b);
    const float* first = slots_[0].in.as<const float>() + b;
    for (int64_t i = 0; i < len; ++i) acc[i] = first[i];
    for (int r = 1; r < size_; ++r) {
      const float* src = slots_[r].in.as<const float>() + b;
      for (int64_t i = 0; i < len; ++i) acc[i] += src[i];
    }
    for (int r = 0; r < size_; ++r) {
      std::memcpy(slots_[r].out.as<float>() + b, acc, static_cast<size_t>(len) * sizeof(float));
    }
  }
}

void LocalGroup::gather(int rank) {
  // Reads every rank's input, writes only this rank's output; an input that already is its own
  // slice of the output (in place) stays where it is.
  const Slot& mine = slots_[rank];
  const size_t in_bytes = mine.in.nbytes();
  if (in_bytes == 0) return;
  for (int r = 0; r < size_; ++r) {
    char* dst = mine.out.as<char>() + static_cast<size_t>(r) * in_bytes;
    const void* src = slots_[r].in.data;
    if (dst != src) std::memcpy(dst, src, in_bytes);
  }
}

}  // namespace beam
