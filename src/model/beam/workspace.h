// Workspace: the per-step activations and batch metadata of BeamModel, grown on demand and reused
// across steps so a decode step allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/api/attention.h"
#include "model/config.h"

namespace beam {

// A host buffer that keeps its capacity; view() hands out [shape] views of the first bytes.
class ScratchBuffer {
 public:
  TensorView view(DType dtype, Shape shape);

 private:
  Buffer buffer_;
};

struct Workspace {
  // Batch metadata, rebuilt every step.
  std::vector<int32_t> token_ids;        // [T]
  std::vector<int64_t> positions;        // [T] absolute positions
  std::vector<int64_t> full_slots;       // [T] physical slot in the full pool
  std::vector<int64_t> sliding_slots;    // [T] physical slot in the sliding pool
  std::vector<AttentionSeq> full_seqs;     // per sequence, block tables of the full pool
  std::vector<AttentionSeq> sliding_seqs;  // per sequence, block tables of the sliding pool
  std::vector<int64_t> logit_rows;       // token rows whose logits are returned

  // Activations.
  ScratchBuffer residual, x, q, k, v, gate, attn_out, branch, mlp_hidden, mlp_act, router_logits,
      expert_ids, expert_weights, final_hidden, lm_out, logits;

  // Views of the metadata for kernels.
  TensorView ids_view() { return {token_ids.data(), DType::kI32, {static_cast<int64_t>(token_ids.size())}}; }
  TensorView positions_view() { return {positions.data(), DType::kI64, {static_cast<int64_t>(positions.size())}}; }
  TensorView full_slots_view() { return {full_slots.data(), DType::kI64, {static_cast<int64_t>(full_slots.size())}}; }
  TensorView sliding_slots_view() { return {sliding_slots.data(), DType::kI64, {static_cast<int64_t>(sliding_slots.size())}}; }
};

}  // namespace beam
