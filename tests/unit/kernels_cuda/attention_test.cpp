// CUDA paged_attention and store_kv against the CPU reference ops: tiny and Beam shapes, block
// sizes 4/16/64, sliding and full attention, batches mixing decode rows and prefill chunks,
// kv_pos0 > 0 and positions near 10^6, unmapped (-1) blocks outside the window, decode batches of
// 1 and 32 rows (the decode kernel, split rows combined by their last CTA or in a cluster of
// CTAs), bit-identity of a row between the decode kernel (split or not, in each warp layout, folded
// in a cluster or not) and the chunk kernel whatever the rest of the batch, the fixed-plan path of
// CUDA graphs (bit-identical to the eager op, padding rows zeroed, graph replays of new batches;
// with the output gate fused, bit-identical to the eager op + output_gate), and the tensor-core
// prefill kernel (chunks of >= 64 rows) against the CPU and against decode rows.
#include "kernels/api/attention.h"

#include "attention_batch.h"
#include "kernels/api/activation.h"
#include "kernels/api/fixed_attention.h"

namespace beam {
namespace {

using Geometry = test::AttentionGeometry;
using test::SeqSpec;
using Batch = test::AttentionBatch;

class AttentionCuda : public test::AttentionCudaTest {
 protected:
  AttentionCuda() : AttentionCudaTest(3, "attention") {}

