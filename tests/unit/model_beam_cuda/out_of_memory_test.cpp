// The GPU running short of memory: a step whose workspace or kernel scratch does not fit is an
// error of that step (BeamModel::forward, kernels/api/device_out_of_memory.h), never an abort,
// and the next step with memory back computes the same logits; an engine's start-up warm-up of a
// step budget that does not fit says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../runtime_engine/engine_test_util.h"
#include "cuda_model_fixture.h"
#include "runtime/engine_device.h"

namespace beam::testing {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Holds device memory so that about `leave` bytes stay free (nothing when less is free already);
// steps down 2 MiB at a time when an allocation that large does not fit.
DeviceBuffer hold_all_but(const KernelContext& ctx, int64_t leave) {
  for (int64_t take = device_memory_info(ctx).free_bytes - leave; take > 0; take -= 2 * kMiB) {
    Expected<DeviceBuffer> b = allocate_buffer(ctx, static_cast<size_t>(take));
    if (b.ok()) return std::move(*b);
  }
  return DeviceBuffer();
}

// What a sweep of the memory left saw: attempts that failed (in a kernel's scratch: the message
// names it), and whether one fit.
struct SweepResult {
  int failed = 0, failed_in_scratch = 0;
  bool fit = false;
};

// Leaves 0, stride, 2 stride, ... bytes free (up to `limit`) until `attempt` fits, then MiB by
// MiB over the last stride: the window where the workspace fits and a kernel's scratch does not
// is a few MiB wide. attempt(leave) returns the error, or nullopt when it fit; every error must
// name memory.
SweepResult sweep(const KernelContext& ctx, int64_t stride, int64_t limit,
                  const std::function<std::optional<std::string>(int64_t)>& attempt) {
  SweepResult r;
  auto try_at = [&](int64_t leave) {
    DeviceBuffer held = hold_all_but(ctx, leave);
    const std::optional<std::string> error = attempt(leave);
    if (!error) return true;
    ++r.failed;
    if (error->find("scratch") != std::string::npos) ++r.failed_in_scratch;
    EXPECT_NE(error->find("memory"), std::string::npos) << *error;
    std::printf("%4lld MiB left: %s\n", static_cast<long long>(leave / kMiB), error->c_str());
    return false;
  };
  int64_t fit_at = -1;
  for (int64_t leave = 0; leave <= limit && fit_at < 0; leave += stride)
    if (try_at(leave)) fit_at = leave;
  if (fit_at < 0) return r;
  r.fit = true;
  for (int64_t leave = std::max<int64_t>(0, fit_at - stride + kMiB); leave < fit_at; leave += kMiB)
    try_at(leave);
  return r;
}

// One 8,192-token prefill of beam-nano over four sequences: large enough that its workspace and
// its kernels' scratch (the MoE permutation and activations, the router's fp32 x) are tens of MiB.
struct BigStep {
  std::vector<std::vector<int32_t>> tokens;
  std::optional<LocalKvCache> kv;

