// CUDA paged attention: plans the batch on the host (tiles of query rows per sequence, split-KV
// where the batch would not fill the GPU), stages the plan and block tables to the device and
// launches attention_kernels.cuh. Also the KV-cache write (store_kv).
//
// Work decomposition. A work item is a tile of query rows of one sequence; its CTA (one per KV
// head) loads each 32-key tile of K/V once into shared memory and serves all G = Nq / Nkv query
// heads of that KV head for every row of the tile (GQA: K/V are read once per tile, not per q
// head). Prefill chunks get tiles of up to 64 / G rows (10 at Beam's G = 6), so an 8K prefill is
// thousands of CTAs. Decode rows (tiles of 1 row) see up to the whole context; when the batch's
// CTAs would carry more keys each than a balanced share of 4 CTAs per SM, long items are split
// along their rows' split grid (64-key splits up to 4096 visible keys, so a batch-1 decode over
// 512 keys runs 8 splits x 8 KV heads = 64 CTAs) into one CTA per split (split-KV), and a reduce
// kernel folds the partial softmax states. Splitting never changes a result bit, and a row's bits
// never depend on the other rows of the batch (see attention_kernels.cuh).
//
// Long query chunks (at least kPrefillMinRows rows, head_dim 128) of eager calls go instead to the
// tensor-core flash-attention kernel of attention_prefill.cuh: one CTA per 64 rows and q head.
//
// Fixed plans (CUDA graphs, kernels/api/fixed_attention.h): the same host plan is written into a
// per-pool PinnedRegion at fixed addresses (grown, never inside a capture) and uploaded before the
// graph launch; the launch's grid depends only on the region's capacities, and the kernels read
// the real item and group counts from device memory. Results equal the eager path's bit for bit.
#include "kernels/cuda/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/check.h"

namespace beam {

namespace ad = cuda::attention_detail;

// Geometry of one attention call (everything but the batch).
struct AttentionGeometry {
  int64_t num_heads, num_kv_heads, head_dim, group, block_size, num_blocks, window;
  bool operator==(const AttentionGeometry&) const = default;
};

// A fixed-address plan: meta holds counts [2] | seqs | items | groups | tables at the offsets
// below (capacities in elements); partials holds [records_cap, head_dim] accumulators then
// [records_cap, 2] (max, sum).
struct FixedAttentionPlan {
  PinnedRegion meta;
  float* partials = nullptr;
  int64_t seqs_cap = 0, items_cap = 0, groups_cap = 0, tables_cap = 0, records_cap = 0;
  int64_t partials_head_dim = 0;
  size_t seqs_off = 0, items_off = 0, groups_off = 0, tables_off = 0;
  AttentionGeometry geometry{};  // of the last plan
  int64_t num_rows = 0;          // query rows the last plan addresses
  bool planned = false;

