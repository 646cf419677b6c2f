// The DFlash2 drafter's forward: kernel-API ops only (GEMMs, norms, RoPE, SwiGLU, and the
// drafter's own in kernels/api/dflash2.h), so it runs on the CPU and on a GPU alike; the host
// builds the batch metadata (block ids and positions, context slots and page tables).
#include "model/dflash2/dflash2_drafter.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/bf16.h"
#include "core/check.h"
#include "kernels/api/activation.h"
#include "kernels/api/device_out_of_memory.h"
#include "kernels/api/dflash2.h"
#include "kernels/api/gemm.h"
#include "kernels/api/norm.h"
#include "kernels/api/rope.h"

namespace beam {

namespace {

// Draft rows read out at once: bounds the [rows, V] logits' scratch (Beam's vocabulary: ~51 MB
// of fp32 logits).
constexpr int64_t kReadOutRows = 64;

// Bump offsets into a metadata buffer: sections 256-byte aligned.
struct MetaLayout {
  size_t used = 0;
  size_t take(size_t nbytes) {
    const size_t at = used;
    used += (nbytes + 255) / 256 * 256;
    return at;
  }
};

// The rows reserve(tokens, ...) makes room for: add_context runs calls of up to 256 rows padded
// to a context graph's bucket.
int64_t context_rows(int64_t tokens) {
  const int64_t bucket = DFlash2DraftGraphs::bucket_of(tokens);
  return tokens > 0 && bucket > 0 ? bucket : tokens;
}

template <typename T>
T* host_at(const MetadataBuffer& m, size_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(m.host()) + offset);
}

}  // namespace

// add_context's metadata for T (padded) rows: each row's position and slot (i64).
struct DFlash2Drafter::ContextMeta {
  int64_t T;
  size_t positions, slots, bytes;
  explicit ContextMeta(int64_t T_) : T(T_) {
    MetaLayout layout;
    positions = layout.take(T * 8);
    slots = layout.take(T * 8);
    bytes = layout.used;
  }
};

// draft()'s metadata for S (padded) blocks of B rows (J draft rows each) whose page tables hold
// `table` entries in all: the rows' positions (i64) and ids (i32), each block's position (i64),
// anchor, table offset and length (i32), the draft rows' block rows (i32), the tables (i32).
struct DFlash2Drafter::DraftLayout {
  int64_t S, table;
  size_t positions, block_positions, ids, anchors, offsets, lengths, rows, pages, bytes;
  DraftLayout(int64_t S_, int64_t B, int64_t J, int64_t table_) : S(S_), table(table_) {
    MetaLayout layout;
    positions = layout.take(S * B * 8);
    block_positions = layout.take(S * 8);
    ids = layout.take(S * B * 4);
    anchors = layout.take(S * 4);
    offsets = layout.take(S * 4);
    lengths = layout.take(S * 4);
    rows = layout.take(S * J * 4);
    pages = layout.take(std::max<int64_t>(table, 1) * 4);
    bytes = layout.used;
  }
};

DFlash2Drafter::DFlash2Drafter(std::shared_ptr<const DFlash2Weights> weights, TensorView embed,
                               TensorView lm_head, KernelContext ctx,
                               std::shared_ptr<DFlash2ContextPool> pool)
    : weights_(std::move(weights)),
      embed_(embed),
      lm_head_(lm_head),
      ctx_(ctx),
      pool_(std::move(pool)) {
  const DFlash2Config& c = config();
  BEAM_CHECK(embed_.device == ctx_.device && lm_head_.device == ctx_.device &&
             weights_->fc.device == ctx_.device && pool_->context().device == ctx_.device)
      << "DFlash2Drafter: weights, target tensors and pool on the drafter's device";
  BEAM_CHECK(embed_.dim(0) == c.vocab_size && embed_.dim(1) == c.hidden_size &&
             lm_head_.shape == embed_.shape)
      << "target embed " << embed_.shape.str() << ", lm_head " << lm_head_.shape.str();
  trash_page_ = pool_->take_page();
  BEAM_CHECK(trash_page_ >= 0) << "DFlash2Drafter: a pool of no free page";
}

