// Communicator: one rank's end of a group of ranks (the tensor-parallel shards of one model, each
// running the same ops in the same order) and the collectives the ranks run together.
#pragma once

#include <stdexcept>

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

  // t [any shape] f32: becomes, in place, the elementwise sum of every rank's t, added in rank
  // order 0..size()-1 for every element, so all ranks get the same bits, run after run.
  virtual void all_reduce_sum(const TensorView& t) = 0;
  // in [any shape]; out of in's dtype with out.nbytes() == size() * in.nbytes(): becomes every
  // rank's in, concatenated in rank order.
  virtual void all_gather(const TensorView& in, const TensorView& out) = 0;
};

}  // namespace beam