  ~FixedAttentionPlan() {
    if (partials) cudaFree(partials);
  }
};

AttentionScratch::AttentionScratch() = default;

AttentionScratch::~AttentionScratch() {
  if (partials) cudaFree(partials);
}

namespace cuda {
namespace {

using Geometry = AttentionGeometry;

// A tile of rows before the split decision: the visible logical slots [lo, hi] of its rows, and
// the split size of its first and last row (split_keys is monotonic in the row).
struct Tile {
  int32_t seq, row0, rows;
  int64_t lo, hi, first_split_keys, last_split_keys;
  int64_t keys() const { return hi - lo + 1; }
  // Splits of the tile when every row has the same split grid, else 0 (never split).
  int64_t splits() const {
    if (first_split_keys != last_split_keys) return 0;
    return hi / last_split_keys - lo / last_split_keys + 1;
  }
};

struct Plan {
  std::vector<ad::SeqDesc> seqs;
  std::vector<int32_t> tables;
  std::vector<ad::WorkItem> items;
  std::vector<ad::ReduceGroup> groups;
  std::vector<ad::PrefillItem> prefill;  // tensor-core items, heaviest first
  int64_t records = 0;  // partial records of the split items
  std::vector<int32_t> counts() const {
    return {static_cast<int32_t>(items.size()), static_cast<int32_t>(groups.size())};
  }
};

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Query rows (row, q head) one CTA holds for this head_dim.
int64_t max_rows(const Geometry& g) {
  return g.head_dim <= 128 ? ad::max_query_rows(128) : ad::max_query_rows(256);
}

// Every query sees its own slot, and the block table maps every block its queries may read.
void check_seq(const AttentionSeq& s, const Geometry& g, size_t index) {
  const int64_t first_hi = s.q_pos0 - s.kv_pos0, last_hi = first_hi + s.q_count - 1;
  BEAM_CHECK(first_hi >= 0 && last_hi < s.kv_len)
      << "paged_attention: sequence " << index << " has queries at positions " << s.q_pos0 << ".."
      << s.q_pos0 + s.q_count - 1 << " but keys only at " << s.kv_pos0 << ".."
      << s.kv_pos0 + s.kv_len - 1;
  BEAM_CHECK(static_cast<int64_t>(s.block_table.size()) > last_hi / g.block_size)
      << "paged_attention: sequence " << index << " block table has " << s.block_table.size()
      << " entries, slot " << last_hi << " needs " << last_hi / g.block_size + 1;
  const int64_t lo = g.window > 0 ? std::max<int64_t>(0, first_hi - g.window + 1) : 0;
  for (int64_t b = lo / g.block_size; b <= last_hi / g.block_size; ++b) {
    const int32_t block = s.block_table[static_cast<size_t>(b)];
    BEAM_CHECK(block >= 0 && block < g.num_blocks)
        << "paged_attention: sequence " << index << " logical block " << b << " maps to " << block
        << " but holds keys visible to queries at positions " << s.q_pos0 << ".."
        << s.q_pos0 + s.q_count - 1 << " (pool of " << g.num_blocks << " blocks)";
  }
}

// Sequence descriptors, concatenated tables and the tiles of query rows.
// Sequences of at least kPrefillMinRows rows go to plan.prefill when `tensor_cores` allows it.
std::vector<Tile> plan_tiles(std::span<const AttentionSeq> seqs, const Geometry& g,
                             int64_t tile_rows, bool tensor_cores, Plan& plan) {
  std::vector<Tile> tiles;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const AttentionSeq& s = seqs[i];
    if (s.q_count == 0) continue;
    check_seq(s, g, i);
    const auto seq = static_cast<int32_t>(plan.seqs.size());
    plan.seqs.push_back({s.q_begin, s.q_pos0, s.kv_pos0, static_cast<int64_t>(plan.tables.size())});
    plan.tables.insert(plan.tables.end(), s.block_table.begin(), s.block_table.end());
    if (tensor_cores && g.head_dim == ad::kPrefillDim && s.q_count >= ad::kPrefillMinRows) {
      BEAM_CHECK(s.q_count < (int64_t{1} << 31)) << "paged_attention: " << s.q_count << " rows";
      const int64_t last = (s.q_count - 1) / ad::kPrefillRows * ad::kPrefillRows;
      for (int64_t r = last; r >= 0; r -= ad::kPrefillRows) {  // causal: later rows see more
        const int64_t rows = std::min<int64_t>(ad::kPrefillRows, s.q_count - r);
        plan.prefill.push_back({seq, static_cast<int32_t>(r), static_cast<int32_t>(rows), 0});
      }
      continue;
    }
    for (int64_t r = 0; r < s.q_count; r += tile_rows) {
      const int64_t rows = std::min(tile_rows, s.q_count - r);
      const int64_t hi_first = s.q_pos0 + r - s.kv_pos0, hi_last = hi_first + rows - 1;
      const int64_t lo = g.window > 0 ? std::max<int64_t>(0, hi_first - g.window + 1) : 0;
      const int64_t lo_last = g.window > 0 ? std::max<int64_t>(0, hi_last - g.window + 1) : 0;
      tiles.push_back({seq, static_cast<int32_t>(r), static_cast<int32_t>(rows), lo, hi_last,
                       ad::split_keys(hi_first - lo + 1), ad::split_keys(hi_last - lo_last + 1)});
    }
  }
  return tiles;
}

// Splits the tiles whose keys exceed twice a balanced share of 4 CTAs per SM (never below one
// minimal split) into one item per split of their rows' grid, then orders items longest first so
// the tail of the grid is short.
void plan_items(const std::vector<Tile>& tiles, const Geometry& g, int num_sms, Plan& plan) {
  int64_t total_keys = 0;
  for (const Tile& t : tiles) total_keys += t.keys();
  const int64_t share = std::max<int64_t>(ad::kMinSplitKeys, total_keys * g.num_kv_heads /
                                                                 (4 * int64_t{num_sms}));
  std::vector<std::pair<int64_t, ad::WorkItem>> items;  // (keys, item)
  for (const Tile& t : tiles) {
    const int64_t splits = t.splits();
    if (splits < 2 || t.keys() <= 2 * share) {
      items.push_back({t.keys(), {t.seq, t.row0, t.rows, 0, 0, -1}});
      continue;
    }
    const int64_t size = t.last_split_keys, first = t.lo / size;
    BEAM_CHECK(first + splits < (int64_t{1} << 31) && size < (int64_t{1} << 31))
        << "paged_attention: split grid beyond 2^31 slots";
    const auto base = static_cast<int32_t>(plan.records);
    plan.groups.push_back({t.seq, t.row0, t.rows, static_cast<int32_t>(splits), base});
    const int64_t per_split = int64_t{t.rows} * g.num_heads;
    for (int64_t s = 0; s < splits; ++s) {
      const auto partial = static_cast<int32_t>(base + s * per_split);
      items.push_back({size, {t.seq, t.row0, t.rows, static_cast<int32_t>(first + s),
                              static_cast<int32_t>(size), partial}});
    }
    plan.records += splits * per_split;
    BEAM_CHECK(plan.records < (int64_t{1} << 31)) << "paged_attention: too many split records";
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  plan.items.reserve(items.size());
  for (const auto& [keys, item] : items) plan.items.push_back(item);
}

// The partial-state scratch, grown stream-ordered (no synchronization).
float* reserve_partials(CudaContext& ctx, size_t floats) {
  AttentionScratch& sc = ctx.attention;
  if (sc.floats < floats) {
    if (sc.partials) CUDA_OK(cudaFreeAsync(sc.partials, ctx.stream));
    sc.partials = nullptr;
    CUDA_OK(cudaMallocAsync(reinterpret_cast<void**>(&sc.partials), floats * sizeof(float),
                            ctx.stream));
    sc.floats = floats;
  }
  return sc.partials;
}

template <typename T>
const T* stage(CudaContext& ctx, const std::vector<T>& v) {
  return static_cast<const T*>(ctx.staging.stage(v.data(), v.size() * sizeof(T), ctx.stream));
}

size_t attend_smem(int64_t head_dim) {
  return sizeof(float) * ad::max_query_rows(static_cast<int>(head_dim)) * head_dim +
         sizeof(__nv_bfloat16) * ad::kTile * (2 * head_dim + 2);
}

// Launches the attend kernel over grid (items_grid, Nkv) and, when groups_grid > 0, the reduce
// kernel over (groups_grid, Nq); the kernels loop over the real counts in p.counts.
template <int D>
void launch(CudaContext& ctx, const ad::Params& p, int64_t items_grid, int64_t groups_grid) {
  const size_t smem = attend_smem(D);
  CUDA_OK(cudaFuncSetAttribute(ad::attend_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(items_grid), static_cast<unsigned>(p.num_kv_heads));
  ad::attend_kernel<D><<<grid, ad::kWarps * 32, smem, ctx.stream>>>(p);
  CUDA_LAUNCH_OK();
  if (groups_grid == 0) return;
  const dim3 rgrid(static_cast<unsigned>(groups_grid), static_cast<unsigned>(p.num_heads));
  ad::reduce_kernel<<<rgrid, ad::kReduceThreads, 0, ctx.stream>>>(p, D);
  CUDA_LAUNCH_OK();
}

void launch_for_head_dim(CudaContext& ctx, const ad::Params& p, int64_t head_dim,
                         int64_t items_grid, int64_t groups_grid) {
  switch (head_dim) {
    case 64:
      launch<64>(ctx, p, items_grid, groups_grid);
      return;
    case 128:
      launch<128>(ctx, p, items_grid, groups_grid);
      return;
    default:
      launch<256>(ctx, p, items_grid, groups_grid);
      return;
  }
}

// The tensor-core prefill kernel over `count` items (grid (count, Nq)).
void launch_prefill(CudaContext& ctx, const ad::Params& p, const ad::PrefillItem* items,
                    size_t count) {
  CUDA_OK(cudaFuncSetAttribute(ad::prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(ad::kPrefillSmemBytes)));
  const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(p.num_heads));
  ad::prefill_kernel<<<grid, ad::kPrefillWarps * 32, ad::kPrefillSmemBytes, ctx.stream>>>(p,
                                                                                        items);
  CUDA_LAUNCH_OK();
}

// Checks what the kernels support and returns the call's geometry.
Geometry make_geometry(int64_t num_heads, int64_t head_dim, const PagedKv& kv, int64_t window) {
  const Geometry g{num_heads,     kv.k.dim(2), head_dim, num_heads / kv.k.dim(2),
                   kv.block_size, kv.k.dim(0), window};
  BEAM_CHECK(g.head_dim == 64 || g.head_dim == 128 || g.head_dim == 256)
      << "paged_attention: CUDA supports head_dim 64, 128 or 256, got " << g.head_dim;
  BEAM_CHECK(g.group <= max_rows(g))
      << "paged_attention: CUDA supports at most " << max_rows(g)
      << " query heads per KV head, got " << g.group;
  BEAM_CHECK(aligned16(kv.k.data) && aligned16(kv.v.data))
      << "paged_attention: the KV cache must be 16-byte aligned";
  BEAM_CHECK(g.num_kv_heads <= 65535 && g.num_heads <= 65535)
      << "paged_attention: " << g.num_heads << " heads over " << g.num_kv_heads << " KV heads";
  return g;
}

// The host plan of a batch (eager and fixed plans use the same split policy, so the same rows;
// fixed plans never use the tensor-core prefill kernel).
Plan make_plan(CudaContext& ctx, std::span<const AttentionSeq> seqs, const Geometry& g,
               bool tensor_cores) {
  Plan plan;
  const std::vector<Tile> tiles = plan_tiles(seqs, g, max_rows(g) / g.group, tensor_cores, plan);
  if (!tiles.empty()) plan_items(tiles, g, ctx.props.multiProcessorCount, plan);
  return plan;
}

// Params of everything but the plan's arrays.
ad::Params base_params(const TensorView& q, const PagedKv& kv, const Geometry& g,
                       const TensorView& out) {
  ad::Params p{};
  p.q = static_cast<const __nv_bfloat16*>(q.data);
  p.out = static_cast<__nv_bfloat16*>(out.data);
  p.k_cache = static_cast<const __nv_bfloat16*>(kv.k.data);
  p.v_cache = static_cast<const __nv_bfloat16*>(kv.v.data);
  p.block_size = g.block_size;
  p.num_blocks = g.num_blocks;
  p.window = g.window;
  p.num_heads = static_cast<int>(g.num_heads);
  p.num_kv_heads = static_cast<int>(g.num_kv_heads);
  p.group = static_cast<int>(g.group);
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(g.head_dim)));
  return p;
}

// store_kv: one CTA per row; 16-byte vectors when every row and pointer allows them.
template <typename V>
__global__ void store_kv_kernel(const V* __restrict__ k, const V* __restrict__ v,
                                const int64_t* __restrict__ slots, V* __restrict__ k_cache,
                                V* __restrict__ v_cache, int64_t row_vecs, int64_t num_slots) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0 || slot >= num_slots) return;
  for (int64_t i = threadIdx.x; i < row_vecs; i += blockDim.x) {
    k_cache[slot * row_vecs + i] = k[t * row_vecs + i];
    v_cache[slot * row_vecs + i] = v[t * row_vecs + i];
  }
}

