// upload_weights: plan (sizes and offsets of every distinct tensor), allocate one arena, copy,
// pack the expert tensors (pack_moe_weights).
#include "model/device_weights.h"

#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/api/device_memory.h"
#include "kernels/api/moe.h"

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

}  // namespace

Expected<DeviceWeights> upload_weights(const KernelContext& ctx,
                                       std::shared_ptr<const BeamWeights> host, bool releasable) {
  BEAM_CHECK(host != nullptr) << "upload_weights: no weights";
  switch (ctx.device) {
    case Device::kCpu:
      return DeviceWeights{std::move(host), 0, nullptr};
    case Device::kCuda:
      break;
  }
  auto dev = std::make_shared<BeamWeights>();
  dev->config = host->config;
  dev->embed = host->embed;
  dev->final_norm = host->final_norm;
  dev->lm_head = host->lm_head;
  dev->layers = host->layers;

  // Plan: one arena offset per distinct (address, bytes) so aliased views share device memory.
  std::map<std::pair<const void*, size_t>, size_t> offsets;
  size_t arena_bytes = 0;
  for_each_view(*dev, [&](TensorView& v) {
    if (v.data == nullptr || v.nbytes() == 0) return;
    auto [it, inserted] = offsets.try_emplace({v.data, v.nbytes()}, arena_bytes);
    if (inserted) arena_bytes += (v.nbytes() + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  });
  const auto no_room = [&](const Error& e) {
    return make_error("uploading " + std::to_string(arena_bytes) +
                      " bytes of weights: " + e.message);
  };
  std::shared_ptr<ReleasableMemory> memory;
  DeviceBuffer arena;
  if (releasable) {
    Expected<std::shared_ptr<ReleasableMemory>> m = allocate_releasable(ctx, arena_bytes);
    if (!m.ok()) return no_room(m.error());
    memory = *m;
    arena = releasable_buffer(memory);
  } else {
    Expected<DeviceBuffer> b = allocate_buffer(ctx, arena_bytes);
    if (!b.ok()) return no_room(b.error());
    arena = std::move(*b);
  }

  // Copy each distinct tensor once, then retarget every view.
  char* base = static_cast<char*>(arena.data());
  for (const auto& [key, offset] : offsets) {
    TensorView src{const_cast<void*>(key.first), DType::kU8, {static_cast<int64_t>(key.second)}, Device::kCpu};
    TensorView dst{base + offset, DType::kU8, {static_cast<int64_t>(key.second)}, ctx.device};
    copy_tensor(ctx, dst, src);
  }
  for_each_view(*dev, [&](TensorView& v) {
    if (v.data == nullptr || v.nbytes() == 0) {
      v.device = ctx.device;
      return;
    }
    v.data = base + offsets.at({v.data, v.nbytes()});
    v.device = ctx.device;
  });
  dev->storage.push_back(arena.owner());
  BEAM_RETURN_IF_ERROR(pack_moe_weights(ctx, *dev));
  return DeviceWeights{std::move(dev), static_cast<int64_t>(arena_bytes), std::move(memory)};
}

Status copy_weights_into(const KernelContext& ctx, const BeamWeights& device,
                         const BeamWeights& host) {
  const std::vector<const TensorView*> dst = views_of(device), src = views_of(host);
  if (dst.size() != src.size()) return make_error("the new weights have another layer count");
  for (size_t i = 0; i < dst.size(); ++i) {
    if (dst[i]->shape != src[i]->shape || dst[i]->dtype != src[i]->dtype)
      return make_error("tensor " + std::to_string(i) + " of the new weights is " +
                        src[i]->shape.str() + ", the served model's " + dst[i]->shape.str());
  }
  for (size_t i = 0; i < dst.size(); ++i) {
    if (dst[i]->data == nullptr || dst[i]->nbytes() == 0) continue;
    const int64_t bytes = static_cast<int64_t>(src[i]->nbytes());
    copy_tensor(ctx, TensorView{dst[i]->data, DType::kU8, {bytes}, ctx.device},
                TensorView{src[i]->data, DType::kU8, {bytes}, Device::kCpu});
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
