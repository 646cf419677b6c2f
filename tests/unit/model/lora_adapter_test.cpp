// PEFT LoRA adapters merged at load (model/lora_adapter.h, load_beam_weights): each named weight
// becomes bf16(W + scale · B · A) exactly as the f32 merge computes it (q rows of the fused qkvg,
// an expert's up rows of its fused gate_up, o_proj, lm_head), every other weight is untouched,
// rsLoRA scales by alpha / √r, alpha_pattern and per-module ranks give each module its own scale,
// and adapters the merge cannot reproduce are refused by name.
#include "model/lora_adapter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "model/weights.h"
#include "test_checkpoint_writer.h"

namespace beam {
namespace {

using test::TestTensor;

constexpr int64_t kRank = 4;

BeamConfig tiny_config() {
  auto c = parse_beam_config(test::tiny_config_json(), "config.json");
  EXPECT_TRUE(c.ok()) << c.error().message;
  return *c;
}

std::string write_tiny_model(const std::string& name, const BeamConfig& c) {
  const std::string dir = test::make_temp_dir(name);
  test::write_text_file(dir + "/config.json", test::tiny_config_json());
  test::write_safetensors(dir + "/model.safetensors", test::tiny_model_tensors(c));
  return dir;
}

// One module's factors: lora_A [r, in] and lora_B [out, r] of `dtype`, random.
struct Module {
  std::string weight;  // the weight's checkpoint name
  int64_t out, in;
  std::string dtype;
};

std::vector<TestTensor> factors(const Module& m, uint32_t seed) {
  std::string base = "base_model.model." + m.weight.substr(0, m.weight.size() - 7);  // no .weight
  return {test::random_tensor(base + ".lora_A.weight", m.dtype, {kRank, m.in}, seed),
          test::random_tensor(base + ".lora_B.weight", m.dtype, {m.out, kRank}, seed + 1)};
}

std::string write_adapter(const std::string& name, const std::vector<TestTensor>& tensors,
                          const std::string& config) {
  const std::string dir = test::make_temp_dir(name);
  test::write_text_file(dir + "/adapter_config.json", config);
  test::write_safetensors(dir + "/adapter_model.safetensors", tensors);
  return dir;
}

const std::string kConfig = R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "bias": "none",
  "target_modules": ["q_proj", "o_proj", "up_proj", "lm_head"], "fan_in_fan_out": false})";

std::vector<float> as_floats(const TestTensor& t) {
  std::vector<float> out;
  const int64_t n = static_cast<int64_t>(t.bytes.size()) / (t.dtype == "F32" ? 4 : 2);
  for (int64_t i = 0; i < n; ++i) {
    if (t.dtype == "F32") {
      float f;
      std::memcpy(&f, t.bytes.data() + 4 * i, 4);
      out.push_back(f);
    } else {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      out.push_back(t.dtype == "F16" ? to_float(f16{h}) : to_float(bf16::from_bits(h)));
    }
  }
  return out;
}

// bf16 rows [out, in] at `merged` equal bf16(base + scale · B · A), the merge's own f32 order.
void expect_merged(const uint16_t* merged, const uint16_t* base, const std::vector<TestTensor>& f,
                   const Module& m, float scale) {
  const std::vector<float> a = as_floats(f[0]), b = as_floats(f[1]);
  int64_t changed = 0;
  for (int64_t o = 0; o < m.out; ++o) {
    std::vector<float> row(static_cast<size_t>(m.in), 0.0f);
    for (int64_t k = 0; k < kRank; ++k)
      for (int64_t c = 0; c < m.in; ++c)
        row[static_cast<size_t>(c)] +=
            b[static_cast<size_t>(o * kRank + k)] * a[static_cast<size_t>(k * m.in + c)];
    for (int64_t c = 0; c < m.in; ++c) {
      const uint16_t want = to_bf16(to_float(bf16::from_bits(base[o * m.in + c])) +
                                    scale * row[static_cast<size_t>(c)])
                                .bits;
      ASSERT_EQ(merged[o * m.in + c], want) << m.weight << " [" << o << ", " << c << "]";
      changed += merged[o * m.in + c] != base[o * m.in + c] ? 1 : 0;
    }
  }
  EXPECT_GT(changed, m.out * m.in / 2) << m.weight;
}

const uint16_t* rows_of(const TensorView& v, int64_t first_row) {
  return static_cast<const uint16_t*>(v.data) + first_row * v.shape[v.shape.rank - 1];
}

