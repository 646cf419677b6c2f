// BeamWeights: every tensor of a Beam checkpoint in the layout the forward pass reads, with
// per-expert tensors fused and the attention projections packed, validated against BeamConfig.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/api/moe.h"
#include "model/config.h"
#include "model/lora_adapter.h"
#include "model/mapped_file.h"

namespace beam {

struct AttentionWeights {
  TensorView qkvg;        // [Nq*D + 2*Nkv*D + Nq*D, H] bf16: rows q, then k, then v, then gate
  TensorView gate_bias;   // [Nq] bf16, per-head output-gate bias
  TensorView q_norm;      // [D] bf16
  TensorView k_norm;      // [D] bf16
  TensorView o_proj;      // [H, Nq*D] bf16
};

struct DenseMlpWeights {
  TensorView gate_up;     // [2*I, H] bf16: gate rows then up rows
  TensorView down;        // [H, I] bf16
};

struct MoeWeights {
  TensorView router;          // [E, H] f32
  TensorView router_bias;     // [E] f32 (e_score_correction_bias, selection only)
  TensorView experts_gate_up; // [E, 2*Im, H] bf16: per expert gate rows then up rows
  TensorView experts_down;    // [E, H, Im] bf16
};

struct LayerWeights {
  TensorView input_norm;      // [H] bf16, pre-attention norm
  TensorView post_attn_norm;  // [H] bf16, post-norm of the attention branch
  TensorView pre_mlp_norm;    // [H] bf16 (pre_feedforward_layernorm)
  TensorView post_mlp_norm;   // [H] bf16 (post_feedforward_layernorm)
  AttentionWeights attn;
  DenseMlpWeights dense;      // set when mlp_layer_types[L] == dense
  MoeWeights moe;             // set when mlp_layer_types[L] == sparse
};

// One expert's source tensor of a deferred routed-expert matrix: `numel` elements of `src_dtype`
// at byte file_offset of `file` (the checkpoint file holding it, kept alive by
// BeamWeights::files; read with pread when uploaded) that become bytes [offset, ...) of expert
// `expert`'s block ([2*Im, H] of gate_up or [H, Im] of down) in the matrix's dtype.
struct ExpertPiece {
  int64_t expert = 0;  // the model's expert index
  size_t offset = 0;
  const MappedFile* file = nullptr;
  uint64_t file_offset = 0;
  DType src_dtype = DType::kBF16;
  int64_t numel = 0;
};

// A routed-expert matrix of layer `layer` left in the checkpoint (ExpertCopy::kDeferred): its view
// has the shape and dtype but no data until upload_weights streams the pieces to the device.
struct DeferredExperts {
  int64_t layer = 0;
  ExpertMatrix matrix = ExpertMatrix::kGateUp;
  std::vector<ExpertPiece> pieces;
};

// Random weights in place of a checkpoint's (model/synthetic_weights.h; vLLM's --load-format
// dummy): normal values with these spreads, element i of tensor n from (seed, n, i) alone.
struct SyntheticWeightOptions {
  uint64_t seed = 1;
  float matrix_std = 0.02f;  // every projection, embedding, LM head and the fp32 router
  float norm_std = 0.02f;    // norm weights: 1 + N(0, norm_std)
  float bias_std = 0.02f;    // output-gate bias and the router correction bias
};

// What a synthetic layout's views are filled with: options' values for rank tp_rank of tp_size.
struct SyntheticFill {
  SyntheticWeightOptions options;
  int tp_rank = 0, tp_size = 1;
};

// The view of matrix `which` (experts_gate_up or experts_down) of layer l.
TensorView& expert_matrix(LayerWeights& l, ExpertMatrix which);
const TensorView& expert_matrix(const LayerWeights& l, ExpertMatrix which);

// Owns the memory the views point into (fused/converted buffers and the mapped checkpoint).
struct BeamWeights {
  BeamConfig config;
  TensorView embed;       // [V, H] bf16
  TensorView final_norm;  // [H] bf16
  TensorView lm_head;     // [V, H] bf16 (the embedding when tie_word_embeddings)
  std::vector<LayerWeights> layers;
  // The routed-expert tensors hold experts [first_expert, first_expert + their leading dim): all
  // of them, or one tensor-parallel rank's (load_beam_weights' ExpertSlice).
  int64_t first_expert = 0;
  // ExpertCopy::kDeferred's matrices: views without data whose bytes are still in the files.
  std::vector<DeferredExperts> deferred_experts;
  // The checkpoint files the views and pieces read, kept open and mapped by these references
  // (checked whole before an update copies).
  std::vector<std::shared_ptr<const MappedFile>> files;
  // Set on a synthetic layout (synthetic_layout): no view has data; upload_weights fills them
  // on its device with random values.
  std::optional<SyntheticFill> synthetic;
  std::vector<std::shared_ptr<void>> storage;  // keeps the other memory the views read alive
};

// Which routed experts load_beam_weights fuses into host memory: [first, first + count), or every
// one (count -1). The others' tensors are checked (names, shapes, dtypes) but not read, so a
// tensor-parallel rank's weights take its share of the host memory (Beam 1.0's experts are
// ~1 TB).
struct ExpertSlice {
  int64_t first = 0;
  int64_t count = -1;
};

// Where load_beam_weights puts the routed experts: fused into host memory (kHost), or left in the
// checkpoint's files as BeamWeights::deferred_experts (kDeferred), which upload_weights reads
// (pread) and streams straight into the device's arena: a CUDA engine's load then makes no host copy of the experts
// (~98% of Beam 1.0's bytes). A layer whose experts a merged LoRA adapter changes is fused on the
// host either way (the merge needs the copy).
enum class ExpertCopy { kHost, kDeferred };
// The copy an engine on `device` loads with: kDeferred on CUDA (streamed at upload), else kHost.
inline ExpertCopy expert_copy_for(Device device) {
  return device == Device::kCuda ? ExpertCopy::kDeferred : ExpertCopy::kHost;
}

// Loads DIR/config.json and the safetensors checkpoint of DIR (one file or sharded through
// model.safetensors.index.json), maps names (one alias table), checks every dtype and shape
// against the config, rejects missing and unexpected tensors, fuses experts and packs q/k/v/gate.
// merge_lora (optional): a LoRA adapter merged into the weights it names (W + scale · B · A,
// rounded to bf16 once); an error names a delta that meets no bf16 linear weight of the model
// or whose shape does not fit it.
// experts: the routed experts to load (default all); an error names a slice outside the model's.
// copy: where the experts go (above); kDeferred's result needs upload_weights before a forward.
Expected<std::shared_ptr<BeamWeights>> load_beam_weights(const std::string& model_dir,
                                                         const LoraAdapter* merge_lora = nullptr,
                                                         ExpertSlice experts = {},
                                                         ExpertCopy copy = ExpertCopy::kHost);
// load_beam_weights with the PEFT adapter of lora_dir merged (empty: none; LoraAdapter::open's
// errors as they are).
Expected<std::shared_ptr<BeamWeights>> load_beam_weights_merging(const std::string& model_dir,
                                                                 const std::string& lora_dir,
                                                                 ExpertSlice experts = {},
                                                                 ExpertCopy copy = ExpertCopy::kHost);

}  // namespace beam