constexpr size_t kMetaAlign = 256;
size_t align_meta(size_t n) { return (n + kMetaAlign - 1) / kMetaAlign * kMetaAlign; }

// Makes `f` hold `plan` (head_dim-wide partials), reallocating with 2x headroom when it does not
// fit; reallocation waits for queued work and bumps ctx.attention.fixed_generation.
void reserve_fixed(CudaContext& ctx, FixedAttentionPlan& f, const Plan& plan, int64_t head_dim) {
  const auto n_seqs = static_cast<int64_t>(plan.seqs.size());
  const auto n_items = static_cast<int64_t>(plan.items.size());
  const auto n_groups = static_cast<int64_t>(plan.groups.size());
  const auto n_tables = static_cast<int64_t>(plan.tables.size());
  const bool fits = f.meta.capacity() > 0 && f.partials != nullptr && n_seqs <= f.seqs_cap &&
                    n_items <= f.items_cap && n_groups <= f.groups_cap &&
                    n_tables <= f.tables_cap && plan.records <= f.records_cap &&
                    head_dim == f.partials_head_dim;
  if (fits) return;
  // A plan without splits needs no records: the first sizes still apply (a zero capacity would
  // leave `partials` unallocated and the plan "not fitting" on every step, recapturing graphs).
  auto grow = [](int64_t need, int64_t cap, int64_t min_cap) {
    return need <= cap && cap > 0 ? cap : std::max(2 * need, min_cap);
  };
  // First sizes cover decode of the largest graph bucket (256 rows) at a few thousand keys, so
  // contexts growing by a token per step rarely move the plan (each move recaptures the graphs).
  f.seqs_cap = grow(n_seqs, f.seqs_cap, 256);
  f.items_cap = grow(n_items, f.items_cap, 16384);
  f.groups_cap = grow(n_groups, f.groups_cap, 4096);
  f.tables_cap = grow(n_tables, f.tables_cap, 32768);
  f.records_cap = grow(plan.records, f.records_cap, 65536);
  f.partials_head_dim = head_dim;
  f.seqs_off = kMetaAlign;  // after the counts
  f.items_off = align_meta(f.seqs_off + sizeof(ad::SeqDesc) * f.seqs_cap);
  f.groups_off = align_meta(f.items_off + sizeof(ad::WorkItem) * f.items_cap);
  f.tables_off = align_meta(f.groups_off + sizeof(ad::ReduceGroup) * f.groups_cap);
  const size_t meta_bytes = align_meta(f.tables_off + sizeof(int32_t) * f.tables_cap);

  CUDA_OK(cudaStreamSynchronize(ctx.stream));  // queued work may still read the old memory
  f.meta = PinnedRegion(meta_bytes);
  if (f.partials) CUDA_OK(cudaFree(f.partials));
  f.partials = nullptr;
  const size_t floats = static_cast<size_t>(f.records_cap * (head_dim + 2));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&f.partials), floats * sizeof(float)));
  ++ctx.attention.fixed_generation;
}

