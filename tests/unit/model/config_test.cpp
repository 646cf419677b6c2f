// config.json parsing and validation: one test per rule, each asserting the error names the
// file, the key and the problem.
#include "model/config.h"

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <limits>

#include <nlohmann/json.hpp>

#include "test_checkpoint_writer.h"

namespace beam {
namespace {

using nlohmann::json;
constexpr const char* kSource = "/models/tiny/config.json";

Expected<BeamConfig> parse_edited(const std::function<void(json&)>& edit) {
  json j = json::parse(test::tiny_config_json());
  edit(j);
  return parse_beam_config(j.dump(), kSource);
}

// Asserts `r` failed with a message naming the file and containing every part.
void expect_error(const Expected<BeamConfig>& r, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << *parts.begin();
  const std::string& msg = r.error().message;
  EXPECT_NE(msg.find(kSource), std::string::npos) << msg;
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

TEST(ConfigTest, ParsesTinyConfig) {
  auto r = parse_beam_config(test::tiny_config_json(), kSource);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const BeamConfig& c = *r;
  EXPECT_EQ(c.vocab_size, 96);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.q_width(), 64);
  EXPECT_EQ(c.intermediate_size, 48);
  EXPECT_EQ(c.moe_intermediate_size, 8);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.num_groups, 4);
  EXPECT_EQ(c.topk_groups, 2);
  EXPECT_EQ(c.experts_per_group(), 2);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_EQ(c.sliding_window, 4);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  ASSERT_TRUE(c.final_logit_softcapping.has_value());
  EXPECT_FLOAT_EQ(*c.final_logit_softcapping, 30.0f);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.layer_types, (std::vector<AttentionKind>{AttentionKind::kSliding, AttentionKind::kFull,
                                                        AttentionKind::kSliding, AttentionKind::kFull}));
  EXPECT_EQ(c.mlp_layer_types,
            (std::vector<MlpKind>{MlpKind::kDense, MlpKind::kSparse, MlpKind::kSparse, MlpKind::kSparse}));
  EXPECT_EQ(c.num_layers_of(AttentionKind::kFull), 2);
  EXPECT_EQ(c.num_layers_of(MlpKind::kSparse), 3);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.kv_bytes_per_token_per_layer(), 2 * 2 * 16 * 2);
}

TEST(ConfigTest, ParsesSpecSection7Config) {
  const char* text = R"({"architectures": ["BeamForCausalLM"], "model_type": "beam", "vocab_size": 1024,
    "hidden_size": 256, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 128, "intermediate_size": 512, "moe_intermediate_size": 128, "n_routed_experts": 16,
    "num_experts_per_tok": 4, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
    "norm_topk_prob": true, "hidden_act": "silu", "rms_norm_eps": 1e-6, "sliding_window": 16,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                    "sliding_attention", "sliding_attention", "full_attention"],
    "mlp_layer_types": ["dense", "sparse", "sparse", "sparse", "sparse", "sparse"],
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": null},
    "final_logit_softcapping": 30.0, "max_position_embeddings": 1048576,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16"})";
  auto r = parse_beam_config(text, kSource);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->num_layers_of(AttentionKind::kSliding), 4);
  EXPECT_EQ(r->q_width(), 512);
  EXPECT_TRUE(r->eos_token_ids.empty());
}

TEST(ConfigTest, InvalidJsonNamesFile) {
  expect_error(parse_beam_config("{\"vocab_size\": ", kSource), {"not valid JSON"});
  expect_error(parse_beam_config("[1, 2]", kSource), {"JSON object"});
  // A number past double's range is nlohmann's out_of_range, not a parse_error (it used to
  // escape as an exception and end the process; found by tests/fuzz/checkpoint_fuzz.cpp).
  expect_error(parse_beam_config("{\"vocab_size\": 1e7408}", kSource), {"not valid JSON"});
}

// Sizes that each pass but together describe more than 2^50 parameters, or more than 2^50 bytes
// of KV for one sequence, are refused: every count computed from them stays in int64_t.
TEST(ConfigTest, SizesTogetherMustStayBelowTwoToTheFifty) {
  const int64_t big = std::numeric_limits<int32_t>::max();
  expect_error(parse_edited([&](json& j) {
                 j["hidden_size"] = big;
                 j["vocab_size"] = big;
               }),
               {"describes", "parameters, more than the 2^50 supported"});
  for (const char* length : {"max_position_embeddings", "sliding_window"}) {
    expect_error(parse_edited([&](json& j) {
                   j[length] = big;
                   j["head_dim"] = 1 << 16;
                   j["num_key_value_heads"] = 1 << 8;
                   j["num_attention_heads"] = 1 << 8;
                 }),
                 {"bytes of KV, more than the 2^50 supported"});
  }
}

