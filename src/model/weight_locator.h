// Checkpoint tensor names back to the served layout: where a tensor of BEAM.md 0a's names lives in
// one rank's BeamWeights (packed q/k/v/gate rows, fused gate/up rows, an expert of a fused expert
// matrix) and how tensor parallelism splits it, so its values can be read back (SGLang's
// /get_weights_by_name, for RL loops that check a weight sync).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/api/moe.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"

namespace beam {

// How a checkpoint tensor is spread over tensor-parallel ranks.
enum class WeightSplit {
  kReplicated,  // every rank holds it whole
  kRows,        // each rank holds a block of rows, rank order
  kColumns,     // each rank holds a block of columns, rank order
  kExpert,      // one rank holds it whole (its routed expert), the others none of it
};

// Checkpoint tensor `shape` ([rows, cols], or [n] for a vector) as one rank holds it: its part
// [part_rows, part_cols] is rows [first_row, first_row + part_rows) of `matrix` viewed as 2-D
// (for a routed expert: rows of expert `expert`'s block of the fused matrix `expert_matrix`,
// which CUDA keeps packed). An empty part (part_rows 0) for another rank's expert.
struct WeightLocation {
  Shape shape;
  WeightSplit split = WeightSplit::kReplicated;
  TensorView matrix;
  int64_t first_row = 0, part_rows = 0, part_cols = 0;
  int64_t expert = -1;  // the expert's index within `matrix` (kExpert), else -1
  ExpertMatrix expert_matrix = ExpertMatrix::kGateUp;
};

// Where `name` is in rank tp's weights w (shard_beam_weights' slice; the whole model for one
// rank). Errors: a name the model has no tensor of (naming it and the accepted forms).
Expected<WeightLocation> locate_weight(const BeamWeights& w, TensorParallel tp,
                                       const std::string& name);

// One rank's part of a checkpoint tensor, read to the host as f32 (row-major [rows, cols]).
struct WeightPart {
  Shape shape;  // the whole tensor's
  WeightSplit split = WeightSplit::kReplicated;
  int64_t rows = 0, cols = 0;
  std::vector<float> values;
};

// Up to max_rows rows (all with max_rows < 0) of rank tp's part of tensor `name` in w (on ctx's
// device; routed experts un-packed from CUDA's layout). Errors: locate_weight's.
Expected<WeightPart> read_weight_part(const KernelContext& ctx, const BeamWeights& w,
                                      TensorParallel tp, const std::string& name,
                                      int64_t max_rows);

// A checkpoint tensor's first rows, as f32: shape [rows, cols] (or [n] for a vector).
struct WeightValues {
  Shape shape;
  std::vector<float> values;
};

// The first max_rows rows (all with max_rows < 0) of the tensor whose parts ranks 0..n-1 read
// (read_weight_part with at least those rows), joined as the split says.
WeightValues gather_weight(const std::vector<WeightPart>& ranks, int64_t max_rows);

}  // namespace beam
