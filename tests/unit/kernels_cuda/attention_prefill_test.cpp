// CUDA paged_attention on prefill chunks (>= 64 query rows at head_dim 128: the wgmma kernel of
// kernels/cuda/attention_prefill.cuh) against the CPU reference op: causal full and sliding windows
// whose edges cut the 128-key tiles, GQA 1:1 / 2:1 / 6:1 / 8:1, chunks after a cached prefix and
// near position 10^6, several sequences and decode rows in one batch, shuffled (out-of-order) paged
// blocks of sizes 4 / 8 / 16 / 24 / 64 / 128 / 256 (whole blocks by TMA where the size allows), NaN
// in the slots no sequence wrote, row counts around the 64-row warpgroup and 128-row CTA tiles,
// unmapped blocks before the window, longer prompts than the three-stage K/V ring, and the
// bit-identity of a row whatever chunk, batch or persistent-CTA schedule computes it (more work
// items than SMs: each CTA loops over several) and with or without TMA maps; P rounded to bf16
// (AttentionProbs::kBf16) within its rounding bound.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>

#include "attention_batch.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_context.h"
#endif

namespace beam {
namespace {

using Geometry = test::AttentionGeometry;
using test::SeqSpec;
using Batch = test::AttentionBatch;

// Five spare pool blocks join the shuffle.
class AttentionPrefillCuda : public test::AttentionCudaTest {
 protected:
  AttentionPrefillCuda() : AttentionCudaTest(5, "prefill") {}
};

// Row counts around the CTA tile (64: half a tile, the second warpgroup idle; 65: one row in the
// second warpgroup; 127 / 128 / 129; 300 = 2 tiles + 44 rows), chunks after cached prefixes (query
// slots from 37, 500, 1000), kv_pos0 > 0, positions near 10^6 and decode rows in the same batch.
const std::vector<SeqSpec> kChunks = {
    {0, 300, 300},         // whole prompt: 2 full CTA tiles and a partial one
    {0, 101, 64},          // 64 rows after 37 cached keys (half a CTA tile)
    {7, 627, 127},         // kv_pos0 > 0, 500 cached keys
    {999000, 1128, 128},   // near 10^6, 1000 cached keys
    {0, 129, 129},         // one row past a tile
    {0, 200, 65},          // one row in the second warpgroup, 135 cached keys
    {0, 40, 1},            // decode row (the CUDA-core kernel)
    {0, 17, 9},            // short chunk (the CUDA-core kernel)
};

TEST_F(AttentionPrefillCuda, MatchesCpuTinyHeads) {
  // Windows: none, smaller than a key tile, not a multiple of 64, between one and two key tiles,
  // Beam's 512.
  for (int64_t window : {int64_t{0}, int64_t{48}, int64_t{100}, int64_t{200}, int64_t{512}}) {
    expect_matches_cpu({12, 2, 128, 16, window}, kChunks, 101);  // GQA 6:1
    expect_matches_cpu({4, 4, 128, 64, window}, kChunks, 102);   // no GQA
  }
  // Block sizes below, at and off the key tile (4, 24: keys by cp.async, 24 no power of two and
  // tiles straddle blocks; 8, 64, 128, 256: whole blocks by TMA, 256 two key tiles per block).
  for (int64_t bs : {4, 8, 24, 64, 128, 256})
    expect_matches_cpu({8, 1, 128, bs, 100}, kChunks, 103 + bs);
  expect_matches_cpu({4, 2, 128, 24, 0}, kChunks, 104);
}

// A 2000-key prompt: 16 key tiles cycle the three-stage K/V ring five times (full attention),
// and the window slides over the ring (W 300).
TEST_F(AttentionPrefillCuda, MatchesCpuLongPrompt) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  for (int64_t window : {int64_t{0}, int64_t{300}})
    expect_matches_cpu({4, 1, 128, 16, window}, {{0, 2000, 2000}}, 141);
}

// beam-nano's head_dim 64 is served by the CUDA-core kernel at every row count.
TEST_F(AttentionPrefillCuda, MatchesCpuHeadDim64) {
  expect_matches_cpu({4, 2, 64, 16, 128}, {{0, 200, 200}, {0, 300, 100}}, 111);
}

// Beam heads (48 / 8 x 128): a sliding-window prompt and a chunk after a cached prefix, a full
// attention chunk, and several prompts in one batch.
TEST_F(AttentionPrefillCuda, MatchesCpuBeamHeads) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  const std::vector<SeqSpec> mixed = {
      {0, 1100, 1100},     // prompt: rows near the start see fewer than 512 keys
      {0, 1700, 600},      // chunk after 1100 cached keys
      {1000000, 900, 77},  // chunk near 10^6
      {0, 800, 1},         // decode row
  };
  expect_matches_cpu({48, 8, 128, 64, 512}, mixed, 121);
  expect_matches_cpu({48, 8, 128, 16, 512}, mixed, 122);
  expect_matches_cpu({48, 8, 128, 64, 0}, {{0, 1200, 700}, {5, 300, 300}}, 123);
}