// Copies v into f.meta's host bytes at offset and queues their upload.
template <typename T>
void write_section(CudaContext& ctx, const FixedAttentionPlan& f, size_t offset,
                   const std::vector<T>& v) {
  if (v.empty()) return;
  std::memcpy(f.meta.host() + offset, v.data(), v.size() * sizeof(T));
  f.meta.upload(offset, v.size() * sizeof(T), ctx.stream);
}

void check_not_capturing(CudaContext& ctx, const char* what) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_OK(cudaStreamIsCapturing(ctx.stream, &capture));
  BEAM_CHECK(capture == cudaStreamCaptureStatusNone)
      << what << " must run before a graph capture, not inside it";
}

}  // namespace

void paged_attention(CudaContext& ctx, const TensorView& q, const PagedKv& kv,
                     std::span<const AttentionSeq> seqs, int64_t window, const TensorView& out) {
  const Geometry g = make_geometry(q.dim(1), q.dim(2), kv, window);
  // cp.async reads q in 16-byte vectors; out is written in bf16 pairs.
  const bool tensor_cores = aligned16(q.data) && reinterpret_cast<uintptr_t>(out.data) % 4 == 0;
  const Plan plan = make_plan(ctx, seqs, g, tensor_cores);
  if (plan.items.empty() && plan.prefill.empty()) return;
  ad::Params p = base_params(q, kv, g, out);
  p.seqs = stage(ctx, plan.seqs);
  p.tables = stage(ctx, plan.tables);
  if (!plan.prefill.empty()) launch_prefill(ctx, p, stage(ctx, plan.prefill), plan.prefill.size());
  if (plan.items.empty()) return;
  p.counts = stage(ctx, plan.counts());
  p.items = stage(ctx, plan.items);
  p.groups = plan.groups.empty() ? nullptr : stage(ctx, plan.groups);
  if (plan.records > 0) {
    const auto records = static_cast<size_t>(plan.records);
    p.part_acc = reserve_partials(ctx, records * static_cast<size_t>(g.head_dim + 2));
    p.part_ml = p.part_acc + records * static_cast<size_t>(g.head_dim);
  }
  launch_for_head_dim(ctx, p, g.head_dim, static_cast<int64_t>(plan.items.size()),
                      static_cast<int64_t>(plan.groups.size()));
}

