// The DFlash2 drafter's CPU ops (kernels/api/dflash2.h, the reference of the CUDA ones): the
// convolution's first-row rule and aliasing, the block attention's key set over a paged ring
// context (window per query row, stale slots, missing pages) against a brute-force attention,
// and the selector's tie order and walk.
#include "kernels/api/dflash2.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "kernel_test_util.h"

namespace beam {
namespace {

TEST(DFlash2Conv, FirstRowsOfABlockSkipThePreviousRowAndOutMayAliasX) {
  test::Contexts ctx;
  std::mt19937 rng(5);
  const int64_t B = 4, N = 8, H = 32, group = 16, G = H / group;
  HostTensor base = test::random_bf16({2, 2, H}, rng), d = test::random_bf16({N, 4 * G}, rng);
  HostTensor x = test::random_bf16({N, H}, rng), out(DType::kBF16, {N, H});
  dflash2_conv(ctx.two, base.view, d.view, 1, group, B, x.view, out.view);
  auto f = [](const HostTensor& t, int64_t i) { return to_float(t.as<bf16>()[i]); };
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < H; ++c) {
      const float k0 = f(base, (2 + 0) * H + c) + f(d, r * 4 * G + 2 * G + c / group);
      float want = k0 * f(x, r * H + c);
      if (r % B != 0) {
        const float k1 = f(base, (2 + 1) * H + c) + f(d, r * 4 * G + 3 * G + c / group);
        want = want + k1 * f(x, (r - 1) * H + c);
      }
      ASSERT_EQ(out.as<bf16>()[r * H + c].bits, to_bf16(want).bits) << r << " " << c;
    }
  dflash2_conv(ctx.one, base.view, d.view, 1, group, B, x.view, x.view);  // in place
  EXPECT_TRUE(test::bits_equal(x.view, out.view));
}

// Two blocks over paged contexts (pages of 4 slots, window 6, B 2): block 0 at position 13 wrote
// positions 0..12 through a ring of 3 pages (12 overwrote 0) and one slot went stale (it records
// another position); block 1 at position 8 has its second page missing. Each query row sees the
// held positions in its own window (row 1's starts one later), then the block's rows; the
// outputs match a brute-force fp64 attention over exactly those keys.
TEST(DFlash2BlockAttention, KeysAreTheHeldPositionsInEachRowsWindowThenTheBlock) {
  test::Contexts ctx;
  std::mt19937 rng(6);
  const int64_t P = 4, ring = 3, W = 6, B = 2, S = 2, Nq = 4, Nkv = 2, D = 8;
  const int64_t pages = 6, slots = pages * P;
  HostTensor keys = test::random_bf16({slots, Nkv, D}, rng);
  HostTensor values = test::random_bf16({slots, Nkv, D}, rng);
  HostTensor slot_pos(DType::kI64, {slots});
  for (int64_t s = 0; s < slots; ++s) slot_pos.as<int64_t>()[s] = -1;
  // Block 0: positions 0..12 written through a ring of pages {0, 1, 2}: logical page lp lives in
  // table[lp % 3]; the latest write of each slot wins (8..12 over 0..4, then 5..7 stay).
  const int32_t table0[] = {0, 1, 2};
  for (int64_t p = 0; p <= 12; ++p) slot_pos.as<int64_t>()[table0[(p / P) % ring] * P + p % P] = p;
  slot_pos.as<int64_t>()[table0[(11 / P) % ring] * P + 11 % P] = 99;  // stale: 11 not held
  // Block 1: positions 0..7 in pages {3, -1 (missing), ...}: only 0..3 held.
  const int32_t table1[] = {3, -1};
  for (int64_t p = 0; p <= 3; ++p) slot_pos.as<int64_t>()[3 * P + p] = p;
  HostTensor page_ids(DType::kI32, {5}), offsets(DType::kI32, {S}), lengths(DType::kI32, {S});
  HostTensor block_pos(DType::kI64, {S});
  std::copy_n(table0, 3, page_ids.as<int32_t>());
  std::copy_n(table1, 2, page_ids.as<int32_t>() + 3);
  offsets.as<int32_t>()[0] = 0, offsets.as<int32_t>()[1] = 3;
  lengths.as<int32_t>()[0] = 3, lengths.as<int32_t>()[1] = 2;
  block_pos.as<int64_t>()[0] = 13, block_pos.as<int64_t>()[1] = 8;
  DFlash2ContextView view{keys.view,      values.view,
                          slot_pos.view,  page_ids.view,
                          offsets.view,   lengths.view,
                          block_pos.view, P,
                          ring,           W};
  HostTensor q = test::random_bf16({S * B, Nq, D}, rng),
             k = test::random_bf16({S * B, Nkv, D}, rng);
  HostTensor v = test::random_bf16({S * B, Nkv, D}, rng), out(DType::kBF16, {S * B, Nq, D});
  dflash2_block_attention(ctx.two, q.view, k.view, v.view, view, out.view);
  // The held positions by block: position -> slot.
  const std::map<int64_t, int64_t> held[] = {
      {{5, 5}, {6, 6}, {7, 7}, {8, 8}, {9, 9}, {10, 10}, {12, 0}},
      {{0, 12}, {1, 13}, {2, 14}, {3, 15}}};
  auto f = [](const HostTensor& t, int64_t i) { return double(to_float(t.as<bf16>()[i])); };
  for (int64_t b = 0; b < S; ++b)
    for (int64_t t = 0; t < B; ++t)
      for (int64_t h = 0; h < Nq; ++h) {
        const int64_t row = b * B + t, g = h / (Nq / Nkv), qp = block_pos.as<int64_t>()[b] + t;
        std::vector<std::pair<const HostTensor*, int64_t>> kv;  // (tensor of k, row index)
        for (const auto& [pos, slot] : held[b])
          if (pos > qp - W && pos < block_pos.as<int64_t>()[b]) kv.push_back({&keys, slot});
        for (int64_t i = 0; i < B; ++i) kv.push_back({&k, b * B + i});
        std::vector<double> score;
        double max = -INFINITY, sum = 0;
        for (const auto& [t_k, r] : kv) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e)
            dot += f(q, (row * Nq + h) * D + e) * f(*t_k, (r * Nkv + g) * D + e);
          score.push_back(dot / std::sqrt(double(D)));
          max = std::max(max, score.back());
        }
        for (double& s : score) sum += (s = std::exp(s - max));
        for (int64_t e = 0; e < D; ++e) {
          double o = 0;
          for (size_t i = 0; i < kv.size(); ++i) {
            const HostTensor& t_v = kv[i].first == &keys ? values : v;
            o += score[i] * f(t_v, (kv[i].second * Nkv + g) * D + e);
          }
          const double got = f(out, (row * Nq + h) * D + e);
          ASSERT_NEAR(got, o / sum, 1e-2 * std::abs(o / sum) + 1e-3) << b << " " << t << " " << h;
        }
      }
}

