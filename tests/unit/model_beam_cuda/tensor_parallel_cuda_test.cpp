// Tensor parallelism over GPUs (NCCL): a one-GPU NcclGroup (sum, gather, abort and reset; needs
// a GPU and NCCL) and, skipped with fewer than two GPUs, the collectives between two (sums,
// gathers, an abort that frees a rank waiting for a peer that never came, and a reset) and a
// two-GPU engine of beam-nano, which gives the one-GPU engine's greedy tokens where the reference
// chose with margin, alone and batched, with decode graphs capturing the collectives, and whose
// weight update reaches both GPUs; sleep mode and the hierarchical cache on both GPUs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "../model_beam/beam_goldens.h"
#include "../model_beam/beam_test_util.h"
#include "../runtime_engine/engine_test_util.h"
#if BEAMSERVE_CUDA
#include "comm/nccl_group.h"
#endif
#include "cuda_model_fixture.h"
#include "kernels/api/device_memory.h"
#include "runtime/engine.h"

namespace beam::testing {
namespace {

#if BEAMSERVE_CUDA  // NcclGroup exists in CUDA builds only

// Two ranks' NcclGroup, or a skip saying why there is none.
std::unique_ptr<NcclGroup> two_gpus() {
  auto group = NcclGroup::create(2);
  if (!group.ok()) return nullptr;
  return std::move(*group);
}

// A group of one GPU (any machine with a GPU and NCCL): the library loads, a sum is the tensor
// itself, a gather a copy, and an aborted group comes back with new communicators.
TEST(NcclGroupTest, OneGpuGroupRunsItsCollectivesAndResets) {
  auto created = NcclGroup::create(1);
  if (!created.ok()) GTEST_SKIP() << created.error().message;
  NcclGroup& group = **created;
  auto cuda = create_cuda_context(0);
  ASSERT_TRUE(cuda.ok()) << cuda.error().message;
  KernelContext ctx{Device::kCuda, nullptr, cuda->get()};
  group.bind_stream(0, native_stream(ctx));
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    HostTensor h(DType::kF32, {300});
    for (int i = 0; i < 300; ++i) h.as<float>()[i] = 0.5f * i - 7.0f;
    DeviceBuffer b = *allocate_buffer(ctx, h.view.nbytes()),
                 g = *allocate_buffer(ctx, h.view.nbytes());
    copy_tensor(ctx, b.view(DType::kF32, {300}), h.view);
    group.rank(0).all_reduce_sum(b.view(DType::kF32, {300}));
    group.rank(0).all_gather(b.view(DType::kF32, {300}), g.view(DType::kF32, {300}));
    HostTensor got(DType::kF32, {300});
    copy_tensor(ctx, got.view, g.view(DType::kF32, {300}));
    EXPECT_EQ(std::memcmp(got.view.data, h.view.data, h.view.nbytes()), 0);
    group.abort("test");
    EXPECT_TRUE(group.aborted());
    ASSERT_TRUE(group.reset().ok());
    EXPECT_FALSE(group.aborted());
  }
}

TEST(NcclGroupTest, SumsAndGathersBetweenTwoGpus) {
  std::unique_ptr<NcclGroup> group = two_gpus();
  if (!group) GTEST_SKIP() << NcclGroup::create(2).error().message;
  std::vector<std::vector<float>> summed(2), gathered(2);
  auto rank = [&](int r) {
    auto cuda = create_cuda_context(r);
    ASSERT_TRUE(cuda.ok()) << cuda.error().message;
    KernelContext ctx{Device::kCuda, nullptr, cuda->get()};
    group->bind_stream(r, native_stream(ctx));
    const int64_t n = 1000003;  // odd: no collective splits it evenly
    HostTensor host(DType::kF32, {n});
    for (int64_t i = 0; i < n; ++i) host.as<float>()[i] = static_cast<float>((i % 97) * (r + 1));
    DeviceBuffer buf = *allocate_buffer(ctx, host.view.nbytes());
    DeviceBuffer all = *allocate_buffer(ctx, 2 * host.view.nbytes());
    copy_tensor(ctx, buf.view(DType::kF32, {n}), host.view);
    group->rank(r).all_gather(buf.view(DType::kF32, {n}), all.view(DType::kF32, {2 * n}));
    group->rank(r).all_reduce_sum(buf.view(DType::kF32, {n}));
    summed[r].resize(n);
    gathered[r].resize(2 * n);
    copy_tensor(ctx, TensorView{summed[r].data(), DType::kF32, {n}, Device::kCpu},
                buf.view(DType::kF32, {n}));
    copy_tensor(ctx, TensorView{gathered[r].data(), DType::kF32, {2 * n}, Device::kCpu},
                all.view(DType::kF32, {2 * n}));
  };
  std::thread one(rank, 1);
  rank(0);
  one.join();
  for (int r = 0; r < 2; ++r) {
    for (int64_t i = 0; i < 1000003; i += 9973) {
      EXPECT_EQ(summed[r][i], static_cast<float>((i % 97) * 3)) << r << " " << i;
      EXPECT_EQ(gathered[r][i], static_cast<float>(i % 97)) << r << " " << i;
      EXPECT_EQ(gathered[r][1000003 + i], static_cast<float>((i % 97) * 2)) << r << " " << i;
    }
  }
}

TEST(NcclGroupTest, AnAbortFreesARankWaitingForAPeerAndResetResumes) {
  std::unique_ptr<NcclGroup> group = two_gpus();
  if (!group) GTEST_SKIP() << NcclGroup::create(2).error().message;
  auto c0 = create_cuda_context(0);
  auto c1 = create_cuda_context(1);
  ASSERT_TRUE(c0.ok() && c1.ok());
  KernelContext k0{Device::kCuda, nullptr, c0->get()}, k1{Device::kCuda, nullptr, c1->get()};
  group->bind_stream(0, native_stream(k0));
  group->bind_stream(1, native_stream(k1));
  DeviceBuffer b0 = *allocate_buffer(k0, 4096);
  group->rank(0).all_reduce_sum(b0.view(DType::kF32, {1024}));  // rank 1 never comes
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    group->abort("rank 1 failed");
  });
  synchronize(k0);  // returns once the abort ends the collective
  aborter.join();
  EXPECT_TRUE(group->aborted());
  ASSERT_TRUE(group->reset().ok());
  EXPECT_FALSE(group->aborted());
  std::vector<float> got(2);
  auto rank = [&](int r, KernelContext ctx) {
    HostTensor h(DType::kF32, {2});
    h.as<float>()[0] = 1.0f + r;
    h.as<float>()[1] = 10.0f;
    DeviceBuffer b = *allocate_buffer(ctx, 8);
    copy_tensor(ctx, b.view(DType::kF32, {2}), h.view);
    group->rank(r).all_reduce_sum(b.view(DType::kF32, {2}));
    copy_tensor(ctx, h.view, b.view(DType::kF32, {2}));
    got[r] = h.as<float>()[0] + h.as<float>()[1];
  };
  std::thread one(rank, 1, k1);
  rank(0, k0);
  one.join();
  EXPECT_EQ(got[0], 23.0f);
  EXPECT_EQ(got[1], 23.0f);
}

