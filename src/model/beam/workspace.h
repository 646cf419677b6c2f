// Workspace: the per-step activations and batch metadata of BeamModel, on the model's device,
// grown on demand and reused across steps so a decode step allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/api/attention.h"
#include "kernels/api/device_memory.h"
#include "model/config.h"

namespace beam {

// Device memory that keeps its capacity; view() hands out [shape] views of the first bytes.
class ScratchBuffer {
 public:
  // Makes room for nbytes on ctx's device (reallocating with 1.5x headroom when it grows). The
  // previous contents are lost; the caller has synchronized the work that used them.
  Status reserve(const KernelContext& ctx, size_t nbytes);
  // A view within the reserved capacity (a caller bug otherwise).
  TensorView view(DType dtype, Shape shape) const;

 private:
  DeviceBuffer buffer_;
};

struct Workspace {
  // Batch metadata, built on the host every step and copied into the device scratch below.
  std::vector<int32_t> token_ids;        // [T]
  std::vector<int64_t> positions;        // [T] absolute positions
  std::vector<int64_t> full_slots;       // [T] physical slot in the full pool
  std::vector<int64_t> sliding_slots;    // [T] physical slot in the sliding pool
  std::vector<AttentionSeq> full_seqs;     // per sequence, block tables of the full pool (host)
  std::vector<AttentionSeq> sliding_seqs;  // per sequence, block tables of the sliding pool (host)
  std::vector<int32_t> logit_rows;       // [R] token rows whose logits are returned

  // Device copies of the metadata.
  ScratchBuffer d_token_ids, d_positions, d_full_slots, d_sliding_slots, d_logit_rows;
  // Activations.
  ScratchBuffer residual, x, q, k, v, gate, attn_out, branch, mlp_hidden, mlp_act, router_logits,
      expert_ids, expert_weights, routed_experts, final_hidden, lm_out, logits;

  // Reserves every buffer for T tokens and R logit rows (routed_experts only with capture) and
  // uploads the metadata. An error when the device is out of memory.
  Status prepare(const KernelContext& ctx, const BeamConfig& cfg, bool capture_routing);

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_logit_rows() const { return static_cast<int64_t>(logit_rows.size()); }
  // Device views of the metadata for kernels.
  TensorView ids_view() const { return d_token_ids.view(DType::kI32, {num_tokens()}); }
  TensorView positions_view() const { return d_positions.view(DType::kI64, {num_tokens()}); }
  TensorView full_slots_view() const { return d_full_slots.view(DType::kI64, {num_tokens()}); }
  TensorView sliding_slots_view() const { return d_sliding_slots.view(DType::kI64, {num_tokens()}); }
  TensorView logit_rows_view() const { return d_logit_rows.view(DType::kI32, {num_logit_rows()}); }
};

}  // namespace beam
