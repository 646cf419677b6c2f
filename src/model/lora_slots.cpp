// LoraSlots: one device allocation holding every module's stacks (a, b, scale per module, each
// aligned to 256 bytes), adapter tensors matched to modules by their checkpoint names (canonical or
// an alias), converted to bf16 and zero-padded to the slots' rank on the host, then copied in: one
// pitched copy per module and factor (an expert module's slot is a row of each expert's stack).
#include "model/lora_slots.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "model/tensor_convert.h"
#include "model/tensor_names.h"

namespace beam {
namespace {

constexpr int kMaxLoras = 64;
constexpr int kLayerTargets = kNumLoraTargets - 1;  // every target but lm_head

size_t aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Slot `slot`'s part of each stack of `all` ([num_stacks, S, ...] on the device): a row each.
PitchedRows slot_rows(const TensorView& all, int32_t slot) {
  const auto row = static_cast<size_t>(all.nbytes() / (all.dim(0) * all.dim(1)));
  return PitchedRows{.data = static_cast<char*>(all.data) + static_cast<size_t>(slot) * row,
                     .device = all.device,
                     .pitch = row * static_cast<size_t>(all.dim(1)),
                     .row_bytes = row,
                     .rows = static_cast<size_t>(all.dim(0))};
}

// rows contiguous rows of host memory holding `data`.
PitchedRows host_rows(std::vector<bf16>& data, int64_t rows) {
  const size_t bytes = data.size() * sizeof(bf16), n = static_cast<size_t>(rows);
  return PitchedRows{.data = data.data(),
                     .device = Device::kCpu,
                     .pitch = bytes / n,
                     .row_bytes = bytes / n,
                     .rows = n};
}

// A target's checkpoint-name suffix under model.layers.{L}. (experts: under
// model.layers.{L}.mlp.experts.{E}.).
const char* layer_suffix(LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ:
      return "self_attn.q_proj.weight";
    case LoraTarget::kK:
      return "self_attn.k_proj.weight";
    case LoraTarget::kV:
      return "self_attn.v_proj.weight";
    case LoraTarget::kGate:
      return "self_attn.gate_proj.weight";
    case LoraTarget::kO:
      return "self_attn.o_proj.weight";
    case LoraTarget::kDenseGate:
      return "mlp.gate_proj.weight";
    case LoraTarget::kDenseUp:
      return "mlp.up_proj.weight";
    case LoraTarget::kDenseDown:
      return "mlp.down_proj.weight";
    case LoraTarget::kExpertGate:
      return "gate_proj.weight";
    case LoraTarget::kExpertUp:
      return "up_proj.weight";
    case LoraTarget::kExpertDown:
      return "down_proj.weight";
    case LoraTarget::kLmHead:
      break;
  }
  return "lm_head.weight";
}

bool is_expert_target(LoraTarget t) {
  return t == LoraTarget::kExpertGate || t == LoraTarget::kExpertUp || t == LoraTarget::kExpertDown;
}

// Whether a rank holds only its rows of the target's output (its heads, its dense width, its
// vocabulary), as shard_beam_weights splits the base weights.
bool is_column_parallel(LoraTarget t) {
  return t != LoraTarget::kO && t != LoraTarget::kDenseDown && !is_expert_target(t);
}

// A target's [out, in] in layer `layer` of cfg; {0, 0} when the layer has no such module.
std::pair<int64_t, int64_t> target_shape(const BeamConfig& cfg, int64_t layer, LoraTarget t) {
  const int64_t H = cfg.hidden_size, q = cfg.num_heads * cfg.head_dim,
                kv = cfg.num_kv_heads * cfg.head_dim, I = cfg.intermediate_size,
                Im = cfg.moe_intermediate_size;
  const bool dense = cfg.mlp_layer_types[layer] == MlpKind::kDense;
  constexpr std::pair<int64_t, int64_t> none{0, 0};
  switch (t) {
    case LoraTarget::kQ:
    case LoraTarget::kGate:
      return {q, H};
    case LoraTarget::kK:
    case LoraTarget::kV:
      return {kv, H};
    case LoraTarget::kO:
      return {H, q};
    case LoraTarget::kDenseGate:
    case LoraTarget::kDenseUp:
      return dense ? std::pair{I, H} : none;
    case LoraTarget::kDenseDown:
      return dense ? std::pair{H, I} : none;
    case LoraTarget::kExpertGate:
    case LoraTarget::kExpertUp:
      return dense ? none : std::pair{Im, H};
    case LoraTarget::kExpertDown:
      return dense ? none : std::pair{H, Im};
    case LoraTarget::kLmHead:
      break;
  }
  return {cfg.vocab_size, H};
}

}  // namespace

