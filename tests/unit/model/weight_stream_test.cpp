// stream_pieces on the CPU: every piece lands converted at its destination, pieces longer than a
// staging chunk (16 MiB) included, and nothing outside the destinations is written. (CUDA:
// model_beam_cuda's device weights test streams whole models.)
#include "model/weight_stream.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/bf16.h"
#include "core/thread_pool.h"

namespace beam {
namespace {

TEST(WeightStream, ConvertsEveryPieceIntoItsDestination) {
  const int64_t big = (int64_t{9} << 20) + 3;  // bf16: a little over 18 MiB, two chunks
  std::vector<float> f32(1000);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = 0.001f * static_cast<float>(i) - 0.3f;
  std::vector<uint16_t> bf16_src(big);
  for (int64_t i = 0; i < big; ++i) bf16_src[i] = static_cast<uint16_t>(i * 2654435761u >> 16);
  std::vector<uint16_t> out(big + f32.size() + 8, 0xABCD);
  std::vector<float> widened(f32.size());
  const std::vector<HostPiece> pieces = {
      {bf16_src.data(), DType::kBF16, big, out.data() + 4, DType::kBF16},
      {f32.data(), DType::kF32, static_cast<int64_t>(f32.size()), out.data() + 4 + big, DType::kBF16},
      {f32.data(), DType::kF32, static_cast<int64_t>(f32.size()), widened.data(), DType::kF32},
  };
  ThreadPool pool(2);
  ASSERT_TRUE(stream_pieces(KernelContext{Device::kCpu, &pool}, pieces).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], 0xABCD) << "before the first piece";
  for (int64_t i = 0; i < big; ++i)
    if (out[4 + i] != bf16_src[i]) FAIL() << "element " << i << " of the bf16 piece";
  for (size_t i = 0; i < f32.size(); ++i)
    EXPECT_EQ(out[4 + big + i], to_bf16(f32[i]).bits) << "element " << i;
  for (size_t i = 4 + big + f32.size(); i < out.size(); ++i) EXPECT_EQ(out[i], 0xABCD);
  EXPECT_EQ(widened, f32);
}

TEST(WeightStream, NoPiecesIsNothingToDo) {
  ThreadPool pool(1);
  EXPECT_TRUE(stream_pieces(KernelContext{Device::kCpu, &pool}, {}).ok());
}

}  // namespace
}  // namespace beam
