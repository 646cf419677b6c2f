// Drafter checkpoint → DFlash2Weights: names, shapes, bf16 conversion, q/k/v and gate/up packing.
#include "model/dflash2/dflash2_weights.h"

#include <cstring>
#include <map>
#include <set>

#include "kernels/api/device_memory.h"
#include "model/checkpoint.h"
#include "model/tensor_convert.h"

namespace beam {

namespace {

// Reads tensors by canonical name, converting to bf16 where stored otherwise; remembers which
// checkpoint names were used so the rest can be reported as unexpected.
class TensorReader {
 public:
  TensorReader(const Checkpoint& ckpt, DFlash2Weights& w) : ckpt_(ckpt), w_(w) {
    for (const std::string& name : ckpt.names()) {
      std::string canonical = name.rfind("model.", 0) == 0 ? name.substr(6) : name;
      for (const char* cb : {"predecessor_codebook", "successor_codebook"}) {
        const std::string with = std::string("candidate_selector.") + cb + ".weight";
        if (canonical == with) canonical = with.substr(0, with.size() - 7);
      }
      by_canonical_[canonical] = name;
    }
  }

  // The tensor `name` as a bf16 view of `shape`.
  Expected<TensorView> get(const std::string& name, Shape shape) {
    BEAM_ASSIGN_OR_RETURN(const RawTensor* raw, find(name, shape));
    if (raw->dtype == DType::kBF16)
      return TensorView{const_cast<void*>(raw->data), DType::kBF16, shape, Device::kCpu};
    auto buffer = std::make_shared<Buffer>(static_cast<size_t>(shape.numel()) * 2);
    convert_elements(raw->data, raw->dtype, shape.numel(), buffer->data(), DType::kBF16);
    w_.storage.push_back(buffer);
    return buffer->view(DType::kBF16, shape);
  }

  // Tensors `names` (each [rows_i, cols]) stacked by rows into one bf16 [Σ rows_i, cols] buffer.
  Expected<TensorView> stacked(const std::vector<std::pair<std::string, int64_t>>& names,
                               int64_t cols) {
    int64_t rows = 0;
    for (const auto& [name, r] : names) rows += r;
    auto buffer = std::make_shared<Buffer>(static_cast<size_t>(rows * cols) * 2);
    char* dst = static_cast<char*>(buffer->data());
    for (const auto& [name, r] : names) {
      BEAM_ASSIGN_OR_RETURN(const RawTensor* raw, find(name, Shape{r, cols}));
      convert_elements(raw->data, raw->dtype, r * cols, dst, DType::kBF16);
      dst += r * cols * 2;
    }
    w_.storage.push_back(buffer);
    return buffer->view(DType::kBF16, Shape{rows, cols});
  }

  // An error naming the first checkpoint tensor no get() asked for.
  Status check_all_used() const {
    for (const auto& [canonical, name] : by_canonical_)
      if (!used_.count(canonical))
        return make_error(ckpt_.dir() + ": unexpected tensor '" + name +
                          "' in a DFlash2 drafter checkpoint (docs/dflash2.md lists its tensors)");
    return ok_status();
  }

 private:
  Expected<const RawTensor*> find(const std::string& canonical, const Shape& shape) {
    auto it = by_canonical_.find(canonical);
    if (it == by_canonical_.end())
      return make_error(ckpt_.dir() + ": DFlash2 tensor '" + canonical + "' is missing");
    const RawTensor* raw = ckpt_.find(it->second);
    if (!(raw->shape == shape))
      return make_error(ckpt_.dir() + ": tensor '" + it->second + "' has shape " +
                        raw->shape.str() + ", the config gives " + shape.str());
    used_.insert(canonical);
    return raw;
  }