std::string LoraSlots::Module::weight(int64_t e) const {
  if (target == LoraTarget::kLmHead) return "lm_head.weight";
  return all_experts ? expert_tensor_name(layer, e, layer_suffix(target))
                     : layer_tensor_name(layer, layer_suffix(target));
}

Expected<std::unique_ptr<LoraSlots>> LoraSlots::create(const KernelContext& ctx,
                                                       const BeamConfig& cfg,
                                                       const LoraSlotsOptions& options) {
  const int max_loras = options.max_loras, max_rank = options.max_rank;
  if (max_loras < 1 || max_loras > kMaxLoras)
    return make_error("max_loras " + std::to_string(max_loras) + " is outside [1, " +
                      std::to_string(kMaxLoras) + "]");
  const int64_t rank_limit = lora_max_rank(ctx.device);
  if (max_rank < 1 || max_rank > rank_limit)
    return make_error("max_lora_rank " + std::to_string(max_rank) + " is outside [1, " +
                      std::to_string(rank_limit) + "]");
  std::unique_ptr<LoraSlots> s(new LoraSlots());
  s->num_slots_ = max_loras;
  s->max_rank_ = max_rank;
  s->modules_.resize(static_cast<size_t>(cfg.num_layers * kLayerTargets + 1));
  const auto S = static_cast<size_t>(max_loras), R = static_cast<size_t>(max_rank);
  // Offsets first, then one allocation.
  struct Offsets {
    size_t a, b, scale;
  };
  std::vector<Offsets> offsets(s->modules_.size());
  size_t total = 0;
  const int64_t ranks = options.tp.size, rank = options.tp.rank;
  const auto lay_out = [&](int64_t layer, LoraTarget target) {
    const auto [full_out, in] = target_shape(cfg, layer, target);
    if (full_out == 0) return;
    const bool experts = is_expert_target(target);
    if (experts && !options.experts) return;
    Module& m = s->module(layer, target);
    m.in = in;
    m.full_out = full_out;
    m.out = is_column_parallel(target) ? full_out / ranks : full_out;
    m.first_row = is_column_parallel(target) ? rank * m.out : 0;
    m.all_experts = experts ? cfg.num_experts : 0;
    m.num_experts = m.all_experts / ranks;
    m.first_expert = rank * m.num_experts;
    m.layer = layer;
    m.target = target;
    m.present = true;
    s->serves_experts_ = s->serves_experts_ || experts;
    const auto copies = static_cast<size_t>(m.num_stacks());
    Offsets& o = offsets[static_cast<size_t>(&m - s->modules_.data())];
    o.a = total;
    total += aligned(copies * S * R * static_cast<size_t>(in) * 2);
    o.b = total;
    total += aligned(copies * S * static_cast<size_t>(m.out) * R * 2);
    o.scale = total;
    total += aligned(S * 4);
  };
  for (int64_t l = 0; l < cfg.num_layers; ++l)
    for (int t = 0; t < kLayerTargets; ++t) lay_out(l, static_cast<LoraTarget>(t));
  lay_out(0, LoraTarget::kLmHead);
  const auto no_room = [&](const Error& e) {
    return make_error("LoRA slots (" + std::to_string(max_loras) + " of rank " +
                      std::to_string(max_rank) + (s->serves_experts_ ? ", with the experts" : "") +
                      ", " + std::to_string(total >> 20) + " MiB): " + e.message);
  };
  if (options.releasable) {
    Expected<std::shared_ptr<ReleasableMemory>> memory = allocate_releasable(ctx, total);
    if (!memory.ok()) return no_room(memory.error());
    s->releasable_ = std::move(*memory);
    s->memory_ = releasable_buffer(s->releasable_);
  } else {
    Expected<DeviceBuffer> memory = allocate_buffer(ctx, total);
    if (!memory.ok()) return no_room(memory.error());
    s->memory_ = std::move(*memory);
  }
  s->clear_all(ctx);
  auto* base = static_cast<char*>(s->memory_.data());
  for (size_t i = 0; i < s->modules_.size(); ++i) {
    Module& m = s->modules_[i];
    if (!m.present) continue;
    const auto Si = static_cast<int64_t>(S), Ri = static_cast<int64_t>(R);
    const TensorView scale{base + offsets[i].scale, DType::kF32, {Si}, ctx.device};
    if (m.num_experts) {
      const int64_t E = m.num_experts;
      m.experts.a = TensorView{base + offsets[i].a, DType::kBF16, {E, Si, Ri, m.in}, ctx.device};
      m.experts.b = TensorView{base + offsets[i].b, DType::kBF16, {E, Si, m.out, Ri}, ctx.device};
      m.experts.scale = scale;
    } else {
      m.stack.a = TensorView{base + offsets[i].a, DType::kBF16, {Si, Ri, m.in}, ctx.device};
      m.stack.b = TensorView{base + offsets[i].b, DType::kBF16, {Si, m.out, Ri}, ctx.device};
      m.stack.scale = scale;
    }
  }
  return s;
}

