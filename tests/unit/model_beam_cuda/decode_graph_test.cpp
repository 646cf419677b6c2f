// CUDA graphs of decode steps (model/beam/decode_graphs.h): two GPU models over the same weights,
// one replaying graphs and one eager (KernelContext::cuda_graphs = false), run the same greedy
// steps; every step's logits must be bit-identical — at exact buckets, padded batches, after
// sequences leave and join (new block tables under a captured graph), and across prefill/decode
// mixing; with captured residuals too. An engine with graphs reproduces the CPU engine's greedy
// tokens on beam-nano.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <span>

#include "../model_beam/beam_goldens.h"
#include "../runtime_engine/engine_test_util.h"
#include "core/bf16.h"
#include "cuda_model_fixture.h"
#include "kernels/api/fixed_attention.h"
#include "runtime/engine.h"

namespace beam::testing {
namespace {

struct Seq {
  std::vector<int32_t> tokens;
  int64_t slot = 0;      // LocalKvCache sequence slot (same in both caches)
  int64_t computed = 0;  // tokens already in the KV cache
};

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

class DecodeGraphTest : public CudaModelTest {
 protected:
  // Graph and eager models of models/<name>, each with a cache of num_slots x max_tokens.
  void make_models(const std::string& name, int64_t num_slots, int64_t max_tokens) {
    auto host = load_model(name);
    ASSERT_NE(host, nullptr);
    auto uploaded = upload_weights(gpu_, host);
    ASSERT_TRUE(uploaded.ok()) << uploaded.error().message;
    // The eager model gets its own CUDA context, as every engine has: its scratch growth must not
    // count as the graph model's (which recaptures when its own scratch moves).
    auto eager_cuda = create_cuda_context(0);
    ASSERT_TRUE(eager_cuda.ok()) << eager_cuda.error().message;
    eager_cuda_ = std::move(*eager_cuda);
    KernelContext eager_ctx = gpu_;
    eager_ctx.cuda = eager_cuda_.get();
    eager_ctx.cuda_graphs = false;
    graph_ = std::make_unique<BeamModel>(uploaded->weights, gpu_);
    eager_ = std::make_unique<BeamModel>(uploaded->weights, eager_ctx);
    auto kv_g = LocalKvCache::create(gpu_, graph_->config(), num_slots, max_tokens);
    auto kv_e = LocalKvCache::create(eager_ctx, eager_->config(), num_slots, max_tokens);
    ASSERT_TRUE(kv_g.ok() && kv_e.ok());
    kv_graph_ = std::make_unique<LocalKvCache>(std::move(*kv_g));
    kv_eager_ = std::make_unique<LocalKvCache>(std::move(*kv_e));
  }

  // Sequences with several uncomputed tokens take every token's logits when all_logits_ is set (a
  // verification's rows).
  ForwardBatch batch_of(const std::vector<Seq*>& seqs, const LocalKvCache& kv) const {
    ForwardBatch batch;
    batch.capture_layers = capture_;
    for (const Seq* s : seqs) {
      std::span<const int32_t> uncomputed(s->tokens.data() + s->computed, s->tokens.size() - s->computed);
      batch.seqs.push_back(SeqChunk{uncomputed, 0, s->computed, kv.block_table(s->slot),
                                    kv.block_table(s->slot), all_logits_ && uncomputed.size() > 1});
      if (final_hidden_) batch.seqs.back().final_hidden_from = 0;
    }
    return batch;
  }