// NaN in every cache slot no sequence wrote (the spare blocks and the tails of the last blocks),
// at block sizes with and without TMA boxes, full and sliding: a key a row cannot see never
// reaches its output (a NaN value times probability 0 would be NaN).
TEST_F(AttentionPrefillCuda, IgnoresNanInUnwrittenSlots) {
  for (int64_t bs : {16, 24, 64, 256}) {
    for (int64_t window : {int64_t{0}, int64_t{100}}) {
      Batch b = make_batch({8, 2, 128, bs, window}, kChunks, 171);
      const int64_t row_elems = b.g.Nkv * b.g.D;
      std::vector<bool> written(static_cast<size_t>(b.cache_k.view.dim(0) * bs), false);
      for (size_t i = 0; i < b.specs.size(); ++i)
        for (int64_t j = 0; j < b.specs[i].kv_len; ++j)
          written[static_cast<size_t>(b.tables[i][j / bs] * bs + j % bs)] = true;
      const uint16_t nan = 0x7fc0;  // bf16 quiet NaN
      for (HostTensor* cache : {&b.cache_k, &b.cache_v}) {
        auto* data = static_cast<uint16_t*>(cache->view.data);
        for (size_t slot = 0; slot < written.size(); ++slot)
          if (!written[slot]) std::fill_n(data + slot * row_elems, row_elems, nan);
      }
      b.dk = upload(b.cache_k);
      b.dv = upload(b.cache_v);
      expect_batch_matches_cpu(b);
    }
  }
}

// Blocks wholly before every query's window unmapped (-1), as the engine releases slid-out
// blocks: a TMA box holding a row's first visible key also brings the keys before it from the
// same (mapped) block, while boxes wholly before the window still never touch the block table.
TEST_F(AttentionPrefillCuda, SkipsUnmappedBlocksBeforeTheWindow) {
  for (int64_t bs : {16, 64}) {
    for (int64_t window : {int64_t{100}, int64_t{200}}) {
      Batch b = make_batch({8, 2, 128, bs, window}, kChunks, 181);
      int64_t unmapped = 0;
      for (size_t i = 0; i < b.specs.size(); ++i) {
        const SeqSpec& s = b.specs[i];
        const int64_t first_lo = s.kv_len - s.q_count - window + 1;  // first query's lowest slot
        for (int64_t j = 0; (j + 1) * bs <= first_lo; ++j, ++unmapped) b.tables[i][j] = -1;
      }
      ASSERT_GT(unmapped, 0);
      expect_batch_matches_cpu(b);
    }
  }
}