  BigStep(const KernelContext& ctx, const BeamConfig& config) {
    std::mt19937_64 rng(5);
    for (int s = 0; s < 4; ++s) {
      std::vector<int32_t> t(2048);
      for (int32_t& id : t) id = static_cast<int32_t>(rng() % config.vocab_size);
      tokens.push_back(std::move(t));
    }
    auto created = LocalKvCache::create(ctx, config, 4, 2048);
    EXPECT_TRUE(created.ok()) << created.error().message;
    if (created.ok()) kv.emplace(std::move(*created));
  }
  Status run(BeamModel& model, ForwardOutput& out) {
    ForwardBatch batch;
    for (size_t s = 0; s < tokens.size(); ++s)
      batch.seqs.push_back(SeqChunk{tokens[s], 0, 0, kv->block_table(static_cast<int64_t>(s)),
                                    kv->block_table(static_cast<int64_t>(s)), false});
    return model.forward(batch, kv->layers(), out);
  }
};

// With free memory swept from none until the step fits (sweep()), every forward either succeeds or
// returns an error naming what did not fit; some of them fail in a kernel's scratch after the
// workspace fit (the path that aborted before). The first forward with memory back gives the
// logits of a step that never ran short, bit for bit.
TEST_F(CudaModelTest, ForwardShortOfMemoryFailsThatStepAndTheNextOneRecovers) {
  auto host = load_model("beam-nano");
  ASSERT_NE(host, nullptr);
  // The reference on a context of its own (its own op scratch); it also loads every kernel the
  // step runs, which lazy module loading would otherwise do under the squeeze below.
  auto ref_cuda = create_cuda_context(0);
  ASSERT_TRUE(ref_cuda.ok()) << ref_cuda.error().message;
  const KernelContext ref_ctx{Device::kCuda, &pool_, ref_cuda->get()};
  auto ref_weights = upload_weights(ref_ctx, host);
  ASSERT_TRUE(ref_weights.ok()) << ref_weights.error().message;
  std::vector<float> want;
  int64_t step_bytes = 0;
  {
    BeamModel ref(ref_weights->weights, ref_ctx);
    BigStep step(ref_ctx, ref.config());
    ASSERT_TRUE(step.kv.has_value());
    const int64_t before = device_memory_info(ref_ctx).free_bytes;
    ForwardOutput out;
    const Status st = step.run(ref, out);
    ASSERT_TRUE(st.ok()) << st.error().message;
    step_bytes = before - device_memory_info(ref_ctx).free_bytes;
    want = out.logits;
  }
  ASSERT_GT(step_bytes, 16 * kMiB) << "the step is too small to squeeze";

  auto model = gpu_model("beam-nano");
  ASSERT_NE(model, nullptr);
  BigStep step(gpu_, model->config());
  ASSERT_TRUE(step.kv.has_value());
  const SweepResult r = sweep(
      gpu_, 8 * kMiB, step_bytes + 64 * kMiB, [&](int64_t leave) -> std::optional<std::string> {
        ForwardOutput out;
        const Status st = step.run(*model, out);
        if (!st.ok()) return st.error().message;
        EXPECT_TRUE(out.logits == want) << "a step with " << leave / kMiB << " MiB left";
        return std::nullopt;
      });
  std::printf("step %lld MiB on the reference context: %d failed (%d in a kernel's scratch)\n",
              static_cast<long long>(step_bytes / kMiB), r.failed, r.failed_in_scratch);
  EXPECT_TRUE(r.fit);
  EXPECT_GT(r.failed, 0);
  EXPECT_GT(r.failed_in_scratch, 0) << "no squeeze hit a kernel's scratch after the workspace fit";
  ForwardOutput out;
  const Status st = step.run(*model, out);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(out.logits == want) << "the step after the squeeze";
}

// The engine's start-up warm-up (warm_up_largest_step) under the same sweep: a step budget that
// does not fit is an error naming the step and the flag that lowers it, whichever allocation
// failed; with memory back the warm-up succeeds.
TEST_F(CudaModelTest, StepBudgetThatDoesNotFitIsAnErrorNamingTheFlag) {
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  auto device = open_engine_device(Device::kCuda, weights);
  ASSERT_TRUE(device.ok()) << device.error().message;
  constexpr int64_t kTokens = 8192, kSeqs = 16, kBlock = 16;
  int64_t step_bytes = 0;
  {  // measured on a context of its own: the sweep's must grow its scratch under the squeeze
    auto probe = open_engine_device(Device::kCuda, weights);
    ASSERT_TRUE(probe.ok()) << probe.error().message;
    std::unique_ptr<LoraSlots> no_lora;
    auto measured = warm_up_largest_step(*probe, kTokens, kSeqs, kBlock, no_lora);
    ASSERT_TRUE(measured.ok()) << measured.error().message;
    step_bytes = measured->step_bytes;
  }
  const SweepResult r =
      sweep(gpu_, 8 * kMiB, 2 * step_bytes + 64 * kMiB, [&](int64_t) -> std::optional<std::string> {
        std::unique_ptr<LoraSlots> no_lora;
        auto step = warm_up_largest_step(*device, kTokens, kSeqs, kBlock, no_lora);
        if (step.ok()) return std::nullopt;
        const std::string& why = step.error().message;
        EXPECT_NE(why.find("a step of 8192 tokens does not fit the device"), std::string::npos)
            << why;
        EXPECT_NE(why.find("lower --max-tokens-per-step"), std::string::npos) << why;
        return why;
      });
  std::printf("warm-up step %lld MiB: %d failed (%d in a kernel's scratch)\n",
              static_cast<long long>(step_bytes / kMiB), r.failed, r.failed_in_scratch);
  EXPECT_TRUE(r.fit);
  EXPECT_GT(r.failed, 0);
  EXPECT_GT(r.failed_in_scratch, 0);
}

// With LoRA slots on the routed experts the warm-up runs its tokens on an (empty) slot, so the
// LoRA kernels' scratch (the experts' fp32 gate / up deltas among it) is reserved before the KV
// pools take the rest: a LoRA step of the warm-up's size then grows no scratch (graph_fingerprint
// unchanged), where after a warm-up without the slots it does. The slots come back either way.
TEST_F(CudaModelTest, WarmUpWithLoraSlotsReservesTheirScratchAndGivesThemBack) {
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  constexpr int64_t kTokens = 1024, kSeqs = 4, kBlock = 16;
  // Whether a LoRA step of kTokens grows the kernels' scratch after the warm-up (with the slots
  // or without them) on a device of its own.
  const auto lora_step_grows_scratch = [&](bool warm_up_with_slots) -> bool {
    auto device = open_engine_device(Device::kCuda, weights);
    EXPECT_TRUE(device.ok()) << device.error().message;
    if (!device.ok()) return false;
    auto slots = LoraSlots::create(device->context(nullptr), weights->config,
                                   {.max_loras = 2, .max_rank = 16, .experts = true});
    EXPECT_TRUE(slots.ok()) << slots.error().message;
    if (!slots.ok()) return false;
    std::unique_ptr<LoraSlots> lora = std::move(*slots), none;
    auto step =
        warm_up_largest_step(*device, kTokens, kSeqs, kBlock, warm_up_with_slots ? lora : none);
    EXPECT_TRUE(step.ok()) << step.error().message;
    EXPECT_NE(lora, nullptr) << "the slots come back";
    KernelContext ctx = device->context(nullptr);
    ctx.cuda_graphs = false;
    const uint64_t before = graph_fingerprint(ctx);
    BeamModel model(device->weights, ctx, std::move(lora));
    auto kv = LocalKvCache::create(ctx, model.config(), kSeqs, kTokens / kSeqs, kBlock);
    EXPECT_TRUE(kv.ok()) << kv.error().message;
    if (!kv.ok()) return false;
    std::vector<int32_t> ids(static_cast<size_t>(kTokens));
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] =
          static_cast<int32_t>((static_cast<int64_t>(i) * 7919 + 1) % model.config().vocab_size);
    ForwardBatch batch;
    for (int64_t s = 0; s < kSeqs; ++s) {
      const auto table = kv->block_table(s);
      batch.seqs.push_back(
          SeqChunk{std::span<const int32_t>(ids).subspan(static_cast<size_t>(s * (kTokens / kSeqs)),
                                                         static_cast<size_t>(kTokens / kSeqs)),
                   0, 0, table, table, false});
      batch.seqs.back().lora_slot = 0;
    }
    ForwardOutput out;
    const Status st = model.forward(batch, kv->layers(), out);
    EXPECT_TRUE(st.ok()) << st.error().message;
    return graph_fingerprint(ctx) != before;
  };
  EXPECT_TRUE(lora_step_grows_scratch(false)) << "LoRA's scratch is more than the plain step's";
  EXPECT_FALSE(lora_step_grows_scratch(true)) << "the warm-up on the slots reserved it";
}

}  // namespace
}  // namespace beam::testing
