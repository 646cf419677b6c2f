// ExpertCopy::kDeferred: routed experts left in the checkpoint's files as pieces (no host copy),
// which upload_weights materializes (CPU) or streams (CUDA: model_beam_cuda's device weights
// test) to exactly the bytes of a host load, whole, sliced by rank, converted from other dtypes,
// and beside a merged LoRA adapter (whose layers stay on the host); a file cut short meanwhile is
// an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/thread_pool.h"
#include "model/device_weights.h"
#include "model/lora_adapter.h"
#include "model/tensor_names.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"
#include "test_checkpoint_writer.h"
#include "weight_compare.h"

namespace beam {
namespace {

using test::kTinyBeamDir;
using test::same_bytes;

// `host` as the CPU serves it (deferred matrices converted into host buffers).
std::shared_ptr<const BeamWeights> on_cpu(std::shared_ptr<const BeamWeights> host) {
  ThreadPool pool(2);
  auto served = upload_weights(KernelContext{Device::kCpu, &pool}, std::move(host));
  EXPECT_TRUE(served.ok()) << served.error().message;
  return served.ok() ? served->weights : nullptr;
}

// Every view of a and b holds the same bytes.
void expect_same_weights(const BeamWeights& a, const BeamWeights& b) {
  ASSERT_EQ(a.layers.size(), b.layers.size());
  EXPECT_EQ(a.first_expert, b.first_expert);
  EXPECT_TRUE(same_bytes(a.embed, b.embed));
  EXPECT_TRUE(same_bytes(a.lm_head, b.lm_head));
  EXPECT_TRUE(same_bytes(a.final_norm, b.final_norm));
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const LayerWeights &x = a.layers[l], &y = b.layers[l];
    SCOPED_TRACE("layer " + std::to_string(l));
    EXPECT_TRUE(same_bytes(x.attn.qkvg, y.attn.qkvg));
    EXPECT_TRUE(same_bytes(x.attn.o_proj, y.attn.o_proj));
    EXPECT_TRUE(same_bytes(x.dense.gate_up, y.dense.gate_up));
    EXPECT_TRUE(same_bytes(x.dense.down, y.dense.down));
    EXPECT_TRUE(same_bytes(x.moe.router, y.moe.router));
    EXPECT_TRUE(same_bytes(x.moe.experts_gate_up, y.moe.experts_gate_up));
    EXPECT_TRUE(same_bytes(x.moe.experts_down, y.moe.experts_down));
  }
}

// The deferred load holds no expert bytes, only their pieces (three per expert), and serves the
// bytes of a host load.
TEST(DeferredExperts, MaterializeToTheHostLoadsBytes) {
  auto host = load_beam_weights(kTinyBeamDir);
  auto deferred = load_beam_weights(kTinyBeamDir, nullptr, {}, ExpertCopy::kDeferred);
  ASSERT_TRUE(host.ok() && deferred.ok());
  const BeamConfig& c = (*host)->config;
  const int64_t moe_layers = c.num_layers_of(MlpKind::kSparse);
  ASSERT_EQ((*deferred)->deferred_experts.size(), static_cast<size_t>(2 * moe_layers));
  int64_t pieces = 0;
  for (const DeferredExperts& d : (*deferred)->deferred_experts) {
    const TensorView& m = expert_matrix((*deferred)->layers[d.layer], d.matrix);
    EXPECT_EQ(m.data, nullptr);
    EXPECT_EQ(m.dim(0), c.num_experts);
    pieces += static_cast<int64_t>(d.pieces.size());
  }
  EXPECT_EQ(pieces, 3 * c.num_experts * moe_layers);
  EXPECT_TRUE((*host)->deferred_experts.empty());
  auto served = on_cpu(*deferred);
  ASSERT_NE(served, nullptr);
  EXPECT_TRUE(served->deferred_experts.empty());
  expect_same_weights(*served, **host);
}

// A rank's deferred load keeps its experts' pieces only; shard_beam_weights of a whole deferred
// load keeps the rank's; both serve the host slices' bytes.
TEST(DeferredExperts, RankSlicesServeTheirExperts) {
  auto whole = load_beam_weights(kTinyBeamDir);
  auto deferred_whole = load_beam_weights(kTinyBeamDir, nullptr, {}, ExpertCopy::kDeferred);
  ASSERT_TRUE(whole.ok() && deferred_whole.ok());
  for (int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank) + " of 2");
    const TensorParallel tp{rank, 2};
    auto expected = shard_beam_weights(*whole, tp);
    auto from_whole = shard_beam_weights(*deferred_whole, tp);
    auto own = load_rank_slice(load_rank_weights(kTinyBeamDir, "", ExpertCopy::kDeferred), tp);
    ASSERT_TRUE(expected.ok() && from_whole.ok() && own.ok());
    for (const auto& slice : {*from_whole, *own}) {
      for (const DeferredExperts& d : slice->deferred_experts) {
        // Each of the rank's 8 experts: gate and up pieces, or one down piece.
        EXPECT_EQ(d.pieces.size(), d.matrix == ExpertMatrix::kGateUp ? 16u : 8u);
        for (const ExpertPiece& p : d.pieces) {
          EXPECT_GE(p.expert, 8 * rank);
          EXPECT_LT(p.expert, 8 * rank + 8);
        }
      }
      auto served = on_cpu(slice);
      ASSERT_NE(served, nullptr);
      expect_same_weights(*served, **expected);
    }
  }
}

