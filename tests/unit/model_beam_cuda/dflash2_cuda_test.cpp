// The DFlash2 drafter on the GPU: context K/V and drafts of the PyTorch reference's goldens
// (models/tiny-beam-dflash2/golden, as the CPU test dflash2_drafter_test.cpp checks them), batched
// blocks as alone, and an engine on Device::kCuda drafting with the trained tiny drafter: its
// tokens are plain decoding's on the GPU up to near-ties of the target's logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "../model_beam/dflash2_goldens.h"
#include "core/bf16.h"
#include "core/npy.h"
#include "cuda_model_fixture.h"
#include "model/dflash2/dflash2_drafter.h"

namespace beam::testing {
namespace {

const std::string kDrafter = std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam-dflash2";
const std::string kTrained =
    std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam-dflash2-trained";
const auto& kCases = kDFlash2Cases;

NpyArray golden(const std::string& c, const std::string& key) {
  return dflash2_golden(kDrafter, c, key);
}
std::vector<int32_t> ints(const NpyArray& a) {
  return golden_ints(a);
}

class DFlash2CudaTest : public CudaModelTest {
 protected:
  void SetUp() override {
    CudaModelTest::SetUp();
    if (IsSkipped()) return;
    auto host = load_model("tiny-beam");
    ASSERT_NE(host, nullptr);
    auto target = upload_weights(gpu_, host);
    ASSERT_TRUE(target.ok()) << target.error().message;
    target_ = target->weights;
    auto w = load_dflash2_weights(kDrafter, host->config);
    ASSERT_TRUE(w.ok()) << w.error().message;
    auto on_gpu = upload_dflash2_weights(gpu_, *w);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.error().message;
    ASSERT_EQ((*on_gpu)->fc.device, Device::kCuda);
    auto contexts = DFlash2ContextPool::create(gpu_, (*w)->config, 64);
    ASSERT_TRUE(contexts.ok()) << contexts.error().message;
    weights_ = *on_gpu;
    pool_ = *contexts;
    drafter_.emplace(*on_gpu, target_->embed, target_->lm_head, gpu_, *contexts);
  }
  // The case's context from its golden features (uploaded).
  std::shared_ptr<DFlash2Context> context_of(const std::string& c) {
    std::shared_ptr<DFlash2Context> ctx = drafter_->new_context();
    const HostTensor bits = golden_features(kDrafter, c);
    auto features = allocate_buffer(gpu_, bits.view.nbytes());
    EXPECT_TRUE(features.ok());
    const TensorView dev = features->view(DType::kBF16, bits.view.shape);
    copy_tensor(gpu_, dev, bits.view);
    const std::vector<int32_t> p = ints(golden(c, "positions"));
    const std::vector<int64_t> positions(p.begin(), p.end());
    const DFlash2ContextRows rows{ctx.get(), 0, positions};
    const Status st = drafter_->add_context(dev, {&rows, 1});
    EXPECT_TRUE(st.ok()) << st.error().message;
    synchronize(gpu_);  // features is freed on return
    return ctx;
  }
  std::shared_ptr<const BeamWeights> target_;
  std::shared_ptr<const DFlash2Weights> weights_;
  std::shared_ptr<DFlash2ContextPool> pool_;
  std::optional<DFlash2Drafter> drafter_;
};

// Context K/V within a bf16 rounding or two of the reference's (cuBLASLt's sums run in another
// order than the reference's).
TEST_F(DFlash2CudaTest, ContextKeysAndValuesMatchTheReference) {
  for (const char* name : kCases) {
    SCOPED_TRACE(name);
    expect_golden_context(gpu_, drafter_->pool(), *context_of(name), kDrafter, name, 0.02f, 2e-3f);
  }
}

// The reference's drafts and candidates; u within the CPU test's tolerance, g within the GPU's.
TEST_F(DFlash2CudaTest, DraftsEqualTheReference) {
  for (const char* name : kCases) {
    SCOPED_TRACE(name);
    expect_golden_block(*drafter_, *context_of(name), kDrafter, name, 0.06f, 4e-3f);
  }
}

// 80 blocks in one call (two read-out chunks of 64 draft rows) draft what each drafts alone.
TEST_F(DFlash2CudaTest, BatchedBlocksDraftAsAlone) {
  const DFlash2Config& c = drafter_->config();
  const auto a = context_of("ctx20"), b = context_of("holes");
  std::vector<DFlash2Block> blocks;
  for (int i = 0; i < 80; ++i)
    blocks.push_back(i % 2 ? DFlash2Block{261, 20, a.get()} : DFlash2Block{17 + i, 40, b.get()});
  const auto J = static_cast<size_t>(c.max_drafts());
  std::vector<int32_t> all(blocks.size() * J), one(J);
  ASSERT_TRUE(drafter_->draft(blocks, all).ok());
  for (size_t i = 0; i < blocks.size(); i += 7) {
    ASSERT_TRUE(drafter_->draft({&blocks[i], 1}, one).ok());
    EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + i * J)) << i;
  }
}