// The rows of `seqs` hold the same bits in both outputs ([T, Nq, D]).
void expect_rows_equal(const HostTensor& got, const HostTensor& want,
                       std::span<const AttentionSeq> seqs) {
  ASSERT_EQ(got.view.nbytes(), want.view.nbytes());
  const size_t row_bytes = got.view.nbytes() / static_cast<size_t>(got.view.dim(0));
  const auto* a = static_cast<const unsigned char*>(got.view.data);
  const auto* b = static_cast<const unsigned char*>(want.view.data);
  for (const AttentionSeq& s : seqs) {
    const size_t off = static_cast<size_t>(s.q_begin) * row_bytes;
    EXPECT_EQ(std::memcmp(a + off, b + off, static_cast<size_t>(s.q_count) * row_bytes), 0)
        << "rows " << s.q_begin << "+" << s.q_count;
  }
}

#if BEAMSERVE_CUDA
// Without TMA maps (as when the driver refuses them) the producer copies every Q, K and V row by
// cp.async and the threads store every out row: the same bits as with the maps, full and sliding,
// at block sizes with and without whole TMA boxes, rows around the warpgroup tiles, fp32 and bf16 P
// (CUDA builds only: it calls the CUDA op directly).
TEST_F(AttentionPrefillCuda, SameBitsWithoutTensorMaps) {
  for (int64_t bs : {24, 64}) {
    for (int64_t window : {int64_t{0}, int64_t{512}}) {
      const Batch b = make_batch({12, 2, 128, bs, window}, kChunks, 181);
      const std::vector<AttentionSeq> seqs = b.seqs();
      for (AttentionProbs probs : {AttentionProbs::kFp32, AttentionProbs::kBf16}) {
        SCOPED_TRACE(::testing::Message() << "block " << bs << " window " << window << " bf16 P "
                                          << (probs == AttentionProbs::kBf16));
        const HostTensor mapped = run_gpu(b, seqs, probs);
        const TensorView out = device_tensor(DType::kBF16, b.dq.shape);
        begin_step(gpu);
        cuda::paged_attention(*gpu.cuda, b.dq, {b.dk, b.dv, bs}, seqs, window, out,
                              probs == AttentionProbs::kBf16, /*tensor_maps=*/false);
        const HostTensor unmapped = download(out);
        synchronize(gpu);
        expect_rows_equal(unmapped, mapped, seqs);
      }
    }
  }
}
#endif  // BEAMSERVE_CUDA

// A batch-invariant context (--enable-deterministic-inference): a sequence's prompt rows run on the
// prefill kernel and its generated rows on the decode kernel however it is chunked, so each row
// keeps its bits: 700 rows (500 prompt, 200 generated) as one chunk, as chunks of 1-200 rows (one
// of them across the prompt's end) in one call, and a chunk a call; Beam's GQA 6:1, full
// attention and a 512-key window.
TEST_F(AttentionPrefillCuda, InvariantRowsKeepTheirBitsAcrossChunkings) {
  constexpr int64_t kRows = 700, kPrompt = 500, kBlock = 16;
  KernelContext ctx = gpu;
  ctx.batch_invariance = BatchInvariance::kAlways;
  for (int64_t window : {int64_t{0}, int64_t{512}}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    const Batch b = make_batch({12, 2, 128, kBlock, window}, {{0, kRows, kRows}}, 191);
    auto run = [&](std::span<const AttentionSeq> seqs) {
      const TensorView out = device_tensor(DType::kBF16, b.dq.shape);
      begin_step(ctx);
      paged_attention(ctx, b.dq, {b.dk, b.dv, kBlock}, seqs, window, out);
      HostTensor h = download(out);
      synchronize(ctx);
      return h;
    };
    std::vector<AttentionSeq> whole = b.seqs();
    whole[0].prompt_rows = kPrompt;
    const HostTensor want = run(whole);
    std::vector<AttentionSeq> chunks;
    int64_t row0 = 0;
    for (int64_t n : {1, 63, 64, 130, 200, 43, 1, 198}) {
      AttentionSeq c{row0, n, row0, 0, row0 + n, b.tables[0]};
      c.prompt_rows = std::clamp<int64_t>(kPrompt - row0, 0, n);
      chunks.push_back(c);
      row0 += n;
    }
    ASSERT_EQ(row0, kRows);
    expect_rows_equal(run(chunks), want, whole);
    for (const AttentionSeq& c : chunks) {
      SCOPED_TRACE(::testing::Message() << "chunk " << c.q_begin << "+" << c.q_count);
      expect_rows_equal(run(std::span(&c, 1)), want, std::span(&c, 1));
    }
  }
}

