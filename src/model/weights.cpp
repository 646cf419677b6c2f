// load_beam_weights: resolves every tensor the config needs (names: tensor_names.h), checks
// shapes, packs q/k/v/gate and dense gate/up, fuses per-expert tensors, converts dtypes, and
// merges a LoRA adapter's deltas (lora_adapter.h) into the copies of the weights it names.
// Plan first (resolve + allocate + list copies), then copy in parallel once nothing can fail.
#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "core/thread_pool.h"
#include "model/checkpoint.h"
#include "model/tensor_convert.h"
#include "model/tensor_names.h"

namespace beam {

namespace {

// One whole checkpoint tensor converted into owned memory.
struct CopyJob {
  const RawTensor* src;
  void* dst;
  DType dst_dtype;
};

// A LoRA delta merged into a converted bf16 weight [out, in] once it is copied.
struct MergeJob {
  const LoraDelta* delta;
  void* dst;
  int64_t out, in;
};

// Builds the views of one BeamWeights; owns the copy plan until run().
class WeightsBuilder {
 public:
  // lora (may be null): an adapter whose deltas are merged into the weights they name.
  WeightsBuilder(const Checkpoint& checkpoint, BeamWeights& weights, const LoraAdapter* lora)
      : checkpoint_(checkpoint), resolver_(checkpoint), weights_(weights), lora_(lora) {}

  // A view of tensor `name`: into the mapping when it already has the target dtype and element
  // alignment (and no LoRA delta), else a converted copy. Missing tensors give an empty view
  // (reported by run()).
  Expected<TensorView> bind(const std::string& name, const TensorSpec& spec) {
    BEAM_ASSIGN_OR_RETURN(const RawTensor* t, resolver_.take(name, spec));
    if (t == nullptr) return TensorView{};
    bool aligned = reinterpret_cast<uintptr_t>(t->data) % dtype_size(spec.target) == 0;
    const LoraDelta* delta = lora_ ? lora_->find(name) : nullptr;
    if (t->dtype == spec.target && aligned && delta == nullptr) {
      return TensorView{const_cast<void*>(t->data), spec.target, spec.shape, Device::kCpu};
    }
    TensorView v = allocate(spec.target, spec.shape);
    jobs_.push_back({t, v.data, spec.target});
    BEAM_RETURN_IF_ERROR(plan_merge(name, spec, v.data));
    return v;
  }

