// CPU DFlash2 drafter ops with docs/dflash2.md's rounding points; summation orders are the ones
// the PyTorch reference's goldens were checked against (context keys in position order, then the
// block's; the selector's Σ over the rank ascending).
#include "kernels/cpu/dflash2.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/bf16.h"

namespace beam::cpu {

void dflash2_conv(ThreadPool& pool, const TensorView& base, const TensorView& d, int64_t side,
                  int64_t group_size, int64_t block_size, const TensorView& x,
                  const TensorView& out) {
  const int64_t N = x.dim(0), H = x.dim(1), G = H / group_size, B = block_size;
  const bf16* base0 = base.as<bf16>() + (side * 2 + 0) * H;
  const bf16* base1 = base.as<bf16>() + (side * 2 + 1) * H;
  const bf16* xs = x.as<bf16>();
  bf16* ys = out.as<bf16>();
  // One task a block: row t - 1 is read before row t is written, so out may alias x (rows are
  // walked backwards within the block).
  pool.parallel_for(N / B, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> y(static_cast<size_t>(H));
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t r = (b + 1) * B - 1; r >= b * B; --r) {
        const bf16* dr = d.as<bf16>() + r * 4 * G + side * 2 * G;
        const bool first = r == b * B;
        for (int64_t ch = 0; ch < H; ++ch) {
          const int64_t g = ch / group_size;
          const float k0 = to_float(base0[ch]) + to_float(dr[g]);
          float sum = k0 * to_float(xs[r * H + ch]);
          if (!first) {
            const float k1 = to_float(base1[ch]) + to_float(dr[G + g]);
            sum = sum + k1 * to_float(xs[(r - 1) * H + ch]);
          }
          y[static_cast<size_t>(ch)] = sum;
        }
        for (int64_t ch = 0; ch < H; ++ch) ys[r * H + ch] = to_bf16(y[static_cast<size_t>(ch)]);
      }
  });
}

void dflash2_store_context(const TensorView& k, const TensorView& v, const TensorView& slots,
                           const TensorView& positions, const TensorView& keys,
                           const TensorView& values, const TensorView& slot_positions) {
  const int64_t T = k.dim(0), width = k.dim(1);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = slots.as<int64_t>()[t];
    std::memcpy(keys.as<bf16>() + slot * width, k.as<bf16>() + t * width, width * sizeof(bf16));
    std::memcpy(values.as<bf16>() + slot * width, v.as<bf16>() + t * width, width * sizeof(bf16));
    if (positions.numel() > 0) slot_positions.as<int64_t>()[slot] = positions.as<int64_t>()[t];
  }
}

namespace {

// The slot holding position p in block b's table, -1 when it is not held.
int64_t held_slot(const DFlash2ContextView& c, int64_t b, int64_t p) {
  const int64_t page_index = c.ring_pages > 0 ? (p / c.page_size) % c.ring_pages : p / c.page_size;
  if (page_index >= c.table_lengths.as<int32_t>()[b]) return -1;
  const int32_t page = c.pages.as<int32_t>()[c.table_offsets.as<int32_t>()[b] + page_index];
  if (page < 0) return -1;
  const int64_t slot = int64_t{page} * c.page_size + p % c.page_size;
  return c.slot_positions.as<int64_t>()[slot] == p ? slot : -1;
}

}  // namespace