void DFlash2Drafter::retarget(const TensorView& embed, const TensorView& lm_head) {
  BEAM_CHECK(embed.shape == embed_.shape && lm_head.shape == lm_head_.shape &&
             embed.device == ctx_.device && lm_head.device == ctx_.device)
      << "DFlash2Drafter::retarget: embed " << embed.shape.str() << ", lm_head "
      << lm_head.shape.str() << " for " << embed_.shape.str();
  embed_ = embed;
  lm_head_ = lm_head;
}

std::shared_ptr<DFlash2Context> DFlash2Drafter::new_context() const {
  return std::make_shared<DFlash2Context>(pool_);
}

Status DFlash2Drafter::reserve_meta(MetadataBuffer& meta, size_t nbytes) {
  if (meta.nbytes() >= nbytes) return ok_status();
  synchronize(ctx_);  // the old buffer's uploads may be in flight
  meta = MetadataBuffer();
  BEAM_ASSIGN_OR_RETURN(meta, allocate_metadata(ctx_, nbytes + nbytes / 2));
  return ok_status();
}

std::array<size_t, DFlash2Drafter::kScratchBuffers> DFlash2Drafter::scratch_sizes(
    const DFlash2Config& c, int64_t tokens, int64_t blocks) {
  // Calls run padded to a draft or context graph's bucket (draft(), add_context()); graphed
  // context calls (256 rows at most) read their features from scratch.
  if (const int64_t bucket = DFlash2DraftGraphs::bucket_of(blocks); bucket > 0) blocks = bucket;
  tokens = context_rows(tokens);
  const int64_t features = std::min(tokens, DFlash2DraftGraphs::kBuckets.back());
  const int64_t H = c.hidden_size, kv = c.num_kv_heads * c.head_dim, q = c.num_heads * c.head_dim;
  const int64_t N = blocks * c.block_size, J = c.max_drafts();
  const int64_t rows = std::min(blocks * J, std::max(kReadOutRows, J));
  auto bf16s = [](int64_t n) { return static_cast<size_t>(std::max<int64_t>(n, 1)) * 2; };
  auto words = [](int64_t n) { return static_cast<size_t>(std::max<int64_t>(n, 1)) * 4; };
  // The order of scratch_buffers().
  return {bf16s(features * c.num_taps() * H),
          bf16s(tokens * H),
          bf16s(tokens * kv),
          bf16s(tokens * kv),
          bf16s(N * H),
          bf16s(N * H),
          bf16s(N * 4 * c.conv_groups()),
          bf16s(N * q),
          bf16s(N * kv),
          bf16s(N * kv),
          bf16s(N * q),
          bf16s(N * H),
          bf16s(N * 2 * c.intermediate_size),
          bf16s(N * c.intermediate_size),
          bf16s(rows * H),
          bf16s(rows * c.vocab_size),
          words(rows * c.vocab_size),
          bf16s(rows * c.selector_rank),
          words(rows * c.selector_top_k),
          words(rows * c.selector_top_k),
          words(blocks * J)};
}

int64_t DFlash2Drafter::scratch_bytes(const DFlash2Config& c, int64_t tokens, int64_t blocks) {
  int64_t total = 0;
  for (size_t n : scratch_sizes(c, tokens, blocks)) total += static_cast<int64_t>(n + n / 2);
  return total;
}

std::array<ScratchBuffer*, DFlash2Drafter::kScratchBuffers> DFlash2Drafter::scratch_buffers() {
  return {&ctx_features_, &ctx_hidden_, &ctx_k_, &ctx_v_, &h_, &a_,
          &dyn_,          &q_,          &k_,     &v_,     &o_, &m_,
          &gate_up_,      &act_,        &g_,     &z_,     &u_, &hp_,
          &candidates_,   &scores_,     &drafts_};
}