TEST(ConfigTest, MissingRequiredKey) {
  expect_error(parse_edited([](json& j) { j.erase("hidden_size"); }), {"key 'hidden_size'", "missing"});
  expect_error(parse_edited([](json& j) { j.erase("layer_types"); }), {"key 'layer_types'", "missing"});
  expect_error(parse_edited([](json& j) { j.erase("rms_norm_eps"); }), {"key 'rms_norm_eps'", "missing"});
  expect_error(parse_edited([](json& j) { j["head_dim"] = nullptr; }), {"key 'head_dim'", "null"});
}

TEST(ConfigTest, WrongJsonTypes) {
  expect_error(parse_edited([](json& j) { j["hidden_size"] = "32"; }), {"key 'hidden_size'", "integer", "string"});
  expect_error(parse_edited([](json& j) { j["num_attention_heads"] = 4.5; }), {"key 'num_attention_heads'", "integer"});
  expect_error(parse_edited([](json& j) { j["layer_types"] = "sliding_attention"; }), {"key 'layer_types'", "list"});
  expect_error(parse_edited([](json& j) { j["norm_topk_prob"] = 1; }), {"key 'norm_topk_prob'", "true or false"});
  expect_error(parse_edited([](json& j) { j["rms_norm_eps"] = "1e-6"; }), {"key 'rms_norm_eps'", "number"});
  expect_error(parse_edited([](json& j) { j["model_type"] = 7; }), {"key 'model_type'", "string"});
}

TEST(ConfigTest, SizesMustBePositive) {
  expect_error(parse_edited([](json& j) { j["vocab_size"] = 0; }), {"key 'vocab_size'", "positive"});
  expect_error(parse_edited([](json& j) { j["intermediate_size"] = -48; }), {"key 'intermediate_size'", "positive"});
  expect_error(parse_edited([](json& j) { j["hidden_size"] = int64_t{1} << 40; }), {"key 'hidden_size'", "positive size"});
  expect_error(parse_edited([](json& j) { j["rms_norm_eps"] = 0.0; }), {"key 'rms_norm_eps'", "positive"});
  expect_error(parse_edited([](json& j) { j["routed_scaling_factor"] = -1.0; }), {"key 'routed_scaling_factor'", "positive"});
}

