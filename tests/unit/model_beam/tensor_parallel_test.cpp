// Tensor parallelism on the CPU (model/tensor_parallel.h, model/beam/rank_workers.h): the weight
// slices, and 2- and 4-rank models whose logits match the one-rank model's (the same roundings,
// fp32 sums in another order) over prefills, chunks, decode steps and mixed batches.
#include "model/tensor_parallel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "beam_test_util.h"
#include "comm/local_group.h"
#include "core/bf16.h"
#include "model/beam/rank_workers.h"
#include "model/synthetic_weights.h"

namespace beam::testing {
namespace {

// How far a sharded model's logits may be from the one-rank model's: its partial sums add in
// another fp32 order, so a bf16 rounding of an output here and there goes the other way.
constexpr double kShardTolerance = 2e-3;

KernelContext cpu(ThreadPool& pool) {
  KernelContext ctx;
  ctx.pool = &pool;
  return ctx;
}

// Multiplies every element of t (f32 or bf16, host) by a power of two (exact).
void scale_exactly(const TensorView& t, float by) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype == DType::kF32)
      t.as<float>()[i] *= by;
    else
      t.as<bf16>()[i] = to_bf16(to_float(t.as<bf16>()[i]) * by);
  }
}

// tiny-beam's widths with 8 q heads over 4 KV heads (splits 1, 2 and 4 ways), random weights;
// router and LM head scaled up 8x so routing choices and top tokens have margins (random weights
// leave both nearly flat, where the split's other fp32 summation order flips choices).
std::shared_ptr<const BeamWeights> four_kv_heads_model(ThreadPool& pool) {
  static std::shared_ptr<const BeamWeights> weights = [&] {
    std::shared_ptr<const BeamWeights> base = load_model("tiny-beam");
    BeamConfig cfg = base->config;
    cfg.num_heads = 8;
    cfg.num_kv_heads = 4;
    cfg.head_dim = 32;
    auto w = make_synthetic_weights(cpu(pool), cfg, SyntheticWeightOptions{3, 0.05f, 0.02f, 0.02f});
    EXPECT_TRUE(w.ok()) << w.error().message;
    for (const LayerWeights& l : (*w)->layers)
      if (l.moe.router.data) scale_exactly(l.moe.router, 8.0f);
    scale_exactly((*w)->lm_head, 8.0f);
    return std::shared_ptr<const BeamWeights>(*w);
  }();
  return weights;
}

// The model split over `size` ranks, each with its KV cache of num_seqs sequences.
class ShardedModel {
 public:
  ShardedModel(std::shared_ptr<const BeamWeights> full, int size, int64_t num_seqs,
               int64_t max_tokens)
      : group_(size) {
    auto slice = shard_beam_weights(full, TensorParallel{0, size});
    EXPECT_TRUE(slice.ok()) << slice.error().message;
    rank0_ = std::make_unique<BeamModel>(*slice, cpu(pool_), nullptr,
                                         ModelShard{TensorParallel{0, size}, &group_.rank(0)});
    auto workers = RankWorkers::create(group_, RankWorkers::cpu_ranks(slices_of(full), group_, 1));
    EXPECT_TRUE(workers.ok()) << workers.error().message;
    workers_ = std::move(*workers);
    for (int r = 0; r < size; ++r)
      caches_.push_back(std::make_unique<LocalKvCache>(full->config, num_seqs, max_tokens, 16,
                                                       TensorParallel{r, size}));
    for (const auto& c : caches_) kv_.push_back(&c->layers());
  }

  Status forward(const ForwardBatch& batch, ForwardOutput& out) {
    return workers_->forward(*rank0_, batch, kv_, out);
  }
  std::span<const int32_t> table(int64_t s) const { return caches_[0]->block_table(s); }
  RankWorkers& workers() { return *workers_; }

 private:
  ThreadPool pool_{1};
  LocalGroup group_;
  std::unique_ptr<BeamModel> rank0_;
  std::unique_ptr<RankWorkers> workers_;
  std::vector<std::unique_ptr<LocalKvCache>> caches_;
  std::vector<const KvLayers*> kv_;
};