Status DFlash2Drafter::reserve(int64_t tokens, int64_t blocks) {
  const DFlash2Config& c = config();
  const auto sizes = scratch_sizes(c, tokens, blocks);
  const auto buffers = scratch_buffers();
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] > buffers[i]->capacity()) {
      synchronize(ctx_);  // work queued on the old buffer
      BEAM_RETURN_IF_ERROR(buffers[i]->reserve(ctx_, sizes[i]));
    }
  BEAM_RETURN_IF_ERROR(reserve_meta(ctx_meta_, ContextMeta(context_rows(tokens)).bytes));
  const int64_t table = blocks * std::max<int64_t>(DFlash2ContextPool::ring_pages(c), 1);
  return reserve_meta(draft_meta_, DraftLayout(blocks, c.block_size, c.max_drafts(), table).bytes);
}

int64_t DFlash2Drafter::release_memory() {
  graphs_.drop();  // they point into what is freed here
  context_graphs_.drop();
  int64_t bytes = pool_->release(trash_page_);
  for (ScratchBuffer* b : scratch_buffers()) {
    bytes += static_cast<int64_t>(b->capacity());
    *b = ScratchBuffer();
  }
  bytes += static_cast<int64_t>(ctx_meta_.nbytes() + draft_meta_.nbytes());
  ctx_meta_ = draft_meta_ = MetadataBuffer();
  return bytes;
}

Status DFlash2Drafter::restore_memory(int64_t tokens, int64_t blocks) {
  BEAM_RETURN_IF_ERROR(pool_->restore());
  return reserve(tokens, blocks);
}

Status DFlash2Drafter::add_context(const TensorView& features,
                                   std::span<const DFlash2ContextRows> items) {
  try {
    return enqueue_context(features, items);
  } catch (const DeviceOutOfMemory& e) {  // an op's own scratch; it stays consistent
    return make_error(e.what());
  }
}

Status DFlash2Drafter::draft(std::span<const DFlash2Block> blocks, std::span<int32_t> drafts,
                             DFlash2Trace* trace) {
  try {
    return run_draft(blocks, drafts, trace);
  } catch (const DeviceOutOfMemory& e) {
    return make_error(e.what());
  }
}

Status DFlash2Drafter::enqueue_context(const TensorView& features,
                                       std::span<const DFlash2ContextRows> items) {
  const DFlash2Config& c = config();
  const int64_t T = features.dim(0), width = c.num_taps() * c.hidden_size;
  if (items.empty()) return ok_status();
  BEAM_CHECK(features.dtype == DType::kBF16 && features.rank() == 2 && features.dim(1) == width &&
             features.device == ctx_.device)
      << "DFlash2 context: features " << features.shape.str();
  if (T == 0) return ok_status();
  // Graphed calls of T <= 256 rows run padded to a context graph's bucket; padding rows are rows
  // no item names.
  const int64_t bucket = graphed() ? DFlash2DraftGraphs::bucket_of(T) : -1;
  const int64_t P = bucket > 0 ? bucket : T;  // the rows run, padding included
  BEAM_RETURN_IF_ERROR(reserve(T, 0));        // room for P rows
  // Host metadata: each row's position and slot (the trash page's when it has none, or when a
  // later row of the same call takes its slot: a ring shorter than the call).
  const ContextMeta at(P);
  int64_t* pos = host_at<int64_t>(ctx_meta_, at.positions);
  int64_t* slots = host_at<int64_t>(ctx_meta_, at.slots);
  const int64_t trash = int64_t{trash_page_} * DFlash2ContextPool::kPageSize;
  const int64_t ring = DFlash2ContextPool::ring_pages(c) * DFlash2ContextPool::kPageSize;
  std::vector<bool> covered(static_cast<size_t>(P), false);
  for (const DFlash2ContextRows& item : items) {
    const int64_t n = static_cast<int64_t>(item.positions.size());
    BEAM_CHECK(item.first_row >= 0 && item.first_row + n <= T)
        << "DFlash2 context: rows " << item.first_row << " + " << n << " of " << T;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = item.first_row + i, p = item.positions[i];
      covered[row] = true;
      pos[row] = p;
      const bool overwritten = ring > 0 && item.positions.back() - p >= ring;
      const int64_t s = overwritten ? -1 : item.context->slot(p);
      slots[row] = s >= 0 ? s : trash + row % DFlash2ContextPool::kPageSize;
      if (s >= 0) pool_->set_position(s, p);
    }
  }
  for (int64_t row = 0; row < P; ++row)
    if (!covered[row]) {  // rows no item names: computed, stored nowhere that is read
      pos[row] = 0;
      slots[row] = trash;
    }
  upload_metadata(ctx_, ctx_meta_, 0, at.bytes);
  if (bucket < 0) {
    enqueue_context_rows(at, features);
    return ok_status();
  }
  // The features lie in the target's workspace (at another address for a graphed step than for
  // an eager one) and end at row T: the graph reads the drafter's copy, whose padding rows hold
  // stale bytes that only the trash page takes.
  copy_tensor(ctx_, ctx_features_.view(DType::kBF16, {T, width}), features);
  const TensorView padded = ctx_features_.view(DType::kBF16, {P, width});
  const uint64_t fingerprint =
      graph_fingerprint_of({&ctx_features_, &ctx_hidden_, &ctx_k_, &ctx_v_}, ctx_meta_);
  context_graphs_.run(ctx_, bucket, fingerprint, [&] { enqueue_context_rows(at, padded); });
  return ok_status();
}