  // One step of seqs (each runs its uncomputed tokens) on both models; the logits must be
  // bit-identical. Appends each sequence's greedy token.
  void step(const std::vector<Seq*>& seqs, const std::string& what) {
    ForwardOutput g, e;
    auto sg = graph_->forward(batch_of(seqs, *kv_graph_), kv_graph_->layers(), g);
    auto se = eager_->forward(batch_of(seqs, *kv_eager_), kv_eager_->layers(), e);
    ASSERT_TRUE(sg.ok()) << sg.error().message;
    ASSERT_TRUE(se.ok()) << se.error().message;
    ASSERT_EQ(g.num_rows(), e.num_rows()) << what;
    ASSERT_EQ(g.logits.size(), e.logits.size()) << what;
    EXPECT_EQ(g.row_seq, e.row_seq) << what;
    EXPECT_EQ(g.row_position, e.row_position) << what;
    EXPECT_EQ(g.captured_hidden, e.captured_hidden) << what << ": captured residuals";
    EXPECT_EQ(g.final_hidden, e.final_hidden) << what << ": final hidden states";
    int64_t tokens = 0;
    for (const Seq* q : seqs) tokens += static_cast<int64_t>(q->tokens.size()) - q->computed;
    EXPECT_EQ(static_cast<int64_t>(g.final_hidden.size()),
              final_hidden_ ? tokens * graph_->config().hidden_size : 0)
        << what;
    EXPECT_EQ(static_cast<int64_t>(g.captured_hidden.size()),
              tokens * static_cast<int64_t>(capture_.size()) * graph_->config().hidden_size)
        << what;
    for (int64_t r = 0; r < g.num_rows(); ++r) {
      auto a = g.row(r), b = e.row(r);
      int64_t differing = 0;
      for (size_t i = 0; i < a.size(); ++i)
        differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
      EXPECT_EQ(differing, 0) << what << ": row " << r << " differs in " << differing << " of "
                              << a.size() << " logits";
    }
    std::vector<int64_t> last_row(seqs.size(), -1);  // each sequence's last logits row
    for (int64_t r = 0; r < g.num_rows(); ++r) last_row[static_cast<size_t>(g.row_seq[r])] = r;
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i]->computed = static_cast<int64_t>(seqs[i]->tokens.size());
      seqs[i]->tokens.push_back(argmax(g.row(last_row[i])));
    }
  }

  // n sequences with prompts up to `longest` tokens: one prefill step, then `decode_steps`
  // decode steps compared bit for bit; one capture, replays on every step after the warm-up.
  void check_batch(int64_t n, int64_t longest, int64_t decode_steps) {
    const int64_t max_tokens = longest + decode_steps + 2;
    make_models("tiny-beam", n, max_tokens);
    if (::testing::Test::HasFatalFailure()) return;
    const int64_t vocab = graph_->config().vocab_size;
    std::vector<Seq> seqs(static_cast<size_t>(n));
    std::vector<Seq*> all;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t len = i == 0 ? longest : 3 + (i * 37) % longest;
      seqs[i] = Seq{random_tokens(len, vocab, 100 + static_cast<uint64_t>(i)), i, 0};
      all.push_back(&seqs[i]);
    }
    step(all, "prefill");
    for (int64_t s = 0; s < decode_steps; ++s) step(all, "decode step " + std::to_string(s));
    EXPECT_EQ(graph_->decode_graphs().num_captures(), 1);
    EXPECT_EQ(graph_->decode_graphs().num_replays(), decode_steps - 1);
    EXPECT_EQ(eager_->decode_graphs().num_replays(), 0);
  }

  std::vector<int64_t> capture_;  // ForwardBatch::capture_layers of every step
  bool final_hidden_ = false;     // every token's SeqChunk::final_hidden_from 0 in every step
  bool all_logits_ = false;       // multi-token chunks take every token's logits
  std::shared_ptr<CudaContext> eager_cuda_;  // declared first: outlives the eager model and cache
  std::unique_ptr<BeamModel> graph_, eager_;
  std::unique_ptr<LocalKvCache> kv_graph_, kv_eager_;
  std::vector<DeviceBuffer> buffers_;  // device tensors of kernel-level tests
};

TEST_F(DecodeGraphTest, BatchOfOneMatchesEagerBitForBit) { check_batch(1, 300, 5); }

// Padded to the bucket of 4; the longest context (1,100 keys) takes the split-KV path.
TEST_F(DecodeGraphTest, BatchOfThreePaddedToFourMatchesEagerBitForBit) { check_batch(3, 1100, 5); }

