// Synthetic layouts (--load-format dummy): rank slices shaped as shard_beam_weights shapes a real
// checkpoint's, no data until upload_weights fills them, the same values make_synthetic_weights
// gives for one rank, replicated tensors equal across ranks, and layouts refused where they cannot
// serve (another rank, an in-place update).
#include <gtest/gtest.h>

#include <string>

#include "core/thread_pool.h"
#include "model/device_weights.h"
#include "model/synthetic_weights.h"
#include "model/tensor_parallel.h"
#include "test_checkpoint_writer.h"
#include "weight_compare.h"

namespace beam {
namespace {

using test::all_views;
using test::kTinyBeamDir;
using test::same_bytes;

std::shared_ptr<const BeamWeights> filled(const std::shared_ptr<const BeamWeights>& layout) {
  ThreadPool pool(2);
  auto w = upload_weights(KernelContext{Device::kCpu, &pool}, layout);
  EXPECT_TRUE(w.ok()) << w.error().message;
  return w.ok() ? w->weights : nullptr;
}

TEST(SyntheticLayout, RankSlicesHaveTheCheckpointSlicesShapesAndNoData) {
  auto host = load_beam_weights(kTinyBeamDir);
  ASSERT_TRUE(host.ok());
  const BeamConfig& c = (*host)->config;
  for (TensorParallel tp : {TensorParallel{0, 1}, TensorParallel{0, 2}, TensorParallel{1, 2}}) {
    SCOPED_TRACE("rank " + std::to_string(tp.rank) + " of " + std::to_string(tp.size));
    auto expected = shard_beam_weights(*host, tp);
    auto layout = synthetic_layout(c, SyntheticWeightOptions{}, tp);
    ASSERT_TRUE(expected.ok() && layout.ok());
    EXPECT_EQ((*layout)->first_expert, (*expected)->first_expert);
    const auto want = all_views(**expected), got = all_views(**layout);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i]->data, nullptr) << i;
      EXPECT_EQ(got[i]->dtype, want[i]->dtype) << i;
      if (want[i]->data != nullptr) {
        EXPECT_EQ(got[i]->shape, want[i]->shape) << i;
      }
    }
    // load_rank_slice passes the rank's own layout through, refuses another rank's.
    auto slice = load_rank_slice(synthetic_rank_weights(c, {}), tp);
    ASSERT_TRUE(slice.ok()) << slice.error().message;
    EXPECT_TRUE((*slice)->synthetic.has_value());
  }
  auto wrong = shard_beam_weights(*synthetic_layout(c, {}, {0, 2}), TensorParallel{1, 2});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("synthetic weights of rank 0 of 2 given to rank 1 of 2"),
            std::string::npos)
      << wrong.error().message;
  EXPECT_FALSE(synthetic_layout(c, {}, {0, 3}).ok());  // 3 does not divide the KV heads
}

TEST(SyntheticLayout, FilledAsMakeSyntheticWeightsAndReplicatedAcrossRanks) {
  auto config = load_beam_config(kTinyBeamDir);
  ASSERT_TRUE(config.ok());
  const SyntheticWeightOptions options{.seed = 9};
  ThreadPool pool(2);
  auto direct = make_synthetic_weights(KernelContext{Device::kCpu, &pool}, *config, options);
  ASSERT_TRUE(direct.ok());
  auto whole = filled(*synthetic_layout(*config, options));
  ASSERT_NE(whole, nullptr);
  const auto a = all_views(**direct), b = all_views(*whole);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bytes(*a[i], *b[i])) << "view " << i;
  auto rank0 = filled(*synthetic_layout(*config, options, {0, 2}));
  auto rank1 = filled(*synthetic_layout(*config, options, {1, 2}));
  ASSERT_TRUE(rank0 && rank1);
  EXPECT_TRUE(same_bytes(rank0->embed, rank1->embed));
  EXPECT_TRUE(same_bytes(rank0->final_norm, rank1->final_norm));
  for (size_t l = 0; l < rank0->layers.size(); ++l) {
    EXPECT_TRUE(same_bytes(rank0->layers[l].input_norm, rank1->layers[l].input_norm));
    EXPECT_TRUE(same_bytes(rank0->layers[l].moe.router, rank1->layers[l].moe.router));
  }
}

// Tied embeddings: a rank's LM head is its vocabulary rows of the (replicated) embedding.
TEST(SyntheticLayout, TiedHeadIsTheRanksEmbeddingRows) {
  auto config = parse_beam_config(test::tiny_config_json(/*tie_word_embeddings=*/true), "config.json");
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto rank1 = filled(*synthetic_layout(*config, {}, {1, 2}));
  ASSERT_NE(rank1, nullptr);
  const int64_t half = config->vocab_size / 2;
  EXPECT_TRUE(same_bytes(rank1->lm_head, rank1->embed.rows(half, half)));
  auto whole = filled(*synthetic_layout(*config, {}));
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->lm_head.data, whole->embed.data);
}

TEST(SyntheticLayout, CannotReplaceServedWeights) {
  auto config = load_beam_config(kTinyBeamDir);
  ASSERT_TRUE(config.ok());
  auto served = filled(*synthetic_layout(*config, {}));
  ASSERT_NE(served, nullptr);
  ThreadPool pool(1);
  const Status st = copy_weights_into(KernelContext{Device::kCpu, &pool}, *served,
                                      **synthetic_layout(*config, {}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("--load-format dummy"), std::string::npos);
}

}  // namespace
}  // namespace beam
