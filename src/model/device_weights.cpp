// upload_weights: plan (sizes and offsets of every distinct tensor and deferred expert matrix),
// allocate one arena, stream the host bytes in (weight_stream.h), pack the expert tensors
// (pack_moe_weights).
#include "model/device_weights.h"

#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/api/device_memory.h"
#include "kernels/api/moe.h"
#include "model/synthetic_weights.h"
#include "model/weight_stream.h"

namespace beam {
namespace {

constexpr size_t kAlignBytes = 256;

// Every tensor view of w in a fixed order (empty ones included: a dense layer's MoE views);
// W is BeamWeights or const BeamWeights.
template <typename W>
auto views_of(W& w) {
  using View = std::conditional_t<std::is_const_v<W>, const TensorView, TensorView>;
  std::vector<View*> views = {&w.embed, &w.final_norm, &w.lm_head};
  for (auto& l : w.layers) {
    views.insert(views.end(), {&l.input_norm, &l.post_attn_norm, &l.pre_mlp_norm, &l.post_mlp_norm,
                               &l.attn.qkvg, &l.attn.gate_bias, &l.attn.q_norm, &l.attn.k_norm,
                               &l.attn.o_proj, &l.dense.gate_up, &l.dense.down, &l.moe.router,
                               &l.moe.router_bias, &l.moe.experts_gate_up, &l.moe.experts_down});
  }
  return views;
}

// Calls fn on every tensor view of w.
void for_each_view(BeamWeights& w, const std::function<void(TensorView&)>& fn) {
  for (TensorView* v : views_of(w)) fn(*v);
}

// The pieces writing deferred matrix d of `host` into `matrix` (its view in weights whose experts
// start at first_expert, with data where the bytes go).
void add_deferred_pieces(const DeferredExperts& d, const TensorView& matrix, int64_t first_expert,
                         std::vector<HostPiece>& pieces) {
  const size_t expert_bytes = matrix.nbytes() / static_cast<size_t>(matrix.dim(0));
  for (const ExpertPiece& p : d.pieces) {
    char* dst = static_cast<char*>(matrix.data) +
                static_cast<size_t>(p.expert - first_expert) * expert_bytes + p.offset;
    pieces.push_back({.src_dtype = p.src_dtype, .numel = p.numel, .dst = dst,
                      .dst_dtype = matrix.dtype, .file = p.file, .file_offset = p.file_offset});
  }
}

// A host copy of `host` with its deferred expert matrices converted into buffers of their own
// (what the CPU reads; the copy keeps `host` and its mapping alive).
Expected<std::shared_ptr<const BeamWeights>> materialize_experts(
    const KernelContext& ctx, std::shared_ptr<const BeamWeights> host) {
  auto out = std::make_shared<BeamWeights>(*host);
  out->deferred_experts.clear();
  out->storage.push_back(std::const_pointer_cast<BeamWeights>(host));
  std::vector<HostPiece> pieces;
  for (const DeferredExperts& d : host->deferred_experts) {
    TensorView& matrix = expert_matrix(out->layers[d.layer], d.matrix);
    auto buffer = std::make_shared<Buffer>(matrix.nbytes());
    matrix = buffer->view(matrix.dtype, matrix.shape);
    out->storage.push_back(std::move(buffer));
    add_deferred_pieces(d, matrix, host->first_expert, pieces);
  }
  BEAM_RETURN_IF_ERROR(stream_pieces(ctx, pieces));
  return std::shared_ptr<const BeamWeights>(std::move(out));
}

}  // namespace

Expected<WeightArena> allocate_weight_arena(const KernelContext& ctx, size_t nbytes,
                                            bool releasable) {
  const auto no_room = [&](const Error& e) {
    return make_error("uploading " + std::to_string(nbytes) + " bytes of weights: " + e.message);
  };
  WeightArena arena;
  if (releasable) {
    Expected<std::shared_ptr<ReleasableMemory>> m = allocate_releasable(ctx, nbytes);
    if (!m.ok()) return no_room(m.error());
    arena.memory = *m;
    arena.buffer = releasable_buffer(arena.memory);
  } else {
    Expected<DeviceBuffer> b = allocate_buffer(ctx, nbytes);
    if (!b.ok()) return no_room(b.error());
    arena.buffer = std::move(*b);
  }
  return arena;
}

Expected<DeviceWeights> upload_weights(const KernelContext& ctx,
                                       std::shared_ptr<const BeamWeights> host, bool releasable) {
  BEAM_CHECK(host != nullptr) << "upload_weights: no weights";
  if (host->synthetic) return fill_synthetic(ctx, *host, releasable);
  BEAM_CHECK(host->embed.device == Device::kCpu)
      << "upload_weights: the weights are not in host memory (they are read there)";
  switch (ctx.device) {
    case Device::kCpu: {
      if (host->deferred_experts.empty()) return DeviceWeights{std::move(host), 0, nullptr};
      BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const BeamWeights> w, materialize_experts(ctx, host));
      return DeviceWeights{std::move(w), 0, nullptr};
    }
    case Device::kCuda:
      break;
  }
  auto dev = std::make_shared<BeamWeights>();
  dev->config = host->config;
  dev->first_expert = host->first_expert;
  dev->embed = host->embed;
  dev->final_norm = host->final_norm;
  dev->lm_head = host->lm_head;
  dev->layers = host->layers;