// More work items (128-row tiles x q heads) than SMs: the persistent CTAs loop over several items
// each (ring slots, the ping-pong turns and the prefetched Q carried across items), single-tile
// items (a prompt of <= 128 keys, or a window smaller than a tile) next to long ones.
TEST_F(AttentionPrefillCuda, MatchesCpuPersistentManyItems) {
  // 40 prompts of 100 rows: 480 single-tile items of 12 heads, three or four per CTA.
  const std::vector<SeqSpec> short_prompts(40, SeqSpec{0, 100, 100});
  for (int64_t window : {int64_t{0}, int64_t{48}})
    expect_matches_cpu({12, 2, 128, 16, window}, short_prompts, 151);
  BEAM_SKIP_UNLESS_OPTIMIZED();
  // 12 + 3 + 2 + 4 items x 12 heads = 252 work items of 1-12 tiles.
  const std::vector<SeqSpec> mixed = {
      {0, 1500, 1500}, {0, 700, 300}, {3, 230, 200}, {0, 100, 100},
      {0, 90, 64},     {0, 128, 128}, {999000, 600, 77},
  };
  for (int64_t window : {int64_t{0}, int64_t{100}, int64_t{512}})
    expect_matches_cpu({12, 2, 128, 16, window}, mixed, 152);
}

// The persistent CTAs take other work items when the batch lists its sequences in another order;
// every row keeps its bits.
TEST_F(AttentionPrefillCuda, RowsBitIdenticalAcrossPersistentSchedules) {
  for (int64_t window : {int64_t{0}, int64_t{48}}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    std::vector<SeqSpec> specs;
    for (int i = 0; i < 24; ++i) specs.push_back({0, 64 + 9 * i, 64 + 9 * i});  // 64-271 rows
    const Batch b = make_batch({12, 2, 128, 16, window}, specs, 161);
    const std::vector<AttentionSeq> seqs = b.seqs();
    const HostTensor all = run_gpu(b, seqs);
    std::vector<AttentionSeq> reversed(seqs.rbegin(), seqs.rend());
    EXPECT_TRUE(test::bits_equal(run_gpu(b, reversed).view, all.view));
    // Every other sequence: the rest of the schedule shifts.
    std::vector<AttentionSeq> odd, even;
    for (size_t i = 0; i < seqs.size(); ++i) (i % 2 ? odd : even).push_back(seqs[i]);
    const HostTensor got_odd = run_gpu(b, odd), got_even = run_gpu(b, even);
    expect_rows_equal(got_odd, all, odd);
    expect_rows_equal(got_even, all, even);
  }
}

// A row's bits depend only on its own q and visible keys: a prompt computed whole equals the same
// prompt computed as chunks of >= 64 rows (other 128-row CTA tiles) and inside a batch with
// other sequences.
TEST_F(AttentionPrefillCuda, RowsBitIdenticalAcrossChunksAndBatches) {
  for (int64_t window : {int64_t{0}, int64_t{100}}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    const Geometry g{12, 2, 128, 16, window};
    const Batch b = make_batch(g, {{0, 700, 700}}, 131);
    const AttentionSeq whole = b.seqs()[0];
    const HostTensor all = run_gpu(b, {&whole, 1});
    // Chunks of 100, 64, 300 and 236 rows, each seeing only the keys up to its last row.
    std::vector<AttentionSeq> chunks;
    for (auto [r0, n] : {std::pair<int64_t, int64_t>{0, 100}, {100, 64}, {164, 300}, {464, 236}})
      chunks.push_back({r0, n, r0, 0, r0 + n, whole.block_table});
    EXPECT_TRUE(test::bits_equal(run_gpu(b, chunks).view, all.view));
    // The chunks in reverse order (other rows of the batch around each).
    std::vector<AttentionSeq> reversed(chunks.rbegin(), chunks.rend());
    EXPECT_TRUE(test::bits_equal(run_gpu(b, reversed).view, all.view));
  }
}