  // An owned buffer, filled by later fill() calls.
  TensorView allocate(DType dtype, Shape shape) {
    auto buffer = std::make_shared<Buffer>(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
    TensorView v = buffer->view(dtype, shape);
    weights_.storage.push_back(std::move(buffer));
    return v;
  }

  // Schedules tensor `name` to be converted into `dst` (spec.target elements).
  Status fill(const std::string& name, const TensorSpec& spec, void* dst) {
    BEAM_ASSIGN_OR_RETURN(const RawTensor* t, resolver_.take(name, spec));
    if (t == nullptr) return ok_status();
    jobs_.push_back({t, dst, spec.target});
    return plan_merge(name, spec, dst);
  }

  // Records tensor `name` as a piece of a deferred expert matrix (expert `expert`, byte offset
  // `offset` of its block): checked now, read and converted when the matrix is uploaded.
  Status defer(const std::string& name, const TensorSpec& spec, int64_t expert, size_t offset,
               DeferredExperts& into) {
    BEAM_ASSIGN_OR_RETURN(const RawTensor* t, resolver_.take(name, spec));
    if (t == nullptr) return ok_status();
    const MappedFile* file = checkpoint_.file_of(t->data);
    BEAM_CHECK(file != nullptr) << name << ": its data is in none of the checkpoint's files";
    const auto at = static_cast<uint64_t>(static_cast<const uint8_t*>(t->data) - file->data());
    into.pieces.push_back({expert, offset, file, at, t->dtype, spec.shape.numel()});
    return ok_status();
  }

  // Checks tensor `name` (shape, dtype) without loading it: another rank's expert. An adapter
  // delta on it counts as merged (that rank merges it).
  Status skip(const std::string& name, const TensorSpec& spec) {
    BEAM_ASSIGN_OR_RETURN(const RawTensor* t, resolver_.take(name, spec));
    (void)t;
    if (lora_ && lora_->find(name)) merged_names_.insert(name);
    return ok_status();
  }

  TensorResolver& resolver() { return resolver_; }
  const LoraAdapter* lora() const { return lora_; }

  // Reports missing/unexpected tensors and adapter deltas that met no weight, then runs every
  // copy (in parallel), then the merges.
  Status run() {
    BEAM_RETURN_IF_ERROR(resolver_.finish());
    if (lora_)
      for (const auto& [name, delta] : lora_->deltas())
        if (!merged_names_.contains(name))
          return make_error(lora_->dir() + ": the adapter's '" + name +
                            "' is no linear weight of this model");
    int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    ThreadPool pool(threads);
    pool.parallel_for(static_cast<int64_t>(jobs_.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const CopyJob& j = jobs_[i];
        convert_elements(j.src->data, j.src->dtype, j.src->shape.numel(), j.dst, j.dst_dtype);
      }
    });
    // The merges: their factors in f32, then chunks of rows of every merged weight at once.
    std::vector<std::optional<LoraFactors>> factors(merges_.size());
    pool.parallel_for(static_cast<int64_t>(merges_.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) factors[i].emplace(*merges_[i].delta);
    });
    constexpr int64_t kMergeRows = 64;
    std::vector<std::pair<size_t, int64_t>> chunks;  // (merge, first row)
    for (size_t i = 0; i < merges_.size(); ++i)
      for (int64_t row = 0; row < merges_[i].out; row += kMergeRows) chunks.emplace_back(i, row);
    pool.parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        const auto [i, row] = chunks[static_cast<size_t>(c)];
        const MergeJob& m = merges_[i];
        merge_lora_rows(static_cast<uint16_t*>(m.dst), m.in, *factors[i], row,
                        std::min(row + kMergeRows, m.out));
      }
    });
    return ok_status();
  }

 private:
  // Schedules the adapter's delta of `name` (if any) into its bf16 copy at `dst`.
  Status plan_merge(const std::string& name, const TensorSpec& spec, void* dst) {
    const LoraDelta* delta = lora_ ? lora_->find(name) : nullptr;
    if (delta == nullptr) return ok_status();
    const std::string where = lora_->dir() + ": '" + name + "'";
    if (spec.shape.rank != 2 || spec.target != DType::kBF16)
      return make_error(where + " is not a bf16 linear weight (LoRA merges into those only)");
    const int64_t out = spec.shape[0], in = spec.shape[1];
    if (delta->b->shape[0] != out || delta->a->shape[1] != in)
      return make_error(where + ": lora_B " + delta->b->shape.str() + " · lora_A " +
                        delta->a->shape.str() + " does not make the weight's " + spec.shape.str());
    merges_.push_back({delta, dst, out, in});
    merged_names_.insert(name);
    return ok_status();
  }

  const Checkpoint& checkpoint_;
  TensorResolver resolver_;
  BeamWeights& weights_;
  const LoraAdapter* lora_;
  std::vector<CopyJob> jobs_;
  std::vector<MergeJob> merges_;
  std::set<std::string> merged_names_;
};

// Address of row `row` of a 2-D-or-more owned view (rows of the leading dimension).
void* row_ptr(const TensorView& v, int64_t row) {
  return v.rows(row, 0).data;
}

