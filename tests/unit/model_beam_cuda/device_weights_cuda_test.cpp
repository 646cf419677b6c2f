// upload_weights and copy_weights_into on the GPU with ExpertCopy::kDeferred (model/weights.h):
// routed experts streamed from the checkpoint's mapping through pinned staging land bit for bit
// where a host load's upload puts them (packed for the expert kernels), for the whole model and
// for a rank of two, in plain and releasable (sleep mode) arenas; an update in place from a
// deferred load restores experts that were overwritten; every tensor reads back by its checkpoint
// name (SGLang's get_weights_by_name), experts gathered from the packed layout; a checkpoint cut
// short before an update copies nothing.
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cuda_model_fixture.h"
#include "model/checkpoint.h"
#include "model/tensor_convert.h"
#include "model/tensor_parallel.h"
#include "model/weight_locator.h"

namespace beam::testing {
namespace {

const std::string kTinyBeam = std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam";

class DeviceWeightsCuda : public CudaModelTest {
 protected:
  // The bytes of a device view (empty for a view a layer kind has not).
  std::vector<uint8_t> bytes_of(const TensorView& v) {
    if (v.data == nullptr) return {};
    std::vector<uint8_t> out(v.nbytes());
    const int64_t n = static_cast<int64_t>(out.size());
    copy_tensor(gpu_, TensorView{out.data(), DType::kU8, {n}, Device::kCpu},
                TensorView{v.data, DType::kU8, {n}, Device::kCuda});
    return out;
  }

  // Every view of the device weights a and b holds the same bytes.
  void expect_same(const BeamWeights& a, const BeamWeights& b) {
    ASSERT_EQ(a.layers.size(), b.layers.size());
    EXPECT_EQ(bytes_of(a.embed), bytes_of(b.embed));
    EXPECT_EQ(bytes_of(a.lm_head), bytes_of(b.lm_head));
    EXPECT_EQ(bytes_of(a.final_norm), bytes_of(b.final_norm));
    for (size_t l = 0; l < a.layers.size(); ++l) {
      SCOPED_TRACE("layer " + std::to_string(l));
      const LayerWeights &x = a.layers[l], &y = b.layers[l];
      for (auto [p, q] : {std::pair{&x.attn.qkvg, &y.attn.qkvg}, {&x.attn.o_proj, &y.attn.o_proj},
                          {&x.input_norm, &y.input_norm}, {&x.dense.gate_up, &y.dense.gate_up},
                          {&x.dense.down, &y.dense.down}, {&x.moe.router, &y.moe.router},
                          {&x.moe.experts_gate_up, &y.moe.experts_gate_up},
                          {&x.moe.experts_down, &y.moe.experts_down}})
        EXPECT_TRUE(bytes_of(*p) == bytes_of(*q)) << p->shape.str();
    }
  }
};

TEST_F(DeviceWeightsCuda, DeferredExpertsUploadAsTheHostLoads) {
  for (TensorParallel tp : {TensorParallel{0, 1}, TensorParallel{1, 2}}) {
    for (bool releasable : {false, true}) {
      SCOPED_TRACE("rank " + std::to_string(tp.rank) + " of " + std::to_string(tp.size) +
                   (releasable ? ", releasable" : ""));
      auto host = load_rank_slice(load_rank_weights(kTinyBeam, "", ExpertCopy::kHost), tp);
      auto deferred = load_rank_slice(load_rank_weights(kTinyBeam, "", ExpertCopy::kDeferred), tp);
      ASSERT_TRUE(host.ok() && deferred.ok());
      ASSERT_FALSE((*deferred)->deferred_experts.empty());
      auto a = upload_weights(gpu_, *host, releasable);
      auto b = upload_weights(gpu_, *deferred, releasable);
      ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.error() : a.error()).message;
      EXPECT_EQ(a->device_bytes, b->device_bytes);
      EXPECT_TRUE(b->weights->deferred_experts.empty());
      expect_same(*a->weights, *b->weights);
    }
  }
}

TEST_F(DeviceWeightsCuda, UpdateInPlaceFromADeferredLoad) {
  auto host = load_beam_weights(kTinyBeam);
  auto deferred = load_beam_weights(kTinyBeam, nullptr, {}, ExpertCopy::kDeferred);
  ASSERT_TRUE(host.ok() && deferred.ok());
  auto expected = upload_weights(gpu_, *host);
  auto served = upload_weights(gpu_, *host);
  ASSERT_TRUE(expected.ok() && served.ok());
  for (const LayerWeights& l : served->weights->layers) {
    if (l.moe.experts_gate_up.data == nullptr) continue;
    zero_tensor(gpu_, l.moe.experts_gate_up);
    zero_tensor(gpu_, l.moe.experts_down);
  }
  const Status st = copy_weights_into(gpu_, *served->weights, **deferred);
  ASSERT_TRUE(st.ok()) << st.error().message;
  expect_same(*expected->weights, *served->weights);
}

// An update whose checkpoint was cut short after its load fails before copying anything: the
// error names the file, *partial stays false and the served weights are unchanged.
TEST_F(DeviceWeightsCuda, AnUpdateFromAFileCutShortCopiesNothing) {
  const std::string dir = ::testing::TempDir() + "/device_weights_cut_short";
  std::filesystem::remove_all(dir);
  std::filesystem::copy(kTinyBeam, dir, std::filesystem::copy_options::recursive);
  auto host = load_beam_weights(kTinyBeam);
  auto deferred = load_beam_weights(dir, nullptr, {}, ExpertCopy::kDeferred);
  ASSERT_TRUE(host.ok() && deferred.ok());
  auto expected = upload_weights(gpu_, *host);
  auto served = upload_weights(gpu_, *host);
  ASSERT_TRUE(expected.ok() && served.ok());
  const std::string file = dir + "/model-00003-of-00003.safetensors";
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  bool partial = false;
  const Status st = copy_weights_into(gpu_, *served->weights, **deferred, &partial);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("cut short"), std::string::npos) << st.error().message;
  EXPECT_FALSE(partial);
  expect_same(*expected->weights, *served->weights);
}

// Every checkpoint tensor of beam-nano (widths that CUDA packs the experts of) reads back from the
// GPU as its first rows (read_weight_part: routed experts gathered from the packed layout).
TEST_F(DeviceWeightsCuda, EveryTensorReadsBackFromTheDevice) {
  const std::string dir = std::string(BEAMSERVE_SOURCE_DIR) + "/models/beam-nano";
  auto checkpoint = Checkpoint::open(dir);
  auto host = load_beam_weights(dir, nullptr, {}, ExpertCopy::kDeferred);
  ASSERT_TRUE(checkpoint.ok() && host.ok());
  auto served = upload_weights(gpu_, *host);
  ASSERT_TRUE(served.ok()) << served.error().message;
  for (const std::string& name : checkpoint->names()) {
    const RawTensor* t = checkpoint->find(name);
    const int64_t rows = std::min<int64_t>(3, t->shape[0]);
    const int64_t cols = t->shape.rank == 1 ? 1 : t->shape[1];
    std::vector<float> want(static_cast<size_t>(rows * cols));
    convert_elements(t->data, t->dtype, rows * cols, want.data(), DType::kF32);
    auto got = read_weight_part(gpu_, *served->weights, {0, 1}, name, 3);
    ASSERT_TRUE(got.ok()) << name << ": " << got.error().message;
    EXPECT_EQ(got->values, want) << name;
  }
}

}  // namespace
}  // namespace beam::testing