  // b's q with `extra` more rows of garbage after its own (the padding rows of a graph batch).
  TensorView padded_q(const Batch& b, int64_t extra) {
    const int64_t T = b.q.view.dim(0);
    HostTensor q(DType::kBF16, {T + extra, b.g.Nq, b.g.D});
    test::fill_uniform(q.view, 77, 100.0f);
    std::memcpy(q.view.data, b.q.view.data, b.q.view.nbytes());
    return upload(q);
  }
  // plan_fixed_attention into `slot` for q's rows, then fixed_paged_attention into a NaN output.
  HostTensor run_fixed(const Batch& b, const TensorView& q, std::span<const AttentionSeq> seqs,
                       int slot) {
    const PagedKv kv{b.dk, b.dv, b.g.block_size};
    plan_fixed_attention(gpu, slot, kv, q.dim(0), b.g.Nq, b.g.D, seqs, b.g.window);
    const TensorView out = device_tensor(DType::kBF16, q.shape);
    fixed_paged_attention(gpu, slot, q, kv, b.g.window, out);
    HostTensor h = download(out);
    synchronize(gpu);
    return h;
  }
  // fixed_paged_attention_gated on b (with 2 padding rows) equals the eager op followed by
  // output_gate bit for bit on the covered rows and zeroes the padding rows.
  void expect_gated_matches_eager(const Batch& b, int slot, std::mt19937& rng) {
    const Geometry& g = b.g;
    const std::vector<AttentionSeq> seqs = b.seqs();
    const TensorView q = padded_q(b, 2);
    const int64_t T = q.dim(0);
    const TensorView gate = upload(test::random_bf16({T, g.Nq * g.D}, rng, 4.0f));
    const TensorView bias = upload(test::random_bf16({g.Nq}, rng, 1.0f));
    const PagedKv kv{b.dk, b.dv, g.block_size};

    const TensorView eager = device_tensor(DType::kBF16, q.shape);  // uncovered rows: NaN
    begin_step(gpu);
    paged_attention(gpu, q, kv, seqs, g.window, eager);
    output_gate(gpu, eager.reshape({T, g.Nq * g.D}), gate, bias);
    const HostTensor want = download(eager);
    synchronize(gpu);

    plan_fixed_attention(gpu, slot, kv, T, g.Nq, g.D, seqs, g.window);
    const TensorView out = device_tensor(DType::kBF16, q.shape);
    fixed_paged_attention_gated(gpu, slot, q, kv, g.window, AttentionGate{gate, bias}, out);
    const HostTensor got = download(out);
    synchronize(gpu);
    expect_covered_equal_rest_zero(got, want, seqs, "gated");
  }
  // The fixed plan (with 3 padding rows) equals the eager op bit for bit on b's rows.
  void expect_fixed_matches_eager(const Batch& b, int slot) {
    const std::vector<AttentionSeq> seqs = b.seqs();
    const TensorView q = padded_q(b, 3);
    const HostTensor eager = run_gpu_on(b, q, seqs);
    expect_covered_equal_rest_zero(run_fixed(b, q, seqs, slot), eager, seqs, "fixed");
  }
  // Rows the sequences cover are bit-identical in got and want; every other row of got is zero.
  static void expect_covered_equal_rest_zero(const HostTensor& got, const HostTensor& want,
                                             std::span<const AttentionSeq> seqs,
                                             const std::string& what) {
    const int64_t T = got.view.dim(0), row = got.view.numel() / T;
    std::vector<bool> covered(static_cast<size_t>(T), false);
    for (const AttentionSeq& s : seqs) {
      std::fill_n(covered.begin() + s.q_begin, s.q_count, true);
      EXPECT_TRUE(test::bits_equal(got.view.rows(s.q_begin, s.q_count),
                                   want.view.rows(s.q_begin, s.q_count)))
          << what << ": rows " << s.q_begin << "+" << s.q_count;
    }
    for (int64_t r = 0; r < T; ++r) {
      if (covered[static_cast<size_t>(r)]) continue;
      int64_t nonzero = 0;
      for (int64_t i = 0; i < row; ++i) nonzero += got.as<bf16>()[r * row + i].bits != 0;
      EXPECT_EQ(nonzero, 0) << what << ": padding row " << r << " is not zero";
    }
  }
};

const std::vector<SeqSpec> kTinySeqs = {
    {0, 40, 40},      // prefill crossing the window
    {0, 17, 1},       // decode one past the window
    {0, 17, 7},       // chunk of 7 after 10 cached
    {999980, 25, 3},  // positions around 10^6
    {0, 1, 1},        // single token
    {5, 1500, 2},     // kv_pos0 > 0; full attention splits it (47 splits of 32 keys)
};

TEST_F(AttentionCuda, MatchesCpuTinyShapes) {
  for (int64_t window : {16, 0}) {
    for (int64_t bs : {4, 16}) expect_matches_cpu({4, 2, 128, bs, window}, kTinySeqs, 31 + bs);
  }
  expect_matches_cpu({4, 2, 64, 16, 128}, kTinySeqs, 37);   // beam-nano heads
  expect_matches_cpu({8, 1, 256, 16, 0}, kTinySeqs, 38);    // D = 256, one KV head
  expect_matches_cpu({12, 12, 64, 16, 16}, kTinySeqs, 39);  // no GQA
}

TEST_F(AttentionCuda, MatchesCpuBeamShapes) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  const std::vector<SeqSpec> mixed = {
      {0, 600, 1},         // decode past the window
      {1000000, 530, 9},   // chunk near position 10^6
      {0, 700, 64},        // prefill chunk after 636 cached
      {1000, 3000, 1},     // decode with kv_pos0 > 0
      {0, 33, 33},         // short prompt
  };
  for (int64_t bs : {64, 16}) expect_matches_cpu({48, 8, 128, bs, 512}, mixed, 41 + bs);
  expect_matches_cpu({48, 8, 128, 64, 0}, mixed, 43);                   // full attention
  expect_matches_cpu({48, 8, 128, 64, 0}, {{0, 9000, 1}, {0, 9000, 1}}, 44);  // long decode
}

// Decode batches through the decode kernel at Beam heads: one row of 512 keys (16 splits, each
// its own CTA, combined by the last), rows just past a split-size step (2,049 and 4,097 keys),
// and 32 rows of 1 to 2,500 keys (CTAs of several splits), sliding and full, paged blocks out of
// order, blocks of 16 and 64 keys.
TEST_F(AttentionCuda, DecodeBatchesMatchCpu) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  std::vector<SeqSpec> batch32;
  for (int64_t j = 0; j < 32; ++j) batch32.push_back({(j * 13) % 5, 1 + (j * 311) % 2500, 1});
  batch32[5] = {0, 512, 1};
  for (int64_t window : {int64_t{512}, int64_t{0}}) {
    for (int64_t bs : {int64_t{64}, int64_t{16}}) {
      const Geometry g{48, 8, 128, bs, window};
      expect_matches_cpu(g, {{0, 512, 1}}, 101);
      expect_matches_cpu(g, {{0, 2049, 1}}, 102);
      expect_matches_cpu(g, {{3, 4097, 1}}, 103);
      expect_matches_cpu(g, batch32, 104);
    }
  }
}