void dflash2_block_attention(ThreadPool& pool, const TensorView& q, const TensorView& k,
                             const TensorView& v, const DFlash2ContextView& context,
                             const TensorView& out) {
  const int64_t S = context.block_positions.dim(0), N = q.dim(0), B = N / S;
  const int64_t Nq = q.dim(1), D = q.dim(2), Nkv = k.dim(1), group = Nq / Nkv;
  const int64_t W = context.window;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // One task a query row (all its heads).
  pool.parallel_for(N, 1, [&](int64_t r0, int64_t r1) {
    std::vector<const bf16*> keys, values;
    std::vector<int64_t> rows;  // >= 0: a context slot; < 0: block row -1 - i
    std::vector<float> scores, acc(static_cast<size_t>(D)), qf(static_cast<size_t>(D));
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t b = row / B, t = row % B;
      const int64_t p = context.block_positions.as<int64_t>()[b], q_pos = p + t;
      // The keys this query sees, in position order: context, then the whole block.
      rows.clear();
      for (int64_t pos = W > 0 ? std::max<int64_t>(0, q_pos - W + 1) : 0; pos < p; ++pos)
        if (const int64_t slot = held_slot(context, b, pos); slot >= 0) rows.push_back(slot);
      for (int64_t i = 0; i < B; ++i) rows.push_back(-1 - (b * B + i));
      for (int64_t h = 0; h < Nq; ++h) {
        const int64_t kvh = h / group;
        const bf16* qh = q.as<bf16>() + (row * Nq + h) * D;
        for (int64_t d = 0; d < D; ++d) qf[d] = to_float(qh[d]);
        keys.clear();
        values.clear();
        for (int64_t r : rows) {
          const bool ctx_row = r >= 0;
          const bf16* kb = ctx_row ? context.keys.as<bf16>() : k.as<bf16>();
          const bf16* vb = ctx_row ? context.values.as<bf16>() : v.as<bf16>();
          const int64_t i = ctx_row ? r : -1 - r;
          keys.push_back(kb + (i * Nkv + kvh) * D);
          values.push_back(vb + (i * Nkv + kvh) * D);
        }
        scores.assign(keys.size(), 0.0f);
        float max = -INFINITY;
        for (size_t i = 0; i < keys.size(); ++i) {
          float dot = 0.0f;
          for (int64_t d = 0; d < D; ++d) dot = dot + qf[d] * to_float(keys[i][d]);
          scores[i] = dot * scale;
          max = std::max(max, scores[i]);
        }
        float sum = 0.0f;
        for (float& s : scores) {
          s = std::exp(s - max);
          sum = sum + s;
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (size_t i = 0; i < values.size(); ++i)
          for (int64_t d = 0; d < D; ++d) acc[d] = acc[d] + scores[i] * to_float(values[i][d]);
        bf16* oh = out.as<bf16>() + (row * Nq + h) * D;
        for (int64_t d = 0; d < D; ++d) oh[d] = to_bf16(acc[d] / sum);
      }
    }
  });
}

void dflash2_select(ThreadPool& pool, const TensorView& u, const TensorView& hp,
                    const TensorView& predecessor, const TensorView& successor,
                    const TensorView& anchors, const TensorView& candidates,
                    const TensorView& scores, const TensorView& drafts) {
  const int64_t R = u.dim(0), V = u.dim(1), K = candidates.dim(1), rank = hp.dim(1);
  const int64_t S = anchors.dim(0), J = R / S;
  // Top-K per row, one task a row.
  pool.parallel_for(R, 1, [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> order(static_cast<size_t>(V));
    for (int64_t r = r0; r < r1; ++r) {
      const float* ur = u.as<float>() + r * V;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + K, order.end(), [ur](int32_t x, int32_t y) {
        return ur[x] > ur[y] || (ur[x] == ur[y] && x < y);
      });
      std::copy_n(order.begin(), K, candidates.as<int32_t>() + r * K);
    }
  });
  // The walk, one task a block.
  pool.parallel_for(S, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> gate(static_cast<size_t>(rank));
    for (int64_t b = b0; b < b1; ++b) {
      int32_t prev = anchors.as<int32_t>()[b];
      for (int64_t r = b * J; r < (b + 1) * J; ++r) {
        const bf16* pred = predecessor.as<bf16>() + int64_t{prev} * rank;
        const bf16* hr = hp.as<bf16>() + r * rank;
        for (int64_t i = 0; i < rank; ++i)
          gate[i] = round_bf16(to_float(pred[i]) * to_float(hr[i]));
        const int32_t* cand = candidates.as<int32_t>() + r * K;
        float* score = scores.as<float>() + r * K;
        int64_t best = 0;
        for (int64_t i = 0; i < K; ++i) {
          const bf16* succ = successor.as<bf16>() + int64_t{cand[i]} * rank;
          float pair = 0.0f;
          for (int64_t j = 0; j < rank; ++j) pair = pair + gate[j] * to_float(succ[j]);
          score[i] = u.as<float>()[r * V + cand[i]] + pair;
          if (score[i] > score[best]) best = i;
        }
        prev = cand[best];
        drafts.as<int32_t>()[r] = prev;
      }
    }
  });
}

}  // namespace beam::cpu
