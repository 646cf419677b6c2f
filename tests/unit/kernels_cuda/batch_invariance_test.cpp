// A batch-invariant context (BatchInvariance::kAlways, --enable-deterministic-inference) on the
// GPU: a token's row of each op has the same bits whatever other rows share the call — linear()
// and linear_split() (one cuBLASLt algorithm per shape for every M: no skinny kernel at M = 1, no
// packed GEMM up to 256 rows), the fused router in 256-token slices, the grouped experts (no
// small-batch path up to 2,048 routed rows) and the one-launch LoRA kernel (no tensor cores past
// 256 tokens) — at row counts around each default path's thresholds. The attention's part (prompt
// rows on the prefill kernel, generated rows on the decode kernel, whatever the chunking) is in
// attention_prefill_test.cpp.
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/api/gemm.h"
#include "kernels/api/lora.h"
#include "kernels/api/moe.h"

namespace beam {
namespace {

class BatchInvariantCuda : public test::CudaTest {
 protected:
  void SetUp() override {
    test::CudaTest::SetUp();
    invariant = gpu;
    invariant.batch_invariance = BatchInvariance::kAlways;
  }

  // Rows [first, first + count) of host tensor t as a device tensor of their own.
  TensorView upload_rows(const HostTensor& t, int64_t first, int64_t count) {
    return upload(t.view.rows(first, count));
  }

