// The DFlash2 drafter's forward on the host: kernel-API ops for the GEMMs, norms, RoPE and SwiGLU;
// the two-tap convolution, the block attention and the selector walk written out here (their
// rounding points: docs/dflash2.md).
#include "model/dflash2/dflash2_drafter.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>

#include "core/check.h"
#include "kernels/api/activation.h"
#include "kernels/api/gemm.h"
#include "kernels/api/norm.h"
#include "kernels/api/rope.h"

namespace beam {

DFlash2Context::DFlash2Context(const DFlash2Config& c)
    : ring_(c.sliding_window > 0 ? c.sliding_window + c.block_size : 0),
      width_(c.num_kv_heads * c.head_dim),
      keys_(static_cast<size_t>(c.num_layers)),
      values_(static_cast<size_t>(c.num_layers)) {
  grow(ring_ > 0 ? std::min<int64_t>(ring_, 64) : 64);
}

void DFlash2Context::grow(int64_t capacity) {
  positions_.resize(static_cast<size_t>(capacity), -1);
  for (auto* t : {&keys_, &values_})
    for (auto& layer : *t) layer.resize(static_cast<size_t>(capacity * width_));
}

// Until the ring is full, position p lives in slot p (growing never moves an entry); after that,
// in slot p % ring.
int64_t DFlash2Context::slot(int64_t pos) {
  const int64_t full = ring_ > 0 ? ring_ : INT64_MAX;
  if (pos >= capacity()) grow(std::min(full, std::max(pos + 1, 2 * capacity())));
  return pos < full ? pos : pos % full;
}

int64_t DFlash2Context::find(int64_t pos) const {
  const int64_t s = ring_ > 0 && pos >= ring_ ? pos % ring_ : pos;
  return s < capacity() && position(s) == pos ? s : -1;
}

void DFlash2Context::truncate(int64_t pos) {
  for (int64_t& p : positions_)
    if (p >= pos) p = -1;
}

bool DFlash2Context::holds_before(int64_t pos) const {
  return std::any_of(positions_.begin(), positions_.end(),
                     [pos](int64_t p) { return p >= 0 && p < pos; });
}

DFlash2Drafter::DFlash2Drafter(std::shared_ptr<const DFlash2Weights> weights, TensorView embed,
                               TensorView lm_head, KernelContext ctx)
    : weights_(std::move(weights)), embed_(embed), lm_head_(lm_head), ctx_(ctx) {
  const DFlash2Config& c = config();
  BEAM_CHECK(ctx_.device == Device::kCpu && embed_.device == Device::kCpu &&
             lm_head_.device == Device::kCpu)
      << "DFlash2Drafter runs on the host";
  BEAM_CHECK(embed_.dim(0) == c.vocab_size && embed_.dim(1) == c.hidden_size &&
             lm_head_.shape == embed_.shape)
      << "target embed " << embed_.shape.str() << ", lm_head " << lm_head_.shape.str();
}

namespace {

// out = bf16(a + b) elementwise; [rows, n] bf16 each (out may alias a).
void add_rounded(const TensorView& a, const TensorView& b, const TensorView& out) {
  const bf16* x = a.as<bf16>();
  const bf16* y = b.as<bf16>();
  bf16* o = out.as<bf16>();
  for (int64_t i = 0; i < a.numel(); ++i) o[i] = to_bf16(to_float(x[i]) + to_float(y[i]));
}

}  // namespace

void DFlash2Drafter::add_context(const TensorView& features, std::span<const int64_t> positions,
                                 DFlash2Context& context) const {
  const DFlash2Config& c = config();
  const DFlash2Weights& w = *weights_;
  const int64_t T = features.dim(0), H = c.hidden_size, D = c.head_dim, Nkv = c.num_kv_heads;
  const int64_t q_width = c.num_heads * D, kv_width = Nkv * D;
  BEAM_CHECK(features.dtype == DType::kBF16 && features.rank() == 2 &&
             features.dim(1) == c.num_taps() * H && static_cast<int64_t>(positions.size()) == T)
      << "DFlash2 context: features " << features.shape.str() << ", " << positions.size()
      << " positions";
  if (T == 0) return;
  HostTensor hidden(DType::kBF16, {T, H});
  linear(ctx_, features, w.fc, hidden.view);
  rms_norm(ctx_, hidden.view, w.hidden_norm, c.rms_norm_eps, hidden.view);
  HostTensor pos(DType::kI64, {T});
  std::copy(positions.begin(), positions.end(), pos.as<int64_t>());
  HostTensor k(DType::kBF16, {T, kv_width}), v(DType::kBF16, {T, kv_width});
  std::vector<int64_t> slots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) slots[t] = context.slot(positions[t]);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const DFlash2LayerWeights& lw = w.layers[l];
    const TensorView outs[] = {k.view, v.view};
    linear_split(ctx_, hidden.view, lw.qkv.rows(q_width, 2 * kv_width), outs);
    rms_norm(ctx_, k.view.reshape({T * Nkv, D}), lw.k_norm, c.rms_norm_eps,
             k.view.reshape({T * Nkv, D}));
    // RoPE on the keys alone: a query tensor of no heads.
    const TensorView no_q{k.view.data, DType::kBF16, Shape{T, 0, D}, Device::kCpu};
    apply_rope(ctx_, no_q, k.view.reshape({T, Nkv, D}), pos.view, c.rope_theta);
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(k.as<bf16>() + t * kv_width, kv_width, context.key(l, slots[t]));
      std::copy_n(v.as<bf16>() + t * kv_width, kv_width, context.value(l, slots[t]));
    }
  }
  for (int64_t t = 0; t < T; ++t) context.set_position(slots[t], positions[t]);
}