// The fixed-plan path (CUDA graphs) equals the eager op bit for bit on every row a sequence
// covers, including the rows of a 7-row chunk (decode kernel here, chunk kernel there), and
// writes zeros to the padding rows; at batch 1 and 32, 512 and 2,000+ keys, sliding and full.
TEST_F(AttentionCuda, FixedPlanMatchesEagerAndZeroesPadding) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  std::vector<SeqSpec> batch32;
  for (int64_t j = 0; j < 32; ++j) batch32.push_back({j % 3, 1 + (j * 419) % 2300, 1});
  batch32[0] = {0, 512, 1};
  batch32[1] = {0, 2100, 1};
  std::vector<SeqSpec> mixed = {{0, 900, 7}, {0, 512, 1}, {0, 2600, 1}};
  for (int64_t window : {int64_t{512}, int64_t{0}}) {
    const Geometry g{48, 8, 128, 16, window};
    const int slot = window > 0 ? 1 : 0;
    for (const auto& [specs, name] :
         {std::pair{std::vector<SeqSpec>{{0, 512, 1}}, "batch 1, 512 keys"},
          std::pair{std::vector<SeqSpec>{{0, 2100, 1}}, "batch 1, 2,100 keys"},
          std::pair{batch32, "batch 32"}, std::pair{mixed, "chunk and decode rows"}}) {
      SCOPED_TRACE(::testing::Message() << name << ", window " << window);
      const Batch b = make_batch(g, specs, 111);
      const std::vector<AttentionSeq> seqs = b.seqs();
      const TensorView q = padded_q(b, 3);
      const HostTensor eager = run_gpu_on(b, q, seqs);
      expect_covered_equal_rest_zero(run_fixed(b, q, seqs, slot), eager, seqs, name);
      expect_covered_equal_rest_zero(run_fixed(b, q, seqs, slot), eager, seqs, "again");
    }
  }
}

// fixed_paged_attention_gated equals the eager op followed by output_gate bit for bit on every
// covered row (whole rows and split rows folded by their last CTA) and zeroes the padding rows;
// Beam's heads at batch 1, 3, 8 and 32, sliding and full, and other head sizes (D 64 / 256, G 2 /
// 16).
TEST_F(AttentionCuda, FixedPlanGatedMatchesEagerThenOutputGate) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  std::vector<SeqSpec> batch32;
  for (int64_t j = 0; j < 32; ++j) batch32.push_back({j % 3, 1 + (j * 419) % 2300, 1});
  batch32[1] = {0, 2100, 1};
  std::vector<SeqSpec> batch8;
  for (int64_t j = 0; j < 8; ++j) batch8.push_back({0, 40 + j * 300, 1});
  const std::vector<SeqSpec> batch3 = {{0, 600, 1}, {0, 2100, 1}, {5, 77, 1}};
  const std::vector<std::pair<Geometry, std::vector<std::vector<SeqSpec>>>> cases = {
      {{48, 8, 128, 16, 512}, {{{0, 512, 1}}, {{0, 2100, 1}}, batch3, batch8, batch32}},
      {{48, 8, 128, 16, 0}, {{{0, 512, 1}}, {{0, 2100, 1}}, batch3, batch8, batch32}},
      {{4, 2, 64, 4, 16}, {{{0, 9, 1}}, batch3}},
      {{16, 1, 256, 64, 0}, {{{0, 700, 1}}, batch3}}};
  std::mt19937 rng(93);
  for (const auto& [g, batches] : cases) {
    const int slot = g.window > 0 ? 1 : 0;
    for (const std::vector<SeqSpec>& specs : batches) {
      SCOPED_TRACE(::testing::Message() << specs.size() << " rows, D " << g.D << ", G "
                                        << g.Nq / g.Nkv << ", window " << g.window);
      expect_gated_matches_eager(make_batch(g, specs, 131), slot, rng);
    }
  }
}

// Decode rows at every split-plan boundary of the decode kernel, Beam's heads, sliding and full:
// contexts of 1 (one whole-row item), 63 / 64 / 65 (a tile and a split boundary), 511 / 512 / 513
// (16 one-tile items whose last CTA folds 16 records; 17 with the window), 4096 (64-key splits),
// 5,000 (128-key splits, the last of 8 keys), 40,000 (1,024-key splits, the last of 64 keys) and
// 70,000 (past 65,536: 64 balanced splits of 34 or 35 tiles), one row alone; then batches of 3,
// 32 and 128 rows (items of several splits, whole-row items, CTAs striding over more items than
// the grid's slots). Each: eager against the CPU (the usual bounds), the fixed plan against the
// eager op bit for bit, and the gated fixed plan against the eager op + output_gate bit for bit.
TEST_F(AttentionCuda, DecodeContextLengthsAndBatches) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  std::vector<SeqSpec> batch32, batch128;
  for (int64_t j = 0; j < 32; ++j) batch32.push_back({j % 2, 1 + (j * 617) % 4200, 1});
  for (int64_t j = 0; j < 128; ++j) batch128.push_back({0, j % 5 == 0 ? 513 : 512, 1});
  batch128[7] = {0, 1, 1};
  batch128[100] = {0, 3000, 1};
  std::vector<std::vector<SeqSpec>> batches;
  for (int64_t n : {1, 63, 64, 65, 511, 512, 513, 4096, 5000, 40000, 70000})
    batches.push_back({{0, n, 1}});
  batches.push_back({{0, 1, 1}, {3, 65, 1}, {0, 513, 1}});
  batches.push_back(batch32);
  batches.push_back(batch128);
  std::mt19937 rng(97);
  for (int64_t window : {int64_t{512}, int64_t{0}}) {
    const Geometry g{48, 8, 128, 64, window};
    const int slot = window > 0 ? 1 : 0;
    for (size_t i = 0; i < batches.size(); ++i) {
      const std::vector<SeqSpec>& specs = batches[i];
      SCOPED_TRACE(::testing::Message() << specs.size() << " rows, the first of "
                                        << specs[0].kv_len << " keys, window " << window);
      const Batch b = make_batch(g, specs, 141 + static_cast<uint32_t>(i));
      expect_batch_matches_cpu(b);
      expect_fixed_matches_eager(b, slot);
      expect_gated_matches_eager(b, slot, rng);
    }
  }
}