TEST(LoraMerge, NamedWeightsBecomeWPlusScaledBA) {
  const BeamConfig c = tiny_config();
  const std::string model = write_tiny_model("lora_model", c);
  const int64_t H = c.hidden_size, QD = c.q_width(), KVD = c.kv_width();
  const int64_t Im = c.moe_intermediate_size;
  int64_t sparse = 0;
  while (c.mlp_layer_types[static_cast<size_t>(sparse)] != MlpKind::kSparse) ++sparse;
  const Module q{"model.layers.0.self_attn.q_proj.weight", QD, H, "F32"};
  const Module o{"model.layers.1.self_attn.o_proj.weight", H, QD, "BF16"};
  const Module up{"model.layers." + std::to_string(sparse) + ".mlp.experts.2.up_proj.weight", Im, H,
                  "BF16"};
  const Module head{"lm_head.weight", c.vocab_size, H, "F16"};
  std::vector<TestTensor> tensors;
  std::vector<std::vector<TestTensor>> f;
  uint32_t seed = 10;
  for (const Module& m : {q, o, up, head}) {
    f.push_back(factors(m, seed += 2));
    tensors.insert(tensors.end(), f.back().begin(), f.back().end());
  }
  auto base = load_beam_weights(model);
  ASSERT_TRUE(base.ok()) << base.error().message;
  for (bool rslora : {false, true}) {
    std::string config = kConfig;
    if (rslora) config.insert(config.size() - 1, R"(, "use_rslora": true)");
    const std::string dir = write_adapter(rslora ? "lora_rs" : "lora_plain", tensors, config);
    auto adapter = LoraAdapter::open(dir);
    ASSERT_TRUE(adapter.ok()) << adapter.error().message;
    auto merged = load_beam_weights(model, adapter->get());
    ASSERT_TRUE(merged.ok()) << merged.error().message;
    const float scale = rslora ? 8.0f / 2.0f : 8.0f / 4.0f;  // alpha / √r, alpha / r
    const BeamWeights &b = **base, &w = **merged;
    expect_merged(rows_of(w.layers[0].attn.qkvg, 0), rows_of(b.layers[0].attn.qkvg, 0), f[0], q,
                  scale);
    expect_merged(rows_of(w.layers[1].attn.o_proj, 0), rows_of(b.layers[1].attn.o_proj, 0), f[1], o,
                  scale);
    const TensorView gu = w.layers[static_cast<size_t>(sparse)].moe.experts_gate_up;
    const TensorView base_gu = b.layers[static_cast<size_t>(sparse)].moe.experts_gate_up;
    expect_merged(rows_of(gu, 2 * 2 * Im + Im), rows_of(base_gu, 2 * 2 * Im + Im), f[2], up, scale);
    expect_merged(rows_of(w.lm_head, 0), rows_of(b.lm_head, 0), f[3], head, scale);
    // The rest is the base's: k/v/gate rows of the same qkvg, the expert's gate rows, layer 1's
    // qkvg, the embedding.
    EXPECT_EQ(std::memcmp(rows_of(w.layers[0].attn.qkvg, QD), rows_of(b.layers[0].attn.qkvg, QD),
                          static_cast<size_t>((2 * KVD + QD) * H) * 2),
              0);
    EXPECT_EQ(std::memcmp(rows_of(gu, 2 * 2 * Im), rows_of(base_gu, 2 * 2 * Im),
                          static_cast<size_t>(Im * H) * 2),
              0);
    EXPECT_EQ(std::memcmp(w.layers[1].attn.qkvg.data, b.layers[1].attn.qkvg.data,
                          w.layers[1].attn.qkvg.nbytes()),
              0);
    EXPECT_EQ(std::memcmp(w.embed.data, b.embed.data, w.embed.nbytes()), 0);
  }
}

