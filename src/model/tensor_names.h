// Checkpoint tensor names: the canonical names of BEAM.md 0a, the ONE alias table for other
// spellings, and TensorResolver, which finds each tensor, checks its shape and records which
// checkpoint names were used, so missing and unexpected tensors can be listed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "model/checkpoint.h"

namespace beam {

// "model.layers.{layer}.{suffix}", e.g. layer_tensor_name(3, "self_attn.q_proj.weight").
std::string layer_tensor_name(int64_t layer, std::string_view suffix);
// "model.layers.{layer}.mlp.experts.{expert}.{suffix}".
std::string expert_tensor_name(int64_t layer, int64_t expert, std::string_view suffix);
// The canonical name first, then every alias spelling of it (from the alias table).
std::vector<std::string> tensor_name_candidates(const std::string& canonical);

// What a tensor must look like: its shape (with the symbols that produce it, for messages)
// and the dtype it is stored in after loading.
struct TensorSpec {
  Shape shape;
  std::string_view dims;  // e.g. "[Nq*D, H]"
  DType target = DType::kBF16;
};

// Finds tensors of one checkpoint by canonical name. Not thread-safe.
class TensorResolver {
 public:
  explicit TensorResolver(const Checkpoint& checkpoint) : checkpoint_(checkpoint) {}

  // The tensor for `canonical` (or an alias). Returns nullptr when it is absent (and, when
  // `required`, records it as missing); an error when its shape or dtype does not fit `spec` or
  // two spellings are present.
  Expected<const RawTensor*> take(const std::string& canonical, const TensorSpec& spec,
                                  bool required = true);
  // Error listing every missing tensor, then every checkpoint tensor never taken.
  Status finish() const;

 private:
  const Checkpoint& checkpoint_;
  std::vector<std::string> missing_;
  std::unordered_set<std::string> used_;
};

}  // namespace beam
