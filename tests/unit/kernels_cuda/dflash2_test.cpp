// CUDA DFlash2 drafter ops against the CPU reference: the convolution (in place too), the context
// store and the selector (top-k with tied logits, both top-k paths, the greedy walk) bit for bit;
// the block attention within 2 bf16 ulps of the output's magnitude over paged, ring and windowed
// contexts with absent keys (stale slots, -1 pages, no table), empty contexts, GQA groups up to 16,
// head dims 32 to 256, split over a cluster (few blocks) or not (many).
#include "kernels/api/dflash2.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"

namespace beam {
namespace {

// A block of the attention test: its anchor position, whether a page of its table is -1 (the
// positions it would hold are absent) and whether it has no table at all (every key absent).
struct DraftBlock {
  int64_t position = 0;
  bool missing_page = false;
  bool no_table = false;
};

struct DraftGeometry {
  int64_t B = 8, Nq = 4, Nkv = 1, D = 32;
  int64_t window = 0, page_size = 16, ring_pages = 0;
};

// Logits of the selector test: planted ties (the row maximum at three ids, and a run of twenty
// equal values across the K-th place), quantized (integers in [-4, 4]: runs of thousands of ties)
// or clustered (quantized, with values near 50 at the ids i with i % 2048 < 60 only: the few
// threads of the GPU's top-k that read them hold thousands of keys above the K-th largest thread
// maximum, more than its buffer, so it takes its K-sweep path).
enum class SelectTies { kPlanted, kQuantized, kClustered };

HostTensor i64_host(const std::vector<int64_t>& v) {
  HostTensor t(DType::kI64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.as<int64_t>());
  return t;
}

HostTensor i32_host(const std::vector<int32_t>& v) {
  HostTensor t(DType::kI32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.as<int32_t>());
  return t;
}

class CudaDFlash2 : public test::CudaTest {
 protected:
  void check_conv(int64_t S, int64_t B, int64_t H, int64_t group, int64_t side, bool in_place) {
    SCOPED_TRACE(::testing::Message() << "conv S=" << S << " B=" << B << " H=" << H << " group="
                                      << group << " side=" << side << " in_place=" << in_place);
    const int64_t N = S * B;
    HostTensor base = test::random_bf16({2, 2, H}, rng_, 0.5f);
    HostTensor d = test::random_bf16({N, 4 * H / group}, rng_, 0.3f);
    HostTensor x = test::random_bf16({N, H}, rng_, 2.0f);
    HostTensor want(DType::kBF16, {N, H});
    dflash2_conv(cpu.one, base.view, d.view, side, group, B, x.view, want.view);
    const TensorView dx = upload(x);
    const TensorView dout = in_place ? dx : device_tensor(DType::kBF16, {N, H});
    dflash2_conv(gpu, upload(base), upload(d), side, group, B, dx, dout);
    EXPECT_TRUE(test::bits_equal(download(dout).view, want.view));
  }

  // T rows into distinct random slots of a pool of num_slots (the others keep their values).
  void check_store(int64_t T, int64_t width, int64_t num_slots, bool with_positions) {
    SCOPED_TRACE(::testing::Message() << "store T=" << T << " width=" << width
                                      << " slots=" << num_slots << " positions=" << with_positions);
    HostTensor k = test::random_bf16({T, width}, rng_);
    HostTensor v = test::random_bf16({T, width}, rng_);
    HostTensor keys = test::random_bf16({num_slots, width}, rng_);
    HostTensor values = test::random_bf16({num_slots, width}, rng_);
    std::vector<int64_t> perm(static_cast<size_t>(num_slots)), held(perm.size(), -1);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    std::vector<int64_t> slots(perm.begin(), perm.begin() + T), positions;
    for (int64_t t = 0; t < T; ++t) positions.push_back(1000 + 3 * t);
    for (int64_t s = 0; s < num_slots; s += 3) held[s] = s;  // some slots hold older positions
    HostTensor slot_view = i64_host(slots), pos = i64_host(positions);
    HostTensor slot_positions = i64_host(held);

    const TensorView dkeys = upload(keys), dvalues = upload(values);
    const TensorView dslot_positions = upload(slot_positions);
    TensorView dpos = upload(pos);
    TensorView cpu_pos = pos.view;
    if (!with_positions) {  // an empty view over real memory, as the drafter passes
      dpos.shape = Shape{0};
      cpu_pos.shape = Shape{0};
    }
    dflash2_store_context(cpu.one, k.view, v.view, slot_view.view, cpu_pos, keys.view, values.view,
                          slot_positions.view);
    dflash2_store_context(gpu, upload(k), upload(v), upload(slot_view), dpos, dkeys, dvalues,
                          dslot_positions);
    EXPECT_TRUE(test::bits_equal(download(dkeys).view, keys.view));
    EXPECT_TRUE(test::bits_equal(download(dvalues).view, values.view));
    EXPECT_TRUE(test::bits_equal(download(dslot_positions).view, slot_positions.view));
  }