void DFlash2Drafter::enqueue_context_rows(const ContextMeta& at, const TensorView& features) {
  const DFlash2Config& c = config();
  const DFlash2Weights& w = *weights_;
  const int64_t T = at.T, H = c.hidden_size, D = c.head_dim, Nkv = c.num_kv_heads;
  const int64_t q_width = c.num_heads * D, kv_width = Nkv * D;
  const TensorView positions = ctx_meta_.device_view(at.positions, DType::kI64, {T});
  const TensorView slot_view = ctx_meta_.device_view(at.slots, DType::kI64, {T});
  const TensorView no_positions = ctx_meta_.device_view(at.positions, DType::kI64, {0});
  const TensorView hidden = ctx_hidden_.view(DType::kBF16, {T, H});
  const TensorView k = ctx_k_.view(DType::kBF16, {T, kv_width});
  const TensorView v = ctx_v_.view(DType::kBF16, {T, kv_width});
  const int64_t slots_total = pool_->slot_positions().dim(0);
  linear(ctx_, features, w.fc, hidden);
  rms_norm(ctx_, hidden, w.hidden_norm, c.rms_norm_eps, hidden);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const DFlash2LayerWeights& lw = w.layers[l];
    const TensorView outs[] = {k, v};
    linear_split(ctx_, hidden, lw.qkv.rows(q_width, 2 * kv_width), outs);
    rms_norm(ctx_, k.reshape({T * Nkv, D}), lw.k_norm, c.rms_norm_eps, k.reshape({T * Nkv, D}));
    // RoPE on the keys alone: a query tensor of no heads.
    const TensorView no_q{k.data, DType::kBF16, Shape{T, 0, D}, ctx_.device};
    apply_rope(ctx_, no_q, k.reshape({T, Nkv, D}), positions, c.rope_theta);
    dflash2_store_context(ctx_, k, v, slot_view, l == 0 ? positions : no_positions,
                          pool_->keys(l).reshape({slots_total, kv_width}),
                          pool_->values(l).reshape({slots_total, kv_width}),
                          pool_->slot_positions());
  }
}

bool DFlash2Drafter::graphed() const {
  return ctx_.device == Device::kCuda && ctx_.cuda_graphs &&
         DFlash2ContextPool::ring_pages(config()) > 0;
}