Status build_attention(WeightsBuilder& b, const BeamConfig& c, int64_t layer, AttentionWeights& a) {
  const int64_t H = c.hidden_size, QD = c.q_width(), KVD = c.kv_width();
  auto name = [&](std::string_view suffix) { return layer_tensor_name(layer, suffix); };
  a.qkvg = b.allocate(DType::kBF16, Shape{2 * QD + 2 * KVD, H});
  BEAM_RETURN_IF_ERROR(b.fill(name("self_attn.q_proj.weight"), {Shape{QD, H}, "[Nq*D, H]"}, row_ptr(a.qkvg, 0)));
  BEAM_RETURN_IF_ERROR(b.fill(name("self_attn.k_proj.weight"), {Shape{KVD, H}, "[Nkv*D, H]"}, row_ptr(a.qkvg, QD)));
  BEAM_RETURN_IF_ERROR(b.fill(name("self_attn.v_proj.weight"), {Shape{KVD, H}, "[Nkv*D, H]"}, row_ptr(a.qkvg, QD + KVD)));
  BEAM_RETURN_IF_ERROR(b.fill(name("self_attn.gate_proj.weight"), {Shape{QD, H}, "[Nq*D, H]"},
                              row_ptr(a.qkvg, QD + 2 * KVD)));
  BEAM_ASSIGN_OR_RETURN(a.gate_bias, b.bind(name("self_attn.gate_bias"), {Shape{c.num_heads}, "[Nq]"}));
  BEAM_ASSIGN_OR_RETURN(a.q_norm, b.bind(name("self_attn.q_norm.weight"), {Shape{c.head_dim}, "[D]"}));
  BEAM_ASSIGN_OR_RETURN(a.k_norm, b.bind(name("self_attn.k_norm.weight"), {Shape{c.head_dim}, "[D]"}));
  BEAM_ASSIGN_OR_RETURN(a.o_proj, b.bind(name("self_attn.o_proj.weight"), {Shape{H, QD}, "[H, Nq*D]"}));
  return ok_status();
}

Status build_dense(WeightsBuilder& b, const BeamConfig& c, int64_t layer, DenseMlpWeights& d) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  auto name = [&](std::string_view suffix) { return layer_tensor_name(layer, suffix); };
  d.gate_up = b.allocate(DType::kBF16, Shape{2 * I, H});
  BEAM_RETURN_IF_ERROR(b.fill(name("mlp.gate_proj.weight"), {Shape{I, H}, "[I, H]"}, row_ptr(d.gate_up, 0)));
  BEAM_RETURN_IF_ERROR(b.fill(name("mlp.up_proj.weight"), {Shape{I, H}, "[I, H]"}, row_ptr(d.gate_up, I)));
  BEAM_ASSIGN_OR_RETURN(d.down, b.bind(name("mlp.down_proj.weight"), {Shape{H, I}, "[H, I]"}));
  return ok_status();
}

// Whether the adapter (may be null) changes a routed expert of `layer` in [first, first + count).
bool adapter_changes_experts(const LoraAdapter* lora, int64_t layer, int64_t first, int64_t count) {
  if (lora == nullptr) return false;
  for (int64_t e = first; e < first + count; ++e)
    for (const char* part : {"gate_proj.weight", "up_proj.weight", "down_proj.weight"})
      if (lora->find(expert_tensor_name(layer, e, part))) return true;
  return false;
}