// PEFT's per-module alphas and ranks (alpha_pattern, rank_pattern): each module's scale is its
// alpha / its own rank (/ √rank with rsLoRA), the alpha from an alpha_pattern key equal to the
// module's name, else the first key (in the file's order) matching the end of its name, else
// lora_alpha; the merge applies each module's own scale.
TEST(LoraMerge, AlphaPatternAndPerModuleRanksSetEachModulesScale) {
  const BeamConfig c = tiny_config();
  const std::string model = write_tiny_model("lora_pattern_model", c);
  const int64_t H = c.hidden_size, QD = c.q_width(), Im = c.moe_intermediate_size;
  int64_t sparse = 0;
  while (c.mlp_layer_types[static_cast<size_t>(sparse)] != MlpKind::kSparse) ++sparse;
  const Module q0{"model.layers.0.self_attn.q_proj.weight", QD, H, "F32"};
  const Module q1{"model.layers.1.self_attn.q_proj.weight", QD, H, "F32"};
  const std::string up = "model.layers." + std::to_string(sparse) + ".mlp.experts.2.up_proj.weight";
  const Module head{"lm_head.weight", c.vocab_size, H, "F32"};
  std::vector<TestTensor> tensors;
  uint32_t seed = 40;
  for (const Module& m : {q0, q1, Module{up, Im, H, "BF16"}, head}) {
    const std::vector<TestTensor> f = factors(m, seed += 2);
    tensors.insert(tensors.end(), f.begin(), f.end());
  }
  // o_proj of layer 1 at rank 2 (a rank_pattern entry's work)
  tensors.push_back(test::random_tensor(
      "base_model.model.model.layers.1.self_attn.o_proj.lora_A.weight", "F32", {2, QD}, 60));
  tensors.push_back(test::random_tensor(
      "base_model.model.model.layers.1.self_attn.o_proj.lora_B.weight", "F32", {H, 2}, 61));
  const std::string pattern = R"("alpha_pattern": {"layers\\.\\d+\\.mlp\\.experts\\.2\\.up_proj": 5,
      "self_attn.q_proj": 2, "q_proj": 12, "lm_head": 3, "model.layers.0.self_attn.q_proj": 20})";
  for (bool rslora : {false, true}) {
    SCOPED_TRACE(rslora ? "rsLoRA" : "LoRA");
    const std::string config = R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, )" + pattern +
                               (rslora ? R"(, "use_rslora": true})" : "}");
    auto adapter = LoraAdapter::open(write_adapter("lora_pattern", tensors, config));
    ASSERT_TRUE(adapter.ok()) << adapter.error().message;
    const auto scale_of = [&](const std::string& weight) {
      return (*adapter)->find(weight)->scale;
    };
    const double r4 = rslora ? 2.0 : 4.0, r2 = rslora ? std::sqrt(2.0) : 2.0;
    EXPECT_EQ(scale_of(q0.weight), 20 / r4);  // its own name, though listed last
    EXPECT_EQ(scale_of(q1.weight), 2 / r4);   // the first key ending its name
    EXPECT_EQ(scale_of(up), 5 / r4);          // a regular expression
    EXPECT_EQ(scale_of(head.weight), 3 / r4);
    EXPECT_EQ(scale_of("model.layers.1.self_attn.o_proj.weight"), 8 / r2);  // lora_alpha, rank 2
    if (rslora) continue;
    auto base = load_beam_weights(model);
    auto merged = load_beam_weights(model, adapter->get());
    ASSERT_TRUE(base.ok() && merged.ok());
    expect_merged(rows_of((*merged)->layers[0].attn.qkvg, 0),
                  rows_of((*base)->layers[0].attn.qkvg, 0), {tensors[0], tensors[1]}, q0, 5.0f);
    expect_merged(rows_of((*merged)->layers[1].attn.qkvg, 0),
                  rows_of((*base)->layers[1].attn.qkvg, 0), {tensors[2], tensors[3]}, q1, 0.5f);
  }
}