// One captured fixed_paged_attention replays a sequence whose context grows across every
// split-plan boundary (1 to 4,097 keys: one item, 16 one-tile items, splits of one to four tiles),
// then three such sequences at once, sliding and full: each replay equals the eager op bit for
// bit and the plan's memory never moves.
TEST_F(AttentionCuda, FixedPlanGraphReplaysGrowingContext) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  for (int64_t window : {int64_t{512}, int64_t{0}}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    const Geometry g{48, 8, 128, 16, window};
    const Batch b = make_batch(g, {{0, 4097, 1}, {0, 4097, 1}, {0, 4097, 1}}, 151);
    const std::vector<AttentionSeq> full = b.seqs();
    auto at = [&](size_t s, int64_t row, int64_t n) {  // sequence s with n keys, at `row`
      return AttentionSeq{row, 1, n - 1, 0, n, full[s].block_table};
    };
    const TensorView q = padded_q(b, 1);  // 4 rows
    const PagedKv kv{b.dk, b.dv, g.block_size};
    const TensorView out = device_tensor(DType::kBF16, q.shape);
    const int slot = window > 0 ? 1 : 0;
    const std::vector<AttentionSeq> first = {at(0, 0, 1)};
    plan_fixed_attention(gpu, slot, kv, q.dim(0), g.Nq, g.D, first, g.window);
    fixed_paged_attention(gpu, slot, q, kv, g.window, out);  // first launch outside the capture
    synchronize(gpu);
    const uint64_t fingerprint = graph_fingerprint(gpu);
    begin_graph_capture(gpu);
    fixed_paged_attention(gpu, slot, q, kv, g.window, out);
    Expected<StepGraph> graph = end_graph_capture(gpu);
    ASSERT_TRUE(graph.ok()) << graph.error().message;

    std::vector<std::vector<AttentionSeq>> steps;
    for (int64_t n : {1, 2, 31, 32, 33, 63, 64, 65, 511, 512, 513, 2048, 2049, 4096, 4097})
      steps.push_back({at(0, 0, n)});
    for (int64_t n : {40, 600, 2100, 4097})
      steps.push_back({at(0, 0, n), at(1, 1, n + 1 <= 4097 ? n + 1 : 1), at(2, 3, n / 2 + 1)});
    for (const std::vector<AttentionSeq>& seqs : steps) {
      SCOPED_TRACE(::testing::Message() << seqs.size() << " rows, the first of " << seqs[0].kv_len
                                        << " keys");
      const HostTensor eager = run_gpu_on(b, q, seqs);
      HostTensor nan(DType::kBF16, q.shape);
      std::memset(nan.view.data, 0xff, nan.view.nbytes());
      copy_tensor(gpu, out, nan.view);
      plan_fixed_attention(gpu, slot, kv, q.dim(0), g.Nq, g.D, seqs, g.window);
      launch_graph(gpu, *graph);
      const HostTensor got = download(out);
      synchronize(gpu);
      expect_covered_equal_rest_zero(got, eager, seqs, "replay");
      EXPECT_EQ(graph_fingerprint(gpu), fingerprint) << "the plan moved";
    }
  }
}