  // Blocks of g.B rows at the given positions, each with its own page table over one pool. The
  // pool's slots start as garbage of magnitude 100 (an attention that reads an absent key is far
  // off); a context position is held with probability 0.85, else its slot records an older
  // position of the ring (or none).
  void check_attention(const DraftGeometry& g, const std::vector<DraftBlock>& blocks) {
    const int64_t S = static_cast<int64_t>(blocks.size()), N = S * g.B;
    SCOPED_TRACE(::testing::Message() << "attention S=" << S << " B=" << g.B << " Nq=" << g.Nq
                                      << " Nkv=" << g.Nkv << " D=" << g.D << " window=" << g.window
                                      << " page=" << g.page_size << " ring=" << g.ring_pages);
    const int64_t ps = g.page_size;
    std::vector<int32_t> pages, offsets, lengths;
    std::vector<std::vector<int32_t>> tables;
    int32_t num_pages = 1;  // page 0 is never in a table
    for (const DraftBlock& blk : blocks) {
      const int64_t len = blk.no_table       ? 0
                          : g.ring_pages > 0 ? g.ring_pages
                                             : (blk.position + ps - 1) / ps;
      std::vector<int32_t> table(static_cast<size_t>(len));
      for (int32_t& e : table) e = num_pages++;
      if (blk.missing_page && len > 1) table[static_cast<size_t>(len / 2)] = -1;
      offsets.push_back(static_cast<int32_t>(pages.size()));
      lengths.push_back(static_cast<int32_t>(len));
      pages.insert(pages.end(), table.begin(), table.end());
      tables.push_back(std::move(table));
    }
    pages.push_back(-1);  // never empty
    const int64_t num_slots = num_pages * ps, width = g.Nkv * g.D;
    HostTensor keys(DType::kBF16, {num_slots, g.Nkv, g.D}), values(DType::kBF16, keys.view.shape);
    test::fill_uniform(keys.view, 11, 100.0f);
    test::fill_uniform(values.view, 12, 100.0f);
    std::vector<int64_t> slot_positions(static_cast<size_t>(num_slots), -1), block_positions;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    for (int64_t b = 0; b < S; ++b) {
      const int64_t p = blocks[b].position;
      block_positions.push_back(p);
      const std::vector<int32_t>& table = tables[static_cast<size_t>(b)];
      const int64_t lo = g.window > 0 ? std::max<int64_t>(0, p - g.window + 1) : 0;
      for (int64_t pos = lo; pos < p; ++pos) {
        int64_t e = pos / ps;
        if (g.ring_pages > 0) e %= g.ring_pages;
        if (e >= static_cast<int64_t>(table.size()) || table[static_cast<size_t>(e)] < 0) continue;
        const int64_t slot = int64_t{table[static_cast<size_t>(e)]} * ps + pos % ps;
        if (coin(rng_) < 0.85) {
          slot_positions[static_cast<size_t>(slot)] = pos;
          for (int64_t i = 0; i < width; ++i) {
            keys.as<bf16>()[slot * width + i] = to_bf16(normal(rng_));
            values.as<bf16>()[slot * width + i] = to_bf16(normal(rng_));
          }
        } else if (g.ring_pages > 0 && pos >= g.ring_pages * ps) {
          slot_positions[static_cast<size_t>(slot)] = pos - g.ring_pages * ps;  // stale
        }
      }
    }
    HostTensor q = test::random_bf16({N, g.Nq, g.D}, rng_, 1.5f);
    HostTensor k = test::random_bf16({N, g.Nkv, g.D}, rng_, 1.5f);
    HostTensor v = test::random_bf16({N, g.Nkv, g.D}, rng_);
    HostTensor sp = i64_host(slot_positions), bp = i64_host(block_positions);
    HostTensor pages_t = i32_host(pages), offsets_t = i32_host(offsets);
    HostTensor lengths_t = i32_host(lengths);

    DFlash2ContextView host_ctx{keys.view,      values.view, sp.view, pages_t.view, offsets_t.view,
                                lengths_t.view, bp.view,     ps,      g.ring_pages, g.window};
    HostTensor want(DType::kBF16, {N, g.Nq, g.D});
    dflash2_block_attention(cpu.one, q.view, k.view, v.view, host_ctx, want.view);

    DFlash2ContextView dev_ctx = host_ctx;
    dev_ctx.keys = upload(keys);
    dev_ctx.values = upload(values);
    dev_ctx.slot_positions = upload(sp);
    dev_ctx.pages = upload(pages_t);
    dev_ctx.table_offsets = upload(offsets_t);
    dev_ctx.table_lengths = upload(lengths_t);
    dev_ctx.block_positions = upload(bp);
    const TensorView dout = device_tensor(DType::kBF16, {N, g.Nq, g.D});
    dflash2_block_attention(gpu, upload(q), upload(k), upload(v), dev_ctx, dout);
    HostTensor got = download(dout);

    // Every element within 2 bf16 ulps of the output's largest magnitude.
    const test::Diff d = test::compare(got.view, want.view, 2);
    float max_ref = 0.0f;
    for (int64_t i = 0; i < want.view.numel(); ++i)
      max_ref = std::max(max_ref, std::fabs(test::value_at(want.view, i)));
    EXPECT_LE(d.rel * max_ref, 2 * test::bf16_ulp(max_ref))
        << "worst element " << d.worst << ": " << test::value_at(got.view, d.worst) << " vs "
        << test::value_at(want.view, d.worst);
    std::printf(
        "block_attention S=%lld B=%lld %lld/%lldx%lld: rel %.3g, %lld beyond 2 ulps, "
        "%.4f bit-equal\n",
        static_cast<long long>(S), static_cast<long long>(g.B), static_cast<long long>(g.Nq),
        static_cast<long long>(g.Nkv), static_cast<long long>(g.D), d.rel,
        static_cast<long long>(d.far), test::exact_fraction(got.view, want.view));
  }