TEST(ConfigTest, LayerListsMustHaveOneEntryPerLayer) {
  auto r = parse_edited([](json& j) { j["layer_types"].erase(3); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            std::string(kSource) + ": key 'layer_types' has 3 entries, expected num_hidden_layers = 4");
  expect_error(parse_edited([](json& j) { j["mlp_layer_types"].push_back("sparse"); }),
               {"key 'mlp_layer_types'", "5 entries", "num_hidden_layers = 4"});
}

TEST(ConfigTest, UnknownLayerKinds) {
  expect_error(parse_edited([](json& j) { j["layer_types"][1] = "global_attention"; }),
               {"key 'layer_types'", "entry 1", "global_attention", "sliding_attention"});
  expect_error(parse_edited([](json& j) { j["mlp_layer_types"][2] = "moe"; }),
               {"key 'mlp_layer_types'", "entry 2", "moe", "\"sparse\""});
  expect_error(parse_edited([](json& j) { j["layer_types"][0] = 3; }), {"key 'layer_types'", "entry 0"});
}

TEST(ConfigTest, HeadsMustDivideIntoKvGroups) {
  expect_error(parse_edited([](json& j) { j["num_key_value_heads"] = 3; }),
               {"key 'num_attention_heads'", "not a multiple of num_key_value_heads = 3"});
}

TEST(ConfigTest, ExpertGroupRules) {
  expect_error(parse_edited([](json& j) { j["n_group"] = 3; }),
               {"key 'n_routed_experts'", "not a multiple of n_group = 3"});
  expect_error(parse_edited([](json& j) { j["topk_group"] = 5; }), {"key 'topk_group'", "exceeds n_group = 4"});
  expect_error(parse_edited([](json& j) { j["num_experts_per_tok"] = 5; }),
               {"key 'num_experts_per_tok'", "exceeds the 4 experts", "2 kept groups"});
  auto ok = parse_edited([](json& j) { j["num_experts_per_tok"] = 4; });
  EXPECT_TRUE(ok.ok()) << ok.error().message;
}

TEST(ConfigTest, SparseLayersNeedMoeKeys) {
  expect_error(parse_edited([](json& j) { j.erase("n_routed_experts"); }), {"key 'n_routed_experts'", "missing"});
  expect_error(parse_edited([](json& j) { j.erase("moe_intermediate_size"); }), {"key 'moe_intermediate_size'", "missing"});
  auto dense_only = parse_edited([](json& j) {
    j["mlp_layer_types"] = {"dense", "dense", "dense", "dense"};
    for (const char* k : {"n_routed_experts", "moe_intermediate_size", "num_experts_per_tok", "n_group", "topk_group"})
      j.erase(k);
  });
  ASSERT_TRUE(dense_only.ok()) << dense_only.error().message;
  EXPECT_EQ(dense_only->num_experts, 0);
  expect_error(parse_edited([](json& j) { j.erase("intermediate_size"); }), {"key 'intermediate_size'", "missing"});
}

TEST(ConfigTest, UnsupportedRoutingChoices) {
  expect_error(parse_edited([](json& j) { j["scoring_func"] = "softmax"; }), {"key 'scoring_func'", "softmax"});
  expect_error(parse_edited([](json& j) { j["topk_method"] = "greedy"; }), {"key 'topk_method'", "greedy"});
  expect_error(parse_edited([](json& j) { j["n_shared_experts"] = 1; }), {"key 'n_shared_experts'", "shared experts"});
  auto ok = parse_edited([](json& j) {
    j["scoring_func"] = "sigmoid";
    j["topk_method"] = "noaux_tc";
    j["n_shared_experts"] = 0;
  });
  EXPECT_TRUE(ok.ok()) << ok.error().message;
}

TEST(ConfigTest, SlidingWindowRequiredForSlidingLayers) {
  expect_error(parse_edited([](json& j) { j["sliding_window"] = 0; }), {"key 'sliding_window'", "positive"});
  expect_error(parse_edited([](json& j) { j.erase("sliding_window"); }), {"key 'sliding_window'", "positive"});
  auto all_full = parse_edited([](json& j) {
    j["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention"};
    j.erase("sliding_window");
    j.erase("rope_parameters");
  });
  ASSERT_TRUE(all_full.ok()) << all_full.error().message;
  EXPECT_EQ(all_full->sliding_window, 0);
}

TEST(ConfigTest, RopeParameters) {
  expect_error(parse_edited([](json& j) { j["rope_parameters"]["sliding_attention"]["rope_type"] = "yarn"; }),
               {"rope_parameters.sliding_attention", "unsupported rope_type", "yarn"});
  expect_error(parse_edited([](json& j) { j["rope_parameters"]["full_attention"] = {{"rope_type", "default"}, {"rope_theta", 1e4}}; }),
               {"rope_parameters.full_attention", "NoPE"});
  expect_error(parse_edited([](json& j) { j["rope_parameters"]["sliding_attention"].erase("rope_theta"); }),
               {"rope_parameters.sliding_attention", "rope_theta"});
  expect_error(parse_edited([](json& j) { j["rope_parameters"]["chunked_attention"] = nullptr; }),
               {"key 'rope_parameters'", "chunked_attention"});
  expect_error(parse_edited([](json& j) { j.erase("rope_parameters"); }), {"rope_parameters", "missing"});
  auto flat = parse_edited([](json& j) { j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}}; });
  ASSERT_TRUE(flat.ok()) << flat.error().message;
  EXPECT_FLOAT_EQ(flat->rope_theta, 5e5f);
}

TEST(ConfigTest, LegacyRopeTheta) {
  auto legacy = parse_edited([](json& j) {
    j.erase("rope_parameters");
    j["rope_theta"] = 1e6;
    j["rope_scaling"] = nullptr;
  });
  ASSERT_TRUE(legacy.ok()) << legacy.error().message;
  EXPECT_FLOAT_EQ(legacy->rope_theta, 1e6f);
  expect_error(parse_edited([](json& j) {
                 j.erase("rope_parameters");
                 j["rope_theta"] = 1e6;
                 j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
               }),
               {"key 'rope_scaling'", "unsupported rope_type", "linear"});
  expect_error(parse_edited([](json& j) { j["rope_theta"] = 5e5; }), {"key 'rope_theta'", "disagrees"});
}

