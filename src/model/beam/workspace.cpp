// Workspace sizing (every activation of one step, per the shapes BeamModel views them with), the
// host metadata of a batch and its upload through pinned memory. Growth policy: reallocate only
// when a buffer needs more bytes than it holds (x1.5).
#include "model/beam/workspace.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>

namespace beam {
namespace {

template <typename T>
void put(const MetadataBuffer& meta, size_t offset, std::span<const T> v) {
  if (!v.empty()) std::memcpy(static_cast<char*>(meta.host()) + offset, v.data(), v.size() * sizeof(T));
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

void Workspace::build(const ForwardBatch& batch, int64_t block_size) {
  token_ids.clear();
  positions.clear();
  full_slots.clear();
  sliding_slots.clear();
  full_seqs.clear();
  sliding_seqs.clear();
  logit_rows.clear();
  lora_slots.clear();
  lora_row_slots.clear();
  any_lora = false;
  auto slot = [block_size](std::span<const int32_t> table, int64_t j) -> int64_t {
    if (table.empty()) return -1;
    return static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
  };
  for (const SeqChunk& s : batch.seqs) {
    any_lora = any_lora || s.lora_slot != kNoLoraSlot;
    int64_t begin = static_cast<int64_t>(token_ids.size());
    int64_t n = static_cast<int64_t>(s.tokens.size());
    for (int64_t i = 0; i < n; ++i) {
      int64_t j = s.num_cached + i;
      token_ids.push_back(s.tokens[i]);
      positions.push_back(s.kv_pos0 + j);
      full_slots.push_back(slot(s.full_blocks, j));
      sliding_slots.push_back(slot(s.sliding_blocks, j));
      lora_slots.push_back(s.lora_slot);
      if (s.all_logits || i == n - 1) {
        logit_rows.push_back(static_cast<int32_t>(begin + i));
        lora_row_slots.push_back(s.lora_slot);
      }
    }
    AttentionSeq a{begin, n, s.kv_pos0 + s.num_cached, s.kv_pos0, s.num_cached + n, s.full_blocks};
    a.prompt_rows = std::clamp<int64_t>(s.num_prompt - s.num_cached, 0, n);
    full_seqs.push_back(a);
    a.block_table = s.sliding_blocks;
    sliding_seqs.push_back(a);
  }
  active_tokens = static_cast<int32_t>(token_ids.size());
}

void Workspace::pad_decode(int64_t rows) {
  BEAM_CHECK(num_logit_rows() == num_tokens() && num_tokens() <= rows)
      << "pad_decode: " << num_tokens() << " tokens, " << num_logit_rows() << " logit rows, "
      << rows << " padded rows";
  for (int64_t r = num_tokens(); r < rows; ++r) {
    token_ids.push_back(0);
    positions.push_back(0);
    full_slots.push_back(-1);
    sliding_slots.push_back(-1);
    lora_slots.push_back(kNoLoraSlot);
    logit_rows.push_back(static_cast<int32_t>(r));
    lora_row_slots.push_back(kNoLoraSlot);
  }
}

size_t Workspace::device_bytes() const {
  size_t n = meta.nbytes();
  for (const ScratchBuffer* b : {&residual,
                                 &x,
                                 &q,
                                 &k,
                                 &v,
                                 &gate,
                                 &attn_out,
                                 &branch,
                                 &mlp_hidden,
                                 &mlp_act,
                                 &expert_ids,
                                 &expert_weights,
                                 &routed_experts,
                                 &final_hidden,
                                 &lm_out,
                                 &logits,
                                 &partial,
                                 &local_expert_ids,
                                 &local_logits,
                                 &gathered_logits,
                                 &rank_partials,
                                 &lora_gathered,
                                 &lora_input,
                                 &captured})
    n += b->capacity();
  return n;
}

Status Workspace::reserve(const KernelContext& ctx, const BeamConfig& cfg, const ShardShape& shard,
                          int64_t tokens, int64_t rows, bool capture_routing,
                          ShardBuffers shard_buffers) {
  if (tokens > meta_tokens || rows > meta_rows || meta.nbytes() == 0) {
    const int64_t t = std::max(tokens + tokens / 2, meta_tokens);
    const int64_t r = std::max(rows + rows / 2, meta_rows);
    meta = MetadataBuffer();  // free the old one first
    Expected<MetadataBuffer> m =
        allocate_metadata(ctx, static_cast<size_t>(32 * t + 8 * r) + sizeof(int32_t));
    if (!m.ok()) return make_error("forward workspace metadata: " + m.error().message);
    meta = std::move(*m);
    meta_tokens = t;
    meta_rows = r;
  }
  const size_t T = tokens, R = rows;
  const size_t H = cfg.hidden_size, Nq = shard.num_heads, Nkv = shard.num_kv_heads,
               D = cfg.head_dim;
  const size_t I = shard.intermediate, K = cfg.num_experts_per_tok;
  const size_t V = cfg.vocab_size, Vl = shard.vocab, S = cfg.num_layers_of(MlpKind::kSparse);
  const size_t tp = shard_buffers != ShardBuffers::kNone ? 1 : 0;  // the rank buffers' factor
  const size_t lora = shard_buffers == ShardBuffers::kRankWithLora ? 1 : 0;
  // The ranks' partials gathered in slices, with deterministic inference on a rank.
  const size_t ranks = tp > 0 && gathers_partials(ctx)
                           ? static_cast<size_t>(cfg.num_heads / shard.num_heads)
                           : 0;
  const size_t gathered_rows = std::min<size_t>(tokens, kRankPartialRows);
  const size_t lora_width = std::max<size_t>(cfg.num_heads * cfg.head_dim, cfg.intermediate_size);
  const size_t bf = sizeof(uint16_t), f32 = sizeof(float), i32 = sizeof(int32_t);
  const std::pair<ScratchBuffer*, size_t> needs[] = {
      {&residual, T * H * bf},
      {&x, T * H * bf},
      {&branch, T * H * bf},
      {&q, T * Nq * D * bf},
      {&gate, T * Nq * D * bf},
      {&attn_out, T * Nq * D * bf},
      {&k, T * Nkv * D * bf},
      {&v, T * Nkv * D * bf},
      {&mlp_hidden, T * 2 * I * bf},
      {&mlp_act, T * I * bf},
      {&expert_ids, T * K * i32},
      {&expert_weights, T * K * f32},
      {&routed_experts, capture_routing ? S * T * K * i32 : 0},
      {&final_hidden, R * H * bf},
      {&lm_out, R * Vl * bf},
      {&logits, R * V * f32},
      {&partial, tp * T * H * f32},
      {&local_expert_ids, tp * T * K * i32},
      {&local_logits, tp * R * Vl * f32},
      {&gathered_logits, tp * R * V * f32},
      {&rank_partials, ranks * gathered_rows * H * f32},
      {&lora_gathered, lora * T * lora_width * bf},
      {&lora_input, lora * T * lora_width * bf}};
  for (const auto& [buffer, nbytes] : needs) BEAM_RETURN_IF_ERROR(buffer->reserve(ctx, nbytes));
  return ok_status();
}

void Workspace::upload(const KernelContext& ctx) {
  BEAM_CHECK(num_tokens() <= meta_tokens && num_logit_rows() <= meta_rows)
      << "Workspace::upload: " << num_tokens() << " tokens / " << num_logit_rows()
      << " rows beyond the reserved " << meta_tokens << " / " << meta_rows;
  put<int64_t>(meta, 0, positions);
  put<int64_t>(meta, slots_offset(0), full_slots);
  put<int64_t>(meta, slots_offset(1), sliding_slots);
  put<int32_t>(meta, ids_offset(), token_ids);
  put<int32_t>(meta, lora_offset(), lora_slots);
  put<int32_t>(meta, rows_offset(), logit_rows);
  put<int32_t>(meta, lora_rows_offset(), lora_row_slots);
  put<int32_t>(meta, active_offset(), {&active_tokens, 1});
  upload_metadata(ctx, meta, 0, active_offset() + sizeof(int32_t));
}

}  // namespace beam