TensorView LoraSlots::Module::all_a() const {
  return num_experts ? experts.a : stack.a.reshape({1, stack.a.dim(0), stack.a.dim(1), in});
}

TensorView LoraSlots::Module::all_b() const {
  return num_experts ? experts.b : stack.b.reshape({1, stack.b.dim(0), out, stack.b.dim(2)});
}

LoraSlots::Module& LoraSlots::module(int64_t layer, LoraTarget target) {
  if (target == LoraTarget::kLmHead) return modules_.back();
  return modules_[static_cast<size_t>(layer * kLayerTargets + static_cast<int>(target))];
}

const LoraSlots::Module& LoraSlots::module(int64_t layer, LoraTarget target) const {
  return const_cast<LoraSlots*>(this)->module(layer, target);
}

const LoraStack* LoraSlots::stack(int64_t layer, LoraTarget target) const {
  BEAM_CHECK(!is_expert_target(target)) << "LoraSlots::stack: an expert target";
  const Module& m = module(layer, target);
  return m.present ? &m.stack : nullptr;
}

const ExpertLoraStack* LoraSlots::expert_stack(int64_t layer, LoraTarget target) const {
  BEAM_CHECK(is_expert_target(target)) << "LoraSlots::expert_stack: not an expert target";
  const Module& m = module(layer, target);
  return m.present ? &m.experts : nullptr;
}

void LoraSlots::clear(const KernelContext& ctx, int32_t slot) {
  BEAM_CHECK(slot >= 0 && slot < num_slots_) << "LoraSlots::clear: slot " << slot;
  for (const Module& m : modules_) {
    if (!m.present) continue;
    zero_rows(ctx, slot_rows(m.all_a(), slot));
    zero_rows(ctx, slot_rows(m.all_b(), slot));
    zero_tensor(ctx, m.stack_of(0).scale.rows(slot, 1));
  }
}

void LoraSlots::clear_all(const KernelContext& ctx) {
  zero_tensor(ctx, memory_.view(DType::kU8, {static_cast<int64_t>(memory_.nbytes())}));
}

