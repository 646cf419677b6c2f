// BeamModel::forward — BEAM.md §3 layer by layer. Every rounding point lives in the kernels; this
// file only sequences them (fused ops where one exists: each post-norm residual update also
// writes the next block's pre-norm, the q/k norms run with RoPE/SSMax and the KV-cache write, the
// graph path's attention applies the output gate); the workspace builds and uploads the batch metadata (positions, KV
// slots, block tables); only the logits (and captured routing) come back. Decode-only CUDA steps
// go through DecodeGraphs, which replays the same op sequence as a CUDA graph.
#include "model/beam/beam_model.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <optional>
#include <span>
#include <string>

#include "kernels/api/activation.h"
#include "kernels/api/attention.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/device_out_of_memory.h"
#include "kernels/api/fixed_attention.h"
#include "kernels/api/gemm.h"
#include "kernels/api/lora.h"
#include "kernels/api/moe.h"
#include "kernels/api/norm.h"
#include "kernels/api/rope.h"
#include "kernels/api/shard_ops.h"
#include "kernels/api/step_profiler.h"
#include "model/device_weights.h"

namespace beam {
namespace {

// Depth-scaled residual coefficients (BEAM.md §3.8): c = 1/sqrt(idx), r = sqrt((idx-1)/idx).
struct DepthScale {
  float r;
  float c;
};

DepthScale depth_scale(int64_t idx) {
  double d = static_cast<double>(idx);
  return {static_cast<float>(std::sqrt((d - 1.0) / d)), static_cast<float>(1.0 / std::sqrt(d))};
}

int64_t pool_blocks(const PagedKv& kv) { return kv.k.dim(0); }

// The profiled op whose projection a LoRA target adapts (its deltas are marked kLora apart).
StepOp lora_base_op(LoraTarget target) {
  switch (target) {
    case LoraTarget::kQ:
    case LoraTarget::kK:
    case LoraTarget::kV:
    case LoraTarget::kGate:
      return StepOp::kQkvg;
    case LoraTarget::kO:
      return StepOp::kOProj;
    case LoraTarget::kDenseGate:
    case LoraTarget::kDenseUp:
    case LoraTarget::kDenseDown:
      return StepOp::kDense;
    case LoraTarget::kExpertGate:
    case LoraTarget::kExpertUp:
    case LoraTarget::kExpertDown:
      return StepOp::kExperts;
    case LoraTarget::kLmHead:
      return StepOp::kHead;
  }
  return StepOp::kSetup;
}

// Checks that every block a query of this chunk can read or write is mapped and in range.
Status check_table(const std::string& pool, size_t seq_index, std::span<const int32_t> table,
                   int64_t first_slot, int64_t end_slot, int64_t block_size, int64_t num_blocks) {
  int64_t need_blocks = (end_slot + block_size - 1) / block_size;
  if (static_cast<int64_t>(table.size()) < need_blocks)
    return make_error("sequence " + std::to_string(seq_index) + ": " + pool + " block table has " +
                      std::to_string(table.size()) + " blocks, needs " + std::to_string(need_blocks));
  for (int64_t b = first_slot / block_size; b < need_blocks; ++b) {
    if (table[b] < 0 || table[b] >= num_blocks)
      return make_error("sequence " + std::to_string(seq_index) + ": " + pool + " block " +
                        std::to_string(b) + " maps to " + std::to_string(table[b]) +
                        ", outside the pool of " + std::to_string(num_blocks) + " blocks");
  }
  return ok_status();
}

}  // namespace

BeamModel::BeamModel(std::shared_ptr<const BeamWeights> weights, KernelContext ctx,
                     std::unique_ptr<LoraSlots> lora, ModelShard shard)
    : weights_(std::move(weights)), ctx_(ctx), lora_(std::move(lora)), shard_(shard) {
  BEAM_CHECK(weights_ != nullptr && weights_->embed.device == ctx_.device &&
             weights_->deferred_experts.empty() && !weights_->synthetic)
      << "BeamModel: weights must live on the context's device (model/device_weights.h)";
  config_ = weights_->config;
  BEAM_CHECK(!sharded() || (shard_.comm != nullptr && shard_.comm->size() == shard_.tp.size &&
                            shard_.comm->rank() == shard_.tp.rank))
      << "BeamModel: rank " << shard_.tp.rank << " of " << shard_.tp.size
      << " needs its end of a group of that size";
  shape_ = shard_shape(config(), shard_.tp);
  BEAM_CHECK(weights_->layers.empty() ||
             weights_->layers[0].attn.o_proj.dim(1) == shape_.num_heads * config().head_dim)
      << "BeamModel: the weights are not rank " << shard_.tp.rank << " of " << shard_.tp.size
      << "'s slice (shard_beam_weights)";
}

size_t BeamModel::release_eager_workspace() {
  const size_t bytes = ws_.device_bytes();
  ws_ = Workspace();
  return bytes;
}

Status BeamModel::replace_weights(std::shared_ptr<const BeamWeights> host, bool* partial) {
  BEAM_CHECK(host != nullptr) << "replace_weights: no weights";
  if (std::optional<std::string_view> key = config_difference(host->config, config()))
    return make_error("the new weights' config differs from the served model's in '" +
                      std::string(*key) + "'");
  if (ctx_.device == Device::kCpu) {  // deferred experts converted into host buffers
    BEAM_ASSIGN_OR_RETURN(DeviceWeights served, upload_weights(ctx_, std::move(host)));
    weights_ = std::move(served.weights);
    return ok_status();
  }
  return copy_weights_into(ctx_, *weights_, *host, partial);
}

Status BeamModel::validate(const ForwardBatch& batch, const KvLayers& kv) const {
  const BeamConfig& cfg = config();
  if (static_cast<int64_t>(kv.layers.size()) != cfg.num_layers)
    return make_error("KV cache has " + std::to_string(kv.layers.size()) + " layers, model has " +
                      std::to_string(cfg.num_layers));
  if (batch.seqs.empty()) return make_error("empty batch");
  for (int64_t l : batch.capture_layers)
    if (l < 0 || l >= cfg.num_layers)
      return make_error("capture of layer " + std::to_string(l) + ": the model has " +
                        std::to_string(cfg.num_layers) + " layers");
  for (const PagedKv& layer : kv.layers) {
    if (layer.k.device != ctx_.device || layer.v.device != ctx_.device)
      return make_error("KV cache memory is not on the model's device");
    if (layer.k.rank() != 4 || layer.k.dim(2) != shape_.num_kv_heads)
      return make_error("KV cache layers hold " +
                        std::to_string(layer.k.rank() == 4 ? layer.k.dim(2) : 0) +
                        " KV heads, the model's rank needs " + std::to_string(shape_.num_kv_heads));
  }
  int64_t bs = kv.layers[0].block_size;
  int64_t full_blocks = -1, sliding_blocks = -1;
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    int64_t& n = cfg.layer_types[l] == AttentionKind::kFull ? full_blocks : sliding_blocks;
    n = pool_blocks(kv.layers[l]);
  }
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqChunk& s = batch.seqs[i];
    std::string who = "sequence " + std::to_string(i);
    if (s.tokens.empty()) return make_error(who + ": no tokens");
    const int32_t slots = lora_ ? lora_->num_slots() : 0;
    if (s.lora_slot < kNoLoraSlot || s.lora_slot >= slots)
      return make_error(who + ": LoRA slot " + std::to_string(s.lora_slot) +
                        " outside the model's " + std::to_string(slots) + " slots");
    if (s.kv_pos0 < 0 || s.num_cached < 0) return make_error(who + ": negative position");
    for (int32_t t : s.tokens)
      if (t < 0 || t >= cfg.vocab_size)
        return make_error(who + ": token id " + std::to_string(t) + " outside the vocabulary of " +
                          std::to_string(cfg.vocab_size));
    int64_t end = s.num_cached + static_cast<int64_t>(s.tokens.size());
    if (full_blocks >= 0) BEAM_RETURN_IF_ERROR(check_table("full", i, s.full_blocks, 0, end, bs, full_blocks));
    if (sliding_blocks >= 0) {
      int64_t first_visible = std::max<int64_t>(0, s.num_cached - (cfg.sliding_window - 1));
      BEAM_RETURN_IF_ERROR(
          check_table("sliding", i, s.sliding_blocks, first_visible, end, bs, sliding_blocks));
    }
  }
  return ok_status();
}

