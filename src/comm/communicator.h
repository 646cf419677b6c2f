// Communicator: one rank's end of a group of ranks (the tensor-parallel shards of one model, each
// running the same ops in the same order) and the collectives the ranks run together.
#pragma once

#include <stdexcept>
#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace beam {

// Thrown by a collective of an aborted group, so that no rank waits forever on a peer that failed.
struct CommAborted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Every rank calls the same collectives in the same order, with tensors of the same shapes and
// dtypes. Used by its rank's thread only.
class Communicator {
 public:
  virtual ~Communicator() = default;

  // This end's index in the group, in [0, size()).
  virtual int rank() const = 0;
  // Number of ranks in the group.
  virtual int size() const = 0;

  // Collectives are ordered like the rank's other work: done when they return on the host
  // (LocalGroup), queued on the rank's stream on a GPU (NcclGroup).
  // t [any shape] f32: becomes, in place, the elementwise sum of every rank's t, with the same
  // bits on every rank, run after run (LocalGroup adds in rank order 0..size()-1; NCCL in its
  // ring's order).
  virtual void all_reduce_sum(const TensorView& t) = 0;
  // in [any shape]; out of in's dtype with out.nbytes() == size() * in.nbytes(): becomes every
  // rank's in, concatenated in rank order.
  virtual void all_gather(const TensorView& in, const TensorView& out) = 0;
};

// The ranks of one group and its failure handling. rank(r) is used by rank r's thread only;
// abort() and aborted() by any thread; reset() by the owner while no rank is inside a collective.
class CommGroup {
 public:
  virtual ~CommGroup() = default;
  virtual int size() const = 0;
  // Rank r's end, r in [0, size()); owned by the group.
  virtual Communicator& rank(int r) = 0;
  // A rank failed: the others must not wait for it. Collectives waiting now or called later
  // throw CommAborted(why) (LocalGroup) or return with their work abandoned (NcclGroup) until
  // reset().
  virtual void abort(std::string why) = 0;
  virtual bool aborted() const = 0;
  // Makes an aborted group usable again (NcclGroup: new communicators); an error when it cannot.
  virtual Status reset() = 0;
};

}  // namespace beam
