// paged_attention and store_kv against a double-precision reference: GQA head mapping, sliding
// window edges, block tables with unmapped (-1) blocks outside the window, positions near 10^6,
// several sequences per batch, batch invariance and determinism, at tiny and Beam shapes.
#include "kernels/api/attention.h"

#include <algorithm>
#include <numeric>

#include "kernel_test_util.h"

namespace beam {
namespace {

using test::Contexts;

struct Geometry {
  int64_t Nq, Nkv, D, block_size, window;
};

// One sequence of a test batch: its logical keys/values and where its queries sit.
struct TestSeq {
  int64_t kv_pos0, kv_len, q_count;  // queries are the last q_count slots
  HostTensor keys, values;           // [kv_len, Nkv, D] bf16
  std::vector<int32_t> table;        // logical block -> physical block
};

// A paged cache holding every sequence of a batch in shuffled physical blocks.
struct Batch {
  Geometry g;
  std::vector<TestSeq> seqs;
  HostTensor q;  // [T, Nq, D]
  HostTensor cache_k, cache_v;
  PagedKv kv() const { return {cache_k.view, cache_v.view, g.block_size}; }

  std::vector<AttentionSeq> attention_seqs() const {
    std::vector<AttentionSeq> out;
    int64_t row = 0;
    for (const TestSeq& s : seqs) {
      out.push_back(
          {row, s.q_count, s.kv_pos0 + s.kv_len - s.q_count, s.kv_pos0, s.kv_len, s.table});
      row += s.q_count;
    }
    return out;
  }
};

struct SeqSpec {
  int64_t kv_pos0, kv_len, q_count;
};

Batch make_batch(const Geometry& g, const std::vector<SeqSpec>& specs, uint64_t seed,
                 Contexts& ctx) {
  Batch b;
  b.g = g;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  int64_t blocks = 0, T = 0;
  for (const SeqSpec& s : specs) {
    blocks += (s.kv_len + g.block_size - 1) / g.block_size;
    T += s.q_count;
  }
  b.cache_k = HostTensor(DType::kBF16, {blocks + 3, g.block_size, g.Nkv, g.D});
  b.cache_v = HostTensor(DType::kBF16, {blocks + 3, g.block_size, g.Nkv, g.D});
  test::fill_uniform(b.cache_k.view, seed + 1, 100.0f);  // garbage in unused slots
  test::fill_uniform(b.cache_v.view, seed + 2, 100.0f);
  std::vector<int32_t> physical(static_cast<size_t>(blocks + 3));
  std::iota(physical.begin(), physical.end(), 0);
  std::shuffle(physical.begin(), physical.end(), rng);
  b.q = test::random_bf16({T, g.Nq, g.D}, rng, 1.5f);
  int64_t next = 0;
  for (const SeqSpec& s : specs) {
    TestSeq ts{s.kv_pos0,
               s.kv_len,
               s.q_count,
               test::random_bf16({s.kv_len, g.Nkv, g.D}, rng, 1.5f),
               test::random_bf16({s.kv_len, g.Nkv, g.D}, rng),
               {}};
    for (int64_t j = 0; j < s.kv_len; j += g.block_size) ts.table.push_back(physical[next++]);
    HostTensor slots(DType::kI64, {s.kv_len});
    for (int64_t j = 0; j < s.kv_len; ++j)
      slots.as<int64_t>()[j] = ts.table[j / g.block_size] * g.block_size + j % g.block_size;
    store_kv(ctx.two, ts.keys.view, ts.values.view, slots.view, b.kv());
    b.seqs.push_back(std::move(ts));
  }
  return b;
}

HostTensor run(const Batch& b, const KernelContext& ctx, std::span<const AttentionSeq> seqs) {
  HostTensor out(DType::kBF16, b.q.view.shape);
  paged_attention(ctx, b.q.view, b.kv(), seqs, b.g.window, out.view);
  return out;
}

// out[row, h, :] in double: softmax over the visible logical slots; KV head = kv_head_of(h).
std::vector<double> reference(const Batch& b, int64_t seq, int64_t i, int64_t h, int64_t kv_head) {
  const Geometry& g = b.g;
  const TestSeq& s = b.seqs[seq];
  int64_t row = i;
  for (int64_t k = 0; k < seq; ++k) row += b.seqs[k].q_count;
  const int64_t p = s.kv_pos0 + s.kv_len - s.q_count + i;
  std::vector<double> scores, out(static_cast<size_t>(g.D), 0.0);
  std::vector<int64_t> slots;
  for (int64_t j = 0; j < s.kv_len; ++j) {
    const int64_t pk = s.kv_pos0 + j;
    if (pk > p || (g.window > 0 && p - pk >= g.window)) continue;
    double dot = 0;
    for (int64_t d = 0; d < g.D; ++d)
      dot += double(to_float(b.q.as<bf16>()[(row * g.Nq + h) * g.D + d])) *
             to_float(s.keys.as<bf16>()[(j * g.Nkv + kv_head) * g.D + d]);
    scores.push_back(dot / std::sqrt(double(g.D)));
    slots.push_back(j);
  }
  const double mx = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (double& sc : scores) sum += (sc = std::exp(sc - mx));
  for (size_t n = 0; n < slots.size(); ++n)
    for (int64_t d = 0; d < g.D; ++d)
      out[d] +=
          scores[n] / sum * to_float(s.values.as<bf16>()[(slots[n] * g.Nkv + kv_head) * g.D + d]);
  return out;
}

// Compares every row and head with the reference; also checks a wrong GQA mapping is detected.
void check_against_reference(const Batch& b, const HostTensor& out) {
  const Geometry& g = b.g;
  const int64_t group = g.Nq / g.Nkv;
  int64_t row = 0, off_by_one = 0, total = 0;
  double wrong_mapping_err = 0;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    for (int64_t i = 0; i < b.seqs[s].q_count; ++i, ++row) {
      for (int64_t h = 0; h < g.Nq; ++h) {
        std::vector<double> want = reference(b, s, i, h, h / group);
        for (int64_t d = 0; d < g.D; ++d) {
          const float got = to_float(out.as<bf16>()[(row * g.Nq + h) * g.D + d]);
          // bf16 rounding of an fp32 result: at most 1 ulp off (or tiny when the average cancels)
          const int ulps = test::bf16_ulps(got, float(want[d]));
          ASSERT_TRUE(ulps <= 1 || std::fabs(got - want[d]) < 1e-5)
              << "seq " << s << " row " << i << " head " << h << " d " << d << ": got " << got
              << " want " << want[d];
          off_by_one += ulps > 0;
          ++total;
        }
        if (g.Nkv > 1 && h == 1 && i == 0) {  // kv head 0 for h / group, 1 for h % Nkv
          std::vector<double> wrong = reference(b, s, i, h, h % g.Nkv);
          for (int64_t d = 0; d < g.D; ++d)
            wrong_mapping_err = std::max(wrong_mapping_err, std::fabs(wrong[d] - want[d]));
        }
      }
    }
  }
  EXPECT_LT(off_by_one, total / 50 + 1) << "more than 2% of outputs 1 bf16 ulp off";
  if (g.Nkv > 1) {
    EXPECT_GT(wrong_mapping_err, 0.05) << "test cannot see the GQA mapping";
  }
}

const std::vector<SeqSpec> kTinySeqs = {
    {0, 40, 40},      // prefill crossing the window
    {0, 17, 1},       // decode one past the window
    {0, 17, 7},       // chunk of 7 after 10 cached
    {999980, 25, 3},  // positions around 10^6
    {0, 1, 1},        // single token
};

TEST(PagedAttention, MatchesReferenceTinyShapes) {
  for (int64_t window : {16, 0}) {
    for (int64_t bs : {4, 16}) {
      SCOPED_TRACE(::testing::Message() << "window " << window << " block_size " << bs);
      Contexts ctx;
      Batch b = make_batch({4, 2, 128, bs, window}, kTinySeqs, 31 + bs + window, ctx);
      std::vector<AttentionSeq> seqs = b.attention_seqs();
      HostTensor out1 = run(b, ctx.one, seqs), out2 = run(b, ctx.two, seqs);
      ASSERT_TRUE(test::bits_equal(out1.view, out2.view)) << "1 vs 2 threads differ";
      check_against_reference(b, out2);
    }
  }
}

TEST(PagedAttention, MatchesReferenceBeamShapes) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  Contexts ctx;
  {
    Batch b = make_batch({48, 8, 128, 64, 512}, {{0, 600, 1}, {1000000, 530, 9}}, 41, ctx);
    std::vector<AttentionSeq> seqs = b.attention_seqs();
    check_against_reference(b, run(b, ctx.two, seqs));
  }
  {
    Batch b = make_batch({48, 8, 128, 64, 0}, {{0, 1100, 2}}, 42, ctx);  // full attention
    std::vector<AttentionSeq> seqs = b.attention_seqs();
    check_against_reference(b, run(b, ctx.two, seqs));
  }
}