// The routed experts [first, first + count) of `layer` fused into host memory, or (copy
// kDeferred) listed in w.deferred_experts; the others' tensors are checked only.
Status build_moe(WeightsBuilder& b, const BeamConfig& c, int64_t layer, int64_t first,
                 int64_t count, ExpertCopy copy, MoeWeights& m, BeamWeights& w) {
  const int64_t H = c.hidden_size, E = c.num_experts, Im = c.moe_intermediate_size;
  BEAM_ASSIGN_OR_RETURN(m.router, b.bind(layer_tensor_name(layer, "mlp.gate.weight"),
                                         {Shape{E, H}, "[E, H]", DType::kF32}));
  BEAM_ASSIGN_OR_RETURN(m.router_bias, b.bind(layer_tensor_name(layer, "mlp.gate.e_score_correction_bias"),
                                              {Shape{E}, "[E]", DType::kF32}));
  const bool defer =
      copy == ExpertCopy::kDeferred && !adapter_changes_experts(b.lora(), layer, first, count);
  if (defer) {
    m.experts_gate_up = TensorView{nullptr, DType::kBF16, Shape{count, 2 * Im, H}, Device::kCpu};
    m.experts_down = TensorView{nullptr, DType::kBF16, Shape{count, H, Im}, Device::kCpu};
  } else {
    m.experts_gate_up = b.allocate(DType::kBF16, Shape{count, 2 * Im, H});
    m.experts_down = b.allocate(DType::kBF16, Shape{count, H, Im});
  }
  DeferredExperts gate_up{layer, ExpertMatrix::kGateUp, {}}, down{layer, ExpertMatrix::kDown, {}};
  const TensorSpec up_spec{Shape{Im, H}, "[Im, H]"}, down_spec{Shape{H, Im}, "[H, Im]"};
  const size_t half_bytes = static_cast<size_t>(Im * H) * sizeof(uint16_t);
  for (int64_t e = 0; e < E; ++e) {
    const std::string gate_name = expert_tensor_name(layer, e, "gate_proj.weight");
    const std::string up_name = expert_tensor_name(layer, e, "up_proj.weight");
    const std::string down_name = expert_tensor_name(layer, e, "down_proj.weight");
    if (e < first || e >= first + count) {
      BEAM_RETURN_IF_ERROR(b.skip(gate_name, up_spec));
      BEAM_RETURN_IF_ERROR(b.skip(up_name, up_spec));
      BEAM_RETURN_IF_ERROR(b.skip(down_name, down_spec));
    } else if (defer) {
      BEAM_RETURN_IF_ERROR(b.defer(gate_name, up_spec, e, 0, gate_up));
      BEAM_RETURN_IF_ERROR(b.defer(up_name, up_spec, e, half_bytes, gate_up));
      BEAM_RETURN_IF_ERROR(b.defer(down_name, down_spec, e, 0, down));
    } else {
      auto* gate_up_rows = static_cast<char*>(row_ptr(m.experts_gate_up, e - first));
      BEAM_RETURN_IF_ERROR(b.fill(gate_name, up_spec, gate_up_rows));
      BEAM_RETURN_IF_ERROR(b.fill(up_name, up_spec, gate_up_rows + half_bytes));
      BEAM_RETURN_IF_ERROR(b.fill(down_name, down_spec, row_ptr(m.experts_down, e - first)));
    }
  }
  if (defer) {
    w.deferred_experts.push_back(std::move(gate_up));
    w.deferred_experts.push_back(std::move(down));
  }
  return ok_status();
}

Status build_layer(WeightsBuilder& b, const BeamConfig& c, int64_t layer,
                   const ExpertSlice& experts, ExpertCopy copy, BeamWeights& weights) {
  LayerWeights& w = weights.layers[layer];
  const TensorSpec norm{Shape{c.hidden_size}, "[H]"};
  BEAM_ASSIGN_OR_RETURN(w.input_norm, b.bind(layer_tensor_name(layer, "input_layernorm.weight"), norm));
  BEAM_ASSIGN_OR_RETURN(w.post_attn_norm, b.bind(layer_tensor_name(layer, "post_attention_layernorm.weight"), norm));
  BEAM_ASSIGN_OR_RETURN(w.pre_mlp_norm, b.bind(layer_tensor_name(layer, "pre_feedforward_layernorm.weight"), norm));
  BEAM_ASSIGN_OR_RETURN(w.post_mlp_norm, b.bind(layer_tensor_name(layer, "post_feedforward_layernorm.weight"), norm));
  BEAM_RETURN_IF_ERROR(build_attention(b, c, layer, w.attn));
  switch (c.mlp_layer_types[layer]) {
    case MlpKind::kDense: return build_dense(b, c, layer, w.dense);
    case MlpKind::kSparse:
      return build_moe(b, c, layer, experts.first, experts.count, copy, w.moe, weights);
  }
  return ok_status();
}