uint64_t DFlash2Drafter::graph_fingerprint_of(std::initializer_list<const ScratchBuffer*> buffers,
                                              const MetadataBuffer& meta) const {
  uint64_t h = graph_fingerprint(ctx_);
  auto mix = [&h](const void* p) { h = (h ^ reinterpret_cast<uintptr_t>(p)) * 1099511628211ull; };
  for (const ScratchBuffer* b : buffers) mix(b->view(DType::kU8, {1}).data);
  mix(meta.device());
  mix(embed_.data);
  mix(lm_head_.data);
  mix(pool_->slot_positions().data);
  for (int64_t l = 0; l < config().num_layers; ++l) {
    mix(pool_->keys(l).data);
    mix(pool_->values(l).data);
  }
  return h;
}

Status DFlash2Drafter::run_draft(std::span<const DFlash2Block> blocks, std::span<int32_t> drafts,
                                 DFlash2Trace* trace) {
  const DFlash2Config& c = config();
  const int64_t S = static_cast<int64_t>(blocks.size()), B = c.block_size, J = c.max_drafts();
  BEAM_CHECK(static_cast<int64_t>(drafts.size()) == S * J)
      << "DFlash2 draft: " << drafts.size() << " outputs for " << S << " blocks of " << B;
  if (S == 0) return ok_status();
  // A windowed drafter's tables hold at most `ring` pages, so a bucket's metadata has one fixed
  // layout (each block's table at b * ring) and its graph serves every call of the bucket.
  const int64_t ring = DFlash2ContextPool::ring_pages(c);
  const int64_t bucket = graphed() && trace == nullptr ? DFlash2DraftGraphs::bucket_of(S) : -1;
  const int64_t P = bucket > 0 ? bucket : S;  // the blocks run, padding included
  BEAM_RETURN_IF_ERROR(reserve(0, P));
  int64_t table_size = 0;
  for (const DFlash2Block& b : blocks)
    table_size += static_cast<int64_t>(b.context->table().size());
  if (bucket > 0) table_size = P * ring;
  const DraftLayout at(P, B, J, table_size);
  BEAM_RETURN_IF_ERROR(reserve_meta(draft_meta_, at.bytes));
  // Host metadata: the block rows' ids and positions, each block's anchor, position and page
  // table, the draft rows' indices into the block rows. Padding blocks: mask tokens at positions
  // 0 .. B - 1 with no context (their drafts are dropped).
  int32_t* pages = host_at<int32_t>(draft_meta_, at.pages);
  std::fill(pages, pages + std::max<int64_t>(table_size, 1), -1);
  int64_t table_at = 0;
  for (int64_t b = 0; b < P; ++b) {
    const bool real = b < S;
    const int32_t anchor = real ? blocks[b].anchor : c.mask_token_id;
    const int64_t position = real ? blocks[b].position : 0;
    for (int64_t t = 0; t < B; ++t) {
      host_at<int32_t>(draft_meta_, at.ids)[b * B + t] = t == 0 ? anchor : c.mask_token_id;
      host_at<int64_t>(draft_meta_, at.positions)[b * B + t] = position + t;
    }
    for (int64_t j = 0; j < J; ++j)
      host_at<int32_t>(draft_meta_, at.rows)[b * J + j] = static_cast<int32_t>(b * B + 1 + j);
    host_at<int64_t>(draft_meta_, at.block_positions)[b] = position;
    host_at<int32_t>(draft_meta_, at.anchors)[b] = anchor;
    const std::span<const int32_t> table =
        real ? blocks[b].context->table() : std::span<const int32_t>();
    BEAM_CHECK(bucket < 0 || static_cast<int64_t>(table.size()) <= ring)
        << "DFlash2 draft: a table of " << table.size() << " pages, the ring holds " << ring;
    if (bucket > 0) table_at = b * ring;
    host_at<int32_t>(draft_meta_, at.offsets)[b] = static_cast<int32_t>(table_at);
    host_at<int32_t>(draft_meta_, at.lengths)[b] = static_cast<int32_t>(table.size());
    std::copy(table.begin(), table.end(), pages + table_at);
    table_at += static_cast<int64_t>(table.size());
  }
  upload_metadata(ctx_, draft_meta_, 0, at.bytes);
  if (trace) *trace = DFlash2Trace{};
  if (bucket > 0) {
    const uint64_t fingerprint =
        graph_fingerprint_of({&h_, &a_, &dyn_, &q_, &k_, &v_, &o_, &m_, &gate_up_, &act_, &g_, &z_,
                              &u_, &hp_, &candidates_, &scores_, &drafts_},
                             draft_meta_);
    graphs_.run(ctx_, bucket, fingerprint, [&] { enqueue_blocks(at, nullptr); });
  } else {
    enqueue_blocks(at, trace);
  }
  copy_tensor(ctx_, TensorView{drafts.data(), DType::kI32, Shape{S * J}, Device::kCpu},
              drafts_.view(DType::kI32, {S * J}));  // synchronizes
  return ok_status();
}

