// Test safetensors writer and random tiny Beam model (see test_checkpoint_writer.h).
#include "test_checkpoint_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>

#include "core/bf16.h"
#include "model/tensor_names.h"

namespace beam::test {

namespace {

std::string header_entry(const TestTensor& t, uint64_t begin) {
  nlohmann::json shape = t.shape;
  return nlohmann::json(t.name).dump() + ":{\"dtype\":" + nlohmann::json(t.dtype).dump() +
         ",\"shape\":" + shape.dump() + ",\"data_offsets\":[" + std::to_string(begin) + "," +
         std::to_string(begin + t.bytes.size()) + "]}";
}

std::vector<size_t> order(size_t n, uint32_t seed) {
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  if (seed != 0) std::shuffle(idx.begin(), idx.end(), std::mt19937(seed));
  return idx;
}

// This process's folder under the gtest temp dir, removed with everything in it at exit.
const std::filesystem::path& process_scratch() {
  struct Scratch {
    std::filesystem::path path;
    ~Scratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Scratch scratch{std::filesystem::path(::testing::TempDir()) /
                               ("beam_model_tests_" + std::to_string(::getpid()))};
  return scratch.path;
}

}  // namespace

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  ASSERT_TRUE(out.good()) << path;
}

void write_raw_safetensors(const std::string& path, const std::string& header,
                           const std::vector<uint8_t>& data) {
  std::string bytes(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(data.data()), data.size());
  write_text_file(path, bytes);
}

void write_safetensors(const std::string& path, const std::vector<TestTensor>& tensors,
                       const WriteOptions& options) {
  std::vector<uint64_t> begin(tensors.size());
  std::vector<uint8_t> data;
  for (size_t i : order(tensors.size(), options.shuffle_seed)) {  // data order
    begin[i] = data.size();
    data.insert(data.end(), tensors[i].bytes.begin(), tensors[i].bytes.end());
  }
  std::string header = "{";
  if (options.metadata) header += "\"__metadata__\":{\"format\":\"pt\",\"writer\":\"beamserve-test\"}";
  uint32_t header_seed = options.shuffle_seed ? options.shuffle_seed * 7919u + 1 : 0;
  for (size_t i : order(tensors.size(), header_seed)) {
    if (header.size() > 1) header += ",";
    header += header_entry(tensors[i], begin[i]);
  }
  header += "}" + std::string(options.header_padding, ' ');
  while (options.align_header && (header.size() + 8) % 8 != 0) header += ' ';
  write_raw_safetensors(path, header, data);
}

void write_sharded(const std::string& dir, const std::vector<TestTensor>& tensors,
                   const std::vector<int>& shard_of, const WriteOptions& options) {
  ASSERT_EQ(shard_of.size(), tensors.size());
  int num_shards = *std::max_element(shard_of.begin(), shard_of.end()) + 1;
  nlohmann::json weight_map = nlohmann::json::object();
  for (int s = 0; s < num_shards; ++s) {
    char file[64];
    std::snprintf(file, sizeof(file), "model-%05d-of-%05d.safetensors", s + 1, num_shards);
    std::vector<TestTensor> part;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (shard_of[i] != s) continue;
      part.push_back(tensors[i]);
      weight_map[tensors[i].name] = file;
    }
    write_safetensors(dir + "/" + file, part, options);
  }
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  write_text_file(dir + "/model.safetensors.index.json", index.dump(2));
}