TEST(ConfigTest, FinalLogitSoftcapping) {
  expect_error(parse_edited([](json& j) { j["final_logit_softcapping"] = -30.0; }),
               {"key 'final_logit_softcapping'", "positive"});
  expect_error(parse_edited([](json& j) { j["final_logit_softcapping"] = 0; }), {"key 'final_logit_softcapping'"});
  auto null_cap = parse_edited([](json& j) { j["final_logit_softcapping"] = nullptr; });
  ASSERT_TRUE(null_cap.ok()) << null_cap.error().message;
  EXPECT_FALSE(null_cap->final_logit_softcapping.has_value());
  auto absent = parse_edited([](json& j) { j.erase("final_logit_softcapping"); });
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->final_logit_softcapping.has_value());
}

TEST(ConfigTest, ActivationModelTypeArchitectures) {
  expect_error(parse_edited([](json& j) { j["hidden_act"] = "gelu"; }), {"key 'hidden_act'", "gelu", "silu"});
  expect_error(parse_edited([](json& j) { j["model_type"] = "llama"; }), {"key 'model_type'", "llama", "beam"});
  expect_error(parse_edited([](json& j) { j.erase("model_type"); }), {"key 'model_type'", "missing"});
  expect_error(parse_edited([](json& j) { j["architectures"] = {"LlamaForCausalLM"}; }),
               {"key 'architectures'", "BeamForCausalLM"});
  expect_error(parse_edited([](json& j) { j["attention_bias"] = true; }), {"key 'attention_bias'"});
  auto no_arch = parse_edited([](json& j) { j.erase("architectures"); j.erase("hidden_act"); });
  EXPECT_TRUE(no_arch.ok()) << no_arch.error().message;
}

TEST(ConfigTest, KeyAliases) {
  auto r = parse_edited([](json& j) {
    j["num_experts"] = j["n_routed_experts"];
    j.erase("n_routed_experts");
    j["dtype"] = "float32";
    j.erase("torch_dtype");
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->num_experts, 8);
  EXPECT_EQ(r->torch_dtype, "float32");
  auto same = parse_edited([](json& j) { j["num_local_experts"] = 8; });
  EXPECT_TRUE(same.ok()) << same.error().message;
  expect_error(parse_edited([](json& j) { j["num_local_experts"] = 16; }),
               {"key 'num_local_experts'", "n_routed_experts", "disagree"});
  // Errors name the spelling the file used.
  expect_error(parse_edited([](json& j) {
                 j["num_experts"] = 8;
                 j.erase("n_routed_experts");
                 j["n_group"] = 3;
               }),
               {"key 'num_experts'", "not a multiple of n_group = 3"});
}

TEST(ConfigTest, TokenIds) {
  auto list = parse_edited([](json& j) { j["eos_token_id"] = {2, 7}; j["pad_token_id"] = 0; });
  ASSERT_TRUE(list.ok()) << list.error().message;
  EXPECT_EQ(list->eos_token_ids, (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(list->pad_token_id, 0);
  expect_error(parse_edited([](json& j) { j["eos_token_id"] = "</s>"; }), {"key 'eos_token_id'", "token ids"});
  expect_error(parse_edited([](json& j) { j["eos_token_id"] = {2, -1}; }), {"key 'eos_token_id'"});
  expect_error(parse_edited([](json& j) { j["bos_token_id"] = {1, 2}; }), {"key 'bos_token_id'", "single"});
}

TEST(ConfigTest, LoadReadsGenerationConfig) {
  std::string dir = test::make_temp_dir("config_gen");
  test::write_text_file(dir + "/config.json", test::tiny_config_json());
  test::write_text_file(dir + "/generation_config.json", R"({"eos_token_id": [5, 2], "bos_token_id": 9})");
  auto r = load_beam_config(dir);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->eos_token_ids, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(r->bos_token_id, 9);

  test::write_text_file(dir + "/generation_config.json", R"({"eos_token_id": "x"})");
  auto bad = load_beam_config(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("generation_config.json: key 'eos_token_id'"), std::string::npos)
      << bad.error().message;
  test::write_text_file(dir + "/generation_config.json", "{");
  bad = load_beam_config(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("generation_config.json: not valid JSON"), std::string::npos)
      << bad.error().message;
}

TEST(ConfigTest, LoadMissingFileNamesIt) {
  auto r = load_beam_config("/nonexistent/model");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/nonexistent/model/config.json"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace beam