// One captured fixed_paged_attention replays batches planned after the capture (other rows,
// positions, block tables and sizes, a batch of one): each replay equals the eager op on the
// covered rows and zeroes the others, and re-planning moves no memory (the fingerprint holds).
TEST_F(AttentionCuda, FixedPlanGraphReplaysNewBatches) {
  const Geometry g{48, 8, 128, 64, 512};
  const Batch b = make_batch(g, {{0, 3000, 1}, {0, 600, 1}, {0, 40, 1}, {7, 1200, 1}}, 121);
  const std::vector<AttentionSeq> all = b.seqs();
  const TensorView q = padded_q(b, 2);  // 6 rows
  const PagedKv kv{b.dk, b.dv, g.block_size};
  const TensorView out = device_tensor(DType::kBF16, q.shape);
  plan_fixed_attention(gpu, 1, kv, q.dim(0), g.Nq, g.D, all, g.window);
  fixed_paged_attention(gpu, 1, q, kv, g.window, out);  // first launch outside the capture
  synchronize(gpu);
  const uint64_t fingerprint = graph_fingerprint(gpu);
  begin_graph_capture(gpu);
  fixed_paged_attention(gpu, 1, q, kv, g.window, out);
  Expected<StepGraph> graph = end_graph_capture(gpu);
  ASSERT_TRUE(graph.ok()) << graph.error().message;

  AttentionSeq shorter = all[0];  // an earlier position of sequence 0, at row 2
  shorter.q_begin = 2;
  shorter.q_pos0 -= 700;
  shorter.kv_len -= 700;
  AttentionSeq moved3 = all[3], moved1 = all[1], alone = all[0];
  moved3.q_begin = 0;
  moved1.q_begin = 1;
  alone.q_begin = 4;
  const std::vector<std::vector<AttentionSeq>> batches = {
      all, {moved3, moved1, shorter}, {alone}, {}, all};
  for (size_t i = 0; i < batches.size(); ++i) {
    const std::vector<AttentionSeq>& seqs = batches[i];
    const HostTensor eager = run_gpu_on(b, q, seqs);
    HostTensor nan(DType::kBF16, q.shape);
    std::memset(nan.view.data, 0xff, nan.view.nbytes());
    copy_tensor(gpu, out, nan.view);
    plan_fixed_attention(gpu, 1, kv, q.dim(0), g.Nq, g.D, seqs, g.window);
    launch_graph(gpu, *graph);
    const HostTensor got = download(out);
    synchronize(gpu);
    expect_covered_equal_rest_zero(got, eager, seqs, "replay " + std::to_string(i));
    EXPECT_EQ(graph_fingerprint(gpu), fingerprint) << "replay " << i << ": the plan moved";
  }
}

// Blocks that slid out of every query's window may be -1: the result does not change.
TEST_F(AttentionCuda, UnmappedBlocksOutsideTheWindow) {
  const Geometry g{48, 8, 128, 16, 512};
  const Batch b = make_batch(g, {{0, 2000, 1}, {70, 1500, 40}}, 51);
  std::vector<AttentionSeq> seqs = b.seqs();
  const HostTensor base = run_gpu(b, seqs);
  // Seq 0: query 1999 sees 1488..1999 (blocks 93..). Seq 1: queries at slots 1460.. see 949...
  std::vector<int32_t> t0 = b.tables[0], t1 = b.tables[1];
  std::fill(t0.begin(), t0.begin() + 93, -1);
  std::fill(t1.begin(), t1.begin() + 949 / 16, -1);
  seqs[0].block_table = t0;
  seqs[1].block_table = t1;
  EXPECT_TRUE(test::bits_equal(run_gpu(b, seqs).view, base.view));
  expect_matches_cpu(g, {{0, 2000, 1}, {70, 1500, 40}}, 51);
}

// A row's bits do not depend on the block size, which decides how the tensor-core decode kernel
// brings its K/V tiles: blocks of 32 and 64 (a TMA box a tile), 8 and 16 (four and two boxes), 96
// (a box a tile, not a power of two), 24 (no whole boxes: every key by cp.async). Rows of 1 to
// 4,100 keys, the visible range cutting tiles at both ends, sliding and full, eager and fixed
// plans (graphs), against the 32-slot batch bit for bit, and that batch against the CPU.
TEST_F(AttentionCuda, DecodeRowsAreBitIdenticalAcrossBlockSizes) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  const std::vector<SeqSpec> specs = {{0, 2000, 1}, {5, 777, 1}, {0, 64, 1},
                                      {3, 4100, 1}, {0, 1, 1},   {0, 545, 1}};
  for (int64_t window : {int64_t{512}, int64_t{0}}) {
    const Batch base = make_batch({48, 8, 128, 32, window}, specs, 171);
    expect_batch_matches_cpu(base);
    const std::vector<AttentionSeq> seqs = base.seqs();
    const HostTensor want = run_gpu(base, seqs);
    for (int64_t bs : {8, 16, 24, 64, 96}) {
      SCOPED_TRACE(::testing::Message() << "block size " << bs << ", window " << window);
      const Batch b = repaged(base, bs, 173 + static_cast<uint32_t>(bs));
      EXPECT_TRUE(test::bits_equal(run_gpu(b, b.seqs()).view, want.view));
      expect_fixed_matches_eager(b, window > 0 ? 1 : 0);
    }
  }
}