EngineOptions tp_options(int tp) {
  EngineOptions o;
  o.device = Device::kCuda;
  o.num_threads = 2;
  o.block_size_tokens = 16;
  o.max_tokens_per_step = 256;
  o.kv_budget_bytes = int64_t{256} << 20;
  o.tensor_parallel_size = tp;
  return o;
}

TEST(TensorParallelCuda, TwoGpusGiveOneGpusGreedyTokens) {
  if (!two_gpus()) GTEST_SKIP() << NcclGroup::create(2).error().message;
  GreedyGoldens golden = load_greedy_goldens("beam-nano");
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  auto one = Engine::create(weights, tp_options(1));
  ASSERT_TRUE(one.ok()) << one.error().message;
  auto two = Engine::create(weights, tp_options(2));
  ASSERT_TRUE(two.ok()) << two.error().message;
  const std::vector<RunRequest> reqs = greedy_requests(golden);
  auto reference = load_model("beam-nano");
  ThreadPool pool(2);
  BeamModel cpu(reference, KernelContext{Device::kCpu, &pool});
  const auto want = run_all(**one, reqs);
  const auto batched = run_all(**two, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const int64_t k = confident_prefix(cpu, reqs[i].prompt, golden.cases[i].generated_ids);
    const auto alone = run_all(**two, {reqs[i]})[0][0].tokens;
    auto head = [k](const std::vector<int32_t>& v) {
      return std::vector<int32_t>(v.begin(),
                                  v.begin() + std::min<int64_t>(k, static_cast<int64_t>(v.size())));
    };
    EXPECT_EQ(head(alone), head(want[i][0].tokens)) << "case " << i << " alone";
    EXPECT_EQ(head(batched[i][0].tokens), head(want[i][0].tokens)) << "case " << i << " batched";
    std::printf("case %zu: %lld confident tokens; two GPUs alone %s, batched %s the one GPU's\n", i,
                static_cast<long long>(k), alone == want[i][0].tokens ? "equal" : "differ from",
                batched[i][0].tokens == want[i][0].tokens ? "equal" : "differ from");
  }
  // A weight update reaches both GPUs: other weights, then the first ones again.
  const std::vector<int32_t> before = run_all(**two, {reqs[0]})[0][0].tokens;
  ASSERT_TRUE((*two)->update_weights(other_synthetic_weights(weights->config), false).ok());
  EXPECT_NE(run_all(**two, {reqs[0]})[0][0].tokens, before);
  ASSERT_TRUE((*two)->update_weights(weights, false).ok());
  EXPECT_EQ(run_all(**two, {reqs[0]})[0][0].tokens, before);
}

