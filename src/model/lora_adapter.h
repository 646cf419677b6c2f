// A PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) as weight deltas to merge
// into a checkpoint's linear weights at load time: W' = W + scale · B · A for each target module
// (attention q / k / v / o / gate projections, dense and expert MLP projections, lm_head), with
// scale = alpha / r (alpha / √r under use_rslora), r the module's rank and alpha its alpha_pattern
// entry's or lora_alpha. One adapter at a time, merged into the served weights
// (load_beam_weights), so it costs nothing per token and works on every device.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/safetensors.h"

namespace beam {

// One target module's low-rank factors (borrowed from the adapter's copy of its file).
struct LoraDelta {
  const RawTensor* a = nullptr;  // lora_A: [r, in]
  const RawTensor* b = nullptr;  // lora_B: [out, r]
  double scale = 1.0;
  int64_t rank() const { return a->shape[0]; }
};

class LoraAdapter {
 public:
  // Reads DIR/adapter_config.json and DIR/adapter_model.safetensors. An error names the file and
  // what it cannot take: not LoRA, DoRA, fan_in_fan_out, LoRA biases, modules_to_save,
  // alpha_pattern, embedding LoRA, a module with lora_A but no lora_B (or the reverse), factors
  // whose ranks disagree, or dtypes other than BF16 / F16 / F32.
  static Expected<std::shared_ptr<const LoraAdapter>> open(const std::string& dir);

  // The delta of the checkpoint tensor `weight_name` (e.g.
  // "model.layers.0.self_attn.q_proj.weight"), or nullptr when the adapter leaves it alone.
  const LoraDelta* find(const std::string& weight_name) const;
  // Each delta's weight name, for checking that every one of them met a weight.
  const std::map<std::string, LoraDelta>& deltas() const { return deltas_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::shared_ptr<MappedFile> file_;
  std::vector<RawTensor> tensors_;
  std::map<std::string, LoraDelta> deltas_;  // by the weight's checkpoint name
};

// A delta's factors in f32 and its scale, for merging row ranges from several threads.
struct LoraFactors {
  explicit LoraFactors(const LoraDelta& delta);
  std::vector<float> a;  // [r, in]
  std::vector<float> b;  // [out, r]
  int64_t rank;
  float scale;
};

// Rows [begin, end) of W (bf16 [out, in] at `weight`, row-major) += scale · B · A, in f32 and
// rounded to bf16 once per element. The caller has checked the shapes ([out, r], [r, in]).
void merge_lora_rows(uint16_t* weight, int64_t in, const LoraFactors& f, int64_t begin,
                     int64_t end);

}  // namespace beam
