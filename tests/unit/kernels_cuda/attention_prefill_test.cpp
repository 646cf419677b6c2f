// CUDA paged_attention on prefill chunks (>= 64 query rows at head_dim 128: the wgmma kernel of
// kernels/cuda/attention_prefill.cuh) against the CPU reference op: causal full and sliding
// windows whose edges cut the 128-key tiles, GQA 1:1 / 2:1 / 6:1 / 8:1, chunks after a cached
// prefix and near position 10^6, several sequences and decode rows in one batch, shuffled
// (out-of-order) paged blocks of sizes 4 / 16 / 24 / 64 / 256, row counts around the 64-row
// warpgroup and 128-row CTA tiles, longer prompts than the three-stage K/V ring, and the
// bit-identity of a row whatever chunk or batch computes it. The kernel rounds P to bf16 for P·V
// (the reference keeps fp32 P), so it is also checked against a host model of its own numerics.
#include <cmath>

#include "attention_batch.h"

namespace beam {
namespace {

using Geometry = test::AttentionGeometry;
using test::SeqSpec;
using Batch = test::AttentionBatch;

// Five spare pool blocks join the shuffle.
class AttentionPrefillCuda : public test::AttentionCudaTest {
 protected:
  AttentionPrefillCuda() : AttentionCudaTest(5, "prefill") {}

  // Host model of the prefill kernel's numerics for the rows of sequences with >= 64 rows (the
  // others stay NaN): fp32 scores, online softmax over the 128-slot key tiles a row sees, in
  // slot order, p = 2^(s c - m c) with c = scale * log2(e), l the fp32 sum of p, o += bf16(p) v,
  // out = bf16(o / l).
  static HostTensor bf16_p_model(const Batch& b) {
    const Geometry& g = b.g;
    const int64_t D = g.D, G = g.Nq / g.Nkv, kTile = 128;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    const float c = scale * 1.4426950408889634f;
    HostTensor out(DType::kBF16, b.q.view.shape);
    for (int64_t i = 0; i < out.view.numel(); ++i) out.as<bf16>()[i] = to_bf16(NAN);
    const bf16* q = b.q.as<bf16>();
    const bf16 *kc = b.cache_k.as<bf16>(), *vc = b.cache_v.as<bf16>();
    std::vector<float> s, o(static_cast<size_t>(D));
    for (const AttentionSeq& sq : b.seqs()) {
      if (sq.q_count < 64) continue;
      for (int64_t r = 0; r < sq.q_count; ++r) {
        const int64_t hi = sq.q_pos0 + r - sq.kv_pos0;
        const int64_t lo = g.window > 0 ? std::max<int64_t>(0, hi - g.window + 1) : 0;
        for (int64_t h = 0; h < g.Nq; ++h) {
          const bf16* qr = q + ((sq.q_begin + r) * g.Nq + h) * D;
          auto row = [&](const bf16* cache, int64_t key) {
            const int64_t slot = sq.block_table[static_cast<size_t>(key / g.block_size)] *
                                     g.block_size + key % g.block_size;
            return cache + (slot * g.Nkv + h / G) * D;
          };
          float m = -INFINITY, l = 0.f;
          std::fill(o.begin(), o.end(), 0.f);
          for (int64_t t0 = lo / kTile * kTile; t0 <= hi; t0 += kTile) {
            const int64_t a = std::max(t0, lo), e = std::min(t0 + kTile - 1, hi);
            s.assign(static_cast<size_t>(e - a + 1), 0.f);
            float mx = -INFINITY;
            for (int64_t key = a; key <= e; ++key) {
              const bf16* kr = row(kc, key);
              float dot = 0.f;
              for (int64_t d = 0; d < D; ++d) dot += to_float(qr[d]) * to_float(kr[d]);
              s[static_cast<size_t>(key - a)] = dot;
              mx = std::max(mx, dot);
            }
            const float m_new = std::max(m, mx), alpha = std::exp2((m - m_new) * c);
            m = m_new;
            float sum = 0.f;
            for (float& d : o) d *= alpha;
            for (int64_t key = a; key <= e; ++key) {
              const float p = std::exp2(std::fma(s[static_cast<size_t>(key - a)], c, -m_new * c));
              sum += p;
              const float pb = round_bf16(p);
              const bf16* vr = row(vc, key);
              for (int64_t d = 0; d < D; ++d) o[static_cast<size_t>(d)] += pb * to_float(vr[d]);
            }
            l = l * alpha + sum;
          }
          bf16* dst = out.as<bf16>() + ((sq.q_begin + r) * g.Nq + h) * D;
          for (int64_t d = 0; d < D; ++d) dst[d] = to_bf16(o[static_cast<size_t>(d)] / l);
        }
      }
    }
    return out;
  }

  // The kernel against its host model (rows of >= 64-row sequences): fp32 sums in another order
  // and ex2.approx, so a few outputs 1 ulp apart (a p on a bf16 rounding edge, very few 2).
  void expect_matches_model(const Geometry& g, const std::vector<SeqSpec>& specs, uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "model: heads " << g.Nq << "/" << g.Nkv << " block "
                                      << g.block_size << " window " << g.window);
    std::vector<SeqSpec> long_specs;
    for (const SeqSpec& sp : specs)
      if (sp.q_count >= 64) long_specs.push_back(sp);
    const Batch b = make_batch(g, long_specs, seed);
    const std::vector<AttentionSeq> seqs = b.seqs();
    const HostTensor got = run_gpu(b, seqs), want = bf16_p_model(b);
    const test::Diff one = test::compare(got.view, want.view, 1);
    const test::Diff two = test::compare(got.view, want.view, 2);
    std::cout << "prefill model " << g.Nq << "/" << g.Nkv << " bs " << g.block_size << " W "
              << g.window << ": max rel err " << one.rel << ", exact "
              << test::exact_fraction(got.view, want.view) << ", >1 ulp " << one.far
              << ", >2 ulps " << two.far << " of " << want.view.numel() << "\n";
    EXPECT_LT(one.rel, 1e-2) << "worst element " << one.worst;
    EXPECT_LE(one.far, want.view.numel() / 200) << "more than 0.5% of outputs > 1 ulp off";
    EXPECT_LE(two.far, want.view.numel() / 2000) << "more than 0.05% of outputs > 2 ulps off";
  }
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
  // Block sizes below, at and off the key tile (24: no power of two, tiles straddle blocks; 256:
  // two key tiles per block).
  for (int64_t bs : {4, 24, 64, 256}) expect_matches_cpu({8, 1, 128, bs, 100}, kChunks, 103 + bs);
  expect_matches_cpu({4, 2, 128, 24, 0}, kChunks, 104);
}

// A 2000-key prompt: 16 key tiles cycle the three-stage K/V ring five times (full attention),
// and the window slides over the ring (W 300).
TEST_F(AttentionPrefillCuda, MatchesCpuLongPrompt) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  for (int64_t window : {int64_t{0}, int64_t{300}})
    expect_matches_cpu({4, 1, 128, 16, window}, {{0, 2000, 2000}}, 141);
}

// The kernel computes what it is meant to (bf16 P) at the fp32-P test's tolerance: windows
// around the key tile, GQA 6:1 and 1:1, a block size off the tile.
TEST_F(AttentionPrefillCuda, MatchesItsNumericsModel) {
  for (int64_t window : {int64_t{0}, int64_t{100}, int64_t{200}, int64_t{512}})
    expect_matches_model({12, 2, 128, 16, window}, kChunks, 151);
  expect_matches_model({4, 4, 128, 24, 48}, kChunks, 152);
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

}  // namespace
}  // namespace beam