void DFlash2Drafter::conv(const DFlash2ConvWeights& w, const TensorView& d, int64_t side,
                          const TensorView& x, const TensorView& out) const {
  const DFlash2Config& c = config();
  const int64_t rows = x.dim(0), H = c.hidden_size, G = c.conv_groups(), B = c.block_size;
  const bf16* base0 = w.base.as<bf16>() + (side * 2 + 0) * H;
  const bf16* base1 = w.base.as<bf16>() + (side * 2 + 1) * H;
  const bf16* xs = x.as<bf16>();
  bf16* ys = out.as<bf16>();
  std::vector<float> y(static_cast<size_t>(H));
  // Row r-1 is read before row r is written, so out may alias x: walk rows backwards.
  for (int64_t r = rows - 1; r >= 0; --r) {
    const bf16* dr = d.as<bf16>() + r * 4 * G + side * 2 * G;
    const bool first = r % B == 0;
    for (int64_t ch = 0; ch < H; ++ch) {
      const int64_t g = ch / c.conv_group_size;
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
}

void DFlash2Drafter::attention(int64_t layer, std::span<const DFlash2Block> blocks,
                               const TensorView& q, const TensorView& k, const TensorView& v,
                               const TensorView& out) const {
  const DFlash2Config& c = config();
  const int64_t B = c.block_size, D = c.head_dim, Nq = c.num_heads, Nkv = c.num_kv_heads;
  const int64_t group = Nq / Nkv, W = c.sliding_window;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<const bf16*> keys, values;
  std::vector<int64_t> kv_rows;  // >= 0: a context slot; < 0: block row -1 - i
  std::vector<float> scores, acc(static_cast<size_t>(D)), qf(static_cast<size_t>(D));
  for (size_t b = 0; b < blocks.size(); ++b) {
    const DFlash2Block& blk = blocks[b];
    const DFlash2Context& ctx = *blk.context;
    for (int64_t t = 0; t < B; ++t) {
      const int64_t row = static_cast<int64_t>(b) * B + t, q_pos = blk.position + t;
      // The keys this query sees, in position order: context, then the whole block.
      kv_rows.clear();
      const int64_t first = W > 0 ? std::max<int64_t>(0, q_pos - W + 1) : 0;
      for (int64_t p = first; p < blk.position; ++p)
        if (const int64_t slot = ctx.find(p); slot >= 0) kv_rows.push_back(slot);
      for (int64_t i = 0; i < B; ++i) kv_rows.push_back(-1 - (static_cast<int64_t>(b) * B + i));
      for (int64_t h = 0; h < Nq; ++h) {
        const int64_t kvh = h / group;
        const bf16* qh = q.as<bf16>() + (row * Nq + h) * D;
        for (int64_t d = 0; d < D; ++d) qf[d] = to_float(qh[d]);
        keys.clear();
        values.clear();
        for (int64_t r : kv_rows) {
          if (r >= 0) {
            keys.push_back(ctx.key(layer, r) + kvh * D);
            values.push_back(ctx.value(layer, r) + kvh * D);
          } else {
            keys.push_back(k.as<bf16>() + ((-1 - r) * Nkv + kvh) * D);
            values.push_back(v.as<bf16>() + ((-1 - r) * Nkv + kvh) * D);
          }
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
  }
}

void DFlash2Drafter::draft(std::span<const DFlash2Block> blocks, std::span<int32_t> drafts,
                           DFlash2Trace* trace) const {
  const DFlash2Config& c = config();
  const DFlash2Weights& w = *weights_;
  const int64_t S = static_cast<int64_t>(blocks.size()), B = c.block_size;
  const int64_t N = S * B, R = S * (B - 1), H = c.hidden_size, D = c.head_dim;
  const int64_t Nq = c.num_heads, Nkv = c.num_kv_heads, I = c.intermediate_size;
  const int64_t G = c.conv_groups(), V = c.vocab_size;
  BEAM_CHECK(static_cast<int64_t>(drafts.size()) == R)
      << "DFlash2 draft: " << drafts.size() << " outputs for " << S << " blocks of " << B;
  if (S == 0) return;
  HostTensor ids(DType::kI32, {N}), pos(DType::kI64, {N});
  for (int64_t b = 0; b < S; ++b)
    for (int64_t t = 0; t < B; ++t) {
      ids.as<int32_t>()[b * B + t] = t == 0 ? blocks[b].anchor : c.mask_token_id;
      pos.as<int64_t>()[b * B + t] = blocks[b].position + t;
    }
  HostTensor h(DType::kBF16, {N, H}), a(DType::kBF16, {N, H}), dyn(DType::kBF16, {N, 4 * G});
  HostTensor q(DType::kBF16, {N, Nq * D}), k(DType::kBF16, {N, Nkv * D}),
      v(DType::kBF16, {N, Nkv * D}), o(DType::kBF16, {N, Nq * D}), m(DType::kBF16, {N, H});
  HostTensor gate_up(DType::kBF16, {N, 2 * I}), act(DType::kBF16, {N, I});
  embedding(ctx_, embed_, ids.view, h.view);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const DFlash2LayerWeights& lw = w.layers[l];
    // Attention: norm, pre-conv, q/k/v, q/k norm and RoPE, block attention, o_proj, post-conv.
    rms_norm(ctx_, h.view, lw.input_norm, c.rms_norm_eps, a.view);
    linear(ctx_, a.view, lw.attention_conv.projection, dyn.view);
    conv(lw.attention_conv, dyn.view, 0, a.view, a.view);
    const TensorView qkv[] = {q.view, k.view, v.view};
    linear_split(ctx_, a.view, lw.qkv, qkv);
    const QkTensors qk{q.view.reshape({N, Nq, D}), k.view.reshape({N, Nkv, D}), lw.q_norm,
                       lw.k_norm, pos.view};
    qk_norm_rope(ctx_, qk, c.rms_norm_eps, c.rope_theta);
    attention(l, blocks, q.view, k.view, v.view, o.view);
    linear(ctx_, o.view, lw.o_proj, m.view);
    conv(lw.attention_conv, dyn.view, 1, m.view, m.view);
    add_rounded(h.view, m.view, h.view);
    // MLP: norm, pre-conv, SwiGLU, post-conv.
    rms_norm(ctx_, h.view, lw.post_attn_norm, c.rms_norm_eps, a.view);
    linear(ctx_, a.view, lw.mlp_conv.projection, dyn.view);
    conv(lw.mlp_conv, dyn.view, 0, a.view, a.view);
    linear(ctx_, a.view, lw.gate_up, gate_up.view);
    swiglu(ctx_, gate_up.view, act.view);
    linear(ctx_, act.view, lw.down, m.view);
    conv(lw.mlp_conv, dyn.view, 1, m.view, m.view);
    add_rounded(h.view, m.view, h.view);
  }
  // Read-out of the draft rows (block positions 1 .. B - 1).
  HostTensor g(DType::kBF16, {R, H});
  for (int64_t b = 0; b < S; ++b)
    std::copy_n(h.as<bf16>() + (b * B + 1) * H, (B - 1) * H, g.as<bf16>() + b * (B - 1) * H);
  rms_norm(ctx_, g.view, w.final_norm, c.rms_norm_eps, g.view);
  HostTensor z(DType::kBF16, {R, V}), u(DType::kF32, {R, V});
  linear(ctx_, g.view, lm_head_, z.view);
  for (int64_t i = 0; i < R * V; ++i) {
    float x = to_float(z.as<bf16>()[i]) * c.output_multiplier;
    if (c.final_logit_softcapping) {
      const float cap = *c.final_logit_softcapping;
      x = cap * std::tanh(x / cap);
    }
    u.as<float>()[i] = x;
  }
  if (trace) {
    trace->hidden.resize(static_cast<size_t>(R * H));
    for (int64_t i = 0; i < R * H; ++i) trace->hidden[i] = to_float(g.as<bf16>()[i]);
    trace->logits.assign(u.as<float>(), u.as<float>() + R * V);
  }
  walk(blocks, g.view, u.view, drafts, trace);
}

void DFlash2Drafter::walk(std::span<const DFlash2Block> blocks, const TensorView& hidden,
                          const TensorView& logits, std::span<int32_t> drafts,
                          DFlash2Trace* trace) const {
  const DFlash2Config& c = config();
  const DFlash2Weights& w = *weights_;
  const int64_t B = c.block_size, R = hidden.dim(0), V = c.vocab_size;
  const int64_t K = c.selector_top_k, rank = c.selector_rank;
  HostTensor hp(DType::kBF16, {R, rank});
  linear(ctx_, hidden, w.hidden_projection, hp.view);
  if (trace) {
    trace->candidates.resize(static_cast<size_t>(R * K));
    trace->scores.resize(static_cast<size_t>(R * K));
  }
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::vector<float> gate(static_cast<size_t>(rank)), score(static_cast<size_t>(K));
  for (size_t b = 0; b < blocks.size(); ++b) {
    int32_t prev = blocks[b].anchor;
    for (int64_t j = 1; j < B; ++j) {
      const int64_t row = static_cast<int64_t>(b) * (B - 1) + j - 1;
      const float* u = logits.as<float>() + row * V;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + K, order.end(), [u](int32_t x, int32_t y) {
        return u[x] > u[y] || (u[x] == u[y] && x < y);
      });
      const bf16* pred = w.predecessor_codebook.as<bf16>() + int64_t{prev} * rank;
      const bf16* hr = hp.as<bf16>() + row * rank;
      for (int64_t r = 0; r < rank; ++r) gate[r] = round_bf16(to_float(pred[r]) * to_float(hr[r]));
      int64_t best = 0;
      for (int64_t i = 0; i < K; ++i) {
        const bf16* succ = w.successor_codebook.as<bf16>() + int64_t{order[i]} * rank;
        float pair = 0.0f;
        for (int64_t r = 0; r < rank; ++r) pair = pair + gate[r] * to_float(succ[r]);
        score[i] = u[order[i]] + pair;
        if (score[i] > score[best]) best = i;
      }
      prev = order[best];
      drafts[row] = prev;
      if (trace) {
        std::copy_n(order.begin(), K, trace->candidates.begin() + row * K);
        std::copy_n(score.begin(), K, trace->scores.begin() + row * K);
      }
    }
  }
}

}  // namespace beam