std::string make_temp_dir(const std::string& name) {
  // Per process: ctest runs each test of a binary as its own process, several at once, and one
  // must not rewrite a file another has mapped.
  const std::filesystem::path dir = process_scratch() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string write_tiny_model(const std::string& name, const std::vector<TestTensor>& tensors,
                             bool tie, const WriteOptions& options) {
  std::string dir = make_temp_dir(name);
  write_text_file(dir + "/config.json", tiny_config_json(tie));
  write_safetensors(dir + "/model.safetensors", tensors, options);
  return dir;
}

std::vector<uint8_t> random_bytes(const std::string& dtype, int64_t numel, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  size_t size = dtype == "F32" ? 4 : 2;
  std::vector<uint8_t> out(static_cast<size_t>(numel) * size);
  for (int64_t i = 0; i < numel; ++i) {
    float v = dist(rng);
    if (dtype == "F32") {
      std::memcpy(&out[i * 4], &v, 4);
    } else {
      uint16_t bits = dtype == "BF16" ? to_bf16(v).bits : to_f16(v).bits;
      std::memcpy(&out[i * 2], &bits, 2);
    }
  }
  return out;
}

TestTensor random_tensor(const std::string& name, const std::string& dtype,
                         std::vector<int64_t> shape, uint32_t seed) {
  int64_t numel = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  return TestTensor{name, dtype, std::move(shape), random_bytes(dtype, numel, seed)};
}

std::string tiny_config_json(bool tie_word_embeddings) {
  nlohmann::json c = {
      {"architectures", {"BeamForCausalLM"}}, {"model_type", "beam"}, {"vocab_size", 96},
      {"hidden_size", 32}, {"num_hidden_layers", 4}, {"num_attention_heads", 4},
      {"num_key_value_heads", 2}, {"head_dim", 16}, {"intermediate_size", 48},
      {"moe_intermediate_size", 8}, {"n_routed_experts", 8}, {"num_experts_per_tok", 2},
      {"n_group", 4}, {"topk_group", 2}, {"routed_scaling_factor", 2.5}, {"norm_topk_prob", true},
      {"hidden_act", "silu"}, {"rms_norm_eps", 1e-6}, {"sliding_window", 4},
      {"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}},
      {"mlp_layer_types", {"dense", "sparse", "sparse", "sparse"}},
      {"rope_parameters", {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
                           {"full_attention", nullptr}}},
      {"final_logit_softcapping", 30.0}, {"max_position_embeddings", 4096},
      {"tie_word_embeddings", tie_word_embeddings}, {"torch_dtype", "bfloat16"},
      {"eos_token_id", 2}, {"bos_token_id", 1}};
  return c.dump(2);
}

std::vector<TestTensor> tiny_model_tensors(const BeamConfig& c, uint32_t seed) {
  std::vector<TestTensor> t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, const char* dtype = "BF16") {
    t.push_back(random_tensor(name, dtype, std::move(shape), seed + static_cast<uint32_t>(t.size())));
  };
  const int64_t H = c.hidden_size, QD = c.q_width(), KVD = c.kv_width();
  add("model.embed_tokens.weight", {c.vocab_size, H});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    auto n = [&](const char* suffix) { return layer_tensor_name(l, suffix); };
    for (const char* norm : {"input_layernorm.weight", "post_attention_layernorm.weight",
                             "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight"})
      add(n(norm), {H});
    add(n("self_attn.q_proj.weight"), {QD, H});
    add(n("self_attn.k_proj.weight"), {KVD, H});
    add(n("self_attn.v_proj.weight"), {KVD, H});
    add(n("self_attn.gate_proj.weight"), {QD, H});
    add(n("self_attn.gate_bias"), {c.num_heads});
    add(n("self_attn.o_proj.weight"), {H, QD});
    add(n("self_attn.q_norm.weight"), {c.head_dim});
    add(n("self_attn.k_norm.weight"), {c.head_dim});
    if (c.mlp_layer_types[l] == MlpKind::kDense) {
      add(n("mlp.gate_proj.weight"), {c.intermediate_size, H});
      add(n("mlp.up_proj.weight"), {c.intermediate_size, H});
      add(n("mlp.down_proj.weight"), {H, c.intermediate_size});
      continue;
    }
    add(n("mlp.gate.weight"), {c.num_experts, H}, "F32");
    add(n("mlp.gate.e_score_correction_bias"), {c.num_experts}, "F32");
    for (int64_t e = 0; e < c.num_experts; ++e) {
      add(expert_tensor_name(l, e, "gate_proj.weight"), {c.moe_intermediate_size, H});
      add(expert_tensor_name(l, e, "up_proj.weight"), {c.moe_intermediate_size, H});
      add(expert_tensor_name(l, e, "down_proj.weight"), {H, c.moe_intermediate_size});
    }
  }
  add("model.norm.weight", {H});
  if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, H});
  return t;
}

std::string write_lora_adapter(const std::string& name, const std::vector<AdapterModule>& modules,
                               int64_t rank, uint32_t seed, double alpha) {
  std::vector<TestTensor> tensors;
  for (const AdapterModule& m : modules) {
    const std::string base = "base_model.model." + m.weight.substr(0, m.weight.size() - 7);
    tensors.push_back(random_tensor(base + ".lora_A.weight", "BF16", {rank, m.in}, seed++));
    tensors.push_back(random_tensor(base + ".lora_B.weight", "F32", {m.out, rank}, seed++));
  }
  const std::string dir = make_temp_dir(name);
  const nlohmann::json config = {
      {"peft_type", "LORA"}, {"r", rank}, {"lora_alpha", alpha}, {"bias", "none"}};
  write_text_file(dir + "/adapter_config.json", config.dump());
  write_safetensors(dir + "/adapter_model.safetensors", tensors);
  return dir;
}

std::vector<AdapterModule> servable_lora_modules(const BeamConfig& c) {
  const int64_t H = c.hidden_size, QD = c.q_width(), KVD = c.kv_width(), I = c.intermediate_size;
  const auto first = [](const char* suffix) { return layer_tensor_name(0, suffix); };
  const auto last = [&](const char* suffix) { return layer_tensor_name(c.num_layers - 1, suffix); };
  return {{first("self_attn.q_proj.weight"), QD, H},  {first("self_attn.k_proj.weight"), KVD, H},
          {first("self_attn.v_proj.weight"), KVD, H}, {first("self_attn.gate_proj.weight"), QD, H},
          {first("self_attn.o_proj.weight"), H, QD},  {first("mlp.gate_proj.weight"), I, H},
          {first("mlp.up_proj.weight"), I, H},        {first("mlp.down_proj.weight"), H, I},
          {last("self_attn.q_proj.weight"), QD, H},   {last("self_attn.o_proj.weight"), H, QD},
          {"lm_head.weight", c.vocab_size, H}};
}

std::vector<AdapterModule> expert_lora_modules(const BeamConfig& c) {
  const int64_t H = c.hidden_size, Im = c.moe_intermediate_size, last = c.num_layers - 1;
  std::vector<AdapterModule> m;
  for (int64_t e = 0; e < c.num_experts; ++e) {
    m.push_back({expert_tensor_name(last, e, "gate_proj.weight"), Im, H});
    m.push_back({expert_tensor_name(last, e, "up_proj.weight"), Im, H});
    m.push_back({expert_tensor_name(last, e, "down_proj.weight"), H, Im});
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.mlp_layer_types[l] != MlpKind::kSparse) continue;
    m.push_back({expert_tensor_name(l, 1, "gate_proj.weight"), Im, H});
    break;
  }
  return m;
}

}  // namespace beam::test