// Logits of a prefill of prompt_len tokens (every row), then one decode step per further token,
// for each of two sequences of different lengths batched together; `run` does each step.
template <typename Run, typename Table>
std::vector<float> prefill_then_decode(const std::vector<int32_t>& tokens, int64_t prompt_len,
                                       Run run, Table table) {
  std::vector<float> logits;
  const auto n = static_cast<int64_t>(tokens.size());
  auto span = [&](int64_t begin, int64_t count) {
    return std::span<const int32_t>(tokens.data() + begin, static_cast<size_t>(count));
  };
  ForwardBatch prefill;  // sequence 0: the prompt; sequence 1: its first half
  prefill.seqs.push_back(SeqChunk{span(0, prompt_len), 0, 0, table(0), table(0), true});
  prefill.seqs.push_back(SeqChunk{span(0, prompt_len / 2), 0, 0, table(1), table(1), true});
  ForwardOutput out;
  EXPECT_TRUE(run(prefill, out));
  logits = out.logits;
  for (int64_t i = prompt_len; i < n; ++i) {
    ForwardBatch step;
    step.seqs.push_back(SeqChunk{span(i, 1), 0, i, table(0), table(0), false});
    const int64_t j = prompt_len / 2 + (i - prompt_len);
    step.seqs.push_back(SeqChunk{span(j, 1), 0, j, table(1), table(1), false});
    EXPECT_TRUE(run(step, out));
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
  }
  return logits;
}

std::vector<float> one_rank_logits(std::shared_ptr<const BeamWeights> w,
                                   const std::vector<int32_t>& tokens, int64_t prompt_len) {
  ThreadPool pool(2);
  BeamModel model(w, cpu(pool));
  LocalKvCache kv(w->config, 2, static_cast<int64_t>(tokens.size()));
  return prefill_then_decode(
      tokens, prompt_len,
      [&](const ForwardBatch& b, ForwardOutput& out) {
        Status st = model.forward(b, kv.layers(), out);
        EXPECT_TRUE(st.ok()) << st.error().message;
        return st.ok();
      },
      [&](int64_t s) { return kv.block_table(s); });
}

std::vector<float> sharded_logits(std::shared_ptr<const BeamWeights> w, int size,
                                  const std::vector<int32_t>& tokens, int64_t prompt_len) {
  ShardedModel model(w, size, 2, static_cast<int64_t>(tokens.size()));
  return prefill_then_decode(
      tokens, prompt_len,
      [&](const ForwardBatch& b, ForwardOutput& out) {
        Status st = model.forward(b, out);
        EXPECT_TRUE(st.ok()) << st.error().message;
        return st.ok();
      },
      [&](int64_t s) { return model.table(s); });
}

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab,
                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  LogitsComparison c = compare_logits(got, ref, vocab);
  EXPECT_LE(c.rel_error, kShardTolerance) << what;
  EXPECT_EQ(c.argmax_mismatches, 0) << what << " (" << c.rows_checked << " rows checked)";
  EXPECT_GT(c.rows_checked, 0) << what;
}

TEST(TensorParallel, ChecksThatEveryDimensionSplits) {
  const BeamConfig& cfg = load_model("tiny-beam")->config;  // 4 q / 2 KV heads, 16 experts
  EXPECT_TRUE(check_tensor_parallel(cfg, 1).ok());
  EXPECT_TRUE(check_tensor_parallel(cfg, 2).ok());
  Status three = check_tensor_parallel(cfg, 3);
  ASSERT_FALSE(three.ok());
  for (const char* named :
       {"num_key_value_heads 2", "num_attention_heads 4", "n_routed_experts 16"})
    EXPECT_NE(three.error().message.find(named), std::string::npos) << three.error().message;
  Status four = check_tensor_parallel(cfg, 4);
  ASSERT_FALSE(four.ok());
  EXPECT_NE(four.error().message.find("num_key_value_heads 2"), std::string::npos);
  EXPECT_EQ(four.error().message.find("num_attention_heads"), std::string::npos);
  EXPECT_FALSE(check_tensor_parallel(cfg, 0).ok());
}