// Experts stored as f32 and f16 convert to bf16 on the way, as a host load converts them.
TEST(DeferredExperts, ConvertOtherDtypesAsTheHostLoadDoes) {
  auto config = parse_beam_config(test::tiny_config_json(), "config.json");
  ASSERT_TRUE(config.ok()) << config.error().message;
  std::vector<test::TestTensor> tensors = test::tiny_model_tensors(*config);
  for (test::TestTensor& t : tensors) {
    if (t.name == expert_tensor_name(2, 3, "up_proj.weight"))
      t = test::random_tensor(t.name, "F32", t.shape, 5);
    if (t.name == expert_tensor_name(3, 0, "down_proj.weight"))
      t = test::random_tensor(t.name, "F16", t.shape, 6);
  }
  const std::string dir = test::write_tiny_model("deferred_convert", tensors);
  auto host = load_beam_weights(dir);
  auto deferred = load_beam_weights(dir, nullptr, {}, ExpertCopy::kDeferred);
  ASSERT_TRUE(host.ok() && deferred.ok()) << (host.ok() ? deferred.error() : host.error()).message;
  int converted = 0;
  for (const DeferredExperts& d : (*deferred)->deferred_experts)
    for (const ExpertPiece& p : d.pieces) converted += p.src_dtype != DType::kBF16;
  EXPECT_EQ(converted, 2);
  auto served = on_cpu(*deferred);
  ASSERT_NE(served, nullptr);
  expect_same_weights(*served, **host);
}

// A merged adapter that changes a layer's experts keeps that layer fused on the host (the merge
// needs the copy); the other layers stay deferred; the served bytes equal the host load's.
TEST(DeferredExperts, LayersALoraMergeChangesStayOnTheHost) {
  auto config = parse_beam_config(test::tiny_config_json(), "config.json");
  ASSERT_TRUE(config.ok());
  const std::string model =
      test::write_tiny_model("deferred_lora_model", test::tiny_model_tensors(*config));
  const BeamConfig& c = *config;
  const int64_t layer = c.num_layers - 1;  // a routed-expert layer in the tiny config
  ASSERT_EQ(c.mlp_layer_types[layer], MlpKind::kSparse);
  const std::string adapter_dir = test::write_lora_adapter(
      "deferred_lora",
      {{expert_tensor_name(layer, 2, "down_proj.weight"), c.hidden_size, c.moe_intermediate_size}},
      4, 11);
  auto adapter = LoraAdapter::open(adapter_dir);
  ASSERT_TRUE(adapter.ok()) << adapter.error().message;
  auto host = load_beam_weights(model, adapter->get());
  auto deferred = load_beam_weights(model, adapter->get(), {}, ExpertCopy::kDeferred);
  ASSERT_TRUE(host.ok() && deferred.ok()) << (host.ok() ? deferred.error() : host.error()).message;
  EXPECT_NE((*deferred)->layers[layer].moe.experts_down.data, nullptr);
  for (const DeferredExperts& d : (*deferred)->deferred_experts) EXPECT_NE(d.layer, layer);
  EXPECT_EQ((*deferred)->deferred_experts.size(),
            static_cast<size_t>(2 * (c.num_layers_of(MlpKind::kSparse) - 1)));
  auto served = on_cpu(*deferred);
  ASSERT_NE(served, nullptr);
  expect_same_weights(*served, **host);
}

// The experts are read with pread when uploaded: a checkpoint cut short after the load (a trainer
// rewriting its files) is an error naming the file, not a SIGBUS through the mapping.
TEST(DeferredExperts, AFileCutShortAfterTheLoadIsAnErrorNamingIt) {
  auto config = parse_beam_config(test::tiny_config_json(), "config.json");
  ASSERT_TRUE(config.ok());
  const std::string dir =
      test::write_tiny_model("deferred_cut_short", test::tiny_model_tensors(*config));
  const std::string file = dir + "/model.safetensors";
  auto deferred = load_beam_weights(dir, nullptr, {}, ExpertCopy::kDeferred);
  ASSERT_TRUE(deferred.ok()) << deferred.error().message;
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  ThreadPool pool(2);
  auto served = upload_weights(KernelContext{Device::kCpu, &pool}, *deferred);
  ASSERT_FALSE(served.ok());
  EXPECT_NE(served.error().message.find(file), std::string::npos) << served.error().message;
  EXPECT_NE(served.error().message.find("cut short"), std::string::npos)
      << served.error().message;
}

}  // namespace
}  // namespace beam
