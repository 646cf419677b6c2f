// DFlash2Weights: a DFlash2 drafter's tensors (docs/dflash2.md) in the layout its forward reads,
// bf16 host memory, validated against DFlash2Config.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/api/context.h"
#include "model/dflash2/dflash2_config.h"

namespace beam {

// One two-tap dynamic convolution wrapped around a sublayer.
struct DFlash2ConvWeights {
  TensorView base;        // [2 sides, 2 taps, H] bf16
  TensorView projection;  // [2 * 2 * groups, H] bf16: rows (side, tap, group)
};

struct DFlash2LayerWeights {
  TensorView input_norm;      // [H]
  TensorView post_attn_norm;  // [H]
  TensorView qkv;             // [Nq*D + 2*Nkv*D, H]: q rows, then k, then v
  TensorView q_norm, k_norm;  // [D]
  TensorView o_proj;          // [H, Nq*D]
  TensorView gate_up;         // [2*I, H]: gate rows then up rows
  TensorView down;            // [H, I]
  DFlash2ConvWeights attention_conv, mlp_conv;
};

struct DFlash2Weights {
  DFlash2Config config;
  TensorView fc;           // [H, n_taps * H]
  TensorView hidden_norm;  // [H]
  TensorView final_norm;   // [H] ("norm.weight")
  std::vector<DFlash2LayerWeights> layers;
  TensorView hidden_projection;                // [R, H]
  TensorView predecessor_codebook;             // [V, R]
  TensorView successor_codebook;               // [V, R]
  std::vector<std::shared_ptr<void>> storage;  // mappings and packed buffers
};

// Loads DIR's config.json (checked against `target`) and safetensors: every tensor present with
// its shape, none unexpected (a `model.` prefix is dropped; the codebooks may end in `.weight`),
// BF16 / F16 / F32 stored (converted to bf16 once). Errors name the tensor and the directory.
Expected<std::shared_ptr<DFlash2Weights>> load_dflash2_weights(const std::string& dir,
                                                               const BeamConfig& target);

// A copy of `host`'s tensors on ctx's device (one allocation; `host` itself on the CPU); an error
// naming the bytes when they do not fit.
Expected<std::shared_ptr<const DFlash2Weights>> upload_dflash2_weights(
    const KernelContext& ctx, std::shared_ptr<const DFlash2Weights> host);

}  // namespace beam