// A row's output depends only on its own visible keys: alone, in a batch, in prefill or decode.
TEST(PagedAttention, BatchInvariant) {
  Contexts ctx;
  Batch b = make_batch({4, 2, 128, 4, 16}, kTinySeqs, 51, ctx);
  std::vector<AttentionSeq> seqs = b.attention_seqs();
  HostTensor all = run(b, ctx.two, seqs);
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int64_t i = 0; i < seqs[s].q_count; ++i) {
      AttentionSeq one = seqs[s];  // query row i alone, as a decode step with the same keys
      one.q_begin = seqs[s].q_begin + i;
      one.q_count = 1;
      one.q_pos0 = seqs[s].q_pos0 + i;
      one.kv_len = one.q_pos0 - one.kv_pos0 + 1;
      HostTensor alone = run(b, ctx.one, {&one, 1});
      ASSERT_TRUE(test::bits_equal(alone.view.rows(one.q_begin, 1), all.view.rows(one.q_begin, 1)))
          << "seq " << s << " row " << i;
    }
  }
}

// The same batch in a paged cache of `block_size` (blocks in reverse order): same queries, keys
// and values, only the paging differs.
Batch repaged(const Batch& b, int64_t block_size, Contexts& ctx) {
  Batch out;
  out.g = b.g;
  out.g.block_size = block_size;
  out.q = test::copy_of(b.q);
  int64_t blocks = 0;
  for (const TestSeq& s : b.seqs) blocks += (s.kv_len + block_size - 1) / block_size;
  out.cache_k = HostTensor(DType::kBF16, {blocks, block_size, b.g.Nkv, b.g.D});
  out.cache_v = HostTensor(DType::kBF16, {blocks, block_size, b.g.Nkv, b.g.D});
  int32_t next = static_cast<int32_t>(blocks);
  for (const TestSeq& s : b.seqs) {
    TestSeq ts{s.kv_pos0, s.kv_len, s.q_count, test::copy_of(s.keys), test::copy_of(s.values), {}};
    for (int64_t j = 0; j < s.kv_len; j += block_size) ts.table.push_back(--next);
    HostTensor slots(DType::kI64, {s.kv_len});
    for (int64_t j = 0; j < s.kv_len; ++j)
      slots.as<int64_t>()[j] = ts.table[j / block_size] * block_size + j % block_size;
    store_kv(ctx.two, ts.keys.view, ts.values.view, slots.view, out.kv());
    out.seqs.push_back(std::move(ts));
  }
  return out;
}

