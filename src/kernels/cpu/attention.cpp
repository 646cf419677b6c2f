// CPU paged attention: one task per (sequence, tile of query rows, KV head) reads the tile's
// visible keys once, chunk by chunk, with an fp32 online softmax per (row, query head).
// Chunks follow a fixed grid on logical slots (multiples of kKeyChunk and of the block size), so
// a row's result depends only on its own visible keys: it is the same in any batch or tile.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vec.h"

namespace beam::cpu {
namespace {

constexpr int64_t kQueryTile = 8;  // query rows sharing one pass over the keys
constexpr int64_t kKeyChunk = 32;  // keys per online-softmax step

struct Geometry {
  int64_t num_heads, num_kv_heads, head_dim, group, block_size, num_blocks, window;
  float scale;  // fp32(1 / sqrt(D))
};

struct WorkItem {
  int64_t seq, row0, rows, kv_head;
};

// Logical slots [lo, hi] visible to the query at absolute position p: p' <= p and, with a
// window, p - p' < window.
struct SlotRange {
  int64_t lo, hi;
};
SlotRange visible_slots(const AttentionSeq& s, int64_t p, int64_t window) {
  const int64_t hi = p - s.kv_pos0;
  return {window > 0 ? std::max<int64_t>(0, hi - window + 1) : 0, hi};
}

// Per-task buffers, sized for one tile.
struct Scratch {
  std::vector<float> q, acc, max, sum, k, v, scores;
  explicit Scratch(const Geometry& g) {
    const size_t rows = static_cast<size_t>(kQueryTile * g.group), D = g.head_dim;
    q.resize(rows * D);
    acc.resize(rows * D);
    max.resize(rows);
    sum.resize(rows);
    k.resize(kKeyChunk * D);
    v.resize(kKeyChunk * D);
    scores.resize(static_cast<size_t>(g.group * kKeyChunk));
  }
};

// Folds n keys into one (row, head) state: scores are raw q·k dot products (scaled here).
void online_softmax_step(float* scores, int64_t n, const float* v, int64_t D, float scale,
                         float& max, float& sum, float* acc) {
  float chunk_max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    scores[j] *= scale;
    chunk_max = std::max(chunk_max, scores[j]);
  }
  const float new_max = std::max(max, chunk_max);
  const float alpha = std::exp(max - new_max);  // 0 on the first step (max = -inf)
  sum *= alpha;
  scale_row(alpha, acc, D);
  for (int64_t j = 0; j < n; ++j) {
    const float p = std::exp(scores[j] - new_max);
    sum += p;
    axpy(p, v + j * D, acc, D);
  }
  max = new_max;
}

// Widens slots [c0, c1) of one KV head (all inside one cache block) to fp32 rows.
void load_chunk(const PagedKv& kv, const Geometry& g, int32_t block, int64_t c0, int64_t c1,
                int64_t kv_head, Scratch& sc) {
  const int64_t D = g.head_dim, stride = g.num_kv_heads * D;
  const int64_t first = ((block * g.block_size + c0 % g.block_size) * g.num_kv_heads + kv_head) * D;
  for (int64_t j = 0; j < c1 - c0; ++j) {
    widen_bf16(kv.k.as<bf16>() + first + j * stride, sc.k.data() + j * D, D);
    widen_bf16(kv.v.as<bf16>() + first + j * stride, sc.v.data() + j * D, D);
  }
}

void attend_tile(const TensorView& q, const PagedKv& kv, const AttentionSeq& s, const Geometry& g,
                 const WorkItem& w, const TensorView& out, Scratch& sc) {
  const int64_t G = g.group, D = g.head_dim, bs = g.block_size;
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t t = s.q_begin + w.row0 + r;
    widen_bf16(q.as<bf16>() + (t * g.num_heads + w.kv_head * G) * D, sc.q.data() + r * G * D,
               G * D);
  }
  std::fill_n(sc.acc.begin(), w.rows * G * D, 0.0f);
  std::fill_n(sc.max.begin(), w.rows * G, -std::numeric_limits<float>::infinity());
  std::fill_n(sc.sum.begin(), w.rows * G, 0.0f);

