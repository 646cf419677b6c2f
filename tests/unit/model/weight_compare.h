// Test helpers comparing whole BeamWeights: every view in one order and byte equality of views.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "model/weights.h"

namespace beam::test {

inline const std::string kTinyBeamDir = std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam";

// Every view of w in one order (model/device_weights.cpp's), a layer kind's unused ones included.
inline std::vector<const TensorView*> all_views(const BeamWeights& w) {
  std::vector<const TensorView*> v = {&w.embed, &w.final_norm, &w.lm_head};
  for (const LayerWeights& l : w.layers)
    v.insert(v.end(), {&l.input_norm, &l.post_attn_norm, &l.pre_mlp_norm, &l.post_mlp_norm,
                       &l.attn.qkvg, &l.attn.gate_bias, &l.attn.q_norm, &l.attn.k_norm,
                       &l.attn.o_proj, &l.dense.gate_up, &l.dense.down, &l.moe.router,
                       &l.moe.router_bias, &l.moe.experts_gate_up, &l.moe.experts_down});
  return v;
}

// Host views a and b hold the same bytes (two views without data, a layer kind's unused ones, are
// equal when their shapes are).
inline bool same_bytes(const TensorView& a, const TensorView& b) {
  if (a.data == nullptr || b.data == nullptr) return a.data == b.data && a.shape == b.shape;
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

}  // namespace beam::test