// Largest |v| over the slots the batch's sequences wrote.
float max_abs_written_v(const Batch& b) {
  const auto* v = static_cast<const bf16*>(b.cache_v.view.data);
  const int64_t row = b.g.Nkv * b.g.D, bs = b.g.block_size;
  float m = 0.f;
  for (size_t i = 0; i < b.specs.size(); ++i)
    for (int64_t j = 0; j < b.specs[i].kv_len; ++j) {
      const int64_t slot = b.tables[i][static_cast<size_t>(j / bs)] * bs + j % bs;
      for (int64_t e = 0; e < row; ++e) m = std::max(m, std::fabs(to_float(v[slot * row + e])));
    }
  return m;
}

// AttentionProbs::kBf16: P enters P·V rounded to bf16 (FlashAttention's rounding). Each output is
// within 2^-8 · max|v| of the fp32-P CPU reference (P rounded by at most half a bf16 ulp, 2^-8 of
// itself; l sums the unrounded p) plus two bf16 ulps (the output's rounding and the fp32 sums'
// order); the mode takes effect (outputs differ from fp32 P's); and a row's bits still depend only
// on its own keys, not on the batch around it.
TEST_F(AttentionPrefillCuda, Bf16ProbsWithinTheirRoundingBound) {
  for (int64_t window : {int64_t{0}, int64_t{100}, int64_t{512}}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    const Batch b = make_batch({8, 2, 128, 64, window}, kChunks, 191);
    const std::vector<AttentionSeq> seqs = b.seqs();
    const HostTensor want = run_cpu(b, seqs), fp32_p = run_gpu(b, seqs);
    const HostTensor got = run_gpu(b, seqs, AttentionProbs::kBf16);
    const float p_bound = std::ldexp(max_abs_written_v(b), -8);
    const auto* g = static_cast<const bf16*>(got.view.data);
    const auto* w = static_cast<const bf16*>(want.view.data);
    const auto* f = static_cast<const bf16*>(fp32_p.view.data);
    int64_t over = 0, moved = 0;
    float worst = 0.f;
    for (int64_t i = 0; i < want.view.numel(); ++i) {
      const float wi = to_float(w[i]), err = std::fabs(to_float(g[i]) - wi);
      const float ulp = wi == 0.f ? 0.f : std::ldexp(1.f, std::ilogb(wi) - 7);
      over += err > p_bound + 2 * ulp;
      worst = std::max(worst, err);
      moved += g[i].bits != f[i].bits;
    }
    std::cout << "bf16 P W " << window << ": max abs err " << worst
              << " (bound 2^-8 max|v| = " << p_bound << "), outputs moved from fp32 P: " << moved
              << " of " << want.view.numel() << "\n";
    EXPECT_EQ(over, 0) << "outputs beyond 2^-8 max|v| + 2 ulps; worst " << worst;
    EXPECT_GT(moved, want.view.numel() / 1000) << "the bf16-P kernel was not used";
    // The first sequence alone keeps its rows' bits.
    const HostTensor alone = run_gpu(b, {&seqs[0], 1}, AttentionProbs::kBf16);
    expect_rows_equal(alone, got, {&seqs[0], 1});
  }
}

}  // namespace
}  // namespace beam