Status BeamModel::forward(const ForwardBatch& batch, const KvLayers& kv, ForwardOutput& out) {
  try {
    return run_step(batch, kv, out);
  } catch (const DeviceOutOfMemory& e) {
    // The ops queued before the failing one still run; the next step synchronizes before it
    // writes metadata, and the op that threw left its scratch empty, to grow again.
    return make_error(e.what());
  }
}

Status BeamModel::run_step(const ForwardBatch& batch, const KvLayers& kv, ForwardOutput& out) {
  const auto entered = std::chrono::steady_clock::now();
  auto host_ms = [&entered] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - entered).count();
  };
  BEAM_RETURN_IF_ERROR(validate(batch, kv));
  // The previous step may have left its logits on the device; its work must be done before the
  // host rewrites pinned metadata that its uploads read (a no-op when already synchronized).
  synchronize(ctx_);
  begin_step(ctx_);
  out.routed_experts.clear();
  if (DecodeGraphs::eligible(ctx_, batch)) {
    BEAM_RETURN_IF_ERROR(graphs_.run(ctx_, config(), shape_, shard_buffers(), batch, kv,
                                     [this](Workspace& ws, const KvLayers& k) {
                                       enqueue_step(ws, k, AttentionPath::kFixed, false);
                                     }));
    out.host_enqueue_ms = host_ms();
    copy_logits(graphs_.workspace(), batch, out);  // synchronizes
    copy_captured(graphs_.workspace(), batch, out);
    copy_final_hidden(graphs_.workspace(), batch, out);
    return ok_status();
  }
  const BeamConfig& cfg = config();
  ws_.build(batch, kv.layers[0].block_size);
  BEAM_RETURN_IF_ERROR(ws_.reserve(ctx_, cfg, shape_, ws_.num_tokens(), ws_.num_logit_rows(),
                                   batch.capture_routing, shard_buffers()));
  ws_.capture_layers = batch.capture_layers;
  ws_.norm_every_row = std::any_of(batch.seqs.begin(), batch.seqs.end(), [](const SeqChunk& s) {
    return s.wants_final_hidden() && !s.all_logits &&
           s.final_hidden_from < static_cast<int64_t>(s.tokens.size()) - 1;
  });
  const int64_t captured_width =
      static_cast<int64_t>(batch.capture_layers.size()) * cfg.hidden_size;
  BEAM_RETURN_IF_ERROR(ws_.captured.reserve(
      ctx_, static_cast<size_t>(ws_.num_tokens() * captured_width) * sizeof(uint16_t)));
  ws_.upload(ctx_);
  enqueue_step(ws_, kv, AttentionPath::kEager, batch.capture_routing);
  out.host_enqueue_ms = host_ms();
  copy_logits(ws_, batch, out);  // synchronizes
  copy_captured(ws_, batch, out);
  copy_final_hidden(ws_, batch, out);
  if (batch.capture_routing) {
    const int64_t S = cfg.num_layers_of(MlpKind::kSparse), T = ws_.num_tokens();
    out.routed_experts.resize(static_cast<size_t>(S * T * cfg.num_experts_per_tok));
    TensorView routed = ws_.routed_experts.view(DType::kI32, {S, T, cfg.num_experts_per_tok});
    copy_tensor(ctx_, TensorView{out.routed_experts.data(), DType::kI32, routed.shape, Device::kCpu}, routed);
  }
  return ok_status();
}