void DFlash2Drafter::enqueue_blocks(const DraftLayout& at, DFlash2Trace* trace) {
  const DFlash2Config& c = config();
  const DFlash2Weights& w = *weights_;
  const int64_t S = at.S, B = c.block_size, J = c.max_drafts();
  const int64_t N = S * B, H = c.hidden_size, D = c.head_dim;
  const int64_t Nq = c.num_heads, Nkv = c.num_kv_heads, I = c.intermediate_size;
  const TensorView ids = draft_meta_.device_view(at.ids, DType::kI32, {N});
  const TensorView pos = draft_meta_.device_view(at.positions, DType::kI64, {N});
  DFlash2ContextView context;
  context.slot_positions = pool_->slot_positions();
  context.pages = draft_meta_.device_view(at.pages, DType::kI32, {std::max<int64_t>(at.table, 1)});
  context.table_offsets = draft_meta_.device_view(at.offsets, DType::kI32, {S});
  context.table_lengths = draft_meta_.device_view(at.lengths, DType::kI32, {S});
  context.block_positions = draft_meta_.device_view(at.block_positions, DType::kI64, {S});
  context.page_size = DFlash2ContextPool::kPageSize;
  context.ring_pages = DFlash2ContextPool::ring_pages(c);
  context.window = c.sliding_window;

  const TensorView h = h_.view(DType::kBF16, {N, H}), a = a_.view(DType::kBF16, {N, H});
  const TensorView dyn = dyn_.view(DType::kBF16, {N, 4 * c.conv_groups()});
  const TensorView q = q_.view(DType::kBF16, {N, Nq * D}), k = k_.view(DType::kBF16, {N, Nkv * D});
  const TensorView v = v_.view(DType::kBF16, {N, Nkv * D}), o = o_.view(DType::kBF16, {N, Nq * D});
  const TensorView m = m_.view(DType::kBF16, {N, H});
  const TensorView gate_up = gate_up_.view(DType::kBF16, {N, 2 * I});
  const TensorView act = act_.view(DType::kBF16, {N, I});
  auto conv = [&](const DFlash2ConvWeights& cw, int64_t side, const TensorView& x) {
    dflash2_conv(ctx_, cw.base, dyn, side, c.conv_group_size, B, x, x);
  };
  embedding(ctx_, embed_, ids, h);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const DFlash2LayerWeights& lw = w.layers[l];
    // Attention: norm, pre-conv, q/k/v, q/k norm and RoPE, block attention, o_proj, post-conv.
    rms_norm(ctx_, h, lw.input_norm, c.rms_norm_eps, a);
    linear(ctx_, a, lw.attention_conv.projection, dyn);
    conv(lw.attention_conv, 0, a);
    const TensorView qkv[] = {q, k, v};
    linear_split(ctx_, a, lw.qkv, qkv);
    const QkTensors qk{q.reshape({N, Nq, D}), k.reshape({N, Nkv, D}), lw.q_norm, lw.k_norm, pos};
    qk_norm_rope(ctx_, qk, c.rms_norm_eps, c.rope_theta);
    context.keys = pool_->keys(l);
    context.values = pool_->values(l);
    dflash2_block_attention(ctx_, q.reshape({N, Nq, D}), k.reshape({N, Nkv, D}),
                            v.reshape({N, Nkv, D}), context, o.reshape({N, Nq, D}));
    linear(ctx_, o, lw.o_proj, m);
    conv(lw.attention_conv, 1, m);
    add_rounded(ctx_, h, m, h);
    // MLP: norm, pre-conv, SwiGLU, post-conv.
    rms_norm(ctx_, h, lw.post_attn_norm, c.rms_norm_eps, a);
    linear(ctx_, a, lw.mlp_conv.projection, dyn);
    conv(lw.mlp_conv, 0, a);
    linear(ctx_, a, lw.gate_up, gate_up);
    swiglu(ctx_, gate_up, act);
    linear(ctx_, act, lw.down, m);
    conv(lw.mlp_conv, 1, m);
    add_rounded(ctx_, h, m, h);
  }
  const int64_t per_chunk = std::max<int64_t>(1, kReadOutRows / J);
  for (int64_t b0 = 0; b0 < S; b0 += per_chunk)
    read_out(draft_meta_.device_view(at.rows, DType::kI32, {S * J}),
             draft_meta_.device_view(at.anchors, DType::kI32, {S}), b0, std::min(S, b0 + per_chunk),
             trace);
}