// The key grid does not follow the cache's blocks: any block size gives the same bits (a server's
// --block-size never changes a sampled token).
TEST(PagedAttention, BlockSizeInvariant) {
  for (int64_t window : {16, 0}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    Contexts ctx;
    const std::vector<SeqSpec> specs = {{0, 140, 140}, {0, 97, 1}, {0, 75, 9}, {999980, 70, 3}};
    Batch base = make_batch({4, 2, 64, 64, window}, specs, 91 + window, ctx);
    const HostTensor want = run(base, ctx.two, base.attention_seqs());
    for (int64_t bs : {1, 4, 16, 24, 48, 128}) {
      Batch b = repaged(base, bs, ctx);
      EXPECT_TRUE(test::bits_equal(run(b, ctx.two, b.attention_seqs()).view, want.view))
          << "block size " << bs;
    }
  }
}

// Query at position 39 with W = 16 sees keys 24..39: changing key 23 (W back) or 22 (W+1 back)
// changes nothing, changing key 24 (W-1 back) changes the output.
TEST(PagedAttention, WindowEdges) {
  Contexts ctx;
  Batch b = make_batch({4, 2, 128, 4, 16}, {{0, 40, 1}}, 61, ctx);
  std::vector<AttentionSeq> seqs = b.attention_seqs();
  const HostTensor base = run(b, ctx.two, seqs);
  for (int64_t back : {b.g.window - 1, b.g.window, b.g.window + 1}) {
    const int64_t j = 39 - back;
    const int64_t phys = b.seqs[0].table[j / 4] * 4 + j % 4;
    HostTensor saved_k = test::copy_of(b.cache_k), saved_v = test::copy_of(b.cache_v);
    const int64_t row = b.g.Nkv * b.g.D;
    for (int64_t e = 0; e < row; ++e) {
      b.cache_k.as<bf16>()[phys * row + e] = to_bf16(7.0f);
      b.cache_v.as<bf16>()[phys * row + e] = to_bf16(-9.0f);
    }
    const HostTensor changed = run(b, ctx.two, seqs);
    EXPECT_EQ(!test::bits_equal(changed.view, base.view), back < b.g.window)
        << back << " keys back";
    std::memcpy(b.cache_k.view.data, saved_k.view.data, saved_k.view.nbytes());
    std::memcpy(b.cache_v.view.data, saved_v.view.data, saved_v.view.nbytes());
  }
}