void BeamModel::enqueue_step(Workspace& ws, const KvLayers& kv, AttentionPath path, bool capture_routing) {
  const BeamConfig& cfg = config();
  const int64_t T = ws.num_tokens(), H = cfg.hidden_size;
  TensorView residual = ws.residual.view(DType::kBF16, {T, H});
  profile_mark(ctx_, StepOp::kSetup);
  embedding(ctx_, weights_->embed, ws.ids_view(), residual);
  profile_mark(ctx_, StepOp::kEmbedding);
  int64_t sparse_index = 0;
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    attention_block(ws, l, kv, path);
    mlp_block(ws, l, sparse_index, capture_routing);
    if (cfg.mlp_layer_types[l] == MlpKind::kSparse) ++sparse_index;
    capture_residual(ws, l);
  }
  compute_logits(ws);
}

void BeamModel::capture_residual(Workspace& ws, int64_t l) {
  const auto& layers = ws.capture_layers;
  const int64_t T = ws.num_tokens(), H = config().hidden_size;
  const size_t row_bytes = static_cast<size_t>(H) * sizeof(uint16_t);
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] != l) continue;
    const TensorView dst =
        ws.captured.view(DType::kBF16, {T, static_cast<int64_t>(layers.size()) * H});
    const TensorView src = ws.residual.view(DType::kBF16, {T, H});
    copy_rows(ctx_,
              PitchedRows{static_cast<char*>(dst.data) + i * row_bytes, dst.device,
                          layers.size() * row_bytes, row_bytes, static_cast<size_t>(T)},
              PitchedRows{src.data, src.device, row_bytes, row_bytes, static_cast<size_t>(T)});
  }
}