void plan_fixed_attention(CudaContext& ctx, int slot, const PagedKv& kv, int64_t num_rows,
                          int64_t num_heads, int64_t head_dim, std::span<const AttentionSeq> seqs,
                          int64_t window) {
  BEAM_CHECK(slot >= 0 && slot < kNumFixedAttentionSlots) << "plan_fixed_attention: slot " << slot;
  check_not_capturing(ctx, "plan_fixed_attention");
  const Geometry g = make_geometry(num_heads, head_dim, kv, window);
  const Plan plan = make_plan(ctx, seqs, g, /*tensor_cores=*/false);
  std::unique_ptr<FixedAttentionPlan>& owned = ctx.attention.fixed[slot];
  if (!owned) owned = std::make_unique<FixedAttentionPlan>();
  FixedAttentionPlan& f = *owned;
  reserve_fixed(ctx, f, plan, g.head_dim);
  const std::vector<int32_t> counts = plan.counts();
  std::memcpy(f.meta.host(), counts.data(), counts.size() * sizeof(int32_t));
  f.meta.upload(0, counts.size() * sizeof(int32_t), ctx.stream);
  write_section(ctx, f, f.seqs_off, plan.seqs);
  write_section(ctx, f, f.items_off, plan.items);
  write_section(ctx, f, f.groups_off, plan.groups);
  write_section(ctx, f, f.tables_off, plan.tables);
  f.geometry = g;
  f.num_rows = num_rows;
  f.planned = true;
}

