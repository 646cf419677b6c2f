// The hierarchical cache on the GPU: HostKvStore's pinned slots take whole blocks of both pools
// (every layer's K and V) and give them back byte for byte; an engine on tiny-beam whose pools
// hold about one prompt gets an evicted prompt back from the host tier under each write policy with
// the tokens and logprobs of a device-only engine hitting its own cache (the same KV bytes and step).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "../runtime_engine/engine_test_util.h"
#include "cuda_model_fixture.h"
#include "kernels/api/device_memory.h"
#include "model/config.h"
#include "runtime/kv_cache/device_kv_allocator.h"
#include "runtime/kv_cache/kv_geometry.h"
#include "runtime/kv_cache/kv_storage.h"
#include "runtime/prefix_cache/host_kv_store.h"

namespace beam::testing {
namespace {

// Host bytes of block `block` of `pool` in storage (every layer's K and V, in block_rows order).
std::vector<uint8_t> read_block(const KernelContext& ctx, const KvStorage& storage, AttentionKind pool,
                                int32_t block) {
  const PitchedRows src = storage.block_rows(pool, BlockId(block));
  std::vector<uint8_t> bytes(src.rows * src.row_bytes);
  copy_rows(ctx, PitchedRows{bytes.data(), Device::kCpu, src.row_bytes, src.row_bytes, src.rows}, src);
  return bytes;
}

TEST_F(CudaModelTest, HostKvStoreSavesAndLoadsWholeBlocks) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  const KvGeometry g = *kv_geometry_from_config(weights->config, 16);
  DeviceKvAllocator allocator(gpu_);
  auto storage = KvStorage::create(g, KvPoolSizes{12, 9}, allocator);
  ASSERT_TRUE(storage.ok()) << storage.error().message;
  // Random bytes in every block of both pools.
  std::mt19937 rng(5);
  for (AttentionKind pool : kKvPools)
    for (int32_t b = 0; b < storage->num_blocks(pool); ++b) {
      const PitchedRows dst = storage->block_rows(pool, BlockId(b));
      std::vector<uint8_t> bytes(dst.rows * dst.row_bytes);
      for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng());
      copy_rows(gpu_, dst, PitchedRows{bytes.data(), Device::kCpu, dst.row_bytes, dst.row_bytes, dst.rows});
    }
  auto store = HostKvStore::create(gpu_, *storage, BlockCounts{4, 3});
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ(store->bytes(), 4 * HostKvStore::block_bytes(*storage, AttentionKind::kFull) +
                                3 * HostKvStore::block_bytes(*storage, AttentionKind::kSliding));
  for (AttentionKind pool : kKvPools) {
    const std::vector<uint8_t> three = read_block(gpu_, *storage, pool, 3);
    const std::vector<uint8_t> seven = read_block(gpu_, *storage, pool, 7);
    const std::vector<uint8_t> eight = read_block(gpu_, *storage, pool, 8);
    store->save(pool, BlockId(3), 2);
    store->save(pool, BlockId(7), 0);
    store->load(pool, 2, BlockId(8));  // queued after the saves: block 8 = old block 3
    store->load(pool, 0, BlockId(3));  // block 3 = block 7
    synchronize(gpu_);
    EXPECT_EQ(read_block(gpu_, *storage, pool, 8), three);
    EXPECT_EQ(read_block(gpu_, *storage, pool, 3), seven);
    EXPECT_EQ(read_block(gpu_, *storage, pool, 7), seven);
    EXPECT_NE(eight, three);
  }
}

TEST_F(CudaModelTest, EngineOnCudaGetsAnEvictedPromptBackFromTheHost) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  const int64_t vocab = weights->config.vocab_size;
  const KvGeometry g = *kv_geometry_from_config(weights->config, 16);
  auto options = [&](bool hicache, int64_t full_blocks) {
    EngineOptions o = engine_options(Device::kCuda);
    o.max_running = 2;
    o.max_tokens_per_step = 64;
    o.kv_budget_bytes = full_blocks * g.bytes_per_block(AttentionKind::kFull) +
                        8 * g.bytes_per_block(AttentionKind::kSliding);
    o.enable_hierarchical_cache = hicache;
    o.hicache_ratio = 8;
    return o;
  };
  auto request = [&](uint64_t seed) {
    RunRequest r{tokens_of(160, seed, vocab), testing::greedy(6)};
    r.params.logprobs = true;
    r.params.top_logprobs = 3;
    return r;
  };
  const RunRequest a = request(11);
  // A device-only engine large enough to keep `a` cached: its second run is the reference.
  auto large = Engine::create(weights, options(false, 200));
  ASSERT_TRUE(large.ok()) << large.error().message;
  run_all(**large, {a});
  const SiblingResult reference = run_all(**large, {a})[0][0];
  ASSERT_EQ(reference.usage.cached_prompt_tokens, 144);

  // Each write policy: write-through copies while the stream goes on with later steps; the
  // selective one only once `a` is used a second time (run twice before the others evict it).
  for (HostWritePolicy policy : {HostWritePolicy::kWriteBack, HostWritePolicy::kWriteThrough,
                                 HostWritePolicy::kWriteThroughSelective}) {
    SCOPED_TRACE(host_write_policy_name(policy));
    EngineOptions o = options(true, 24);
    o.hicache_write_policy = policy;
    auto engine = Engine::create(weights, o);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    run_all(**engine, {a});
    if (policy == HostWritePolicy::kWriteThroughSelective) run_all(**engine, {a});
    for (uint64_t s = 0; s < 3; ++s) run_all(**engine, {request(20 + s)});
    const SiblingResult again = run_all(**engine, {a})[0][0];
    EXPECT_EQ(again.usage.cached_prompt_tokens, 144);
    const EngineStats stats = (*engine)->stats();
    EXPECT_GT(stats.host_cache.tier.loaded.full, 0);
    EXPECT_EQ(stats.host_cache.restored_tokens, stats.host_cache.tier.loaded.full * 16);
    EXPECT_EQ(again.tokens, reference.tokens);
    ASSERT_EQ(again.logprobs.size(), reference.logprobs.size());
    for (size_t i = 0; i < again.logprobs.size(); ++i) {
      EXPECT_EQ(again.logprobs[i].chosen.logprob, reference.logprobs[i].chosen.logprob) << "token " << i;
      ASSERT_EQ(again.logprobs[i].top.size(), reference.logprobs[i].top.size());
      for (size_t k = 0; k < again.logprobs[i].top.size(); ++k)
        EXPECT_EQ(again.logprobs[i].top[k].logprob, reference.logprobs[i].top[k].logprob);
    }
    (*engine)->flush_prefix_cache();
    expect_pools_full(**engine);
  }
}

}  // namespace
}  // namespace beam::testing