void BeamModel::attention_block(Workspace& ws, int64_t l, const KvLayers& kv, AttentionPath path) {
  const BeamConfig& cfg = config();
  const LayerWeights& lw = weights_->layers[l];
  const int64_t T = ws.num_tokens();
  const int64_t H = cfg.hidden_size, Nq = shape_.num_heads, Nkv = shape_.num_kv_heads;
  const int64_t D = cfg.head_dim;
  const bool sliding = cfg.layer_types[l] == AttentionKind::kSliding;

  TensorView residual = ws.residual.view(DType::kBF16, {T, H});
  TensorView x = ws.x.view(DType::kBF16, {T, H});
  // Later layers: the previous layer's post-MLP norm op already wrote x = input_norm(residual).
  // The kNorm boundary stays in every block (empty after layer 0; the fused norms count as
  // kPostNorm), so the breakdown keeps one norms boundary per block.
  if (l == 0) rms_norm(ctx_, residual, lw.input_norm, cfg.rms_norm_eps, x);
  profile_mark(ctx_, StepOp::kNorm);

  // q, k, v and the gate share the input x; their weights are consecutive row ranges of qkvg.
  TensorView q = ws.q.view(DType::kBF16, {T, Nq * D});
  TensorView k = ws.k.view(DType::kBF16, {T, Nkv * D});
  TensorView v = ws.v.view(DType::kBF16, {T, Nkv * D});
  TensorView g = ws.gate.view(DType::kBF16, {T, Nq * D});
  const TensorView qkvg_outs[] = {q, k, v, g};
  linear_split(ctx_, x, lw.attn.qkvg, qkvg_outs);
  add_lora(ws, l, x,
           {{LoraTarget::kQ, q}, {LoraTarget::kK, k}, {LoraTarget::kV, v}, {LoraTarget::kGate, g}});
  profile_mark(ctx_, StepOp::kQkvg);

  // Per-head q/k norms, then RoPE (sliding) or SSMax (full), then the KV-cache write: one op.
  // The kStoreKv boundary stays (empty: the store counts as kQkNormRope).
  TensorView q3 = q.reshape({T, Nq, D}), k3 = k.reshape({T, Nkv, D}), v3 = v.reshape({T, Nkv, D});
  const QkTensors qk{q3, k3, lw.attn.q_norm, lw.attn.k_norm, ws.positions_view()};
  const PagedKv& layer_kv = kv.layers[l];
  const KvStore store{v3, sliding ? ws.sliding_slots_view() : ws.full_slots_view(), layer_kv};
  if (sliding) {
    qk_norm_rope(ctx_, qk, cfg.rms_norm_eps, cfg.rope_theta, &store);
  } else {
    qk_norm_ssmax(ctx_, qk, cfg.rms_norm_eps, &store);
  }
  profile_mark(ctx_, StepOp::kQkNormRope);
  profile_mark(ctx_, StepOp::kStoreKv);

  TensorView o = ws.attn_out.view(DType::kBF16, {T, Nq, D});
  const int64_t window = sliding ? cfg.sliding_window : 0;
  // The fixed (graph) path gates in the attention epilogue (one launch, the same bits); the kGate
  // boundary stays (empty there).
  switch (path) {
    case AttentionPath::kEager:
      paged_attention(ctx_, q3, layer_kv, sliding ? ws.sliding_seqs : ws.full_seqs, window, o);
      profile_mark(ctx_, StepOp::kAttention);
      output_gate(ctx_, o.reshape({T, Nq * D}), g, lw.attn.gate_bias);
      break;
    case AttentionPath::kFixed:
      fixed_paged_attention_gated(ctx_, sliding ? 1 : 0, q3, layer_kv, window,
                                  AttentionGate{g, lw.attn.gate_bias}, o);
      profile_mark(ctx_, StepOp::kAttention);
      break;
  }
  profile_mark(ctx_, StepOp::kGate);

  TensorView a = ws.branch.view(DType::kBF16, {T, H});
  if (sharded()) {  // this rank's heads' share of o_proj, summed over the ranks
    TensorView part = ws.partial.view(DType::kF32, {T, H});
    linear(ctx_, o.reshape({T, Nq * D}), lw.attn.o_proj, part);
    reduce_partials(part, a);
  } else {
    linear(ctx_, o.reshape({T, Nq * D}), lw.attn.o_proj, a);
  }
  add_lora(ws, l, lora_input(ws, l, LoraTarget::kO, o.reshape({T, Nq * D})),
           {{LoraTarget::kO, a}});
  profile_mark(ctx_, StepOp::kOProj);
  DepthScale s = depth_scale(2 * l + 2);
  // The residual update and the MLP's pre-norm of the new residual into x, in one op.
  post_norm_residual_norm(ctx_, a, lw.post_attn_norm, cfg.rms_norm_eps, s.r, s.c, residual,
                          lw.pre_mlp_norm, x);
  profile_mark(ctx_, StepOp::kPostNorm);
}