TEST_F(DecodeGraphTest, BatchOfThirtyTwoMatchesEagerBitForBit) { check_batch(32, 80, 4); }

// Decode steps that capture residuals (a DFlash2 drafter's taps) replay graphs too: the graphs'
// copies of the tapped layers' residuals equal the eager steps' bit for bit, padding rows left out.
TEST_F(DecodeGraphTest, CapturedResidualsReplayAsEagerBitForBit) {
  capture_ = {1, 3, 4};
  check_batch(3, 300, 5);
}

// Decode steps that return every token's final hidden state (SGLang's return_hidden_states) replay
// graphs too: the states are the LM head's normed rows, equal to the eager steps' bit for bit.
TEST_F(DecodeGraphTest, FinalHiddenStatesReplayAsEagerBitForBit) {
  final_hidden_ = true;
  check_batch(3, 300, 5);
}

// A prefill chunk with one logit row norms every row for its states (Workspace::norm_every_row);
// with every row a logit row the states are the LM head's own normed rows: equal bit for bit.
TEST_F(DecodeGraphTest, FinalHiddenStatesOfAChunkEqualThoseOfItsLogitRows) {
  make_models("tiny-beam", 1, 200);
  if (HasFatalFailure()) return;
  const std::vector<int32_t> prompt = random_tokens(150, graph_->config().vocab_size, 5);
  ForwardOutput rows[2];
  for (int all : {0, 1}) {
    BeamModel& model = all ? *graph_ : *eager_;
    const LocalKvCache& kv = all ? *kv_graph_ : *kv_eager_;
    ForwardBatch batch;
    batch.seqs.push_back(SeqChunk{prompt, 0, 0, kv.block_table(0), kv.block_table(0), all == 1});
    batch.seqs[0].final_hidden_from = 0;
    auto st = model.forward(batch, kv.layers(), rows[all]);
    ASSERT_TRUE(st.ok()) << st.error().message;
  }
  ASSERT_EQ(rows[0].final_hidden.size(), prompt.size() * graph_->config().hidden_size);
  EXPECT_EQ(rows[0].final_hidden, rows[1].final_hidden);
  EXPECT_EQ(rows[0].num_rows(), 1);
  EXPECT_EQ(rows[1].num_rows(), static_cast<int64_t>(prompt.size()));
}

// Speculative verification steps (a few tokens a sequence, every token's logits) replay graphs
// of their row count: the drafts' logits, the captured residuals and the KV they leave equal the
// eager steps' bit for bit, with decodes (one token, last logits) in the same batch; the bucket of
// 16 serves batches of 11 and 13 rows (other draft counts, other block tables).
TEST_F(DecodeGraphTest, VerificationStepsReplayAsEagerBitForBit) {
  capture_ = {1, 3, 4};
  make_models("tiny-beam", 3, 300);
  if (HasFatalFailure()) return;
  const int64_t vocab = graph_->config().vocab_size;
  std::vector<Seq> s(3);
  const int64_t lens[3] = {120, 40, 230};
  for (int64_t i = 0; i < 3; ++i)
    s[i] = Seq{random_tokens(lens[i], vocab, 31 + static_cast<uint64_t>(i)), i, 0};
  step({&s[0], &s[1], &s[2]}, "prefill");
  all_logits_ = true;
  // Drafts per sequence each step (0: a plain decode in the same batch).
  const int64_t drafts[4][3] = {{3, 0, 5}, {7, 2, 1}, {3, 0, 5}, {4, 1, 5}};
  for (int k = 0; k < 4; ++k) {
    for (int64_t i = 0; i < 3; ++i) {
      const std::vector<int32_t> d =
          random_tokens(drafts[k][i], vocab, 500 + static_cast<uint64_t>(k * 3 + i));
      s[i].tokens.insert(s[i].tokens.end(), d.begin(), d.end());
    }
    step({&s[0], &s[1], &s[2]}, "verification " + std::to_string(k));
  }
  // 11, 13, 11 and 13 rows: the bucket of 16 warms, then captures and replays each step.
  EXPECT_EQ(graph_->decode_graphs().num_captures(), 1);
  EXPECT_EQ(graph_->decode_graphs().num_replays(), 3);
  EXPECT_EQ(eager_->decode_graphs().num_replays(), 0);
  // A chunk longer than a verification's runs eagerly.
  s[0].tokens.resize(s[0].tokens.size() + DecodeGraphs::kMaxRowsPerSeq, 7);
  step({&s[0], &s[1], &s[2]}, "a long chunk");
  EXPECT_EQ(graph_->decode_graphs().num_replays(), 3);
}