  // S blocks of J rows over a vocabulary of V: top-K candidates, scores and drafts.
  void check_select(int64_t S, int64_t J, int64_t V, int64_t K, int64_t rank, SelectTies ties) {
    SCOPED_TRACE(::testing::Message() << "select S=" << S << " J=" << J << " V=" << V << " K=" << K
                                      << " rank=" << rank << " ties=" << static_cast<int>(ties));
    const int64_t R = S * J;
    HostTensor u(DType::kF32, {R, V});
    test::fill_uniform(u.view, static_cast<uint64_t>(V + K), 8.0f);
    std::uniform_int_distribution<int64_t> any_id(0, V - 1);
    for (int64_t r = 0; r < R; ++r) {
      float* row = u.as<float>() + r * V;
      if (ties != SelectTies::kPlanted) {
        for (int64_t i = 0; i < V; ++i) row[i] = std::round(row[i] / 2.0f);
        if (ties == SelectTies::kClustered)
          for (int64_t i = 0; i < V; ++i)
            if (i % 2048 < 60) row[i] += 50.0f;
        continue;
      }
      const float top = *std::max_element(row, row + V);
      for (int i = 0; i < 3; ++i) row[any_id(rng_)] = top + 1.0f;
      for (int i = 0; i < 20; ++i) row[any_id(rng_)] = top + 0.5f;  // across the K-th place
    }
    HostTensor hp = test::random_bf16({R, rank}, rng_, 1.0f);
    HostTensor predecessor(DType::kBF16, {V, rank}), successor(DType::kBF16, {V, rank});
    test::fill_uniform(predecessor.view, 21, 1.0f);
    test::fill_uniform(successor.view, 22, 1.0f);
    std::vector<int32_t> anchor_ids;
    for (int64_t b = 0; b < S; ++b) anchor_ids.push_back(static_cast<int32_t>(any_id(rng_)));
    HostTensor anchors = i32_host(anchor_ids);

    HostTensor want_c(DType::kI32, {R, K}), want_s(DType::kF32, {R, K}), want_d(DType::kI32, {R});
    dflash2_select(cpu.two, u.view, hp.view, predecessor.view, successor.view, anchors.view,
                   want_c.view, want_s.view, want_d.view);
    const TensorView dc = device_tensor(DType::kI32, {R, K});
    const TensorView ds = device_tensor(DType::kF32, {R, K});
    const TensorView dd = device_tensor(DType::kI32, {R});
    dflash2_select(gpu, upload(u), upload(hp), upload(predecessor), upload(successor),
                   upload(anchors), dc, ds, dd);
    EXPECT_TRUE(test::bits_equal(download(dc).view, want_c.view)) << "candidates";
    EXPECT_TRUE(test::bits_equal(download(ds).view, want_s.view)) << "scores";
    EXPECT_TRUE(test::bits_equal(download(dd).view, want_d.view)) << "drafts";
  }