TEST(TensorParallel, SlicesHoldTheirRanksRowsAndColumns) {
  std::shared_ptr<const BeamWeights> full = load_model("tiny-beam");
  const BeamConfig& c = full->config;
  const int64_t D = c.head_dim, H = c.hidden_size;
  for (int r = 0; r < 2; ++r) {
    auto slice = shard_beam_weights(full, TensorParallel{r, 2});
    ASSERT_TRUE(slice.ok()) << slice.error().message;
    const ShardShape s = shard_shape(c, TensorParallel{r, 2});
    EXPECT_EQ(s.num_heads, 2);
    EXPECT_EQ(s.num_kv_heads, 1);
    EXPECT_EQ(s.first_expert, r * 8);
    EXPECT_EQ(s.first_vocab, r * c.vocab_size / 2);
    for (size_t l = 0; l < full->layers.size(); ++l) {
      const LayerWeights& f = full->layers[l];
      const LayerWeights& w = (*slice)->layers[l];
      const auto* fq = f.attn.qkvg.as<bf16>();
      const auto* wq = w.attn.qkvg.as<bf16>();
      ASSERT_EQ(w.attn.qkvg.dim(0), 2 * s.num_heads * D + 2 * s.num_kv_heads * D);
      // Row blocks: q heads, the KV head's k, its v, the gate of the q heads.
      const int64_t src_rows[] = {r * s.num_heads * D, c.q_width() + r * D,
                                  c.q_width() + c.kv_width() + r * D,
                                  c.q_width() + 2 * c.kv_width() + r * s.num_heads * D};
      const int64_t counts[] = {s.num_heads * D, D, D, s.num_heads * D};
      int64_t dst = 0;
      for (int part = 0; part < 4; ++part) {
        EXPECT_EQ(
            std::memcmp(wq + dst * H, fq + src_rows[part] * H, counts[part] * H * sizeof(bf16)), 0)
            << "layer " << l << " part " << part;
        dst += counts[part];
      }
      const int64_t cols = s.num_heads * D;
      for (int64_t row : {int64_t{0}, H - 1})
        EXPECT_EQ(std::memcmp(w.attn.o_proj.as<bf16>() + row * cols,
                              f.attn.o_proj.as<bf16>() + row * c.q_width() + r * cols,
                              cols * sizeof(bf16)),
                  0);
      if (c.mlp_layer_types[l] == MlpKind::kSparse) {
        EXPECT_EQ(w.moe.experts_gate_up.dim(0), 8);
        EXPECT_EQ(w.moe.experts_gate_up.data, f.moe.experts_gate_up.rows(r * 8, 8).data);
        EXPECT_EQ(w.moe.router.data, f.moe.router.data);
      } else {
        const int64_t I = s.intermediate;
        EXPECT_EQ(std::memcmp(w.dense.gate_up.as<bf16>() + I * H,
                              f.dense.gate_up.as<bf16>() + (c.intermediate_size + r * I) * H,
                              I * H * sizeof(bf16)),
                  0);
      }
    }
    EXPECT_EQ((*slice)->lm_head.dim(0), c.vocab_size / 2);
    EXPECT_EQ((*slice)->embed.data, full->embed.data);
  }
  auto one = shard_beam_weights(full, TensorParallel{0, 1});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->get(), full.get());
}

TEST(TensorParallel, TwoRanksMatchOneOnTinyBeam) {
  std::shared_ptr<const BeamWeights> w = load_model("tiny-beam");
  const std::vector<int32_t> tokens = random_tokens(40, w->config.vocab_size, 5);
  const std::vector<float> ref = one_rank_logits(w, tokens, 30);
  expect_close(sharded_logits(w, 2, tokens, 30), ref, w->config.vocab_size, "2 ranks");
}

TEST(TensorParallel, TwoAndFourRanksMatchOneWithFourKvHeads) {
  ThreadPool pool(2);
  std::shared_ptr<const BeamWeights> w = four_kv_heads_model(pool);
  const std::vector<int32_t> tokens = random_tokens(36, w->config.vocab_size, 9);
  const std::vector<float> ref = one_rank_logits(w, tokens, 24);
  // The tokens route to experts of every rank's quarter (so each rank's partial sums matter).
  ThreadPool pool1(1);
  BeamModel one(w, cpu(pool1));
  std::vector<std::vector<int32_t>> experts;
  run_chunked(one, tokens, 0, 0, &experts);
  std::set<int64_t> quarters;
  for (const auto& token : experts)
    for (int32_t e : token) quarters.insert(e / (w->config.num_experts / 4));
  EXPECT_EQ(quarters.size(), 4u);
  for (int size : {2, 4})
    expect_close(sharded_logits(w, size, tokens, 24), ref, w->config.vocab_size,
                 std::to_string(size) + " ranks");
}