  const Checkpoint& ckpt_;
  DFlash2Weights& w_;
  std::map<std::string, std::string> by_canonical_;
  std::set<std::string> used_;
};

Expected<DFlash2ConvWeights> conv_weights(TensorReader& r, const std::string& prefix,
                                          const DFlash2Config& c) {
  DFlash2ConvWeights w;
  BEAM_ASSIGN_OR_RETURN(w.base, r.get(prefix + ".base_kernel", Shape{2, 2, c.hidden_size}));
  BEAM_ASSIGN_OR_RETURN(w.projection, r.get(prefix + ".kernel_projection.weight",
                                            Shape{4 * c.conv_groups(), c.hidden_size}));
  return w;
}

Expected<DFlash2LayerWeights> layer_weights(TensorReader& r, int64_t l, const DFlash2Config& c) {
  const std::string p = "layers." + std::to_string(l) + ".";
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q = c.num_heads * D, kv = c.num_kv_heads * D;
  DFlash2LayerWeights w;
  BEAM_ASSIGN_OR_RETURN(w.input_norm, r.get(p + "input_layernorm.weight", Shape{H}));
  BEAM_ASSIGN_OR_RETURN(w.post_attn_norm, r.get(p + "post_attention_layernorm.weight", Shape{H}));
  BEAM_ASSIGN_OR_RETURN(w.qkv, r.stacked({{p + "self_attn.q_proj.weight", q},
                                          {p + "self_attn.k_proj.weight", kv},
                                          {p + "self_attn.v_proj.weight", kv}},
                                         H));
  BEAM_ASSIGN_OR_RETURN(w.q_norm, r.get(p + "self_attn.q_norm.weight", Shape{D}));
  BEAM_ASSIGN_OR_RETURN(w.k_norm, r.get(p + "self_attn.k_norm.weight", Shape{D}));
  BEAM_ASSIGN_OR_RETURN(w.o_proj, r.get(p + "self_attn.o_proj.weight", Shape{H, q}));
  BEAM_ASSIGN_OR_RETURN(
      w.gate_up, r.stacked({{p + "mlp.gate_proj.weight", I}, {p + "mlp.up_proj.weight", I}}, H));
  BEAM_ASSIGN_OR_RETURN(w.down, r.get(p + "mlp.down_proj.weight", Shape{H, I}));
  BEAM_ASSIGN_OR_RETURN(w.attention_conv, conv_weights(r, p + "attention_conv", c));
  BEAM_ASSIGN_OR_RETURN(w.mlp_conv, conv_weights(r, p + "mlp_conv", c));
  return w;
}

}  // namespace

Expected<std::shared_ptr<DFlash2Weights>> load_dflash2_weights(const std::string& dir,
                                                               const BeamConfig& target) {
  auto w = std::make_shared<DFlash2Weights>();
  BEAM_ASSIGN_OR_RETURN(w->config, load_dflash2_config(dir, target));
  BEAM_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
  for (const auto& file : ckpt.files()) w->storage.push_back(file);
  const DFlash2Config& c = w->config;
  const int64_t H = c.hidden_size, R = c.selector_rank, V = c.vocab_size;
  TensorReader r(ckpt, *w);
  BEAM_ASSIGN_OR_RETURN(w->fc, r.get("fc.weight", Shape{H, c.num_taps() * H}));
  BEAM_ASSIGN_OR_RETURN(w->hidden_norm, r.get("hidden_norm.weight", Shape{H}));
  BEAM_ASSIGN_OR_RETURN(w->final_norm, r.get("norm.weight", Shape{H}));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    BEAM_ASSIGN_OR_RETURN(DFlash2LayerWeights layer, layer_weights(r, l, c));
    w->layers.push_back(layer);
  }
  BEAM_ASSIGN_OR_RETURN(w->hidden_projection,
                        r.get("candidate_selector.hidden_projection.weight", Shape{R, H}));
  BEAM_ASSIGN_OR_RETURN(w->predecessor_codebook,
                        r.get("candidate_selector.predecessor_codebook", Shape{V, R}));
  BEAM_ASSIGN_OR_RETURN(w->successor_codebook,
                        r.get("candidate_selector.successor_codebook", Shape{V, R}));
  BEAM_RETURN_IF_ERROR(r.check_all_used());
  return w;
}

namespace {

// Every tensor of w, in one order.
std::vector<TensorView*> tensors_of(DFlash2Weights& w) {
  std::vector<TensorView*> t = {&w.fc, &w.hidden_norm, &w.final_norm, &w.hidden_projection,
                                &w.predecessor_codebook, &w.successor_codebook};
  for (DFlash2LayerWeights& l : w.layers)
    for (TensorView* v : {&l.input_norm, &l.post_attn_norm, &l.qkv, &l.q_norm, &l.k_norm,
                          &l.o_proj, &l.gate_up, &l.down, &l.attention_conv.base,
                          &l.attention_conv.projection, &l.mlp_conv.base, &l.mlp_conv.projection})
      t.push_back(v);
  return t;
}

}  // namespace

Expected<std::shared_ptr<const DFlash2Weights>> upload_dflash2_weights(
    const KernelContext& ctx, std::shared_ptr<const DFlash2Weights> host) {
  if (ctx.device == Device::kCpu) return host;
  auto w = std::make_shared<DFlash2Weights>(*host);
  w->storage.clear();
  const std::vector<TensorView*> tensors = tensors_of(*w);
  size_t total = 0;
  for (const TensorView* t : tensors) total += (t->nbytes() + 255) / 256 * 256;
  Expected<DeviceBuffer> buffer = allocate_buffer(ctx, total);
  if (!buffer.ok())
    return make_error("the DFlash2 drafter's weights (" + std::to_string(total >> 20) +
                      " MiB): " + buffer.error().message);
  size_t at = 0;
  for (TensorView* t : tensors) {
    const TensorView dst{static_cast<char*>(buffer->data()) + at, t->dtype, t->shape, ctx.device};
    copy_tensor(ctx, dst, *t);
    *t = dst;
    at += (t->nbytes() + 255) / 256 * 256;
  }
  synchronize(ctx);
  w->storage.push_back(buffer->owner());
  return std::shared_ptr<const DFlash2Weights>(std::move(w));
}

}  // namespace beam