// A row's bits depend only on its own keys (batch invariance): every row of a 6,000-token prompt
// computed inside a batch of chunks of 32 rows equals the same row computed alone as a decode step
// (split over CTAs and combined) and inside a batch of decode rows of other lengths; rows on the
// one-, two- and four-tile split grids, at Beam's heads (every row in the decode kernel, sliding
// and full) and at D = 64, G = 2 (CUDA cores: the chunk kernel's tiles of 32 rows against the
// decode kernel).
TEST_F(AttentionCuda, SplitAndUnsplitRowsAreBitIdentical) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  constexpr int64_t kPrompt = 6000;
  const Geometry geometries[] = {{48, 8, 128, 64, 0}, {48, 8, 128, 64, 512}, {16, 8, 64, 16, 0}};
  for (const Geometry& g : geometries) {
    SCOPED_TRACE(::testing::Message() << "D " << g.D << ", window " << g.window);
    const Batch b = make_batch(g, {{0, kPrompt, kPrompt}}, 61);
    const AttentionSeq whole = b.seqs()[0];
    std::vector<AttentionSeq> chunks;
    for (int64_t c = 0; c < kPrompt; c += 32) {
      const int64_t rows = std::min<int64_t>(32, kPrompt - c);
      chunks.push_back({c, rows, c, 0, c + rows, whole.block_table});
    }
    const HostTensor all = run_gpu(b, chunks);
    for (int64_t i : {0, 1000, 2047, 4095, 4500, 5999}) {
      const AttentionSeq one{i, 1, i, 0, i + 1, whole.block_table};
      const HostTensor alone = run_gpu(b, {&one, 1});
      EXPECT_TRUE(test::bits_equal(alone.view.rows(i, 1), all.view.rows(i, 1))) << "row " << i;
      std::vector<AttentionSeq> decodes;  // row i among decode rows of other contexts
      for (int64_t j = 0; j < 32; ++j) {
        const int64_t r = j == 0 ? i : (i + 131 * j) % kPrompt;
        decodes.push_back({r, 1, r, 0, r + 1, whole.block_table});
      }
      const HostTensor mixed = run_gpu(b, decodes);
      EXPECT_TRUE(test::bits_equal(mixed.view.rows(i, 1), all.view.rows(i, 1)))
          << "row " << i << " in a decode batch";
    }
  }
}

// The same past 65,536 keys, where a row's 64 splits are balanced (split_grid.h): the 32 rows of a
// chunk after 69,984 cached keys (one tile of rows sharing their grid, split along it into 64
// items and reduced, on CUDA cores at D = 64; decode rows at Beam's heads) equal each row computed
// alone and among decode rows of other lengths.
TEST_F(AttentionCuda, BalancedSplitRowsAreBitIdentical) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  constexpr int64_t kKeys = 70016, kRows = 32, kFirst = kKeys - kRows;
  const Geometry geometries[] = {{48, 8, 128, 64, 0}, {16, 8, 64, 16, 0}};
  for (const Geometry& g : geometries) {
    SCOPED_TRACE(::testing::Message() << "D " << g.D);
    const Batch b = make_batch(g, {{0, kKeys, kRows}}, 67);
    const AttentionSeq chunk = b.seqs()[0];
    const HostTensor all = run_gpu(b, {&chunk, 1});
    for (int64_t r : {0, 13, 31}) {
      const AttentionSeq one{r, 1, kFirst + r, 0, kFirst + r + 1, chunk.block_table};
      const HostTensor alone = run_gpu(b, {&one, 1});
      EXPECT_TRUE(test::bits_equal(alone.view.rows(r, 1), all.view.rows(r, 1))) << "row " << r;
      std::vector<AttentionSeq> decodes;  // row r among decode rows of other contexts
      for (int64_t j = 0; j < kRows; ++j) {
        const int64_t len = j == r ? kFirst + r + 1 : 1000 + 2131 * j;
        decodes.push_back({j, 1, len - 1, 0, len, chunk.block_table});
      }
      const HostTensor mixed = run_gpu(b, decodes);
      EXPECT_TRUE(test::bits_equal(mixed.view.rows(r, 1), all.view.rows(r, 1)))
          << "row " << r << " in a decode batch";
    }
  }
}