  KernelContext invariant;
};

// Row counts past each default path's edge: the skinny kernel (1), its widest use (16), the packed
// split GEMM (256, 257), the router's fused kernel (256, 257) and cuBLASLt heuristics per M.
constexpr int64_t kMostRows = 600;
const std::vector<int64_t> kRowCounts = {1, 2, 16, 17, 255, 256, 257, 511};

struct LinearShape {
  int64_t N, K;
  DType w, out;
};

// linear()'s first M rows equal the first M rows of the 600-row call: Beam's q projection and
// LM-head-like bf16 -> f32 shape, the fp32 router GEMM, an odd small shape.
TEST_F(BatchInvariantCuda, LinearRowsDoNotDependOnM) {
  for (const LinearShape& c : {LinearShape{6144, 5120, DType::kBF16, DType::kBF16},
                               LinearShape{4096, 5120, DType::kBF16, DType::kF32},
                               LinearShape{256, 5120, DType::kF32, DType::kF32},
                               LinearShape{151, 96, DType::kBF16, DType::kBF16}}) {
    SCOPED_TRACE(::testing::Message() << "N " << c.N << " K " << c.K << " w "
                                      << dtype_name(c.w) << " out " << dtype_name(c.out));
    std::mt19937 rng(static_cast<uint32_t>(c.N + c.K));
    const HostTensor x = test::random_bf16({kMostRows, c.K}, rng);
    HostTensor w(c.w, {c.N, c.K});
    test::fill_uniform(w.view, static_cast<uint64_t>(c.N), 1.0f / std::sqrt(float(c.K)));
    const TensorView dx = upload(x), dw = upload(w);
    const TensorView all = device_tensor(c.out, {kMostRows, c.N});
    linear(invariant, dx, dw, all);
    const HostTensor want = download(all);
    for (int64_t M : kRowCounts) {
      const TensorView part = device_tensor(c.out, {M, c.N});
      linear(invariant, dx.rows(0, M), dw, part);
      EXPECT_TRUE(test::bits_equal(download(part).view, want.view.rows(0, M))) << "M " << M;
    }
  }
}

// linear_split over Beam's q / k / v / gate rows: at every M each output holds the bits of
// linear() over its rows of w in the 600-row call.
TEST_F(BatchInvariantCuda, LinearSplitIsLinearPerRangeAtEveryM) {
  const int64_t K = 5120;
  const std::vector<int64_t> widths = {6144, 1024, 1024, 6144};
  const int64_t N = std::accumulate(widths.begin(), widths.end(), int64_t{0});
  std::mt19937 rng(91);
  const HostTensor x = test::random_bf16({kMostRows, K}, rng);
  HostTensor w(DType::kBF16, {N, K});
  test::fill_uniform(w.view, 92, 1.0f / std::sqrt(float(K)));
  const TensorView dx = upload(x), dw = upload(w);
  std::vector<HostTensor> want;
  int64_t row0 = 0;
  for (int64_t n : widths) {
    const TensorView all = device_tensor(DType::kBF16, {kMostRows, n});
    linear(invariant, dx, dw.rows(row0, n), all);
    want.push_back(download(all));
    row0 += n;
  }
  for (int64_t M : kRowCounts) {
    std::vector<TensorView> outs;
    for (int64_t n : widths) outs.push_back(device_tensor(DType::kBF16, {M, n}));
    linear_split(invariant, dx.rows(0, M), dw, outs);
    for (size_t i = 0; i < outs.size(); ++i)
      EXPECT_TRUE(test::bits_equal(download(outs[i]).view, want[i].view.rows(0, M)))
          << "M " << M << " output " << i;
  }
}

// The router (fp32 GEMM and grouped top-k) at Beam's widths: every token's experts and weights
// in a 600-token call (three fused slices) are those of the token alone and of smaller batches
// (one slice, or the fused kernel at 256 and fewer tokens, as by default), and padding tokens
// (active) count across the slices.
TEST_F(BatchInvariantCuda, RouterTokensDoNotDependOnTheBatch) {
  const RouterParams p{8, 4, 8, true, 2.5f};
  const int64_t H = 5120, E = 256;
  std::mt19937 rng(93);
  const HostTensor x = test::random_bf16({kMostRows, H}, rng);
  const TensorView rw = upload(test::random_f32({E, H}, rng, 0.02f));
  const TensorView bias = upload(test::random_f32({E}, rng, 0.1f));
  auto run = [&](int64_t first, int64_t T) {
    const TensorView ids = device_tensor(DType::kI32, {T, p.top_k});
    const TensorView weights = device_tensor(DType::kF32, {T, p.top_k});
    moe_router_route(invariant, upload_rows(x, first, T), rw, bias, p, ids, weights);
    return std::make_pair(download(ids), download(weights));
  };
  const auto all = run(0, kMostRows);
  for (const auto& [first, T] : {std::pair<int64_t, int64_t>{0, 1}, {255, 1}, {256, 1}, {599, 1},
                                 {0, 256}, {100, 257}, {300, 300}}) {
    SCOPED_TRACE(::testing::Message() << "tokens " << first << "+" << T);
    const auto part = run(first, T);
    EXPECT_TRUE(test::bits_equal(part.first.view, all.first.view.rows(first, T)));
    EXPECT_TRUE(test::bits_equal(part.second.view, all.second.view.rows(first, T)));
  }
  // Padding tokens counted over the slices (decode graphs pad to buckets of up to 512 tokens):
  // tokens from 450 on get no expert, the others their routes.
  HostTensor active(DType::kI32, {1});
  active.as<int32_t>()[0] = 450;
  const TensorView ids = device_tensor(DType::kI32, {kMostRows, p.top_k});
  const TensorView weights = device_tensor(DType::kF32, {kMostRows, p.top_k});
  moe_router_route(invariant, upload(x), rw, bias, p, ids, weights, upload(active));
  const HostTensor padded_ids = download(ids), padded_weights = download(weights);
  EXPECT_TRUE(test::bits_equal(padded_ids.view.rows(0, 450), all.first.view.rows(0, 450)));
  EXPECT_TRUE(test::bits_equal(padded_weights.view.rows(0, 450), all.second.view.rows(0, 450)));
  for (int64_t i = 450 * p.top_k; i < kMostRows * p.top_k; ++i) {
    EXPECT_EQ(padded_ids.as<int32_t>()[i], kNoExpert) << i;
    EXPECT_EQ(padded_weights.as<float>()[i], 0.0f) << i;
  }
}

// The routed experts (16 of width 128 over hidden 256, top-4): a token's output in a 600-token
// call (2,400 routed rows, the grouped path by default too) is its output alone and in batches
// the default would give the small-batch path (1 and 100 tokens).
TEST_F(BatchInvariantCuda, ExpertTokensDoNotDependOnTheBatch) {
  const int64_t E = 16, H = 256, I = 128, top_k = 4;
  std::mt19937 rng(94);
  const HostTensor x = test::random_bf16({kMostRows, H}, rng);
  const TensorView gate_up = upload_experts(test::random_bf16({E, 2 * I, H}, rng, 0.06f),
                                            ExpertMatrix::kGateUp);
  const TensorView down =
      upload_experts(test::random_bf16({E, H, I}, rng, 0.09f), ExpertMatrix::kDown);
  HostTensor ids(DType::kI32, {kMostRows, top_k});
  std::vector<int32_t> experts(static_cast<size_t>(E));
  std::iota(experts.begin(), experts.end(), 0);
  for (int64_t t = 0; t < kMostRows; ++t) {
    std::shuffle(experts.begin(), experts.end(), rng);
    std::copy_n(experts.begin(), top_k, ids.as<int32_t>() + t * top_k);
  }
  HostTensor weights = test::random_f32({kMostRows, top_k}, rng, 0.3f);
  auto run = [&](int64_t first, int64_t T) {
    const TensorView out = device_tensor(DType::kBF16, {T, H});
    moe_experts(invariant, upload_rows(x, first, T), gate_up, down, upload_rows(ids, first, T),
                upload_rows(weights, first, T), out);
    return download(out);
  };
  const HostTensor all = run(0, kMostRows);
  for (const auto& [first, T] :
       {std::pair<int64_t, int64_t>{0, 1}, {333, 1}, {599, 1}, {7, 100}, {200, 400}}) {
    EXPECT_TRUE(test::bits_equal(run(first, T).view, all.view.rows(first, T)))
        << "tokens " << first << "+" << T;
  }
}

// LoRA deltas (rank 16, three slots and no-adapter tokens): a token's bits in a 300-token call
// (tensor cores by default) are those of the token alone (the one-launch kernel by default).
TEST_F(BatchInvariantCuda, LoraTokensDoNotDependOnTheBatch) {
  const int64_t T = 300, in = 1024, n = 1000, r = 16, S = 3;
  std::mt19937 rng(95);
  const HostTensor x = test::random_bf16({T, in}, rng);
  const HostTensor out0 = test::random_bf16({T, n}, rng);
  HostTensor slots(DType::kI32, {T});
  std::uniform_int_distribution<int32_t> slot(kNoLoraSlot, static_cast<int32_t>(S - 1));
  for (int64_t t = 0; t < T; ++t) slots.as<int32_t>()[t] = slot(rng);
  HostTensor scale(DType::kF32, {S});
  for (int64_t s = 0; s < S; ++s) scale.as<float>()[s] = 0.5f + 0.25f * static_cast<float>(s);
  const LoraStack stack{upload(test::random_bf16({S, r, in}, rng, 0.05f)),
                        upload(test::random_bf16({S, n, r}, rng, 0.05f)), upload(scale)};
  const TensorView all = upload(out0);
  lora_add(invariant, upload(x), stack, upload(slots), all, 0);
  const HostTensor want = download(all);
  for (int64_t t : {int64_t{0}, int64_t{131}, T - 1}) {
    const TensorView one = upload_rows(out0, t, 1);
    lora_add(invariant, upload_rows(x, t, 1), stack, upload_rows(slots, t, 1), one, 0);
    EXPECT_TRUE(test::bits_equal(download(one).view, want.view.rows(t, 1))) << "token " << t;
  }
}

}  // namespace
}  // namespace beam
