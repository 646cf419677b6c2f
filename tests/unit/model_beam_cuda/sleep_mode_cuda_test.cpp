// Sleep mode on the GPU engine (beam-nano): sleeping gives the weights' and the KV pools' device
// memory back (the free memory grows by about their bytes), and after the wake-up the engine —
// its decode graphs captured before the sleep, replayed at the same addresses — gives the same
// greedy tokens as before; level 2 serves again once new weights are given; the LoRA slots sleep
// with the weights and serve their adapters again after the wake-up. Also the CUDA
// ReleasableMemory alone: release frees its bytes, restore keeps its address.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "../model/test_checkpoint_writer.h"
#include "../runtime_engine/engine_test_util.h"
#include "cuda_model_fixture.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/releasable_memory.h"
#include "runtime/engine.h"

namespace beam::testing {
namespace {

TEST_F(CudaModelTest, ReleasableDeviceMemoryGoesBackAndComesBackAtItsAddress) {
  constexpr size_t kBytes = size_t{1} << 30;
  auto m = allocate_releasable(gpu_, kBytes);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ReleasableMemory& mem = **m;
  const TensorView view{mem.data(), DType::kU8, Shape{static_cast<int64_t>(kBytes)}, Device::kCuda};
  std::vector<uint8_t> host(kBytes, 0x3c), back(kBytes);
  copy_tensor(gpu_, view, TensorView{host.data(), DType::kU8, view.shape, Device::kCpu});
  const int64_t held = device_memory_info(gpu_).free_bytes;
  mem.release();
  EXPECT_GE(device_memory_info(gpu_).free_bytes - held, static_cast<int64_t>(kBytes));
  void* const address = mem.data();
  ASSERT_TRUE(mem.restore().ok());
  EXPECT_EQ(mem.data(), address);
  EXPECT_LE(device_memory_info(gpu_).free_bytes, held);
  copy_tensor(gpu_, view, TensorView{host.data(), DType::kU8, view.shape, Device::kCpu});
  copy_tensor(gpu_, TensorView{back.data(), DType::kU8, view.shape, Device::kCpu}, view);
  EXPECT_EQ(std::memcmp(back.data(), host.data(), kBytes), 0);
}

TEST_F(CudaModelTest, EngineOnCudaSleepsAndWakesWithItsGraphs) {
  auto nano = engine_test_model("beam-nano");
  ASSERT_NE(nano, nullptr);
  EngineOptions o = engine_options(Device::kCuda);
  o.kv_budget_bytes = int64_t{1} << 30;
  o.enable_sleep_mode = true;
  auto engine = Engine::create(nano, o);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const std::vector<RunRequest> reqs = {
      {tokens_of(37, 1, nano->config.vocab_size), testing::greedy(24)},
      {tokens_of(70, 2, nano->config.vocab_size), testing::greedy(24)}};
  const auto before = run_all(**engine, reqs);  // captures decode graphs
  for (SleepLevel level : {SleepLevel::kOffloadWeights, SleepLevel::kDiscardWeights}) {
    SCOPED_TRACE(level == SleepLevel::kOffloadWeights ? "level 1" : "level 2");
    const int64_t awake_free = device_memory_info(gpu_).free_bytes;
    ASSERT_TRUE((*engine)->sleep(level).ok());
    const SleepState s = (*engine)->sleep_state();
    EXPECT_TRUE(s.weights_released && s.kv_released);
    EXPECT_EQ(s.weights_discarded, level == SleepLevel::kDiscardWeights);
    auto asleep_read = (*engine)->read_weight("model.norm.weight", 1);  // no weights to read
    ASSERT_FALSE(asleep_read.ok());
    EXPECT_NE(asleep_read.error().message.find("the weights are asleep"), std::string::npos);
    const int64_t freed = device_memory_info(gpu_).free_bytes - awake_free;
    std::printf("sleep freed %.3f GiB\n", static_cast<double>(freed) / (1 << 30));
    EXPECT_GE(freed, int64_t{900} << 20);  // the KV pools' ~1 GiB budget and beam-nano's weights
    ASSERT_TRUE((*engine)->wake_up(true, true).ok());
    if (level == SleepLevel::kDiscardWeights) {
      EXPECT_TRUE((*engine)->sleep_state().weights_discarded);
      ASSERT_TRUE((*engine)->update_weights(nano, false).ok());
    }
    EXPECT_FALSE((*engine)->sleep_state().asleep());
    auto read = (*engine)->read_weight("model.norm.weight", 4);  // a vector: its first 4 values
    ASSERT_TRUE(read.ok()) << read.error().message;
    EXPECT_EQ(read->values.size(), 4u);
    const auto after = run_all(**engine, reqs);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(after[i][0].tokens, before[i][0].tokens) << "request " << i;
  }
  expect_pools_full(**engine);
}

// A drafting engine on the GPU: the sleep frees the drafter's context pool (256 MiB of a 512 MiB
// KV budget here) with the KV pools, the wake-up allocates it again, and the engine's tokens and
// drafts after it are those before it.
TEST_F(CudaModelTest, EngineOnCudaSleepsWithItsDraftersPool) {
  auto tiny = engine_test_model("tiny-beam");
  ASSERT_NE(tiny, nullptr);
  EngineOptions o = engine_options(Device::kCuda);
  o.block_size_tokens = 4;
  o.enable_sleep_mode = true;
  o.speculative.dflash2_drafter =
      std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam-dflash2-trained";
  o.kv_budget_bytes = int64_t{512} << 20;
  o.speculative.dflash2_context_pool_bytes = int64_t{256} << 20;
  auto engine = Engine::create(tiny, o);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  std::vector<RunRequest> reqs;
  for (uint64_t i = 0; i < 4; ++i) reqs.push_back({tokens_of(20, 40 + i, 512), testing::greedy(30)});
  const auto before = run_all(**engine, reqs);
  const int64_t accepted = (*engine)->stats().spec_accepted_tokens;
  EXPECT_GT(accepted, 0);
  const int64_t awake_free = device_memory_info(gpu_).free_bytes;
  ASSERT_TRUE((*engine)->sleep(SleepLevel::kOffloadWeights).ok());
  // The KV pools (the budget's other 256 MiB at most) and the drafter's pool.
  EXPECT_GE(device_memory_info(gpu_).free_bytes - awake_free, int64_t{500} << 20);
  ASSERT_TRUE((*engine)->wake_up(true, true).ok());
  const auto after = run_all(**engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(after[i][0].tokens, before[i][0].tokens) << "request " << i;
  EXPECT_GT((*engine)->stats().spec_accepted_tokens, accepted);
  (*engine)->flush_prefix_cache();
  expect_pools_full(**engine);
}

// With LoRA slots the adapters' stacks are released with the weights (and come back zeroed): after
// the wake-up the engine loads each slot's adapter again, so a request on the adapter gets the
// tokens it got before the sleep, and so does a base request.
TEST_F(CudaModelTest, EngineOnCudaSleepsWithItsLoraSlots) {
  auto nano = engine_test_model("beam-nano");
  ASSERT_NE(nano, nullptr);
  const std::string adapter =
      test::write_lora_adapter("sleep_lora", test::servable_lora_modules(nano->config), 8, 7, 16);
  EngineOptions o = engine_options(Device::kCuda);
  o.kv_budget_bytes = int64_t{1} << 30;
  o.enable_sleep_mode = true;
  o.max_loras = 2;
  o.max_lora_rank = 8;
  auto engine = Engine::create(nano, o);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const Status loaded = (*engine)->load_lora_adapter("a", adapter);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const int64_t V = nano->config.vocab_size;
  const std::vector<RunRequest> reqs = {{tokens_of(37, 1, V), testing::greedy(24), "a"},
                                        {tokens_of(37, 1, V), testing::greedy(24)},
                                        {tokens_of(70, 2, V), testing::greedy(24), "a"}};
  const auto before = run_all(**engine, reqs);
  EXPECT_NE(before[0][0].tokens, before[1][0].tokens) << "the adapter changes the tokens";
  ASSERT_TRUE((*engine)->sleep(SleepLevel::kOffloadWeights).ok());
  ASSERT_TRUE((*engine)->wake_up(true, true).ok());
  const auto after = run_all(**engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(after[i][0].tokens, before[i][0].tokens) << "request " << i;
  expect_pools_full(**engine);
}

}  // namespace
}  // namespace beam::testing
