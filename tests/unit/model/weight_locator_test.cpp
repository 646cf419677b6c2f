// locate_weight / read_weight_part / gather_weight (SGLang's get_weights_by_name): every tensor of
// the tiny-beam checkpoint reads back as its values from the served layout (packed q/k/v/gate,
// fused gate/up, fused experts), whole and gathered from two ranks' slices, truncated to the first
// rows; unknown names, layers and experts are errors naming them.
#include "model/weight_locator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/checkpoint.h"
#include "model/tensor_convert.h"
#include "weight_compare.h"

namespace beam {
namespace {

using test::kTinyBeamDir;

// A checkpoint tensor's first `rows` rows as f32.
std::vector<float> checkpoint_rows(const RawTensor& t, int64_t rows) {
  const int64_t cols = t.shape.rank == 1 ? 1 : t.shape[1];
  std::vector<float> out(static_cast<size_t>(rows * cols));
  convert_elements(t.data, t.dtype, rows * cols, out.data(), DType::kF32);
  return out;
}

// Tensor `name` read from the ranks' slices (rank 0's alone with size 1), first `rows` rows.
WeightValues read_from_ranks(const std::vector<std::shared_ptr<const BeamWeights>>& ranks,
                             const std::string& name, int64_t rows) {
  ThreadPool pool(1);
  const KernelContext ctx{Device::kCpu, &pool};
  std::vector<WeightPart> parts;
  for (size_t r = 0; r < ranks.size(); ++r) {
    auto part = read_weight_part(ctx, *ranks[r],
                                 {static_cast<int>(r), static_cast<int>(ranks.size())}, name, rows);
    EXPECT_TRUE(part.ok()) << name << ": " << part.error().message;
    if (!part.ok()) return {};
    parts.push_back(std::move(*part));
  }
  return gather_weight(parts, rows);
}

TEST(WeightLocator, EveryCheckpointTensorReadsBackWholeAndFromTwoRanks) {
  auto checkpoint = Checkpoint::open(kTinyBeamDir);
  auto whole = load_beam_weights(kTinyBeamDir);
  ASSERT_TRUE(checkpoint.ok() && whole.ok());
  auto rank0 = shard_beam_weights(*whole, {0, 2}), rank1 = shard_beam_weights(*whole, {1, 2});
  ASSERT_TRUE(rank0.ok() && rank1.ok());
  const std::vector<std::shared_ptr<const BeamWeights>> one = {*whole}, two = {*rank0, *rank1};
  int checked = 0;
  for (const std::string& name : checkpoint->names()) {
    SCOPED_TRACE(name);
    const RawTensor* t = checkpoint->find(name);
    for (int64_t rows : {int64_t{-1}, int64_t{3}}) {
      const int64_t n = rows < 0 ? t->shape[0] : std::min(rows, t->shape[0]);
      const std::vector<float> want = checkpoint_rows(*t, n);
      for (const auto& ranks : {one, two}) {
        const WeightValues got = read_from_ranks(ranks, name, rows);
        EXPECT_EQ(got.shape[0], n);
        EXPECT_EQ(got.values, want) << ranks.size() << " rank(s), rows " << rows;
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(checkpoint->num_tensors()));
}

TEST(WeightLocator, UnknownTensorsAreErrorsNamingThem) {
  auto w = load_beam_weights(kTinyBeamDir);
  ASSERT_TRUE(w.ok());
  for (const auto& [name, message] : std::vector<std::pair<std::string, std::string>>{
           {"model.layers.6.input_layernorm.weight", "layer 6 of a model of 6"},
           {"model.layers.1.mlp.experts.16.up_proj.weight", "expert 16 of a model of 16"},
           {"model.layers.1.mlp.experts.2.w1.weight", "no such expert tensor"},
           {"model.layers.0.mlp.gate.weight", "layer 0 has no such tensor"},
           {"model.layers.x.input_layernorm.weight", "no such tensor"},
           {"lm_head", "'lm_head': no such tensor"}}) {
    auto at = locate_weight(**w, {0, 1}, name);
    ASSERT_FALSE(at.ok()) << name;
    EXPECT_NE(at.error().message.find(message), std::string::npos) << at.error().message;
  }
}

}  // namespace
}  // namespace beam