// DFlash2 drafts on two GPUs: rank 0 drafts from its captured residuals with the LM head gathered
// from both GPUs' vocabulary halves (a copy from GPU 1 into GPU 0's memory); the tokens are the
// same two GPUs' plain decoding's, and drafts are accepted.
TEST(TensorParallelCuda, TwoGpusDraftWithTheGatheredLmHead) {
  if (!two_gpus()) GTEST_SKIP() << NcclGroup::create(2).error().message;
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  EngineOptions o = tp_options(2);
  o.block_size_tokens = 4;
  auto plain = Engine::create(weights, o);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  o.speculative.dflash2_drafter =
      std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam-dflash2-trained";
  auto spec = Engine::create(weights, o);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  std::vector<RunRequest> reqs;
  for (uint64_t i = 0; i < 6; ++i) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 40;
    reqs.push_back(RunRequest{tokens_of(20, 40 + i, 512), p});
  }
  const auto want = run_all(**plain, reqs), got = run_all(**spec, reqs);
  int identical = 0;
  for (size_t i = 0; i < reqs.size(); ++i) identical += want[i][0].tokens == got[i][0].tokens;
  EXPECT_GE(identical, 4) << "a verify step rounds as a batch of another size (near-ties only)";
  EXPECT_GT((*spec)->stats().spec_accepted_tokens, 0);
}

// Sleep mode on two GPUs: a level-1 sleep gives back both GPUs' weights (copied to host memory)
// and KV pools, and after the wake-up (the decode graphs replaying on the same addresses) the
// engine serves the tokens it served before; with the hierarchical cache, each GPU's host slots
// hold its heads and an evicted prompt comes back with the same tokens.
TEST(TensorParallelCuda, TwoGpusSleepAndWakeWithTheirHostTiers) {
  if (!two_gpus()) GTEST_SKIP() << NcclGroup::create(2).error().message;
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  EngineOptions o = tp_options(2);
  o.enable_sleep_mode = true;
  o.enable_hierarchical_cache = true;
  o.kv_budget_bytes = int64_t{8} << 20;  // a few prompts: the others evict the first
  auto two = Engine::create(weights, o);
  ASSERT_TRUE(two.ok()) << two.error().message;
  const int64_t vocab = weights->config.vocab_size;
  const RunRequest first{tokens_of(700, 5, vocab), greedy(12)};
  const std::vector<int32_t> before = run_all(**two, {first})[0][0].tokens;
  ASSERT_TRUE((*two)->sleep(SleepLevel::kOffloadWeights).ok());
  const SleepState asleep = (*two)->sleep_state();
  EXPECT_TRUE(asleep.weights_released && asleep.kv_released);
  EXPECT_GT(asleep.released_bytes, 0);
  ASSERT_TRUE((*two)->wake_up(true, true).ok());
  EXPECT_EQ(run_all(**two, {first})[0][0].tokens, before);
  for (uint64_t s = 0; s < 4; ++s) run_all(**two, {RunRequest{tokens_of(700, 40 + s, vocab), greedy(4)}});
  const SiblingResult again = run_all(**two, {first})[0][0];
  EXPECT_GT((*two)->stats().host_cache.tier.loaded.full, 0);
  EXPECT_EQ(again.tokens, before);
}

#endif  // BEAMSERVE_CUDA

}  // namespace
}  // namespace beam::testing