void BeamModel::mlp_block(Workspace& ws, int64_t l, int64_t sparse_index, bool capture) {
  const BeamConfig& cfg = config();
  const int64_t T = ws.num_tokens();
  const LayerWeights& lw = weights_->layers[l];
  const int64_t H = cfg.hidden_size;
  TensorView residual = ws.residual.view(DType::kBF16, {T, H});
  TensorView x = ws.x.view(DType::kBF16, {T, H});  // pre_mlp_norm(residual), from attention_block
  profile_mark(ctx_, StepOp::kNorm);                // an empty boundary (see attention_block)
  TensorView m = ws.branch.view(DType::kBF16, {T, H});

  switch (cfg.mlp_layer_types[l]) {
    case MlpKind::kDense: {
      const int64_t I = shape_.intermediate;
      TensorView gu = ws.mlp_hidden.view(DType::kBF16, {T, 2 * I});
      TensorView act = ws.mlp_act.view(DType::kBF16, {T, I});
      linear(ctx_, x, lw.dense.gate_up, gu);
      add_lora(ws, l, x, {{LoraTarget::kDenseGate, gu, 0}, {LoraTarget::kDenseUp, gu, I}});
      swiglu(ctx_, gu, act);
      if (sharded()) {  // this rank's width's share of down, summed over the ranks
        TensorView part = ws.partial.view(DType::kF32, {T, H});
        linear(ctx_, act, lw.dense.down, part);
        reduce_partials(part, m);
      } else {
        linear(ctx_, act, lw.dense.down, m);
      }
      add_lora(ws, l, lora_input(ws, l, LoraTarget::kDenseDown, act),
               {{LoraTarget::kDenseDown, m}});
      profile_mark(ctx_, StepOp::kDense);
      break;
    }
    case MlpKind::kSparse: {
      const int64_t K = cfg.num_experts_per_tok;
      // With capture, each sparse layer routes straight into its slice of the capture buffer.
      TensorView ids = capture ? ws.routed_experts.view(DType::kI32, {sparse_index + 1, T, K})
                                     .rows(sparse_index, 1)
                                     .reshape({T, K})
                               : ws.expert_ids.view(DType::kI32, {T, K});
      TensorView weights = ws.expert_weights.view(DType::kF32, {T, K});
      RouterParams rp{cfg.num_groups, cfg.topk_groups, K, cfg.norm_topk_prob, cfg.routed_scaling_factor};
      moe_router_route(ctx_, x, lw.moe.router, lw.moe.router_bias, rp, ids, weights,
                       ws.active_view());  // a padded decode graph's padding gets no experts
      profile_mark(ctx_, StepOp::kRouter);
      // Expert LoRA rides inside the experts op (its deltas are counted as kExperts).
      const std::optional<MoeLora> lora = moe_lora(ws, l);
      if (sharded()) {  // this rank's experts' share of the combine, summed over the ranks
        TensorView local_ids = ws.local_expert_ids.view(DType::kI32, {T, K});
        localize_expert_ids(ctx_, ids, shape_.first_expert, shape_.num_experts, local_ids);
        TensorView part = ws.partial.view(DType::kF32, {T, H});
        moe_experts(ctx_, x, lw.moe.experts_gate_up, lw.moe.experts_down, local_ids, weights, part,
                    lora ? &*lora : nullptr);  // the slots hold this rank's experts
        reduce_partials(part, m);
      } else {
        moe_experts(ctx_, x, lw.moe.experts_gate_up, lw.moe.experts_down, ids, weights, m,
                    lora ? &*lora : nullptr);
      }
      profile_mark(ctx_, StepOp::kExperts);
      break;
    }
  }
  DepthScale s = depth_scale(2 * l + 3);
  if (l + 1 < cfg.num_layers) {  // and the next layer's input norm into x
    post_norm_residual_norm(ctx_, m, lw.post_mlp_norm, cfg.rms_norm_eps, s.r, s.c, residual,
                            weights_->layers[l + 1].input_norm, x);
  } else {  // the final norm runs on the gathered logit rows (compute_logits)
    post_norm_residual(ctx_, m, lw.post_mlp_norm, cfg.rms_norm_eps, s.r, s.c, residual);
  }
  profile_mark(ctx_, StepOp::kPostNorm);
}