TEST(LoraMerge, AdaptersTheMergeCannotReproduceAreRefusedByName) {
  const BeamConfig c = tiny_config();
  const std::string model = write_tiny_model("lora_refused_model", c);
  const int64_t H = c.hidden_size, QD = c.q_width();
  const Module q{"model.layers.0.self_attn.q_proj.weight", QD, H, "F32"};
  const std::vector<TestTensor> good = factors(q, 3);
  struct Case {
    std::vector<TestTensor> tensors;
    std::string config;
    std::string message;  // from open() or from the load
  };
  std::vector<TestTensor> half = {good[0]};
  std::vector<TestTensor> ranks = good;
  ranks[1] = test::random_tensor(ranks[1].name, "F32", {QD, kRank + 1}, 5);
  std::vector<TestTensor> wrong_out = good;
  wrong_out[1] = test::random_tensor(wrong_out[1].name, "F32", {QD + 1, kRank}, 6);
  const std::vector<TestTensor> absent =
      factors({"model.layers.0.self_attn.nope_proj.weight", QD, H, "F32"}, 7);
  int64_t sparse = 0;
  while (c.mlp_layer_types[static_cast<size_t>(sparse)] != MlpKind::kSparse) ++sparse;
  const std::vector<TestTensor> router = factors(
      {"model.layers." + std::to_string(sparse) + ".mlp.gate.weight", c.num_experts, H, "F32"}, 9);
  const std::vector<TestTensor> embedding = {test::random_tensor(
      "base_model.model.model.embed_tokens.lora_embedding_A", "F32", {kRank, c.vocab_size}, 11)};
  const std::string dora = R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_dora": true})";
  const std::string saved = R"({"r": 4, "lora_alpha": 8, "modules_to_save": ["lm_head"]})";
  const std::string biased = R"({"r": 4, "lora_alpha": 8, "bias": "lora_only"})";
  const std::string no_alpha = R"({"r": 4})";
  const std::string pattern_list = R"({"r": 4, "lora_alpha": 8, "alpha_pattern": ["q_proj"]})";
  const std::string pattern_value = R"({"r": 4, "lora_alpha": 8, "alpha_pattern": {"q_proj": -1}})";
  const std::string pattern_regex = R"({"r": 4, "lora_alpha": 8, "alpha_pattern": {"(": 2}})";
  for (const Case& k : std::vector<Case>{
           {half, kConfig, "has lora_A but no lora_B"},
           {ranks, kConfig, "disagree on the rank"},
           {wrong_out, kConfig, "does not make the weight's"},
           {absent, kConfig, "'model.layers.0.self_attn.nope_proj.weight' is no linear weight"},
           {embedding, kConfig, "LoRA on embeddings is not supported"},
           {good, dora, "use_dora"},
           {good, saved, "modules_to_save"},
           {good, biased, "LoRA biases are not supported"},
           {good, no_alpha, "lora_alpha must be a positive number"},
           {good, pattern_list, "alpha_pattern must be an object"},
           {good, pattern_value, "alpha_pattern['q_proj'] must be a positive number"},
           {good, pattern_regex, "alpha_pattern key '(' is not a regular expression"},
       }) {
    const std::string dir = write_adapter("lora_refused", k.tensors, k.config);
    auto adapter = LoraAdapter::open(dir);
    std::string message;
    if (!adapter.ok()) {
      message = adapter.error().message;
    } else {
      auto w = load_beam_weights(model, adapter->get());
      ASSERT_FALSE(w.ok()) << k.message;
      message = w.error().message;
    }
    EXPECT_NE(message.find(k.message), std::string::npos) << message;
    EXPECT_NE(message.find(dir), std::string::npos) << message;  // names the adapter
  }
  // A tied lm_head is the embedding: a delta on it is refused.
  {
    const std::string tied = test::make_temp_dir("lora_tied_model");
    test::write_text_file(tied + "/config.json",
                          test::tiny_config_json(/*tie_word_embeddings=*/true));
    auto tied_config = parse_beam_config(test::tiny_config_json(true), "config.json");
    ASSERT_TRUE(tied_config.ok());
    test::write_safetensors(tied + "/model.safetensors", test::tiny_model_tensors(*tied_config));
    const std::string dir = write_adapter(
        "lora_tied", factors({"lm_head.weight", c.vocab_size, H, "F32"}, 13), kConfig);
    auto adapter = LoraAdapter::open(dir);
    ASSERT_TRUE(adapter.ok()) << adapter.error().message;
    auto w = load_beam_weights(tied, adapter->get());
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().message.find("tied to the embedding"), std::string::npos)
        << w.error().message;
  }
  // A pickled adapter (adapter_model.bin) is named, with how to get a safetensors file.
  {
    const std::string dir = test::make_temp_dir("lora_pickle");
    test::write_text_file(dir + "/adapter_config.json", kConfig);
    test::write_text_file(dir + "/adapter_model.bin", "not read");
    auto adapter = LoraAdapter::open(dir);
    ASSERT_FALSE(adapter.ok());
    EXPECT_NE(adapter.error().message.find("adapter_model.bin (a pickle)"), std::string::npos)
        << adapter.error().message;
  }
  // The router is f32 (its selection is exact): not a weight LoRA merges into.
  const std::string dir = write_adapter("lora_router", router, kConfig);
  auto adapter = LoraAdapter::open(dir);
  ASSERT_TRUE(adapter.ok()) << adapter.error().message;
  auto w = load_beam_weights(model, adapter->get());
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("mlp.gate.weight' is not a bf16 linear weight"),
            std::string::npos)
      << w.error().message;
}

}  // namespace
}  // namespace beam