// CUDA graphs of the drafter (DFlash2DraftGraphs): calls of 3, 4, 1 and 5 blocks (buckets 4, 4, 1
// and 8), three rounds, so each bucket warms, captures and replays with other anchors, positions
// and contexts between replays, draft what an eager drafter (cuda_graphs off, the same weights
// and pool) drafts; traced calls run eagerly.
TEST_F(DFlash2CudaTest, GraphedDraftsEqualEagerOnes) {
  ASSERT_TRUE(gpu_.cuda_graphs);
  KernelContext eager_ctx = gpu_;
  eager_ctx.cuda_graphs = false;
  DFlash2Drafter eager(weights_, target_->embed, target_->lm_head, eager_ctx, pool_);
  const auto a = context_of("ctx20"), b = context_of("holes");
  const std::vector<std::vector<DFlash2Block>> calls = {
      {{261, 20, a.get()}, {17, 40, b.get()}, {5, 21, a.get()}},
      {{30, 41, b.get()}, {261, 20, a.get()}, {99, 40, b.get()}, {7, 22, a.get()}},
      {{44, 40, b.get()}},
      {{3, 20, a.get()}, {4, 40, b.get()}, {8, 21, a.get()}, {9, 41, b.get()}, {10, 22, a.get()}}};
  const auto J = static_cast<size_t>(drafter_->config().max_drafts());
  for (int round = 0; round < 3; ++round)
    for (size_t k = 0; k < calls.size(); ++k) {
      std::vector<int32_t> graphed(calls[k].size() * J), plain(calls[k].size() * J);
      ASSERT_TRUE(drafter_->draft(calls[k], graphed).ok());
      ASSERT_TRUE(eager.draft(calls[k], plain).ok());
      EXPECT_EQ(graphed, plain) << "round " << round << " call " << k;
    }
  EXPECT_GE(drafter_->graphs().num_captures(), 3);
  EXPECT_GE(drafter_->graphs().num_replays(), 6);
  EXPECT_EQ(eager.graphs().num_replays(), 0);
}