TEST(TensorParallel, EveryRankGathersTheSameLogits) {
  std::shared_ptr<const BeamWeights> w = load_model("tiny-beam");
  ShardedModel model(w, 2, 1, 32);
  const std::vector<int32_t> tokens = random_tokens(20, w->config.vocab_size, 2);
  ForwardBatch batch;
  batch.seqs.push_back(SeqChunk{tokens, 0, 0, model.table(0), model.table(0), true});
  ForwardOutput out;
  ASSERT_TRUE(model.forward(batch, out).ok());
  const ForwardOutput& other = model.workers().output(1);
  ASSERT_EQ(out.logits.size(), static_cast<size_t>(20 * w->config.vocab_size));
  ASSERT_EQ(other.logits.size(), out.logits.size());
  EXPECT_EQ(std::memcmp(other.logits.data(), out.logits.data(), out.logits.size() * sizeof(float)),
            0);
  for (float v : out.logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(TensorParallel, ARankErrorStopsTheStepAndTheNextStepRuns) {
  std::shared_ptr<const BeamWeights> w = load_model("tiny-beam");
  ShardedModel model(w, 2, 1, 32);
  const std::vector<int32_t> tokens = random_tokens(8, w->config.vocab_size, 4);
  std::vector<int32_t> bad = tokens;
  bad[3] = static_cast<int32_t>(w->config.vocab_size);  // outside the vocabulary
  ForwardBatch batch;
  batch.seqs.push_back(SeqChunk{bad, 0, 0, model.table(0), model.table(0), true});
  ForwardOutput out;
  Status st = model.forward(batch, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("outside the vocabulary"), std::string::npos)
      << st.error().message;
  batch.seqs[0].tokens = tokens;
  st = model.forward(batch, out);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(out.logits.size(), static_cast<size_t>(8 * w->config.vocab_size));
}

TEST(TensorParallel, AKvCacheOfAnotherSplitIsAnError) {
  std::shared_ptr<const BeamWeights> w = load_model("tiny-beam");
  LocalGroup group(2);
  ThreadPool pool(1);
  auto slice = shard_beam_weights(w, TensorParallel{0, 2});
  ASSERT_TRUE(slice.ok());
  auto workers = RankWorkers::create(group, RankWorkers::cpu_ranks(slices_of(w), group, 1));
  ASSERT_TRUE(workers.ok());
  BeamModel rank0(*slice, cpu(pool), nullptr, ModelShard{TensorParallel{0, 2}, &group.rank(0)});
  LocalKvCache whole(w->config, 1, 16), half(w->config, 1, 16, 16, TensorParallel{1, 2});
  const std::vector<const KvLayers*> kv = {&whole.layers(), &half.layers()};
  const std::vector<int32_t> tokens = {1, 2, 3};
  ForwardBatch batch;
  batch.seqs.push_back(SeqChunk{tokens, 0, 0, whole.block_table(0), whole.block_table(0), false});
  ForwardOutput out;
  Status st = (*workers)->forward(rank0, batch, kv, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("KV cache layers hold 2 KV heads, the model's rank needs 1"),
            std::string::npos)
      << st.error().message;
}

TEST(TensorParallel, ReplacedWeightsReachEveryRank) {
  ThreadPool pool(2);
  std::shared_ptr<const BeamWeights> a = load_model("tiny-beam");
  auto b =
      make_synthetic_weights(cpu(pool), a->config, SyntheticWeightOptions{11, 0.05f, 0.02f, 0.02f});
  ASSERT_TRUE(b.ok());
  std::shared_ptr<const BeamWeights> bw = *b;
  const std::vector<int32_t> tokens = random_tokens(12, a->config.vocab_size, 6);
  const std::vector<float> ref = one_rank_logits(bw, tokens, 12);

  LocalGroup group(2);
  ThreadPool pool0(1);
  auto workers = RankWorkers::create(group, RankWorkers::cpu_ranks(slices_of(a), group, 1));
  ASSERT_TRUE(workers.ok());
  BeamModel rank0(*shard_beam_weights(a, TensorParallel{0, 2}), cpu(pool0), nullptr,
                  ModelShard{TensorParallel{0, 2}, &group.rank(0)});
  ASSERT_TRUE(rank0.replace_weights(*shard_beam_weights(bw, TensorParallel{0, 2})).ok());
  ASSERT_TRUE((*workers)->replace_weights(slices_of(bw)).ok());
  LocalKvCache c0(a->config, 2, 12, 16, TensorParallel{0, 2}),
      c1(a->config, 2, 12, 16, TensorParallel{1, 2});
  const std::vector<const KvLayers*> kv = {&c0.layers(), &c1.layers()};
  const std::vector<float> got = prefill_then_decode(
      tokens, 12,
      [&](const ForwardBatch& batch, ForwardOutput& out) {
        Status st = (*workers)->forward(rank0, batch, kv, out);
        EXPECT_TRUE(st.ok()) << st.error().message;
        return st.ok();
      },
      [&](int64_t s) { return c0.block_table(s); });
  expect_close(got, ref, a->config.vocab_size, "replaced weights");
}

}  // namespace
}  // namespace beam::testing