void BeamModel::compute_logits(Workspace& ws) {
  const BeamConfig& cfg = config();
  const int64_t T = ws.num_tokens(), R = ws.num_logit_rows();
  const int64_t H = cfg.hidden_size, V = shape_.vocab;  // this rank's vocabulary slice
  TensorView residual = ws.residual.view(DType::kBF16, {T, H});
  // The rows that need logits, gathered on the device (the embedding op is a row gather).
  TensorView hidden = ws.final_hidden.view(DType::kBF16, {R, H});
  if (ws.norm_every_row) {  // every token's final norm (returned), then the logit rows of it
    TensorView normed = ws.x.view(DType::kBF16, {T, H});
    rms_norm(ctx_, residual, weights_->final_norm, cfg.rms_norm_eps, normed);
    embedding(ctx_, normed, ws.logit_rows_view(), hidden);
  } else {
    embedding(ctx_, residual, ws.logit_rows_view(), hidden);
    rms_norm(ctx_, hidden, weights_->final_norm, cfg.rms_norm_eps, hidden);
  }
  TensorView z = ws.lm_out.view(DType::kBF16, {R, V});
  linear(ctx_, hidden, weights_->lm_head, z);
  add_lora(ws, 0, hidden, {{LoraTarget::kLmHead, z}});
  TensorView logits = (sharded() ? ws.local_logits : ws.logits).view(DType::kF32, {R, V});
  softcap(ctx_, z, cfg.final_logit_softcapping.value_or(0.0f), 1.0f, logits);
  if (sharded()) gather_logits(ws);
  profile_mark(ctx_, StepOp::kHead);
}

