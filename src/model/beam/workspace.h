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
#include "model/forward_batch.h"
#include "model/tensor_parallel.h"

namespace beam {

// Device memory that keeps its capacity; view() hands out [shape] views of the first bytes.
class ScratchBuffer {
 public:
  // Makes room for nbytes on ctx's device (reallocating with 1.5x headroom when it grows). The
  // previous contents are lost; the caller has synchronized the work that used them.
  Status reserve(const KernelContext& ctx, size_t nbytes);
  // A view within the reserved capacity (a caller bug otherwise).
  TensorView view(DType dtype, Shape shape) const;
  size_t capacity() const { return buffer_.nbytes(); }

 private:
  DeviceBuffer buffer_;
};

// The tensor-parallel buffers Workspace::reserve makes: none (one rank), a rank's (partial sums,
// routed ids of its experts, logit slices), and with LoRA slots also the gathered inputs of o_proj
// and the dense down projection (their adapters see every rank's columns).
enum class ShardBuffers { kNone, kRank, kRankWithLora };

struct Workspace {
  // Batch metadata, built on the host every step (build / pad_decode) and uploaded to `meta`.
  std::vector<int32_t> token_ids;        // [T]
  std::vector<int64_t> positions;        // [T] absolute positions
  std::vector<int64_t> full_slots;       // [T] physical slot in the full pool
  std::vector<int64_t> sliding_slots;    // [T] physical slot in the sliding pool
  std::vector<AttentionSeq> full_seqs;     // per sequence, block tables of the full pool (host)
  std::vector<AttentionSeq> sliding_seqs;  // per sequence, block tables of the sliding pool (host)
  std::vector<int32_t> logit_rows;       // [R] token rows whose logits are computed
  std::vector<int32_t> lora_slots;       // [T] each token's LoRA slot (kNoLoraSlot: none)
  std::vector<int32_t> lora_row_slots;   // [R] each logit row's LoRA slot
  // Some token has a LoRA slot (then so does its sequence's logit row: every chunk has one).
  bool any_lora = false;
  int32_t active_tokens = 0;             // tokens before the padding (all: num_tokens())

  // Pinned metadata with its device mirror (kernels/api/device_memory.h), laid out for
  // meta_tokens tokens and meta_rows logit rows: positions, full slots, sliding slots (i64 each),
  // token ids, LoRA slots, logit rows, the rows' LoRA slots, active_tokens (i32). Addresses change
  // only when reserve() grows it.
  MetadataBuffer meta;
  int64_t meta_tokens = 0, meta_rows = 0;
  // Activations.
  ScratchBuffer residual, x, q, k, v, gate, attn_out, branch, mlp_hidden, mlp_act,
      expert_ids, expert_weights, routed_experts, final_hidden, lm_out, logits;
  // A tensor-parallel rank's (model/tensor_parallel.h): fp32 partial sums [T, H], the routed ids
  // of its experts [T, k], its logits' vocabulary slice [R, V / n] and every rank's [n, R, V / n].
  ScratchBuffer partial, local_expert_ids, local_logits, gathered_logits;
  // Deterministic inference on a rank (gathers_partials): every rank's partials of up to
  // kRankPartialRows rows [n, rows, H], summed in rank order (BeamModel::reduce_partials).
  ScratchBuffer rank_partials;
  static constexpr int64_t kRankPartialRows = 1024;
  // Whether a rank in ctx gathers the ranks' partials and sums them in rank order instead of
  // all-reducing them (BatchInvariance::kAlways: NCCL's order depends on the message size).
  static bool gathers_partials(const KernelContext& ctx) {
    return ctx.batch_invariance == BatchInvariance::kAlways;
  }
  // With LoRA on a rank: a row-parallel module's input gathered from every rank [n, T, c / n] and
  // rearranged to [T, c] (c: the q heads' width or the dense width).
  ScratchBuffer lora_gathered, lora_input;
  // ForwardBatch::capture_layers of the step and their residuals [T, n * H] (BeamModel::run_step
  // reserves it).
  std::vector<int64_t> capture_layers;
  ScratchBuffer captured;
  // Some SeqChunk::final_hidden_from asks for a token that is not a logit row: compute_logits
  // norms every token into x (free after the last layer) and gathers the logit rows from it.
  // Otherwise the asked-for rows are logit rows of final_hidden.
  bool norm_every_row = false;

  // Fills the host metadata of batch (KV slots from its block tables). Logit rows: every token of
  // an all_logits sequence, else its last.
  void build(const ForwardBatch& batch, int64_t block_size);
  // Pads a decode batch (one token per sequence, built above) to `rows` rows: token 0 at position
  // 0, no KV slot (-1), no routed experts (active_tokens stays the batch), logits computed (and
  // dropped by the caller), no LoRA. Attention seqs stay real.
  void pad_decode(int64_t rows);
  // Reserves every buffer for `tokens` tokens and `rows` logit rows of a rank holding `shard`'s
  // share (routed_experts only with capture, the tensor-parallel ones as `shard_buffers` says).
  // An error when the device is out of memory.
  Status reserve(const KernelContext& ctx, const BeamConfig& cfg, const ShardShape& shard,
                 int64_t tokens, int64_t rows, bool capture_routing,
                 ShardBuffers shard_buffers = ShardBuffers::kNone);
  // Bytes the activations and the metadata mirror hold on the device.
  size_t device_bytes() const;
  // Copies the host metadata into meta's pinned bytes and queues one upload (after reserve for
  // at least num_tokens() / num_logit_rows()).
  void upload(const KernelContext& ctx);

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_logit_rows() const { return static_cast<int64_t>(logit_rows.size()); }
  // Device views of the metadata for kernels.
  TensorView positions_view() const { return meta.device_view(0, DType::kI64, {num_tokens()}); }
  TensorView full_slots_view() const { return meta.device_view(slots_offset(0), DType::kI64, {num_tokens()}); }
  TensorView sliding_slots_view() const { return meta.device_view(slots_offset(1), DType::kI64, {num_tokens()}); }
  TensorView ids_view() const { return meta.device_view(ids_offset(), DType::kI32, {num_tokens()}); }
  TensorView logit_rows_view() const { return meta.device_view(rows_offset(), DType::kI32, {num_logit_rows()}); }
  TensorView active_view() const { return meta.device_view(active_offset(), DType::kI32, {1}); }
  TensorView lora_slots_view() const {
    return meta.device_view(lora_offset(), DType::kI32, {num_tokens()});
  }
  TensorView lora_row_slots_view() const {
    return meta.device_view(lora_rows_offset(), DType::kI32, {num_logit_rows()});
  }

 private:
  size_t slots_offset(int pool) const { return static_cast<size_t>(meta_tokens) * 8 * (pool + 1); }
  size_t ids_offset() const { return static_cast<size_t>(meta_tokens) * 24; }
  size_t lora_offset() const { return static_cast<size_t>(meta_tokens) * 28; }
  size_t rows_offset() const { return static_cast<size_t>(meta_tokens) * 32; }
  size_t lora_rows_offset() const { return rows_offset() + static_cast<size_t>(meta_rows) * 4; }
  size_t active_offset() const { return rows_offset() + static_cast<size_t>(meta_rows) * 8; }
};

}  // namespace beam