// Candidates: the K largest logits, the lower id first on ties; the walk's prev is the anchor,
// then each row's pick, so a row's scores depend on the pick before it.
TEST(DFlash2Select, TopKBreaksTiesByIdAndTheWalkChainsPicks) {
  test::Contexts ctx;
  std::mt19937 rng(7);
  const int64_t S = 2, J = 3, R = S * J, V = 40, rank = 4, K = 3;
  HostTensor u(DType::kF32, {R, V});
  for (int64_t i = 0; i < R * V; ++i) u.as<float>()[i] = static_cast<float>(i % 5);  // ties
  HostTensor hp = test::random_bf16({R, rank}, rng), pred = test::random_bf16({V, rank}, rng);
  HostTensor succ = test::random_bf16({V, rank}, rng), anchors(DType::kI32, {S});
  anchors.as<int32_t>()[0] = 3, anchors.as<int32_t>()[1] = 17;
  HostTensor cand(DType::kI32, {R, K}), scores(DType::kF32, {R, K}), drafts(DType::kI32, {R});
  dflash2_select(ctx.two, u.view, hp.view, pred.view, succ.view, anchors.view, cand.view,
                 scores.view, drafts.view);
  for (int64_t r = 0; r < R; ++r) {
    // u = (r * V + id) % 5: the largest value 4 at the three lowest such ids.
    std::vector<int32_t> want;
    for (int32_t id = 0; id < V && static_cast<int64_t>(want.size()) < K; ++id)
      if ((r * V + id) % 5 == 4) want.push_back(id);
    EXPECT_EQ(std::vector<int32_t>(cand.as<int32_t>() + r * K, cand.as<int32_t>() + (r + 1) * K),
              want)
        << "row " << r;
  }
  auto f = [](const HostTensor& t, int64_t i) { return to_float(t.as<bf16>()[i]); };
  for (int64_t b = 0; b < S; ++b) {
    int32_t prev = anchors.as<int32_t>()[b];
    for (int64_t r = b * J; r < (b + 1) * J; ++r) {
      int64_t best = 0;
      for (int64_t i = 0; i < K; ++i) {
        const int32_t c = cand.as<int32_t>()[r * K + i];
        float pair = 0.0f;
        for (int64_t j = 0; j < rank; ++j)
          pair = pair +
                 round_bf16(f(pred, prev * rank + j) * f(hp, r * rank + j)) * f(succ, c * rank + j);
        const float s = u.as<float>()[r * V + c] + pair;
        EXPECT_EQ(scores.as<float>()[r * K + i], s) << r << " " << i;
        if (s > scores.as<float>()[r * K + best]) best = i;
      }
      prev = cand.as<int32_t>()[r * K + best];
      EXPECT_EQ(drafts.as<int32_t>()[r], prev) << "row " << r;
    }
  }
}

}  // namespace
}  // namespace beam