Expected<LoraSlots::Placement> LoraSlots::place(const LoraAdapter& adapter) const {
  // Each module (each expert of an expert module) under its canonical name or an alias; every
  // delta must find one.
  struct Target {
    const Module* module;
    int64_t expert;  // this rank's index, -1: another rank's
    int64_t global_expert;
  };
  std::map<std::string, Target> names;
  for (const Module& m : modules_) {
    if (!m.present) continue;
    for (int64_t e = 0; e < std::max<int64_t>(m.all_experts, 1); ++e) {
      const bool mine = e >= m.first_expert && e < m.first_expert + m.num_stacks();
      for (const std::string& name : tensor_name_candidates(m.weight(e)))
        if (adapter.find(name)) names.emplace(name, Target{&m, mine ? e - m.first_expert : -1, e});
    }
  }
  const std::string& dir = adapter.dir();
  Placement placement;
  for (const auto& [name, delta] : adapter.deltas()) {
    const auto it = names.find(name);
    if (it == names.end())
      return make_error(dir + ": '" + name + "' " +
                        (name.find(".experts.") != std::string::npos && !serves_experts_
                             ? "is a routed expert's weight: serve expert LoRA per request with "
                               "--lora-experts, or merge the adapter at load with --merge-lora"
                             : "is no module per-request LoRA serves in this model"));
    const Module& m = *it->second.module;
    if (delta.a->shape[1] != m.in || delta.b->shape[0] != m.full_out)
      return make_error(dir + ": '" + name + "': lora_B " + delta.b->shape.str() + " · lora_A " +
                        delta.a->shape.str() + " does not fit the module's [" +
                        std::to_string(m.full_out) + ", " + std::to_string(m.in) + "]");
    if (delta.rank() > max_rank_)
      return make_error(dir + ": '" + name + "' has rank " + std::to_string(delta.rank()) +
                        ", above the server's max LoRA rank " + std::to_string(max_rank_));
    placement.push_back(Place{&delta, &m, it->second.expert, it->second.global_expert});
  }
  // An expert module keeps one scale a slot for all its experts (kernels/api/moe.h's stacks), on
  // every rank: the check covers other ranks' experts too.
  std::map<const Module*, const Place*> first_of;
  for (const Place& p : placement) {
    const Place* first = first_of.emplace(p.module, &p).first->second;
    if (first->delta->scale != p.delta->scale)
      return make_error(dir +
                        ": the experts of one layer's module need one LoRA scale (alpha / r); " +
                        "expert " + std::to_string(first->global_expert) + " has " +
                        std::to_string(first->delta->scale) + ", expert " +
                        std::to_string(p.global_expert) + " " + std::to_string(p.delta->scale) +
                        " (rank_pattern / alpha_pattern): merge it with --merge-lora instead");
  }
  std::erase_if(placement, [](const Place& p) { return p.expert < 0; });  // another rank's
  return placement;
}

Status LoraSlots::check(const LoraAdapter& adapter) const {
  BEAM_ASSIGN_OR_RETURN(Placement placement, place(adapter));
  return ok_status();
}

Status LoraSlots::load(const KernelContext& ctx, int32_t slot, const LoraAdapter& adapter) {
  BEAM_CHECK(slot >= 0 && slot < num_slots_) << "LoraSlots::load: slot " << slot;
  clear(ctx, slot);
  BEAM_ASSIGN_OR_RETURN(Placement placement, place(adapter));
  // Each module's slot parts are staged on the host for all its stacks (zeros where the adapter has
  // no delta, the rank zero-padded to max_rank_) and go up in one copy per factor.
  std::map<const Module*, std::vector<const Place*>> by_module;
  for (const Place& p : placement) by_module[p.module].push_back(&p);
  const int64_t R = max_rank_;
  std::vector<bf16> a, b, b_packed;
  for (const auto& [m, places] : by_module) {
    const int64_t n = m->num_stacks();
    a.assign(static_cast<size_t>(n * R * m->in), bf16{});
    b.assign(static_cast<size_t>(n * m->out * R), bf16{});
    for (const Place* p : places) {
      const LoraDelta& delta = *p->delta;
      const int64_t r = delta.rank();
      // [r, in] -> rows [0, r) of the stack's [R, in]; [out, r] -> columns [0, r) of its [out, R].
      convert_elements(delta.a->data, delta.a->dtype, r * m->in, a.data() + p->expert * R * m->in,
                       DType::kBF16);
      // lora_B's rows of this rank (all of them unless the module is column-parallel).
      b_packed.resize(static_cast<size_t>(m->out * r));
      const auto* b_rows = static_cast<const char*>(delta.b->data) +
                           static_cast<size_t>(m->first_row * r) * dtype_size(delta.b->dtype);
      convert_elements(b_rows, delta.b->dtype, m->out * r, b_packed.data(), DType::kBF16);
      bf16* b_stack = b.data() + p->expert * m->out * R;
      for (int64_t o = 0; o < m->out; ++o) std::copy_n(b_packed.data() + o * r, r, b_stack + o * R);
    }
    copy_rows(ctx, slot_rows(m->all_a(), slot), host_rows(a, n));
    copy_rows(ctx, slot_rows(m->all_b(), slot), host_rows(b, n));
    // (one scale a module and slot: place() checked that its experts share it)
    auto scale = static_cast<float>(places.front()->delta->scale);
    copy_tensor(ctx, m->stack_of(0).scale.rows(slot, 1),
                TensorView{&scale, DType::kF32, {1}, Device::kCpu});
  }
  synchronize(ctx);
  return ok_status();
}

}  // namespace beam