  // Plan: one arena offset per distinct (address, bytes) so aliased views share device memory,
  // then one per deferred expert matrix (no address yet).
  struct Placed {
    size_t offset;
    DType dtype;
    int64_t numel;
  };
  std::map<std::pair<const void*, size_t>, Placed> offsets;
  size_t arena_bytes = 0;
  const auto place = [&](size_t bytes) {
    const size_t at = arena_bytes;
    arena_bytes += (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    return at;
  };
  for_each_view(*dev, [&](TensorView& v) {
    if (v.data == nullptr || v.nbytes() == 0) return;
    if (!offsets.contains({v.data, v.nbytes()}))
      offsets.emplace(std::pair{v.data, v.nbytes()}, Placed{place(v.nbytes()), v.dtype, v.numel()});
  });
  std::vector<size_t> deferred_offsets;
  for (const DeferredExperts& d : host->deferred_experts)
    deferred_offsets.push_back(place(expert_matrix(dev->layers[d.layer], d.matrix).nbytes()));
  for (const auto& f : host->files)  // the views below read the mapping: no file cut short
    BEAM_RETURN_IF_ERROR(f->check_whole());
  BEAM_ASSIGN_OR_RETURN(WeightArena arena, allocate_weight_arena(ctx, arena_bytes, releasable));

  // Copy each distinct tensor once and each deferred matrix's pieces, then retarget every view.
  char* base = static_cast<char*>(arena.buffer.data());
  std::vector<HostPiece> pieces;
  for (const auto& [key, at] : offsets)
    pieces.push_back({key.first, at.dtype, at.numel, base + at.offset, at.dtype});
  for_each_view(*dev, [&](TensorView& v) {
    if (v.data != nullptr && v.nbytes() != 0) v.data = base + offsets.at({v.data, v.nbytes()}).offset;
    v.device = ctx.device;
  });
  for (size_t i = 0; i < host->deferred_experts.size(); ++i) {
    const DeferredExperts& d = host->deferred_experts[i];
    TensorView& matrix = expert_matrix(dev->layers[d.layer], d.matrix);
    matrix.data = base + deferred_offsets[i];
    add_deferred_pieces(d, matrix, host->first_expert, pieces);
  }
  if (Status st = stream_pieces(ctx, pieces); !st.ok())
    return make_error("uploading " + std::to_string(arena_bytes) + " bytes of weights: " +
                      st.error().message);
  dev->storage.push_back(arena.buffer.owner());
  BEAM_RETURN_IF_ERROR(pack_moe_weights(ctx, *dev));
  return DeviceWeights{std::move(dev), static_cast<int64_t>(arena_bytes), std::move(arena.memory)};
}

Status copy_weights_into(const KernelContext& ctx, const BeamWeights& device,
                         const BeamWeights& host, bool* partial) {
  if (host.synthetic)
    return make_error("synthetic weights (--load-format dummy) cannot replace the served ones");
  const std::vector<const TensorView*> dst = views_of(device), src = views_of(host);
  if (dst.size() != src.size()) return make_error("the new weights have another layer count");
  for (size_t i = 0; i < dst.size(); ++i) {
    if (dst[i]->shape != src[i]->shape || dst[i]->dtype != src[i]->dtype)
      return make_error("tensor " + std::to_string(i) + " of the new weights is " +
                        src[i]->shape.str() + ", the served model's " + dst[i]->shape.str());
  }
  std::vector<HostPiece> pieces;
  for (size_t i = 0; i < dst.size(); ++i) {
    if (dst[i]->data == nullptr || src[i]->data == nullptr || dst[i]->nbytes() == 0) continue;
    pieces.push_back({src[i]->data, src[i]->dtype, src[i]->numel(), dst[i]->data, dst[i]->dtype});
  }
  for (const DeferredExperts& d : host.deferred_experts)
    add_deferred_pieces(d, expert_matrix(device.layers[d.layer], d.matrix),
                        host.first_expert, pieces);
  for (const auto& f : host.files)  // a file already cut short: nothing copied yet
    BEAM_RETURN_IF_ERROR(f->check_whole());
  if (Status st = stream_pieces(ctx, pieces); !st.ok()) {
    if (partial != nullptr) *partial = true;
    return make_error(st.error().message +
                      "; the copy stopped part way, so the device holds part of each model");
  }
  return pack_moe_weights(ctx, device);
}

Status pack_moe_weights(const KernelContext& ctx, const BeamWeights& w) {
  for (const LayerWeights& l : w.layers) {
    if (l.moe.experts_gate_up.data == nullptr) continue;  // a dense layer
    BEAM_RETURN_IF_ERROR(pack_expert_weights(ctx, ExpertMatrix::kGateUp, l.moe.experts_gate_up));
    BEAM_RETURN_IF_ERROR(pack_expert_weights(ctx, ExpertMatrix::kDown, l.moe.experts_down));
  }
  return ok_status();
}

}  // namespace beam