// A captured bucket replays after a sequence leaves and another joins (other block tables,
// other positions), the join's prefill runs in a mixed (eager) step, and a smaller batch pads
// into the same bucket.
TEST_F(DecodeGraphTest, ReplayAfterLeaveAndJoinMatchesEager) {
  make_models("tiny-beam", 5, 200);
  if (HasFatalFailure()) return;
  const int64_t vocab = graph_->config().vocab_size;
  std::vector<Seq> s(5);
  const int64_t lens[5] = {40, 70, 25, 130, 90};
  for (int64_t i = 0; i < 5; ++i) s[i] = Seq{random_tokens(lens[i], vocab, 7 + static_cast<uint64_t>(i)), i, 0};

  step({&s[0], &s[1], &s[2], &s[3]}, "prefill A-D");
  for (int k = 0; k < 3; ++k) step({&s[0], &s[1], &s[2], &s[3]}, "decode A-D " + std::to_string(k));
  EXPECT_EQ(graph_->decode_graphs().num_captures(), 1);
  const int64_t replays = graph_->decode_graphs().num_replays();
  EXPECT_EQ(replays, 2);

  // C leaves; E joins with its prefill in a mixed step (decodes of A, B, D + E's prompt).
  step({&s[0], &s[1], &s[3], &s[4]}, "mixed: decode A, B, D + prefill E");
  EXPECT_EQ(graph_->decode_graphs().num_replays(), replays) << "a mixed step must run eagerly";
  for (int k = 0; k < 3; ++k) step({&s[0], &s[1], &s[3], &s[4]}, "decode A, B, D, E " + std::to_string(k));
  // D leaves: three sequences pad into the same bucket of 4.
  for (int k = 0; k < 2; ++k) step({&s[4], &s[0], &s[1]}, "decode E, A, B " + std::to_string(k));
  EXPECT_EQ(graph_->decode_graphs().num_captures(), 1) << "new block tables must not recapture";
  EXPECT_EQ(graph_->decode_graphs().num_replays(), replays + 5);
}

