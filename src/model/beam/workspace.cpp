// Workspace sizing (every activation of one step, per the shapes BeamModel views them with) and the
// host -> device copy of the batch metadata. Growth policy: reallocate only when a buffer needs
// more bytes than it holds (x1.5).
#include "model/beam/workspace.h"

#include <algorithm>
#include <string>
#include <utility>

namespace beam {
namespace {

template <typename T>
TensorView host_view(std::vector<T>& v, DType dtype) {
  return TensorView{v.data(), dtype, {static_cast<int64_t>(v.size())}, Device::kCpu};
}

}  // namespace

Status ScratchBuffer::reserve(const KernelContext& ctx, size_t nbytes) {
  if (nbytes <= buffer_.nbytes() && buffer_.device() == ctx.device) return ok_status();
  buffer_ = DeviceBuffer();  // free the old allocation before taking a larger one
  Expected<DeviceBuffer> b = allocate_buffer(ctx, nbytes + nbytes / 2);
  if (!b.ok()) return make_error("forward workspace: " + b.error().message);
  buffer_ = std::move(*b);
  return ok_status();
}

TensorView ScratchBuffer::view(DType dtype, Shape shape) const { return buffer_.view(dtype, shape); }

Status Workspace::prepare(const KernelContext& ctx, const BeamConfig& cfg, bool capture_routing) {
  const size_t T = token_ids.size(), R = logit_rows.size();
  const size_t H = cfg.hidden_size, Nq = cfg.num_heads, Nkv = cfg.num_kv_heads, D = cfg.head_dim;
  const size_t I = cfg.intermediate_size, E = cfg.num_experts, K = cfg.num_experts_per_tok;
  const size_t V = cfg.vocab_size, S = cfg.num_layers_of(MlpKind::kSparse);
  const size_t bf = sizeof(uint16_t), f32 = sizeof(float), i32 = sizeof(int32_t), i64 = sizeof(int64_t);
  const std::pair<ScratchBuffer*, size_t> needs[] = {
      {&d_token_ids, T * i32}, {&d_positions, T * i64}, {&d_full_slots, T * i64},
      {&d_sliding_slots, T * i64}, {&d_logit_rows, R * i32},
      {&residual, T * H * bf}, {&x, T * H * bf}, {&branch, T * H * bf},
      {&q, T * Nq * D * bf}, {&gate, T * Nq * D * bf}, {&attn_out, T * Nq * D * bf},
      {&k, T * Nkv * D * bf}, {&v, T * Nkv * D * bf},
      {&mlp_hidden, T * 2 * I * bf}, {&mlp_act, T * I * bf},
      {&router_logits, T * E * f32}, {&expert_ids, T * K * i32}, {&expert_weights, T * K * f32},
      {&routed_experts, capture_routing ? S * T * K * i32 : 0},
      {&final_hidden, R * H * bf}, {&lm_out, R * V * bf}, {&logits, R * V * f32}};
  for (const auto& [buffer, nbytes] : needs) BEAM_RETURN_IF_ERROR(buffer->reserve(ctx, nbytes));
  copy_tensor(ctx, ids_view(), host_view(token_ids, DType::kI32));
  copy_tensor(ctx, positions_view(), host_view(positions, DType::kI64));
  copy_tensor(ctx, full_slots_view(), host_view(full_slots, DType::kI64));
  copy_tensor(ctx, sliding_slots_view(), host_view(sliding_slots, DType::kI64));
  copy_tensor(ctx, logit_rows_view(), host_view(logit_rows, DType::kI32));
  return ok_status();
}

}  // namespace beam