// The decode kernel's warp layouts give a row the same bits: alone (a warp per q head on CUDA
// cores; four tensor-core warps) and in a batch of 72 (from 32 rows a CUDA-core warp serves two q
// heads; from 64 the tensor-core kernel runs two-warp CTAs) or, sliding, of 48 (two-warp CTAs from
// more rows than two waves of four-warp CTAs, 32 on an H200), at Beam's heads (G = 6, sliding and
// full, tensor cores), D = 64 with G = 2 and D = 256 with G = 8 (CUDA cores), with contexts from 1
// key to several split groups.
TEST_F(AttentionCuda, DecodeWarpLayoutsAreBitIdentical) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  std::vector<SeqSpec> batch72;
  for (int64_t j = 0; j < 72; ++j) batch72.push_back({j % 3, 1 + (j * 733) % 5000, 1});
  batch72[1] = {0, 1, 1};
  batch72[2] = {0, 512, 1};
  std::vector<SeqSpec> batch48(batch72.begin(), batch72.begin() + 48);
  const Geometry geometries[] = {
      {48, 8, 128, 64, 512}, {48, 8, 128, 64, 0}, {16, 8, 64, 16, 0}, {16, 2, 256, 16, 0}};
  for (const Geometry& g : geometries) {
    for (const std::vector<SeqSpec>* specs : {&batch72, &batch48}) {
      if (specs == &batch48 && g.window == 0) continue;
      SCOPED_TRACE(::testing::Message()
                   << "heads " << g.Nq << "/" << g.Nkv << " D " << g.D << " window " << g.window
                   << ", " << specs->size() << " rows");
      const Batch b = make_batch(g, *specs, 71);
      const std::vector<AttentionSeq> seqs = b.seqs();
      const HostTensor all = run_gpu(b, seqs);
      for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{17}, size_t{39}, seqs.size() - 1}) {
        const HostTensor alone = run_gpu(b, {&seqs[i], 1});
        const int64_t row = seqs[i].q_begin;
        EXPECT_TRUE(test::bits_equal(alone.view.rows(row, 1), all.view.rows(row, 1)))
            << "row " << i << " of " << seqs[i].kv_len << " keys";
      }
    }
  }
}

// Split rows of 2-5 items fold in a cluster of four-warp CTAs (decode_clusters.h) when the plan
// fits the clusters the GPU holds at once. Such rows alone, in batches of 2 to 4 (a cluster's free
// CTAs given to other rows' items, or too many items to place) and rows of other lengths beside
// them (whole rows, groups of 6+ items folded through records) equal the same rows in a batch of
// 72 (two-warp CTAs, records and tickets), at Beam's heads, sliding and full (sliding windows span
// 17 tiles: five items); the fixed (graph) plans of 1, 2 and 4 rows equal the eager op (sliding:
// clustered launches up to the rows whose items fit them).
TEST_F(AttentionCuda, ClusterFoldedRowsAreBitIdentical) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  const int64_t lengths[] = {150, 200, 300, 400, 512, 600, 2000, 97};
  std::vector<SeqSpec> batch72;
  for (int64_t j = 0; j < 72; ++j) batch72.push_back({j % 3, lengths[j % 8] + j / 8, 1});
  const Geometry geometries[] = {{48, 8, 128, 64, 512}, {48, 8, 128, 64, 0}};
  for (const Geometry& g : geometries) {
    SCOPED_TRACE(::testing::Message() << "window " << g.window);
    const Batch b = make_batch(g, batch72, 73);
    const std::vector<AttentionSeq> seqs = b.seqs();
    const HostTensor all = run_gpu(b, seqs);
    const auto expect_rows = [&](std::span<const AttentionSeq> part, const std::string& what) {
      const HostTensor got = run_gpu(b, part);
      for (const AttentionSeq& s : part)
        EXPECT_TRUE(test::bits_equal(got.view.rows(s.q_begin, 1), all.view.rows(s.q_begin, 1)))
            << what << ": row of " << s.kv_len << " keys";
    };
    for (size_t i = 0; i < 8; ++i) expect_rows({&seqs[i], 1}, "alone");
    for (size_t first : {size_t{0}, size_t{1}, size_t{4}}) {
      for (size_t rows : {size_t{2}, size_t{3}, size_t{4}})
        expect_rows({seqs.data() + first, rows},
                    std::to_string(rows) + " rows from " + std::to_string(first));
    }
    for (int64_t rows : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << "fixed plan of " << rows << " rows");
      const std::vector<SeqSpec> part(batch72.begin() + 4, batch72.begin() + 4 + rows);
      expect_fixed_matches_eager(make_batch(g, part, 79), 0);
    }
  }
}

