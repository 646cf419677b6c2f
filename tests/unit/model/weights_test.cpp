// load_beam_weights: every packed/fused tensor equals its sources, layouts and dtypes on disk do
// not change the result, and missing / unexpected / mis-shaped tensors are named in errors.
#include "model/weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "core/bf16.h"
#include "model/checkpoint.h"
#include "model/param_count.h"
#include "model/tensor_names.h"
#include "model/tensor_parallel.h"
#include "test_checkpoint_writer.h"

namespace beam {
namespace {

using test::TestTensor;

struct TinyModel {
  BeamConfig config;
  std::vector<TestTensor> tensors;
  const TestTensor& operator[](const std::string& name) const {
    for (const TestTensor& t : tensors)
      if (t.name == name) return t;
    ADD_FAILURE() << "no tensor " << name;
    return tensors[0];
  }
};

TinyModel tiny_model(bool tie = false) {
  TinyModel m;
  auto c = parse_beam_config(test::tiny_config_json(tie), "config.json");
  EXPECT_TRUE(c.ok()) << c.error().message;
  m.config = *c;
  m.tensors = test::tiny_model_tensors(m.config);
  return m;
}


// Bytes [offset, offset + size) of a view equal the source tensor's bytes.
void expect_part(const TensorView& v, size_t offset, const TestTensor& src) {
  ASSERT_NE(v.data, nullptr) << src.name;
  ASSERT_LE(offset + src.bytes.size(), v.nbytes()) << src.name;
  EXPECT_EQ(std::memcmp(static_cast<const char*>(v.data) + offset, src.bytes.data(), src.bytes.size()), 0) << src.name;
}

void expect_view(const TensorView& v, DType dtype, Shape shape, const std::string& what) {
  EXPECT_EQ(v.dtype, dtype) << what;
  EXPECT_TRUE(v.shape == shape) << what << ": " << v.shape.str() << " vs " << shape.str();
}

void expect_attention_matches(const TinyModel& m, const BeamWeights& w, int64_t l) {
  const BeamConfig& c = m.config;
  const AttentionWeights& a = w.layers[l].attn;
  const size_t row = c.hidden_size * 2, QD = c.q_width(), KVD = c.kv_width();
  expect_view(a.qkvg, DType::kBF16, Shape{int64_t(2 * QD + 2 * KVD), c.hidden_size}, "qkvg");
  expect_part(a.qkvg, 0, m[layer_tensor_name(l, "self_attn.q_proj.weight")]);
  expect_part(a.qkvg, QD * row, m[layer_tensor_name(l, "self_attn.k_proj.weight")]);
  expect_part(a.qkvg, (QD + KVD) * row, m[layer_tensor_name(l, "self_attn.v_proj.weight")]);
  expect_part(a.qkvg, (QD + 2 * KVD) * row, m[layer_tensor_name(l, "self_attn.gate_proj.weight")]);
  expect_part(a.gate_bias, 0, m[layer_tensor_name(l, "self_attn.gate_bias")]);
  expect_part(a.q_norm, 0, m[layer_tensor_name(l, "self_attn.q_norm.weight")]);
  expect_part(a.k_norm, 0, m[layer_tensor_name(l, "self_attn.k_norm.weight")]);
  expect_part(a.o_proj, 0, m[layer_tensor_name(l, "self_attn.o_proj.weight")]);
  expect_view(a.o_proj, DType::kBF16, Shape{c.hidden_size, int64_t(QD)}, "o_proj");
}

void expect_mlp_matches(const TinyModel& m, const BeamWeights& w, int64_t l) {
  const BeamConfig& c = m.config;
  const LayerWeights& lw = w.layers[l];
  if (c.mlp_layer_types[l] == MlpKind::kDense) {
    expect_view(lw.dense.gate_up, DType::kBF16, Shape{2 * c.intermediate_size, c.hidden_size}, "gate_up");
    expect_part(lw.dense.gate_up, 0, m[layer_tensor_name(l, "mlp.gate_proj.weight")]);
    expect_part(lw.dense.gate_up, c.intermediate_size * c.hidden_size * 2, m[layer_tensor_name(l, "mlp.up_proj.weight")]);
    expect_part(lw.dense.down, 0, m[layer_tensor_name(l, "mlp.down_proj.weight")]);
    return;
  }
  const MoeWeights& moe = lw.moe;
  const int64_t E = c.num_experts, Im = c.moe_intermediate_size, H = c.hidden_size;
  expect_view(moe.router, DType::kF32, Shape{E, H}, "router");
  expect_view(moe.router_bias, DType::kF32, Shape{E}, "router_bias");
  expect_view(moe.experts_gate_up, DType::kBF16, Shape{E, 2 * Im, H}, "experts_gate_up");
  expect_view(moe.experts_down, DType::kBF16, Shape{E, H, Im}, "experts_down");
  expect_part(moe.router, 0, m[layer_tensor_name(l, "mlp.gate.weight")]);
  expect_part(moe.router_bias, 0, m[layer_tensor_name(l, "mlp.gate.e_score_correction_bias")]);
  const size_t half = Im * H * 2;
  for (int64_t e = 0; e < E; ++e) {
    expect_part(moe.experts_gate_up, 2 * half * e, m[expert_tensor_name(l, e, "gate_proj.weight")]);
    expect_part(moe.experts_gate_up, 2 * half * e + half, m[expert_tensor_name(l, e, "up_proj.weight")]);
    expect_part(moe.experts_down, half * e, m[expert_tensor_name(l, e, "down_proj.weight")]);
  }
}

void expect_model_matches(const TinyModel& m, const BeamWeights& w) {
  const BeamConfig& c = m.config;
  ASSERT_EQ(w.layers.size(), static_cast<size_t>(c.num_layers));
  expect_view(w.embed, DType::kBF16, Shape{c.vocab_size, c.hidden_size}, "embed");
  expect_part(w.embed, 0, m["model.embed_tokens.weight"]);
  expect_part(w.final_norm, 0, m["model.norm.weight"]);
  expect_part(w.lm_head, 0, m[c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"]);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    expect_part(w.layers[l].input_norm, 0, m[layer_tensor_name(l, "input_layernorm.weight")]);
    expect_part(w.layers[l].post_attn_norm, 0, m[layer_tensor_name(l, "post_attention_layernorm.weight")]);
    expect_part(w.layers[l].pre_mlp_norm, 0, m[layer_tensor_name(l, "pre_feedforward_layernorm.weight")]);
    expect_part(w.layers[l].post_mlp_norm, 0, m[layer_tensor_name(l, "post_feedforward_layernorm.weight")]);
    expect_attention_matches(m, w, l);
    expect_mlp_matches(m, w, l);
  }
}

// Loading `dir` fails with a message containing every part.
void expect_load_error(const std::string& dir, std::initializer_list<std::string> parts) {
  auto r = load_beam_weights(dir);
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << *parts.begin();
  for (const std::string& p : parts) {
    EXPECT_NE(r.error().message.find(p), std::string::npos) << "'" << p << "' not in: " << r.error().message;
  }
}

TEST(WeightsCheckpointTest, LoadsTinyModelAndFusesEveryTensor) {
  TinyModel m = tiny_model();
  std::string dir = test::write_tiny_model("weights_tiny", m.tensors);
  auto w = load_beam_weights(dir);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ((*w)->config.num_layers, 4);
  expect_model_matches(m, **w);
}

TEST(WeightsCheckpointTest, OrderShardsPaddingAndMetadataDoNotMatter) {
  TinyModel m = tiny_model();
  std::vector<test::WriteOptions> options = {
      {.shuffle_seed = 11}, {.header_padding = 7, .align_header = false}, {.metadata = true}};
  for (size_t i = 0; i < options.size(); ++i) {
    auto w = load_beam_weights(test::write_tiny_model("weights_variant" + std::to_string(i), m.tensors, false, options[i]));
    ASSERT_TRUE(w.ok()) << "variant " << i << ": " << w.error().message;
    expect_model_matches(m, **w);
  }
  for (int shards : {2, 5}) {
    std::string dir = test::make_temp_dir("weights_shards" + std::to_string(shards));
    test::write_text_file(dir + "/config.json", test::tiny_config_json());
    std::vector<int> shard_of;
    for (size_t i = 0; i < m.tensors.size(); ++i) shard_of.push_back(static_cast<int>((i * 7) % shards));
    test::write_sharded(dir, m.tensors, shard_of, {.header_padding = 1, .align_header = shards == 2, .shuffle_seed = 5});
    auto w = load_beam_weights(dir);
    ASSERT_TRUE(w.ok()) << shards << " shards: " << w.error().message;
    expect_model_matches(m, **w);
  }
}

// Rewrites a tensor's values in another dtype; returns the values as f32.
std::vector<float> recast(TestTensor& t, const std::string& dtype, uint32_t seed) {
  int64_t numel = 1;
  for (int64_t d : t.shape) numel *= d;
  t = test::random_tensor(t.name, dtype, t.shape, seed);
  std::vector<float> values(numel);
  for (int64_t i = 0; i < numel; ++i) {
    if (dtype == "F32") {
      std::memcpy(&values[i], &t.bytes[4 * i], 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, &t.bytes[2 * i], 2);
      values[i] = dtype == "BF16" ? to_float(bf16::from_bits(bits)) : to_float(f16{bits});
    }
  }
  return values;
}

TEST(WeightsCheckpointTest, ConvertsF16AndF32ToBf16AndWidensRouter) {
  TinyModel m = tiny_model();
  std::map<std::string, std::vector<float>> values;
  for (TestTensor& t : m.tensors) {
    if (t.name == "model.embed_tokens.weight" || t.name == layer_tensor_name(0, "self_attn.k_proj.weight") ||
        t.name == layer_tensor_name(1, "input_layernorm.weight")) {
      values[t.name] = recast(t, "F32", 99);
    } else if (t.name == expert_tensor_name(2, 3, "up_proj.weight") || t.name == layer_tensor_name(0, "mlp.down_proj.weight")) {
      values[t.name] = recast(t, "F16", 98);
    } else if (t.name == layer_tensor_name(1, "mlp.gate.weight")) {
      values[t.name] = recast(t, "BF16", 97);
    } else if (t.name == layer_tensor_name(3, "mlp.gate.e_score_correction_bias")) {
      values[t.name] = recast(t, "F16", 96);
    }
  }
  auto w = load_beam_weights(test::write_tiny_model("weights_convert", m.tensors));
  ASSERT_TRUE(w.ok()) << w.error().message;
  const BeamConfig& c = m.config;
  auto expect_bf16 = [](const TensorView& v, size_t offset_elems, const std::vector<float>& src, const char* what) {
    ASSERT_EQ(v.dtype, DType::kBF16);
    for (size_t i = 0; i < src.size(); ++i) {
      ASSERT_EQ(v.as<bf16>()[offset_elems + i].bits, to_bf16(src[i]).bits) << what << " element " << i;
    }
  };
  auto expect_f32 = [](const TensorView& v, const std::vector<float>& src, const char* what) {
    ASSERT_EQ(v.dtype, DType::kF32);
    for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(v.as<float>()[i], src[i]) << what << " element " << i;
  };
  expect_bf16((*w)->embed, 0, values["model.embed_tokens.weight"], "embed (f32)");
  expect_bf16((*w)->layers[0].attn.qkvg, c.q_width() * c.hidden_size, values[layer_tensor_name(0, "self_attn.k_proj.weight")], "k_proj (f32)");
  expect_bf16((*w)->layers[1].input_norm, 0, values[layer_tensor_name(1, "input_layernorm.weight")], "norm (f32)");
  size_t expert_up = (3 * 2 + 1) * c.moe_intermediate_size * c.hidden_size;
  expect_bf16((*w)->layers[2].moe.experts_gate_up, expert_up, values[expert_tensor_name(2, 3, "up_proj.weight")], "expert up (f16)");
  expect_bf16((*w)->layers[0].dense.down, 0, values[layer_tensor_name(0, "mlp.down_proj.weight")], "dense down (f16)");
  expect_f32((*w)->layers[1].moe.router, values[layer_tensor_name(1, "mlp.gate.weight")], "router (bf16)");
  expect_f32((*w)->layers[3].moe.router_bias, values[layer_tensor_name(3, "mlp.gate.e_score_correction_bias")], "bias (f16)");
}

TEST(WeightsCheckpointTest, TiedEmbeddings) {
  TinyModel m = tiny_model(/*tie=*/true);
  auto w = load_beam_weights(test::write_tiny_model("weights_tied", m.tensors, true));
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ((*w)->lm_head.data, (*w)->embed.data);
  expect_model_matches(m, **w);

  auto with_head = m.tensors;
  TestTensor head = m["model.embed_tokens.weight"];
  head.name = "lm_head.weight";
  with_head.push_back(head);
  w = load_beam_weights(test::write_tiny_model("weights_tied_same", with_head, true));
  EXPECT_TRUE(w.ok()) << w.error().message;
  with_head.back().bytes[0] ^= 1;
  expect_load_error(test::write_tiny_model("weights_tied_diff", with_head, true),
                    {"lm_head.weight", "differs from the embedding", "tie_word_embeddings"});
}

TEST(WeightsCheckpointTest, MissingTensorsAreListed) {
  TinyModel m = tiny_model();
  std::vector<TestTensor> kept;
  for (const TestTensor& t : m.tensors) {
    if (t.name != layer_tensor_name(2, "self_attn.q_norm.weight") && t.name != expert_tensor_name(3, 7, "down_proj.weight"))
      kept.push_back(t);
  }
  expect_load_error(test::write_tiny_model("weights_missing", kept),
                    {"missing 2 tensor(s)", "model.layers.2.self_attn.q_norm.weight",
                     "model.layers.3.mlp.experts.7.down_proj.weight"});
  kept = m.tensors;
  kept.erase(kept.begin() + (kept.size() - 1));  // lm_head.weight with an untied config
  expect_load_error(test::write_tiny_model("weights_missing_head", kept), {"missing 1 tensor(s)", "lm_head.weight"});
}

TEST(WeightsCheckpointTest, UnexpectedTensorsAreListed) {
  TinyModel m = tiny_model();
  auto tensors = m.tensors;
  tensors.push_back(test::random_tensor(expert_tensor_name(1, 8, "gate_proj.weight"), "BF16", {8, 32}, 3));
  tensors.push_back(test::random_tensor("model.layers.0.mlp.shared_expert.up_proj.weight", "BF16", {4, 32}, 4));
  expect_load_error(test::write_tiny_model("weights_extra", tensors),
                    {"2 unexpected tensor(s)", "model.layers.1.mlp.experts.8.gate_proj.weight",
                     "model.layers.0.mlp.shared_expert.up_proj.weight", "(model.safetensors)"});
}

TEST(WeightsCheckpointTest, WrongShapeNamesTensorShapesAndFile) {
  TinyModel m = tiny_model();
  auto tensors = m.tensors;
  for (TestTensor& t : tensors) {
    if (t.name == layer_tensor_name(1, "self_attn.v_proj.weight")) t = test::random_tensor(t.name, "BF16", {32, 31}, 9);
  }
  std::string dir = test::write_tiny_model("weights_shape", tensors);
  expect_load_error(dir, {dir + "/model.safetensors", "tensor 'model.layers.1.self_attn.v_proj.weight'",
                          "has shape [32, 31] bf16", "expected [32, 32] = [Nkv*D, H] bf16"});
  tensors = m.tensors;
  for (TestTensor& t : tensors) {
    if (t.name == layer_tensor_name(2, "mlp.gate.weight")) t = test::random_tensor(t.name, "F32", {32, 8}, 9);
  }
  expect_load_error(test::write_tiny_model("weights_shape_router", tensors),
                    {"tensor 'model.layers.2.mlp.gate.weight'", "has shape [32, 8] f32", "expected [8, 32] = [E, H] f32"});
}

TEST(WeightsCheckpointTest, AliasSpellingsLoad) {
  TinyModel m = tiny_model();
  auto tensors = m.tensors;
  for (TestTensor& t : tensors) {
    if (t.name == layer_tensor_name(0, "self_attn.gate_proj.weight")) t.name = layer_tensor_name(0, "self_attn.output_gate_proj.weight");
    if (t.name == layer_tensor_name(3, "mlp.gate.weight")) t.name = layer_tensor_name(3, "mlp.router.weight");
  }
  auto w = load_beam_weights(test::write_tiny_model("weights_alias", tensors));
  ASSERT_TRUE(w.ok()) << w.error().message;
  expect_model_matches(m, **w);
  tensors.push_back(m[layer_tensor_name(0, "self_attn.gate_proj.weight")]);
  expect_load_error(test::write_tiny_model("weights_alias_both", tensors),
                    {"self_attn.gate_proj.weight", "self_attn.output_gate_proj.weight", "two spellings"});
}

TEST(WeightsCheckpointTest, ConfigAndCheckpointErrorsPropagate) {
  TinyModel m = tiny_model();
  std::string dir = test::write_tiny_model("weights_badconfig", m.tensors);
  test::write_text_file(dir + "/config.json", "{\"model_type\": \"beam\"}");
  expect_load_error(dir, {"config.json", "missing"});
  dir = test::make_temp_dir("weights_noweights");
  test::write_text_file(dir + "/config.json", test::tiny_config_json());
  expect_load_error(dir, {"model.safetensors"});
}

TEST(WeightsCheckpointTest, LoadsShippedTinyBeam) {
  std::string dir = std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam";
  ASSERT_TRUE(std::filesystem::exists(dir + "/config.json")) << dir << " is part of the repository";
  auto w = load_beam_weights(dir);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const BeamConfig& c = (*w)->config;
  EXPECT_EQ((*w)->layers.size(), static_cast<size_t>(c.num_layers));
  EXPECT_GT(c.num_layers_of(AttentionKind::kSliding), 0);
  EXPECT_GT(c.num_layers_of(AttentionKind::kFull), 0);
  EXPECT_GT(c.num_layers_of(MlpKind::kSparse), 0);
  for (const LayerWeights& l : (*w)->layers) {
    EXPECT_NE(l.attn.qkvg.data, nullptr);
    EXPECT_EQ(l.attn.qkvg.shape[0], 2 * c.q_width() + 2 * c.kv_width());
  }
  // The config-only byte count (what `beamserve inspect` reports) equals the checkpoint's.
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  auto on_disk = ckpt->bytes_by_dtype();
  WeightBytes expected = weight_bytes(c);
  EXPECT_EQ(static_cast<int64_t>(on_disk[DType::kBF16]), expected.bf16_bytes);
  EXPECT_EQ(static_cast<int64_t>(on_disk[DType::kF32]), expected.f32_bytes);
}

// A tensor-parallel rank's load (ExpertSlice): only its experts are fused, byte for byte those of
// a whole load; the other experts' tensors are still checked; slices outside the model are
// errors; shard_beam_weights takes either load for the rank and refuses weights without its
// experts; load_rank_weights gives each rank its own.
TEST(WeightsCheckpointTest, ExpertSliceLoadsOnlyThoseExperts) {
  const std::string dir = std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam";
  auto whole = load_beam_weights(dir);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  auto part = load_beam_weights(dir, nullptr, ExpertSlice{8, 8});
  ASSERT_TRUE(part.ok()) << part.error().message;
  EXPECT_EQ((*part)->first_expert, 8);
  const BeamConfig& c = (*whole)->config;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.mlp_layer_types[l] != MlpKind::kSparse) continue;
    const MoeWeights& w = (*whole)->layers[l].moe;
    const MoeWeights& p = (*part)->layers[l].moe;
    ASSERT_EQ(p.experts_gate_up.dim(0), 8);
    ASSERT_EQ(p.experts_down.dim(0), 8);
    EXPECT_EQ(std::memcmp(p.experts_gate_up.data, w.experts_gate_up.rows(8, 8).data,
                          p.experts_gate_up.nbytes()),
              0);
    EXPECT_EQ(
        std::memcmp(p.experts_down.data, w.experts_down.rows(8, 8).data, p.experts_down.nbytes()),
        0);
  }
  for (ExpertSlice bad : {ExpertSlice{12, 8}, ExpertSlice{-1, 4}, ExpertSlice{0, 0}}) {
    auto r = load_beam_weights(dir, nullptr, bad);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("of a model of 16"), std::string::npos) << r.error().message;
  }
  // Rank 1 of 2 from either load: the same bytes; rank 0 lacks its experts in the part.
  auto from_whole = shard_beam_weights(*whole, TensorParallel{1, 2});
  auto from_part = shard_beam_weights(*part, TensorParallel{1, 2});
  ASSERT_TRUE(from_whole.ok() && from_part.ok());
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.mlp_layer_types[l] != MlpKind::kSparse) continue;
    const TensorView a = (*from_whole)->layers[l].moe.experts_down,
                     b = (*from_part)->layers[l].moe.experts_down;
    ASSERT_EQ(a.shape, b.shape);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes()), 0);
  }
  auto wrong = shard_beam_weights(*part, TensorParallel{0, 2});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(
      wrong.error().message.find("the weights hold experts [8, 16), rank 0 of 2 needs [0, 8)"),
      std::string::npos)
      << wrong.error().message;
  const RankWeights source = load_rank_weights(dir, "");
  auto rank1 = source(TensorParallel{1, 2});
  ASSERT_TRUE(rank1.ok()) << rank1.error().message;
  EXPECT_EQ((*rank1)->first_expert, 8);
  EXPECT_FALSE(source(TensorParallel{0, 3}).ok());  // 3 does not divide the KV heads
}

}  // namespace
}  // namespace beam