  std::mt19937 rng_{20260407};
};

TEST_F(CudaDFlash2, ConvBitExact) {
  check_conv(1, 8, 5120, 16, 0, true);  // Beam's drafter, in place
  check_conv(16, 8, 5120, 16, 1, true);
  check_conv(3, 4, 256, 16, 1, false);
  check_conv(2, 4, 36, 4, 0, true);  // width and group not multiples of 8: scalar path
  check_conv(2, 4, 36, 4, 1, false);
  check_conv(3, 1, 64, 8, 1, true);  // blocks of one row: no x_{t-1} term
}

TEST_F(CudaDFlash2, StoreContextBitExact) {
  check_store(7, 8 * 128, 64, true);
  check_store(7, 8 * 128, 64, false);  // positions empty: slot_positions untouched
  check_store(5, 3 * 5, 9, true);      // odd width: scalar path
  check_store(1, 2 * 32, 1, true);
}

TEST_F(CudaDFlash2, BlockAttentionPagedContext) {
  // GQA group 4, head_dim 32, blocks of 4, no window: an empty context (position 0), a short
  // one, a missing page, a block without a table.
  DraftGeometry g{.B = 4, .Nq = 8, .Nkv = 2, .D = 32};
  check_attention(g, {{0}, {17}, {70, true}, {131}, {45, false, true}});
}

TEST_F(CudaDFlash2, BlockAttentionRingWindow) {
  // A ring of pages under a 40-position window: stale slots, a missing page; rows of a block see
  // different context ranges.
  DraftGeometry g{.B = 8, .Nq = 4, .Nkv = 1, .D = 32, .window = 40, .page_size = 16};
  g.ring_pages = (g.window + g.B + g.page_size - 1) / g.page_size + 1;
  check_attention(g, {{100}, {45, true}, {3}, {300, true}, {0}});
  g.D = 128;
  check_attention(g, {{1000, true}, {41}});
}

TEST_F(CudaDFlash2, BlockAttentionWindowShorterThanBlock) {
  // The last rows of a block see no context key, only the block's rows.
  DraftGeometry g{.B = 4, .Nq = 4, .Nkv = 2, .D = 64, .window = 3, .page_size = 4};
  g.ring_pages = (g.window + g.B + g.page_size - 1) / g.page_size + 1;
  check_attention(g, {{10}, {2}, {57, true}});
}

TEST_F(CudaDFlash2, BlockAttentionManyBlocks) {
  // Enough (block, KV head) pairs to fill the GPU: no cluster split.
  DraftGeometry g{.B = 4, .Nq = 16, .Nkv = 4, .D = 128, .window = 64, .page_size = 16};
  g.ring_pages = (g.window + g.B + g.page_size - 1) / g.page_size + 1;
  std::vector<DraftBlock> blocks;
  for (int64_t b = 0; b < 40; ++b) blocks.push_back({b * 13 % 200, b % 7 == 3});
  check_attention(g, blocks);
}

TEST_F(CudaDFlash2, BlockAttentionWideGroups) {
  // 16 rows x 16 q heads per KV head: 256 query rows in 4 CTAs, head_dim 256.
  DraftGeometry g{.B = 16, .Nq = 16, .Nkv = 1, .D = 256};
  check_attention(g, {{90}, {33, true}});
}

TEST_F(CudaDFlash2, BlockAttentionBeamDrafter) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  // 40 / 8 heads x 128, blocks of 8, window 4096 over a ring of pages of 16.
  DraftGeometry g{.B = 8, .Nq = 40, .Nkv = 8, .D = 128, .window = 4096, .page_size = 16};
  g.ring_pages = (g.window + g.B + g.page_size - 1) / g.page_size + 1;
  check_attention(g, {{5000, true}, {4097}, {700}});
}

// Few rows split over slices of the vocabulary whose top K merge (tie runs across the slices'
// edges); rows enough to fill the GPU (280 >= two CTAs an SM) take one CTA a row, where the
// clustered logits reach the K-sweep path. Where rank % 8 == 0 the walk scores every (previous
// draft, candidate) pair in parallel and then picks its path (the sequential walk otherwise).
TEST_F(CudaDFlash2, SelectBitExact) {
  check_select(2, 7, 151936, 16, 256, SelectTies::kPlanted);
  check_select(3, 7, 100, 16, 256, SelectTies::kQuantized);
  check_select(1, 3, 151936, 16, 256, SelectTies::kQuantized);
  check_select(2, 3, 151936, 16, 256, SelectTies::kClustered);
  check_select(40, 7, 151936, 16, 256, SelectTies::kClustered);
  check_select(2, 2, 1001, 5, 36, SelectTies::kPlanted);  // odd widths: scalar paths
  check_select(1, 2, 8193, 64, 64, SelectTies::kQuantized);  // two slices of scalar reads
  check_select(1, 2, 5000, 64, 64, SelectTies::kPlanted);
  check_select(2, 1, 151936, 16, 256, SelectTies::kPlanted);  // one row: the anchor's pairs only
  check_select(1, 3, 151936, 64, 256, SelectTies::kPlanted);  // > 48 KiB of gates and rows
}

}  // namespace
}  // namespace beam