void BeamModel::reduce_partials(const TensorView& part, const TensorView& out) {
  if (!Workspace::gathers_partials(ctx_)) {
    shard_.comm->all_reduce_sum(part);
    round_to_bf16(ctx_, part, out);
    return;
  }
  // Every rank's partials, a slice of rows at a time, summed in rank order (as LocalGroup's
  // all-reduce does).
  const int64_t T = part.dim(0), H = part.dim(1), n = shard_.tp.size;
  for (int64_t r0 = 0; r0 < T; r0 += Workspace::kRankPartialRows) {
    const int64_t rows = std::min(Workspace::kRankPartialRows, T - r0);
    const TensorView gathered = ws_.rank_partials.view(DType::kF32, {n, rows, H});
    shard_.comm->all_gather(part.rows(r0, rows), gathered);
    sum_ranks_to_bf16(ctx_, gathered, out.rows(r0, rows));
  }
}

void BeamModel::gather_logits(const Workspace& ws) {
  const int64_t R = ws.num_logit_rows(), Vl = shape_.vocab, n = shard_.tp.size;
  gather_columns(ws.local_logits.view(DType::kF32, {R, Vl}),
                 ws.gathered_logits.view(DType::kF32, {n, R, Vl}),
                 ws.logits.view(DType::kF32, {R, n * Vl}));
}

void BeamModel::gather_columns(const TensorView& local, const TensorView& gathered,
                               const TensorView& out) {
  const int64_t n = shard_.tp.size;
  shard_.comm->all_gather(local, gathered);
  // Rank r's [rows, c] goes to columns [r * c, (r + 1) * c) of out.
  const size_t row = static_cast<size_t>(local.dim(1)) * dtype_size(local.dtype);
  const auto rows = static_cast<size_t>(local.dim(0));
  for (int64_t r = 0; r < n; ++r)
    copy_rows(ctx_,
              PitchedRows{static_cast<char*>(out.data) + r * row, ctx_.device, n * row, row, rows},
              PitchedRows{gathered.rows(r, 1).data, ctx_.device, row, row, rows});
}

TensorView BeamModel::lora_input(const Workspace& ws, int64_t l, LoraTarget target,
                                 const TensorView& x) {
  if (!sharded() || !lora_ || !ws.any_lora || lora_->stack(l, target) == nullptr) return x;
  const int64_t T = x.dim(0), c = x.dim(1), n = shard_.tp.size;
  const TensorView full = ws.lora_input.view(DType::kBF16, {T, n * c});
  gather_columns(x, ws.lora_gathered.view(DType::kBF16, {n, T, c}), full);
  return full;
}

void BeamModel::add_lora(const Workspace& ws, int64_t l, const TensorView& x,
                         std::initializer_list<LoraPart> parts) {
  // Steps without an adapter token skip the op; decode graphs keep one graph per bucket for
  // batches with adapters and one for batches without (decode_graphs.h), so a graph captured
  // with the op replays only for batches that have adapter tokens.
  if (!lora_ || !ws.any_lora) return;
  BEAM_CHECK(parts.size() <= kMaxLoraOutputs) << "add_lora: " << parts.size() << " modules";
  std::array<LoraOutput, kMaxLoraOutputs> outputs;
  size_t n = 0;
  for (const LoraPart& part : parts)
    if (const LoraStack* stack = lora_->stack(l, part.target))
      outputs[n++] = LoraOutput{*stack, part.out, part.col0};
  if (n == 0) return;
  const LoraTarget first = parts.begin()->target;
  const bool rows = first == LoraTarget::kLmHead;
  profile_mark(ctx_, lora_base_op(first));  // the base projections queued before the deltas
  lora_add(ctx_, x, std::span<const LoraOutput>(outputs.data(), n),
           rows ? ws.lora_row_slots_view() : ws.lora_slots_view());
  profile_mark(ctx_, StepOp::kLora);
}

std::optional<MoeLora> BeamModel::moe_lora(const Workspace& ws, int64_t l) const {
  if (!lora_ || !ws.any_lora || !lora_->serves_experts()) return std::nullopt;
  const ExpertLoraStack* gate = lora_->expert_stack(l, LoraTarget::kExpertGate);
  if (gate == nullptr) return std::nullopt;
  return MoeLora{*gate, *lora_->expert_stack(l, LoraTarget::kExpertUp),
                 *lora_->expert_stack(l, LoraTarget::kExpertDown), ws.lora_slots_view()};
}

