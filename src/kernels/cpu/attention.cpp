// CPU paged attention: one task per (sequence, tile of query rows, range of KV heads) reads the
// tile's visible keys once, chunk by chunk, with an fp32 online softmax per (row, query head).
// Chunks follow a fixed grid on logical slots (multiples of kKeyChunk, whatever the cache's block
// size), so a row's result depends only on its own visible keys: it is the same in any batch,
// tile, task or block size.
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
// Bound on a task's fp32 query + accumulator rows, so they stay in L1/L2 next to the K/V chunk.
constexpr int64_t kStateBytes = 64 * 1024;

struct Geometry {
  int64_t num_heads, num_kv_heads, head_dim, group, block_size, num_blocks, window;
  float scale;  // fp32(1 / sqrt(D))
};

// Query rows [row0, row0 + rows) of one sequence against KV heads [kv0, kv0 + num_kv).
struct WorkItem {
  int64_t seq, row0, rows, kv0, num_kv;
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

// Chunk [c0, c1) of the fixed key grid: it ends at the next multiple of kKeyChunk or after slot
// `last`, whichever comes first (it may span cache blocks).
int64_t chunk_end(int64_t c0, int64_t last) {
  return std::min((c0 / kKeyChunk + 1) * kKeyChunk, last + 1);
}

// Per-task buffers. Query state is [row][query head of the item][D]; K/V chunks are head-major
// [kv head of the item][key][D].
struct Scratch {
  std::vector<float> q, acc, max, sum, k, v, scores;
  Scratch(const Geometry& g, int64_t max_state_rows, int64_t max_kv) {
    const int64_t D = g.head_dim;
    q.resize(static_cast<size_t>(max_state_rows * D));
    acc.resize(q.size());
    max.resize(static_cast<size_t>(max_state_rows));
    sum.resize(max.size());
    k.resize(static_cast<size_t>(max_kv * kKeyChunk * D));
    v.resize(k.size());
    scores.resize(static_cast<size_t>(g.group * kKeyChunk));
  }
};

// Folds n keys into the online-softmax state of G query heads. scores: [G][kKeyChunk] raw q·k
// products, replaced by the probabilities exp(score * scale - new_max); max, sum: [G];
// acc: [G, D], rescaled by exp(old_max - new_max) before the new p·v terms are added in key order.
void online_softmax_step(float* scores, int64_t G, int64_t n, const float* v, int64_t D,
                         float scale, float* max, float* sum, float* acc) {
  for (int64_t u = 0; u < G; ++u) {
    float* s = scores + u * kKeyChunk;
    float chunk_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      s[j] *= scale;
      chunk_max = std::max(chunk_max, s[j]);
    }
    const float new_max = std::max(max[u], chunk_max);
    const float alpha = std::exp(max[u] - new_max);  // 0 on the first step (max = -inf)
    sum[u] *= alpha;
    scale_row(alpha, acc + u * D, D);
    for (int64_t j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - new_max);
      sum[u] += s[j];
    }
    max[u] = new_max;
  }
  accumulate_pv(scores, kKeyChunk, G, v, n, D, acc);
}

// Widens logical slots [c0, c1) of the item's KV heads to fp32, head-major, each slot from the
// cache block its sequence's table maps it to. Each slot's heads [kv0, kv0 + num_kv) are
// contiguous in the cache.
void load_chunk(const PagedKv& kv, const AttentionSeq& s, const Geometry& g, const WorkItem& w,
                int64_t c0, int64_t c1, Scratch& sc) {
  const int64_t D = g.head_dim;
  for (int64_t c = c0; c < c1; ++c) {
    const int32_t block = s.block_table[c / g.block_size];
    BEAM_CHECK(block >= 0 && block < g.num_blocks)
        << "paged_attention: logical block " << c / g.block_size << " maps to " << block
        << " but holds key slot " << c << ", visible to queries from position " << s.q_pos0
        << " on (pool of " << g.num_blocks << " blocks)";
    const int64_t src = ((block * g.block_size + c % g.block_size) * g.num_kv_heads + w.kv0) * D;
    const int64_t j = c - c0;
    for (int64_t h = 0; h < w.num_kv; ++h) {
      widen_bf16(kv.k.as<bf16>() + src + h * D, sc.k.data() + (h * kKeyChunk + j) * D, D);
      widen_bf16(kv.v.as<bf16>() + src + h * D, sc.v.data() + (h * kKeyChunk + j) * D, D);
    }
  }
}