// Blocks that slid out of every query's window may be -1 and are never read.
TEST(PagedAttention, UnmappedBlocksOutsideTheWindow) {
  Contexts ctx;
  Batch b = make_batch({4, 2, 128, 4, 16}, {{0, 40, 1}, {0, 40, 5}}, 71, ctx);
  std::vector<AttentionSeq> seqs = b.attention_seqs();
  const HostTensor base = run(b, ctx.two, seqs);
  // Seq 0: query 39 sees 24..39 (blocks 6..9). Seq 1: queries 35..39 see 20..39 (blocks 5..9).
  std::vector<int32_t> t0 = b.seqs[0].table, t1 = b.seqs[1].table;
  std::fill(t0.begin(), t0.begin() + 6, -1);
  std::fill(t1.begin(), t1.begin() + 5, -1);
  seqs[0].block_table = t0;
  seqs[1].block_table = t1;
  EXPECT_TRUE(test::bits_equal(run(b, ctx.two, seqs).view, base.view));
}

TEST(PagedAttentionDeathTest, UnmappedBlockInsideTheWindowIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Contexts ctx;
  Batch b = make_batch({4, 2, 128, 4, 16}, {{0, 40, 1}}, 81, ctx);
  std::vector<AttentionSeq> seqs = b.attention_seqs();
  std::vector<int32_t> t = b.seqs[0].table;
  t[6] = -1;  // holds key 24, inside the window of query 39
  seqs[0].block_table = t;
  EXPECT_DEATH(run(b, ctx.one, seqs), "logical block 6 maps to -1");
}

TEST(StoreKv, WritesSlotsAndSkipsMinusOne) {
  Contexts ctx;
  std::mt19937 rng(91);
  HostTensor k = test::random_bf16({3, 2, 8}, rng), v = test::random_bf16({3, 2, 8}, rng);
  HostTensor ck(DType::kBF16, {2, 4, 2, 8}), cv(DType::kBF16, {2, 4, 2, 8}),
      slots(DType::kI64, {3});
  std::fill_n(ck.as<bf16>(), ck.view.numel(), to_bf16(0.0f));
  std::fill_n(cv.as<bf16>(), cv.view.numel(), to_bf16(0.0f));
  const int64_t s[3] = {5, -1, 0};
  std::copy_n(s, 3, slots.as<int64_t>());
  store_kv(ctx.two, k.view, v.view, slots.view, {ck.view, cv.view, 4});
  const TensorView ck_rows = ck.view.reshape({8, 16}), cv_rows = cv.view.reshape({8, 16});
  EXPECT_TRUE(test::bits_equal(ck_rows.rows(5, 1), k.view.rows(0, 1).reshape({1, 16})));
  EXPECT_TRUE(test::bits_equal(cv_rows.rows(0, 1), v.view.rows(2, 1).reshape({1, 16})));
  int nonzero = 0;
  for (int64_t i = 0; i < ck.view.numel(); ++i) nonzero += ck.as<bf16>()[i].bits != 0;
  EXPECT_LE(nonzero, 32);  // only slots 5 and 0 written
}

}  // namespace
}  // namespace beam