void BeamModel::copy_captured(const Workspace& ws, const ForwardBatch& batch,
                              ForwardOutput& out) {
  out.captured_hidden.clear();
  out.device_captured = TensorView();
  if (batch.capture_layers.empty()) return;
  // The batch's tokens (a decode graph's padding rows come after them).
  const int64_t T = ws.active_tokens;
  const TensorView captured = ws.captured.view(
      DType::kBF16, {T, static_cast<int64_t>(batch.capture_layers.size()) * config().hidden_size});
  if (batch.captured_on_device) {
    out.device_captured = captured;
    return;
  }
  out.captured_hidden.resize(static_cast<size_t>(captured.numel()));
  copy_tensor(ctx_,
              TensorView{out.captured_hidden.data(), DType::kBF16, captured.shape, Device::kCpu},
              captured);
}

void BeamModel::copy_final_hidden(const Workspace& ws, const ForwardBatch& batch,
                                  ForwardOutput& out) {
  out.final_hidden.clear();
  const int64_t H = config().hidden_size;
  const TensorView normed = ws.norm_every_row ? ws.x.view(DType::kBF16, {ws.num_tokens(), H})
                                              : ws.final_hidden.view(DType::kBF16,
                                                                     {ws.num_logit_rows(), H});
  int64_t t0 = 0, r0 = 0;  // the chunk's first token row and first logit row
  for (const SeqChunk& s : batch.seqs) {
    const auto n = static_cast<int64_t>(s.tokens.size());
    const int64_t logit_rows = s.all_logits ? n : 1;  // its last tokens (Workspace::build)
    if (s.wants_final_hidden()) {
      // Token k's normed row: x's row t0 + k, or (a logit row) final_hidden's r0 + k - (n - rows).
      const int64_t first = ws.norm_every_row ? t0 + s.final_hidden_from
                                              : r0 + s.final_hidden_from - (n - logit_rows);
      BEAM_CHECK(ws.norm_every_row || s.final_hidden_from >= n - logit_rows)
          << "copy_final_hidden: token " << s.final_hidden_from << " of " << n
          << " is not a logit row";
      const int64_t rows = n - s.final_hidden_from;
      const size_t at = out.final_hidden.size();
      out.final_hidden.resize(at + static_cast<size_t>(rows * H));
      copy_tensor(ctx_,
                  TensorView{out.final_hidden.data() + at, DType::kBF16, {rows, H}, Device::kCpu},
                  normed.rows(first, rows));
    }
    t0 += n;
    r0 += logit_rows;
  }
}

void BeamModel::copy_logits(const Workspace& ws, const ForwardBatch& batch, ForwardOutput& out) {
  const int64_t V = config().vocab_size;
  out.row_seq.clear();
  out.row_position.clear();
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqChunk& s = batch.seqs[i];
    int64_t n = static_cast<int64_t>(s.tokens.size());
    for (int64_t t = s.all_logits ? 0 : n - 1; t < n; ++t) {
      out.row_seq.push_back(static_cast<int32_t>(i));
      out.row_position.push_back(s.kv_pos0 + s.num_cached + t);
    }
  }
  const auto R = static_cast<int64_t>(out.row_seq.size());
  BEAM_CHECK(R <= ws.num_logit_rows()) << "copy_logits: " << R << " rows of " << ws.num_logit_rows();
  out.vocab_size = V;
  out.device_logits = batch.logits_on_device ? ws.logits.view(DType::kF32, {R, V}) : TensorView{};
  out.logits.resize(batch.logits_on_device ? 0 : static_cast<size_t>(R * V));
  if (!batch.logits_on_device)
    copy_tensor(ctx_, TensorView{out.logits.data(), DType::kF32, {R, V}, Device::kCpu},
                ws.logits.view(DType::kF32, {R, V}));
}

}  // namespace beam