void fixed_paged_attention(CudaContext& ctx, int slot, const TensorView& q, const PagedKv& kv,
                           int64_t window, const TensorView& out) {
  BEAM_CHECK(slot >= 0 && slot < kNumFixedAttentionSlots) << "fixed_paged_attention: slot " << slot;
  const FixedAttentionPlan* f = ctx.attention.fixed[slot].get();
  BEAM_CHECK(f != nullptr && f->planned)
      << "fixed_paged_attention: slot " << slot << " has no plan (plan_fixed_attention first)";
  const Geometry g = make_geometry(q.dim(1), q.dim(2), kv, window);
  BEAM_CHECK(g == f->geometry)
      << "fixed_paged_attention: slot " << slot << " was planned for another geometry";
  BEAM_CHECK(q.dim(0) >= f->num_rows)
      << "fixed_paged_attention: q has " << q.dim(0) << " rows, the plan " << f->num_rows;
  ad::Params p = base_params(q, kv, g, out);
  const char* dev = f->meta.device();
  p.counts = reinterpret_cast<const int32_t*>(dev);
  p.seqs = reinterpret_cast<const ad::SeqDesc*>(dev + f->seqs_off);
  p.items = reinterpret_cast<const ad::WorkItem*>(dev + f->items_off);
  p.groups = reinterpret_cast<const ad::ReduceGroup*>(dev + f->groups_off);
  p.tables = reinterpret_cast<const int32_t*>(dev + f->tables_off);
  p.part_acc = f->partials;
  p.part_ml = f->partials + f->records_cap * g.head_dim;
  // The grid depends on capacities only: about 4 CTAs per SM over all KV heads, and one reduce
  // CTA column per SM; the kernels stride over the real counts.
  const int64_t sms = ctx.props.multiProcessorCount;
  const int64_t items_grid = std::min(f->items_cap, (4 * sms + g.num_kv_heads - 1) / g.num_kv_heads);
  const int64_t groups_grid = std::min(f->groups_cap, sms);
  launch_for_head_dim(ctx, p, g.head_dim, items_grid, groups_grid);
}

void store_kv(CudaContext& ctx, const TensorView& k, const TensorView& v, const TensorView& slots,
              const PagedKv& kv) {
  const int64_t T = k.dim(0), row = k.dim(1) * k.dim(2);
  if (T == 0 || row == 0) return;
  const int64_t num_slots = kv.k.dim(0) * kv.k.dim(1);
  const auto* slot_ptr = slots.as<const int64_t>();
  constexpr int kThreads = 128;
  if (row % 8 == 0 && aligned16(k.data) && aligned16(v.data) && aligned16(kv.k.data) &&
      aligned16(kv.v.data)) {
    store_kv_kernel<uint4><<<static_cast<unsigned>(T), kThreads, 0, ctx.stream>>>(
        k.as<const uint4>(), v.as<const uint4>(), slot_ptr, kv.k.as<uint4>(), kv.v.as<uint4>(),
        row / 8, num_slots);
  } else {
    store_kv_kernel<uint16_t><<<static_cast<unsigned>(T), kThreads, 0, ctx.stream>>>(
        k.as<const uint16_t>(), v.as<const uint16_t>(), slot_ptr, kv.k.as<uint16_t>(),
        kv.v.as<uint16_t>(), row, num_slots);
  }
  CUDA_LAUNCH_OK();
}

}  // namespace cuda
}  // namespace beam