// With tie_word_embeddings the LM head is the embedding; a stored lm_head.weight must equal it.
Status build_lm_head(WeightsBuilder& b, const BeamConfig& c, BeamWeights& w) {
  const TensorSpec spec{Shape{c.vocab_size, c.hidden_size}, "[V, H]"};
  if (!c.tie_word_embeddings) {
    BEAM_ASSIGN_OR_RETURN(w.lm_head, b.bind("lm_head.weight", spec));
    return ok_status();
  }
  w.lm_head = w.embed;
  if (b.lora() && b.lora()->find("lm_head.weight"))
    return make_error(b.lora()->dir() +
                      ": 'lm_head.weight' is tied to the embedding (tie_word_embeddings = true), "
                      "so a LoRA delta on it would change the embedding too");
  BEAM_ASSIGN_OR_RETURN(const RawTensor* head, b.resolver().take("lm_head.weight", spec, /*required=*/false));
  BEAM_ASSIGN_OR_RETURN(const RawTensor* embed, b.resolver().take("model.embed_tokens.weight", spec, false));
  if (head != nullptr && embed != nullptr &&
      (head->dtype != embed->dtype || std::memcmp(head->data, embed->data, head->nbytes) != 0)) {
    return make_error(head->file + ": tensor '" + head->name +
                      "' differs from the embedding, but config.json sets tie_word_embeddings = true");
  }
  return ok_status();
}

}  // namespace

TensorView& expert_matrix(LayerWeights& l, ExpertMatrix which) {
  return which == ExpertMatrix::kGateUp ? l.moe.experts_gate_up : l.moe.experts_down;
}

const TensorView& expert_matrix(const LayerWeights& l, ExpertMatrix which) {
  return which == ExpertMatrix::kGateUp ? l.moe.experts_gate_up : l.moe.experts_down;
}

Expected<std::shared_ptr<BeamWeights>> load_beam_weights(const std::string& model_dir,
                                                         const LoraAdapter* merge_lora,
                                                         ExpertSlice experts, ExpertCopy copy) {
  BEAM_ASSIGN_OR_RETURN(BeamConfig config, load_beam_config(model_dir));
  if (experts.count < 0) experts = ExpertSlice{0, config.num_experts};
  if (config.num_layers_of(MlpKind::kSparse) > 0 &&
      (experts.first < 0 || experts.count < 1 ||
       experts.first + experts.count > config.num_experts))
    return make_error("experts [" + std::to_string(experts.first) + ", " +
                      std::to_string(experts.first + experts.count) + ") of a model of " +
                      std::to_string(config.num_experts));
  BEAM_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open(model_dir));
  auto w = std::make_shared<BeamWeights>();
  w->config = std::move(config);
  w->first_expert = experts.first;
  const BeamConfig& c = w->config;
  w->files.assign(checkpoint.files().begin(), checkpoint.files().end());
  WeightsBuilder b(checkpoint, *w, merge_lora);
  BEAM_ASSIGN_OR_RETURN(w->embed, b.bind("model.embed_tokens.weight", {Shape{c.vocab_size, c.hidden_size}, "[V, H]"}));
  BEAM_ASSIGN_OR_RETURN(w->final_norm, b.bind("model.norm.weight", {Shape{c.hidden_size}, "[H]"}));
  w->layers.resize(c.num_layers);
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    BEAM_RETURN_IF_ERROR(build_layer(b, c, layer, experts, copy, *w));
  }
  BEAM_RETURN_IF_ERROR(build_lm_head(b, c, *w));
  BEAM_RETURN_IF_ERROR(b.run());
  return w;
}

Expected<std::shared_ptr<BeamWeights>> load_beam_weights_merging(const std::string& model_dir,
                                                                 const std::string& lora_dir,
                                                                 ExpertSlice experts,
                                                                 ExpertCopy copy) {
  if (lora_dir.empty()) return load_beam_weights(model_dir, nullptr, experts, copy);
  BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const LoraAdapter> adapter, LoraAdapter::open(lora_dir));
  return load_beam_weights(model_dir, adapter.get(), experts, copy);
}

}  // namespace beam
