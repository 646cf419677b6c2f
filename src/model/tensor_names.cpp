// Tensor name alias table and TensorResolver.
#include "model/tensor_names.h"

#include <algorithm>
#include <filesystem>

namespace beam {

namespace {

// Canonical name suffix → other spellings of the same tensor (gate names used by vLLM, NeMo and
// Megatron). The ONE place to add the real Beam checkpoint's names; a suffix matches at a '.'
// boundary of the canonical name.
struct NameAlias {
  std::string_view canonical_suffix;
  std::string_view alias_suffix;
};
constexpr NameAlias kNameAliases[] = {
    {"self_attn.gate_proj.weight", "self_attn.output_gate_proj.weight"},
    {"self_attn.gate_bias", "self_attn.output_gate_bias"},
    {"mlp.gate.e_score_correction_bias", "mlp.router.e_score_correction_bias"},
    {"mlp.gate.weight", "mlp.router.weight"},
};

bool has_suffix_at_boundary(const std::string& name, std::string_view suffix) {
  if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  return name.size() == suffix.size() || name[name.size() - suffix.size() - 1] == '.';
}

// Accepted source dtypes: every float dtype the reader knows converts to bf16 or f32 exactly
// or by one round-to-nearest-even.
bool convertible(DType from) {
  switch (from) {
    case DType::kBF16:
    case DType::kF16:
    case DType::kF32:
      return true;
    case DType::kI32:
    case DType::kI64:
    case DType::kU8:
      return false;
  }
  return false;
}

std::string join_limited(const std::vector<std::string>& names, size_t limit) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += ", ... (" + std::to_string(names.size() - limit) + " more)";
  return out;
}

}  // namespace

std::string layer_tensor_name(int64_t layer, std::string_view suffix) {
  return "model.layers." + std::to_string(layer) + "." + std::string(suffix);
}

std::string expert_tensor_name(int64_t layer, int64_t expert, std::string_view suffix) {
  return "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(expert) + "." +
         std::string(suffix);
}

std::vector<std::string> tensor_name_candidates(const std::string& canonical) {
  std::vector<std::string> out = {canonical};
  for (const NameAlias& a : kNameAliases) {
    if (!has_suffix_at_boundary(canonical, a.canonical_suffix)) continue;
    out.push_back(canonical.substr(0, canonical.size() - a.canonical_suffix.size()) +
                  std::string(a.alias_suffix));
  }
  return out;
}

Expected<const RawTensor*> TensorResolver::take(const std::string& canonical, const TensorSpec& spec,
                                                bool required) {
  const RawTensor* found = nullptr;
  for (const std::string& name : tensor_name_candidates(canonical)) {
    const RawTensor* t = checkpoint_.find(name);
    if (t == nullptr) continue;
    if (found != nullptr) {
      return make_error(checkpoint_.dir() + ": tensors '" + found->name + "' and '" + name +
                        "' are two spellings of the same weight; keep one");
    }
    found = t;
  }
  if (found == nullptr) {
    if (required) missing_.push_back(canonical);
    return found;
  }
  used_.insert(found->name);
  if (!(found->shape == spec.shape) || !convertible(found->dtype)) {
    return make_error(found->file + ": tensor '" + found->name + "' has shape " + found->shape.str() + " " +
                      std::string(dtype_name(found->dtype)) + ", expected " + spec.shape.str() + " = " +
                      std::string(spec.dims) + " " + std::string(dtype_name(spec.target)) +
                      " (bf16, f16 or f32 on disk)");
  }
  return found;
}

Status TensorResolver::finish() const {
  if (!missing_.empty()) {
    return make_error(checkpoint_.dir() + ": checkpoint is missing " + std::to_string(missing_.size()) +
                      " tensor(s) the config needs: " + join_limited(missing_, 20));
  }
  std::vector<std::string> extra;
  for (const std::string& name : checkpoint_.names()) {
    if (!used_.count(name)) {
      extra.push_back(name + " (" + std::filesystem::path(checkpoint_.find(name)->file).filename().string() + ")");
    }
  }
  if (!extra.empty()) {
    return make_error(checkpoint_.dir() + ": checkpoint has " + std::to_string(extra.size()) +
                      " unexpected tensor(s) this model does not use: " + join_limited(extra, 20));
  }
  return ok_status();
}

}  // namespace beam
