// CUDA round_to_bf16, sum_ranks_to_bf16 and localize_expert_ids against the CPU reference: all
// bit-exact (NaN payloads aside), on sizes that leave a partial block and a grid-stride remainder.
#include "kernels/api/shard_ops.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "cuda_test_util.h"

namespace beam {
namespace {

class CudaShardOps : public test::CudaTest {};

TEST_F(CudaShardOps, RoundToBf16MatchesTheCpu) {
  std::mt19937 rng(7);
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{300001}}) {
    HostTensor src = test::random_f32({n}, rng, 100.0f);
    const float specials[] = {std::bit_cast<float>(0x3f808000u), -0.0f,
                              std::numeric_limits<float>::infinity(), 1e-40f};
    std::memcpy(src.view.data, specials, std::min<size_t>(sizeof(specials), src.view.nbytes()));
    HostTensor want(DType::kBF16, {n});
    round_to_bf16(cpu.one, src.view, want.view);
    const TensorView out = device_tensor(DType::kBF16, {n});
    round_to_bf16(gpu, upload(src), out);
    HostTensor got = download(out);
    EXPECT_EQ(std::memcmp(got.view.data, want.view.data, want.view.nbytes()), 0) << n;
  }
}

// The deterministic reduce of tensor-parallel partials: the ranks' sum in rank order, rounded
// once, bit for bit the CPU's (and 1 rank is a plain rounding).
TEST_F(CudaShardOps, SumRanksToBf16MatchesTheCpu) {
  std::mt19937 rng(8);
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{8}}) {
    const int64_t m = 3 * 5120 + 7;
    HostTensor parts = test::random_f32({n, m}, rng, 10.0f);
    HostTensor want(DType::kBF16, {m});
    sum_ranks_to_bf16(cpu.one, parts.view, want.view);
    const TensorView out = device_tensor(DType::kBF16, {m});
    sum_ranks_to_bf16(gpu, upload(parts), out);
    HostTensor got = download(out);
    EXPECT_EQ(std::memcmp(got.view.data, want.view.data, want.view.nbytes()), 0) << n;
  }
}

TEST_F(CudaShardOps, LocalizeExpertIdsMatchesTheCpu) {
  std::mt19937 rng(9);
  const int64_t T = 1031, K = 8, E = 256;
  HostTensor ids(DType::kI32, {T, K});
  for (int64_t i = 0; i < T * K; ++i)
    ids.as<int32_t>()[i] = i % 97 == 0 ? kNoExpert : static_cast<int32_t>(rng() % E);
  for (int64_t first : {int64_t{0}, int64_t{96}, int64_t{224}}) {
    HostTensor want(DType::kI32, {T, K});
    localize_expert_ids(cpu.one, ids.view, first, 32, want.view);
    const TensorView out = device_tensor(DType::kI32, {T, K});
    localize_expert_ids(gpu, upload(ids), first, 32, out);
    HostTensor got = download(out);
    EXPECT_EQ(std::memcmp(got.view.data, want.view.data, want.view.nbytes()), 0) << first;
  }
}

}  // namespace
}  // namespace beam