// Folds chunk [c0, c1) into every row whose visible range intersects it.
void attend_chunk(const AttentionSeq& s, const Geometry& g, const WorkItem& w, int64_t c0,
                  int64_t c1, Scratch& sc) {
  const int64_t G = g.group, D = g.head_dim, heads = w.num_kv * G;
  for (int64_t r = 0; r < w.rows; ++r) {
    const SlotRange vis = visible_slots(s, s.q_pos0 + w.row0 + r, g.window);
    const int64_t a = std::max(vis.lo, c0), b = std::min(vis.hi, c1 - 1);
    if (a > b) continue;
    for (int64_t h = 0; h < w.num_kv; ++h) {
      const float* k = sc.k.data() + (h * kKeyChunk + a - c0) * D;
      const float* v = sc.v.data() + (h * kKeyChunk + a - c0) * D;
      const int64_t row = r * heads + h * G;  // first query head of this KV head
      gemm_serial(sc.q.data() + row * D, G, D, k, b - a + 1, sc.scores.data(), kKeyChunk);
      online_softmax_step(sc.scores.data(), G, b - a + 1, v, D, g.scale, sc.max.data() + row,
                          sc.sum.data() + row, sc.acc.data() + row * D);
    }
  }
}

void attend_item(const TensorView& q, const PagedKv& kv, const AttentionSeq& s, const Geometry& g,
                 const WorkItem& w, const TensorView& out, Scratch& sc) {
  const int64_t D = g.head_dim, heads = w.num_kv * g.group, h0 = w.kv0 * g.group;
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t t = s.q_begin + w.row0 + r;
    widen_bf16(q.as<bf16>() + (t * g.num_heads + h0) * D, sc.q.data() + r * heads * D, heads * D);
  }
  std::fill_n(sc.acc.begin(), w.rows * heads * D, 0.0f);
  std::fill_n(sc.max.begin(), w.rows * heads, -std::numeric_limits<float>::infinity());
  std::fill_n(sc.sum.begin(), w.rows * heads, 0.0f);

  const int64_t p0 = s.q_pos0 + w.row0;
  const SlotRange first = visible_slots(s, p0, g.window);
  const SlotRange last = visible_slots(s, p0 + w.rows - 1, g.window);
  for (int64_t c0 = first.lo; c0 <= last.hi;) {
    const int64_t c1 = chunk_end(c0, last.hi);
    load_chunk(kv, s, g, w, c0, c1, sc);
    attend_chunk(s, g, w, c0, c1, sc);
    c0 = c1;
  }
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t t = s.q_begin + w.row0 + r;
    for (int64_t u = 0; u < heads; ++u) {
      bf16* dst = out.as<bf16>() + (t * g.num_heads + h0 + u) * D;
      const float* acc = sc.acc.data() + (r * heads + u) * D;
      const float sum = sc.sum[r * heads + u];
      for (int64_t d = 0; d < D; ++d) dst[d] = to_bf16(acc[d] / sum);
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

// Splits the batch into tasks. KV heads per task: as many as keep the query state within
// kStateBytes (wide contiguous reads of each slot), halved while there are fewer tasks than
// threads. The split never changes results (heads are independent).
std::vector<WorkItem> plan_items(std::span<const AttentionSeq> seqs, const Geometry& g,
                                 int num_threads) {
  const int64_t per_kv_row_bytes = g.group * g.head_dim * 8;  // q + acc, fp32
  auto build = [&](int64_t max_kv) {
    std::vector<WorkItem> items;
    for (size_t i = 0; i < seqs.size(); ++i) {
      for (int64_t r = 0; r < seqs[i].q_count; r += kQueryTile) {
        const int64_t rows = std::min(kQueryTile, seqs[i].q_count - r);
        int64_t num_kv = max_kv;  // a divisor of Nkv
        while (num_kv > 1 && num_kv * rows * per_kv_row_bytes > kStateBytes) num_kv /= 2;
        while (g.num_kv_heads % num_kv != 0) --num_kv;
        for (int64_t h = 0; h < g.num_kv_heads; h += num_kv)
          items.push_back({static_cast<int64_t>(i), r, rows, h, num_kv});
      }
    }
    return items;
  };
  int64_t max_kv = g.num_kv_heads;
  std::vector<WorkItem> items = build(max_kv);
  while (static_cast<int64_t>(items.size()) < num_threads && max_kv > 1) items = build(max_kv /= 2);
  return items;
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
  for (size_t i = 0; i < seqs.size(); ++i) check_seq(seqs[i], g, i);

  const std::vector<WorkItem> items = plan_items(seqs, g, pool.num_threads());
  int64_t max_state_rows = 0, max_kv = 0;
  for (const WorkItem& w : items) {
    max_state_rows = std::max(max_state_rows, w.rows * w.num_kv * g.group);
    max_kv = std::max(max_kv, w.num_kv);
  }
  pool.parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t i0, int64_t i1) {
    Scratch sc(g, max_state_rows, max_kv);
    for (int64_t i = i0; i < i1; ++i) attend_item(q, kv, seqs[items[i].seq], g, items[i], out, sc);
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