// The fixed-grid attention of graphs against the eager op at Beam's head shapes (48/8 x 128),
// padded rows, contexts that take the split-KV path, full and 512-key sliding windows, and a
// re-plan of the same slot for another batch.
TEST_F(DecodeGraphTest, FixedAttentionMatchesPagedAttentionAtBeamShapes) {
  const int64_t Nq = 48, Nkv = 8, D = 128, B = 64, NB = 192, T = 4;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto device_random = [&](Shape shape) {
    std::vector<bf16> host(static_cast<size_t>(shape.numel()));
    for (bf16& x : host) x = to_bf16(normal(rng));
    auto buf = allocate_buffer(gpu_, host.size() * sizeof(bf16));
    EXPECT_TRUE(buf.ok());
    TensorView dev = buf->view(DType::kBF16, shape);
    copy_tensor(gpu_, dev, TensorView{host.data(), DType::kBF16, shape, Device::kCpu});
    buffers_.push_back(*buf);
    return dev;
  };
  PagedKv kv{device_random({NB, B, Nkv, D}), device_random({NB, B, Nkv, D}), B};
  TensorView q = device_random({T, Nq, D});
  TensorView out_eager = device_random({T, Nq, D}), out_fixed = device_random({T, Nq, D});
  std::vector<int32_t> blocks(NB);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  const int64_t contexts[3] = {100, 1500, 9000};  // 9,000 keys: 36 splits of 256
  std::vector<AttentionSeq> seqs;
  size_t next_block = 0;
  for (int64_t i = 0; i < 3; ++i) {
    const auto n = static_cast<size_t>((contexts[i] + B - 1) / B);
    std::span<const int32_t> table(blocks.data() + next_block, n);
    next_block += n;
    seqs.push_back(AttentionSeq{i, 1, contexts[i] - 1, 0, contexts[i], table});
  }
  auto rows_of = [&](const TensorView& t) {
    std::vector<uint16_t> host(static_cast<size_t>(3 * Nq * D));
    copy_tensor(gpu_, TensorView{host.data(), DType::kBF16, {3, Nq, D}, Device::kCpu}, t.rows(0, 3));
    return host;
  };
  for (int64_t window : {int64_t{0}, int64_t{512}}) {
    for (int pass = 0; pass < 2; ++pass) {  // the second pass re-plans with the order reversed
      if (pass == 1) {
        std::reverse(seqs.begin(), seqs.end());
        for (int64_t i = 0; i < 3; ++i) seqs[i].q_begin = i;
      }
      begin_step(gpu_);
      paged_attention(gpu_, q, kv, seqs, window, out_eager);
      plan_fixed_attention(gpu_, window > 0 ? 1 : 0, kv, T, Nq, D, seqs, window);
      fixed_paged_attention(gpu_, window > 0 ? 1 : 0, q, kv, window, out_fixed);
      EXPECT_EQ(rows_of(out_eager), rows_of(out_fixed)) << "window " << window << " pass " << pass;
    }
  }
}

EngineOptions nano_engine_options(Device device, bool cuda_graphs) {
  EngineOptions o = engine_options(device);
  o.cuda_graphs = cuda_graphs;
  return o;
}

TEST_F(DecodeGraphTest, EngineWithGraphsGeneratesTheCpuEnginesGreedyTokens) {
  GreedyGoldens golden = load_greedy_goldens("beam-nano");
  ASSERT_FALSE(golden.cases.empty());
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  const std::vector<RunRequest> reqs = greedy_requests(golden);
  auto cpu = Engine::create(weights, nano_engine_options(Device::kCpu, false));
  ASSERT_TRUE(cpu.ok()) << cpu.error().message;
  auto graphs = Engine::create(weights, nano_engine_options(Device::kCuda, true));
  ASSERT_TRUE(graphs.ok()) << graphs.error().message;
  auto eager = Engine::create(weights, nano_engine_options(Device::kCuda, false));
  ASSERT_TRUE(eager.ok()) << eager.error().message;
  const auto want = run_all(**cpu, reqs);
  const auto with_graphs = run_all(**graphs, reqs);
  const auto without = run_all(**eager, reqs);
  auto reference = cpu_model("beam-nano");
  ASSERT_NE(reference, nullptr);
  for (size_t i = 0; i < reqs.size(); ++i) {
    // Graphs replay the eager kernels: identical tokens. Against the CPU: where the margin >= 0.5.
    EXPECT_EQ(with_graphs[i][0].tokens, without[i][0].tokens) << "case " << i << " graphs vs eager";
    const int64_t k = confident_prefix(*reference, reqs[i].prompt, want[i][0].tokens);
    EXPECT_EQ(first(with_graphs[i][0].tokens, k), first(want[i][0].tokens, k)) << "case " << i << " with graphs";
  }
  // Alone (bucket 1) after the batched run (bucket 8): graphs of both buckets coexist.
  const int64_t k0 = confident_prefix(*reference, reqs[0].prompt, want[0][0].tokens);
  EXPECT_EQ(first(run_all(**graphs, {reqs[0]})[0][0].tokens, k0), first(want[0][0].tokens, k0));
  expect_pools_full(**graphs);
}

}  // namespace
}  // namespace beam::testing