  const int64_t p0 = s.q_pos0 + w.row0;
  const SlotRange first = visible_slots(s, p0, g.window);
  const SlotRange last = visible_slots(s, p0 + w.rows - 1, g.window);
  for (int64_t c0 = first.lo; c0 <= last.hi;) {
    const int64_t c1 =
        std::min({(c0 / kKeyChunk + 1) * kKeyChunk, (c0 / bs + 1) * bs, last.hi + 1});
    const int32_t block = s.block_table[c0 / bs];
    BEAM_CHECK(block >= 0 && block < g.num_blocks)
        << "paged_attention: logical block " << c0 / bs << " maps to " << block
        << " but holds keys visible to queries at positions " << p0 << ".." << p0 + w.rows - 1
        << " (pool of " << g.num_blocks << " blocks)";
    load_chunk(kv, g, block, c0, c1, w.kv_head, sc);
    for (int64_t r = 0; r < w.rows; ++r) {
      const SlotRange vis = visible_slots(s, p0 + r, g.window);
      const int64_t a = std::max(vis.lo, c0), b = std::min(vis.hi, c1 - 1);
      if (a > b) continue;
      gemm_serial(sc.q.data() + r * G * D, G, D, sc.k.data() + (a - c0) * D, b - a + 1,
                  sc.scores.data(), kKeyChunk);
      for (int64_t u = 0; u < G; ++u) {
        const int64_t row = r * G + u;
        online_softmax_step(sc.scores.data() + u * kKeyChunk, b - a + 1, sc.v.data() + (a - c0) * D,
                            D, g.scale, sc.max[row], sc.sum[row], sc.acc.data() + row * D);
      }
    }
    c0 = c1;
  }
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t t = s.q_begin + w.row0 + r;
    for (int64_t u = 0; u < G; ++u) {
      const int64_t row = r * G + u;
      bf16* dst = out.as<bf16>() + (t * g.num_heads + w.kv_head * G + u) * D;
      const float* acc = sc.acc.data() + row * D;
      for (int64_t d = 0; d < D; ++d) dst[d] = to_bf16(acc[d] / sc.sum[row]);
    }
  }
}

// Every query sees its own slot, and the block table covers the slots it may read.
void check_seq(const AttentionSeq& s, const Geometry& g, size_t index) {
  if (s.q_count == 0) return;
  const int64_t first_hi = s.q_pos0 - s.kv_pos0, last_hi = first_hi + s.q_count - 1;
  BEAM_CHECK(first_hi >= 0 && last_hi < s.kv_len)
      << "paged_attention: sequence " << index << " has queries at positions " << s.q_pos0 << ".."
      << s.q_pos0 + s.q_count - 1 << " but keys only at " << s.kv_pos0 << ".."
      << s.kv_pos0 + s.kv_len - 1;
  BEAM_CHECK(static_cast<int64_t>(s.block_table.size()) > last_hi / g.block_size)
      << "paged_attention: sequence " << index << " block table has " << s.block_table.size()
      << " entries, slot " << last_hi << " needs " << last_hi / g.block_size + 1;
}

}  // namespace

void paged_attention(ThreadPool& pool, const TensorView& q, const PagedKv& kv,
                     std::span<const AttentionSeq> seqs, int64_t window, const TensorView& out) {
  Geometry g{};
  g.num_heads = q.dim(1);
  g.num_kv_heads = kv.k.dim(2);
  g.head_dim = q.dim(2);
  g.group = g.num_heads / g.num_kv_heads;
  g.block_size = kv.block_size;
  g.num_blocks = kv.k.dim(0);
  g.window = window;
  g.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(g.head_dim)));

  std::vector<WorkItem> items;
  for (size_t i = 0; i < seqs.size(); ++i) {
    check_seq(seqs[i], g, i);
    for (int64_t r = 0; r < seqs[i].q_count; r += kQueryTile)
      for (int64_t h = 0; h < g.num_kv_heads; ++h)
        items.push_back({static_cast<int64_t>(i), r, std::min(kQueryTile, seqs[i].q_count - r), h});
  }
  pool.parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t i0, int64_t i1) {
    Scratch sc(g);
    for (int64_t i = i0; i < i1; ++i) attend_tile(q, kv, seqs[items[i].seq], g, items[i], out, sc);
  });
}

void store_kv(ThreadPool& pool, const TensorView& k, const TensorView& v, const TensorView& slots,
              const PagedKv& kv) {
  const int64_t T = k.dim(0), row = k.dim(1) * k.dim(2);
  const int64_t num_slots = kv.k.dim(0) * kv.k.dim(1);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = slots.as<int64_t>()[t];
    BEAM_CHECK(slot >= -1 && slot < num_slots)
        << "store_kv: row " << t << " targets slot " << slot << " of " << num_slots;
    if (slot < 0) continue;
    std::copy_n(k.as<bf16>() + t * row, row, kv.k.as<bf16>() + slot * row);
    std::copy_n(v.as<bf16>() + t * row, row, kv.v.as<bf16>() + slot * row);
  }
}

}  // namespace beam::cpu