void DFlash2Drafter::read_out(const TensorView& draft_rows, const TensorView& all_anchors,
                              int64_t b0, int64_t b1, DFlash2Trace* trace) {
  const DFlash2Config& c = config();
  const DFlash2Weights& w = *weights_;
  const int64_t S = all_anchors.dim(0), B = c.block_size, J = c.max_drafts();
  const int64_t R = (b1 - b0) * J, H = c.hidden_size, V = c.vocab_size, K = c.selector_top_k;
  // The draft rows (block positions 1 .. B - 1) of blocks [b0, b1): their final norm, logits,
  // top-k and walk.
  const TensorView rows{static_cast<int32_t*>(draft_rows.data) + b0 * J, DType::kI32, Shape{R},
                        ctx_.device};
  const TensorView anchors{static_cast<int32_t*>(all_anchors.data) + b0, DType::kI32,
                           Shape{b1 - b0}, ctx_.device};
  const TensorView g = g_.view(DType::kBF16, {R, H}), z = z_.view(DType::kBF16, {R, V});
  const TensorView u = u_.view(DType::kF32, {R, V});
  const TensorView hp = hp_.view(DType::kBF16, {R, c.selector_rank});
  const TensorView candidates = candidates_.view(DType::kI32, {R, K});
  const TensorView scores = scores_.view(DType::kF32, {R, K});
  const TensorView out{static_cast<int32_t*>(drafts_.view(DType::kI32, {S * J}).data) + b0 * J,
                       DType::kI32, Shape{R}, ctx_.device};
  embedding(ctx_, h_.view(DType::kBF16, {S * B, H}), rows, g);
  rms_norm(ctx_, g, w.final_norm, c.rms_norm_eps, g);
  linear(ctx_, g, lm_head_, z);
  softcap(ctx_, z, c.final_logit_softcapping.value_or(0.0f), c.output_multiplier, u);
  linear(ctx_, g, w.hidden_projection, hp);
  dflash2_select(ctx_, u, hp, w.predecessor_codebook, w.successor_codebook, anchors, candidates,
                 scores, out);
  if (!trace) return;
  auto append = [&](auto& dst, const TensorView& src, DType dtype) {
    const size_t at = dst.size();
    dst.resize(at + static_cast<size_t>(src.numel()));
    copy_tensor(ctx_, TensorView{dst.data() + at, dtype, src.shape, Device::kCpu}, src);
  };
  std::vector<uint16_t> g_bits;
  append(g_bits, g, DType::kBF16);
  for (uint16_t bits : g_bits) trace->hidden.push_back(to_float(bf16{bits}));
  append(trace->logits, u, DType::kF32);
  append(trace->candidates, candidates, DType::kI32);
  append(trace->scores, scores, DType::kF32);
}

}  // namespace beam