// The tensor-core prefill kernel (chunks of >= 64 rows at head_dim 128): partial last tiles,
// chunks after cached keys, positions near 10^6, sliding and full, GQA 6:1 and 2:1, against the
// CPU op; at Beam heads a 2.5K sliding and a 2K full prompt.
TEST_F(AttentionCuda, TensorCorePrefillMatchesCpu) {
  const std::vector<SeqSpec> chunks = {
      {0, 130, 130},     // prompt of 2 full tiles and a partial one
      {5, 300, 64},      // one tile after 236 cached keys, kv_pos0 > 0
      {999000, 700, 100},  // positions near 10^6
      {0, 17, 1},        // a decode row in the same batch (the other kernel)
  };
  for (int64_t window : {int64_t{0}, int64_t{48}}) {
    expect_matches_cpu({12, 2, 128, 16, window}, chunks, 81);
    expect_matches_cpu({12, 2, 128, 64, window}, chunks, 82);
  }
  BEAM_SKIP_UNLESS_OPTIMIZED();
  expect_matches_cpu({48, 8, 128, 64, 512}, {{0, 2500, 2500}, {0, 600, 1}}, 83);
  expect_matches_cpu({48, 8, 128, 64, 0}, {{0, 2048, 2048}}, 84);
}

// An 8K prompt through the tensor-core kernel agrees with the same rows computed as decode steps
// (the CUDA-core kernel, itself checked against the CPU above), sliding and full.
TEST_F(AttentionCuda, TensorCorePrefill8kMatchesDecodeRows) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  for (int64_t window : {int64_t{512}, int64_t{0}}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    const Geometry g{48, 8, 128, 64, window};
    const Batch b = make_batch(g, {{0, 8192, 8192}}, 91);
    const AttentionSeq whole = b.seqs()[0];
    const HostTensor all = run_gpu(b, {&whole, 1});
    std::vector<AttentionSeq> decodes;
    const int64_t rows[] = {0, 63, 64, 511, 512, 4000, 8127, 8128, 8190, 8191};
    for (int64_t r : rows) decodes.push_back({r, 1, r, 0, r + 1, whole.block_table});
    const HostTensor dec = run_gpu(b, decodes);
    for (int64_t r : rows) {
      SCOPED_TRACE(::testing::Message() << "row " << r);
      const test::Diff one = test::compare(all.view.rows(r, 1), dec.view.rows(r, 1), 1);
      const test::Diff two = test::compare(all.view.rows(r, 1), dec.view.rows(r, 1), 2);
      EXPECT_LT(one.rel, 1e-2) << "worst element " << one.worst;
      EXPECT_LE(one.far, 48 * 128 / 100) << "more than 1% of the row > 1 ulp off";
      // Measured on the H200: 2-4 of the 6144 outputs of a row > 2 ulps at 8K keys (two fp32
      // summation orders over up to 8K keys; rel error stays < 1e-2).
      EXPECT_LE(two.far, 48 * 128 / 1000) << "more than 0.1% of the row > 2 ulps off";
    }
  }
}

TEST_F(AttentionCuda, StoreKvMatchesCpu) {
  std::mt19937 rng(71);
  for (auto [Nkv, D] : {std::pair<int64_t, int64_t>{8, 128}, {3, 6}}) {  // 16-byte and scalar rows
    SCOPED_TRACE(::testing::Message() << "Nkv " << Nkv << " D " << D);
    HostTensor k = test::random_bf16({5, Nkv, D}, rng), v = test::random_bf16({5, Nkv, D}, rng);
    HostTensor ck = test::random_bf16({3, 4, Nkv, D}, rng), cv = test::random_bf16({3, 4, Nkv, D}, rng);
    HostTensor slots(DType::kI64, {5});
    const int64_t s[5] = {5, -1, 0, 11, 6};
    std::copy_n(s, 5, slots.as<int64_t>());
    const TensorView dck = upload(ck), dcv = upload(cv);
    store_kv(gpu, upload(k), upload(v), upload(slots), {dck, dcv, 4});
    store_kv(cpu.two, k.view, v.view, slots.view, {ck.view, cv.view, 4});
    EXPECT_TRUE(test::bits_equal(download(dck).view, ck.view));
    EXPECT_TRUE(test::bits_equal(download(dcv).view, cv.view));
  }
}

}  // namespace
}  // namespace beam
