// Test helper: a small safetensors writer (single file, sharded with an index, or raw bytes for
// malformed files) and a random tiny Beam model in the canonical tensor names of BEAM.md 0a.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace beam::test {

struct TestTensor {
  std::string name;
  std::string dtype;  // safetensors spelling ("BF16", "F16", "F32", or anything for bad files)
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

struct WriteOptions {
  size_t header_padding = 0;   // extra spaces after the header JSON (before 8-byte alignment)
  bool align_header = true;    // pad the header so the data section starts 8-byte aligned
  bool metadata = false;       // add a "__metadata__" entry
  uint32_t shuffle_seed = 0;   // non-zero: shuffle header order and data order independently
};

// Writes one well-formed safetensors file.
void write_safetensors(const std::string& path, const std::vector<TestTensor>& tensors,
                       const WriteOptions& options = {});
// Writes tensor i into shard shard_of[i] ("model-0000k-of-0000n.safetensors") plus
// model.safetensors.index.json in `dir`.
void write_sharded(const std::string& dir, const std::vector<TestTensor>& tensors,
                   const std::vector<int>& shard_of, const WriteOptions& options = {});
// 8-byte little-endian length of `header`, the header text, then `data`.
void write_raw_safetensors(const std::string& path, const std::string& header,
                           const std::vector<uint8_t>& data);
void write_text_file(const std::string& path, const std::string& text);
// A fresh empty directory under the gtest temp dir, of this process alone (removed when the
// process exits).
std::string make_temp_dir(const std::string& name);

// Random values as bytes of the given safetensors dtype ("BF16", "F16", "F32").
std::vector<uint8_t> random_bytes(const std::string& dtype, int64_t numel, uint32_t seed);
TestTensor random_tensor(const std::string& name, const std::string& dtype,
                         std::vector<int64_t> shape, uint32_t seed);

// A small config that passes validation and uses every feature: q width != hidden, GQA,
// sliding + full layers, one dense then sparse layers, grouped routing, untied head.
std::string tiny_config_json(bool tie_word_embeddings = false);
// Every tensor of a model with config `c` in canonical names: bf16 weights, f32 router tensors.
std::vector<TestTensor> tiny_model_tensors(const BeamConfig& c, uint32_t seed = 1);
// A fresh directory `name` (make_temp_dir) holding tiny_config_json(tie) and `tensors` as one
// model.safetensors; returns it.
std::string write_tiny_model(const std::string& name, const std::vector<TestTensor>& tensors,
                             bool tie = false, const WriteOptions& options = {});

// A linear module a LoRA adapter targets: its weight's checkpoint name and [out, in].
struct AdapterModule {
  std::string weight;
  int64_t out, in;
};
// Writes a PEFT LoRA adapter into a fresh directory `name` (returned): random lora_A (bf16) and
// lora_B (f32) of rank `rank` for each module, lora_alpha `alpha`.
std::string write_lora_adapter(const std::string& name, const std::vector<AdapterModule>& modules,
                               int64_t rank, uint32_t seed, double alpha = 4);
// Every module per-request LoRA serves (model/lora_slots.h) on the first layer (dense in the
// tiny configs), q and o on the last layer, and lm_head.
std::vector<AdapterModule> servable_lora_modules(const BeamConfig& c);
// Routed-expert modules (served per request with LoraSlotsOptions::experts): every expert's gate,
// up and down of the last layer and expert 1's gate of the first routed-expert layer.
std::vector<AdapterModule> expert_lora_modules(const BeamConfig& c);

}  // namespace beam::test