// CUDA graphs of the context feed (DFlash2Drafter::context_graphs): calls of 1, 3, 17 and 300 rows
// (buckets 1, 4 and 32; past 256 rows eagerly), three rounds, so each bucket warms, captures and
// replays other features and positions; each call's features in a buffer of its rows alone (as
// the target's workspace holds them), its rows split over two contexts. The contexts hold what an
// eager drafter's (cuda_graphs off, the same weights and pool) hold, bit for bit: every layer's
// K/V and the position of each held position's slot, hence the same drafts.
TEST_F(DFlash2CudaTest, GraphedContextFeedsEqualEagerOnes) {
  ASSERT_TRUE(gpu_.cuda_graphs);
  KernelContext eager_ctx = gpu_;
  eager_ctx.cuda_graphs = false;
  DFlash2Drafter eager(weights_, target_->embed, target_->lm_head, eager_ctx, pool_);
  const DFlash2Config& c = drafter_->config();
  const HostTensor golden_rows = golden_features(kDrafter, "ctx20");  // [20, n_taps * H]
  const int64_t golden_T = golden_rows.view.dim(0), width = golden_rows.view.dim(1);
  const int64_t kv = c.num_kv_heads * c.head_dim, slots = pool_->slot_positions().dim(0);
  const auto J = static_cast<size_t>(c.max_drafts());
  for (const int64_t n : {1, 3, 17, 300}) {
    SCOPED_TRACE(n);
    const int64_t na = (n + 1) / 2;  // context a's rows; b's the rest
    const std::shared_ptr<DFlash2Context> graphed[] = {drafter_->new_context(),
                                                       drafter_->new_context()};
    const std::shared_ptr<DFlash2Context> plain[] = {eager.new_context(), eager.new_context()};
    for (int64_t round = 0; round < 3; ++round) {
      SCOPED_TRACE(round);
      HostTensor rows(DType::kBF16, {n, width});
      for (int64_t r = 0; r < n; ++r)
        std::memcpy(rows.as<bf16>() + r * width,
                    golden_rows.as<bf16>() + ((round * n + r) % golden_T) * width,
                    static_cast<size_t>(width) * sizeof(bf16));
      auto features = allocate_buffer(gpu_, rows.view.nbytes());
      ASSERT_TRUE(features.ok());
      const TensorView dev = features->view(DType::kBF16, {n, width});
      copy_tensor(gpu_, dev, rows.view);
      std::vector<int64_t> positions(static_cast<size_t>(n));
      std::iota(positions.begin(), positions.begin() + na, round * na);
      std::iota(positions.begin() + na, positions.end(), 5 + round * (n - na));
      const std::span<const int64_t> all(positions);
      const std::span<const int64_t> fed[] = {all.first(static_cast<size_t>(na)),
                                              all.subspan(static_cast<size_t>(na))};
      const DFlash2ContextRows graphed_items[] = {{graphed[0].get(), 0, fed[0]},
                                                  {graphed[1].get(), na, fed[1]}};
      const DFlash2ContextRows plain_items[] = {{plain[0].get(), 0, fed[0]},
                                                {plain[1].get(), na, fed[1]}};
      ASSERT_TRUE(drafter_->add_context(dev, graphed_items).ok());
      ASSERT_TRUE(eager.add_context(dev, plain_items).ok());
      synchronize(gpu_);  // features is freed at the round's end
      HostTensor slot_positions(DType::kI64, {slots});
      copy_tensor(gpu_, slot_positions.view, pool_->slot_positions());
      for (int64_t l = 0; l < c.num_layers; ++l) {
        HostTensor keys(DType::kBF16, {slots, kv}), values(DType::kBF16, {slots, kv});
        copy_tensor(gpu_, keys.view, pool_->keys(l));
        copy_tensor(gpu_, values.view, pool_->values(l));
        for (int i = 0; i < 2; ++i)
          for (const int64_t p : fed[i]) {
            const int64_t sg = graphed[i]->find(p), se = plain[i]->find(p);
            ASSERT_EQ(sg >= 0, se >= 0) << "context " << i << " position " << p;
            if (sg < 0) continue;
            EXPECT_EQ(slot_positions.as<int64_t>()[sg], p);
            EXPECT_EQ(slot_positions.as<int64_t>()[se], p);
            for (const HostTensor* t : {&keys, &values})
              ASSERT_EQ(std::memcmp(t->as<bf16>() + sg * kv, t->as<bf16>() + se * kv,
                                    static_cast<size_t>(kv) * sizeof(bf16)),
                        0)
                  << "layer " << l << " context " << i << " position " << p;
          }
      }
      // The same drafter drafts from either context.
      for (int i = 0; i < 2; ++i) {
        const int64_t next = fed[i].empty() ? 0 : fed[i].back() + 1;
        const DFlash2Block from_graphed{17, next, graphed[i].get()};
        const DFlash2Block from_plain{17, next, plain[i].get()};
        std::vector<int32_t> g(J), e(J);
        ASSERT_TRUE(eager.draft({&from_graphed, 1}, g).ok());
        ASSERT_TRUE(eager.draft({&from_plain, 1}, e).ok());
        EXPECT_EQ(g, e) << "context " << i;
      }
    }
  }
  EXPECT_GE(drafter_->context_graphs().num_captures(), 3);
  EXPECT_EQ(drafter_->context_graphs().num_replays(), 6);
  EXPECT_EQ(eager.context_graphs().num_replays(), 0);
}

// An engine on the GPU with the trained drafter against one without: the drafter's blocks are
// verified and some accepted; each request's tokens equal plain decoding's up to a step where the
// plain engine's two best tokens were within 0.05 nats (a verify step's batch rounds the target's
// logits differently from a decode step's, as a batch of another size does).
TEST_F(DFlash2CudaTest, AnEngineOnTheGpuDraftsAndKeepsPlainDecodingsTokens) {
  auto weights = load_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  std::vector<RunRequest> reqs;
  for (uint64_t i = 0; i < 8; ++i) {
    SamplingParams p = greedy(40);
    p.logprobs = true;
    p.top_logprobs = 2;
    reqs.push_back(RunRequest{tokens_of(20, 40 + i, 512), p});
  }
  EngineOptions o = engine_options(Device::kCuda);
  o.block_size_tokens = 4;
  o.max_running = 8;
  auto plain = Engine::create(weights, o);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  o.speculative.dflash2_drafter = kTrained;
  auto spec = Engine::create(weights, o);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  const auto want = run_all(**plain, reqs), got = run_all(**spec, reqs);
  ASSERT_EQ(want.size(), got.size());
  int identical = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    const SiblingResult &w = want[r][0], &g = got[r][0];
    const size_t n = std::min(w.tokens.size(), g.tokens.size());
    size_t i = 0;
    while (i < n && w.tokens[i] == g.tokens[i]) ++i;
    if (i == w.tokens.size() && i == g.tokens.size()) {
      ++identical;
      continue;
    }
    ASSERT_LT(i, w.logprobs.size()) << "request " << r;
    const auto& top = w.logprobs[i].top;
    ASSERT_GE(top.size(), 2u);
    EXPECT_LT(top[0].logprob - top[1].logprob, 0.05) << "request " << r << " token " << i;
  }
  EXPECT_GE(identical, 4);
  const EngineStats s = (*spec)->stats();
  EXPECT_GT(s.spec_verifications, 0);
  EXPECT_GT(s.spec_accepted_tokens, 0);
  (*spec)->flush_prefix_cache();
  expect_pools_full(**spec);
}

}  // namespace
}  // namespace beam::testing
