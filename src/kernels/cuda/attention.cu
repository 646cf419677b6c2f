// CUDA paged attention: plans the batch on the host, uploads the plan and the block tables in one
// copy and launches the kernels. Also the KV-cache write (store_kv).
//
// Decode rows (sequences with one query row) go to the decode kernel (attention_decode.cuh): a
// CTA per KV head serves the G = Nq / Nkv q heads of one row over a run of the row's splits
// (whole 32-key tiles, at most 64 splits a row: split_grid.h). At head_dim 128 and G <= 8 (Beam's
// 6) it runs on tensor cores (attention_decode_mma.cuh): each warp computes
// whole splits with the G heads as the mma's columns, its tiles through its own ring; four warps a
// CTA and one CTA an SM below kMmaTwoWarpRows rows, else two and two (same bits). Other
// geometries run on CUDA cores (K/V read once per tile; a warp per head below kWideDecodeRows
// rows, else a warp per two heads). The planner gives each warp about an equal share of the
// batch's key tiles, aiming at a layout's CTAs per SM: a batch-1 decode over 512 keys runs 16
// splits x 8 KV heads as 4 CTAs of four one-tile warps per KV head, and the last CTA of a split
// row folds the partial states (no second launch). The split grid itself (split_grid.h) is a
// numerics contract shared with the chunk kernel (see attention_kernels.cuh): the planner only
// chooses which CTA computes which splits, so the items follow each step's real lengths while the
// grid of a fixed plan stays (geometry, SM count, graph batch). Where decode rows use tensor
// cores, the rows of short prefill chunks go to the decode kernel as well (a row's bits then do
// not depend on how it was batched).
//
// Prefill chunks go to the attend kernel of attention_kernels.cuh: a work item is a tile of up to
// 64 / G query rows (10 at Beam's G = 6) whose CTA (one per KV head) loads each K/V tile once for
// every row and q head of the tile; when the chunks' CTAs would carry more keys each than a
// balanced share of 4 CTAs per SM, long tiles are split along their rows' split grid and a reduce
// kernel folds the partial states. Long query chunks (at least kPrefillMinRows rows, head_dim 128)
// of eager calls go instead to the tensor-core flash-attention kernel of attention_prefill.cuh
// (batch-invariant calls: each sequence's prompt rows whatever their count, the others to the
// decode kernel, so a row's kernel depends on its token, not on its chunk).
// Outside that kernel, a row's bits depend neither on its kernel, nor on splitting, nor on the
// other rows of the batch (see attention_kernels.cuh and attention_decode_mma.cuh).
//
// Fixed plans (CUDA graphs, kernels/api/fixed_attention.h) plan every query row as a decode row
// into a per-pool PinnedRegion at fixed addresses (grown, never inside a capture) that is uploaded
// before the graph launch; the decode grid and warp layout depend only on the geometry, the SM
// count and the graph batch, the kernel reads the real counts from device memory and zeroes the
// rows no sequence covers. Results equal the eager path's bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/logging.h"
#include "kernels/api/device_out_of_memory.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/decode_clusters.h"
#include "kernels/cuda/decode_item_sizes.h"
#include "kernels/cuda/device_alloc.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/tensor_map.h"

namespace beam {

namespace ad = cuda::attention_detail;

// Geometry of one attention call (everything but the batch).
struct AttentionGeometry {
  int64_t num_heads, num_kv_heads, head_dim, group, block_size, num_blocks, window;
  bool operator==(const AttentionGeometry&) const = default;
};

// A fixed-address plan of the decode kernel: meta holds its header (DecodePlanHeader), items,
// tables and uncovered rows, packed; partials holds [records_cap, head_dim] accumulators then
// [records_cap, 2] (max, sum); counters [groups_cap, counters_kv_heads], zero between launches.
struct FixedAttentionPlan {
  PinnedRegion meta;
  float* partials = nullptr;
  uint32_t* counters = nullptr;
  int64_t records_cap = 0, groups_cap = 0;
  int64_t partials_head_dim = 0, counters_kv_heads = 0;
  AttentionGeometry geometry{};  // of the last plan
  int64_t num_rows = 0;          // query rows the last plan addresses
  bool planned = false;

  ~FixedAttentionPlan() {
    if (partials) cudaFree(partials);
    if (counters) cudaFree(counters);
  }
};

// The tensor-core decode kernel's TMA maps by the KV cache they describe (a map depends on
// nothing else): a layer's maps are encoded once, not on every eager call (~0.5 µs each).
struct DecodeMapCache {
  struct Entry {
    const void* k_cache;
    const void* v_cache;
    int64_t num_blocks, block_size, num_kv_heads;
    ad::decode_mma::DecodeMaps maps;
  };
  static constexpr size_t kMaxEntries = 256;  // layers x caches in use; cleared when full
  std::vector<Entry> entries;
};

AttentionScratch::AttentionScratch() = default;

AttentionScratch::~AttentionScratch() {
  if (partials) cudaFree(partials);
  if (counters) cudaFree(counters);
}

namespace cuda {
namespace {

using Geometry = AttentionGeometry;

// A tile of rows before the split decision: the visible logical slots [lo, hi] of its rows, and
// the split grids of its first and last row (each row's grid lies between theirs).
struct Tile {
  int32_t seq, row0, rows;
  int64_t lo, hi;
  ad::SplitGrid first_grid, last_grid;
  int64_t keys() const { return hi - lo + 1; }
  // The grid over the tile's slots whose split boundaries every row's grid follows (aligned grids
  // of one size, or one balanced grid); splits = 0 when the rows' boundaries differ (never split).
  ad::SplitGrid shared_grid() const {
    const int32_t size = last_grid.size;
    if (first_grid.size != size || (size == 0 && first_grid != last_grid)) return {};
    if (size == 0) return last_grid;
    // Slots below 2^31 (check_seq).
    return ad::aligned_grid(static_cast<int32_t>(lo / ad::kTile),
                            static_cast<int32_t>(hi / ad::kTile), last_grid.shift);
  }
};

// A decode row before the split decision: its visible logical slots [lo, hi], the first slot this
// step writes (its sequence's first query position) and its split grid.
struct DecodeRow {
  int64_t row, table, lo, hi, fresh;
  ad::SplitGrid grid;
};

struct Plan {
  std::vector<ad::SeqDesc> seqs;
  std::vector<int32_t> tables;
  std::vector<ad::WorkItem> items;  // attend kernel
  std::vector<ad::ReduceGroup> groups;
  std::vector<ad::PrefillItem> prefill;  // tensor-core items, heaviest first
  std::vector<ad::DecodeItem> decode;    // decode kernel, longest first
  ad::DecodeLayout decode_layout = ad::DecodeLayout::kHeadPerWarp;
  bool decode_clustered = false;  // decode items placed for clusters (decode_clusters.h)
  int64_t decode_groups = 0;  // decode rows split over several items
  int64_t records = 0;  // partial records of the split items, then of the decode groups
};

// CTAs per SM the decode planner aims at for the CUDA-core decode kernel (its occupancy at Beam's
// heads; the tensor-core layouts' is decode_mma::Cta::kCtasPerSm).
constexpr int64_t kDecodeCtasPerSm = 4;
constexpr int64_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y (the decode kernel's CTA slots)

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

// Row r of s as a decode row (its block table at `table` in the plan's tables).
DecodeRow decode_row(const AttentionSeq& s, int64_t r, const Geometry& g, int64_t table) {
  const int64_t hi = s.q_pos0 + r - s.kv_pos0;
  const int64_t lo = g.window > 0 ? std::max<int64_t>(0, hi - g.window + 1) : 0;
  return {s.q_begin + r, table, lo, hi, s.q_pos0 - s.kv_pos0, ad::split_grid(lo, hi)};
}

// Rows of s that go to the prefill kernel (its first ones): with `invariant` its prompt rows, else
// all of a sequence of at least kPrefillMinRows rows; none when `tensor_cores` or the head width
// rule the kernel out.
int64_t prefill_rows(const AttentionSeq& s, const Geometry& g, bool tensor_cores, bool invariant) {
  if (!tensor_cores || g.head_dim != ad::kPrefillDim) return 0;
  if (invariant) return std::clamp<int64_t>(s.prompt_rows, 0, s.q_count);
  return s.q_count >= ad::kPrefillMinRows ? s.q_count : 0;
}

// Sequence descriptors, concatenated tables and the tiles of query rows. A sequence's first
// prefill_rows() rows go to plan.prefill; its other rows are decode rows (every row when
// `all_decode`, all of them when `chunks_as_decode`, else those of one-row remainders) for
// `decode` when the decode kernel serves the geometry, else tiles.
std::vector<Tile> plan_tiles(std::span<const AttentionSeq> seqs, const Geometry& g,
                             int64_t tile_rows, bool tensor_cores, bool all_decode,
                             bool chunks_as_decode, bool invariant, Plan& plan,
                             std::vector<DecodeRow>& decode) {
  std::vector<Tile> tiles;
  const bool decode_kernel = g.group <= ad::kMaxDecodeGroup;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const AttentionSeq& s = seqs[i];
    if (s.q_count == 0) continue;
    check_seq(s, g, i);
    const auto seq = static_cast<int32_t>(plan.seqs.size());
    const auto table = static_cast<int64_t>(plan.tables.size());
    plan.seqs.push_back({s.q_begin, s.q_pos0, s.kv_pos0, table});
    plan.tables.insert(plan.tables.end(), s.block_table.begin(), s.block_table.end());
    BEAM_CHECK(s.kv_len < (int64_t{1} << 31) && s.q_begin + s.q_count < (int64_t{1} << 31) &&
               plan.tables.size() < (size_t{1} << 31))
        << "paged_attention: sequence " << i << " beyond 2^31 rows, keys or table entries";
    const int64_t first = all_decode ? 0 : prefill_rows(s, g, tensor_cores, invariant);
    if (first > 0) {
      BEAM_CHECK(first < (int64_t{1} << 31)) << "paged_attention: " << first << " rows";
      const int64_t last = (first - 1) / ad::kPrefillRows * ad::kPrefillRows;
      for (int64_t r = last; r >= 0; r -= ad::kPrefillRows) {  // causal: later rows see more
        const int64_t rows = std::min<int64_t>(ad::kPrefillRows, first - r);
        plan.prefill.push_back({seq, static_cast<int32_t>(r), static_cast<int32_t>(rows), 0});
      }
    }
    if (first == s.q_count) continue;
    if (decode_kernel && (all_decode || s.q_count - first == 1 || chunks_as_decode)) {
      for (int64_t r = first; r < s.q_count; ++r) decode.push_back(decode_row(s, r, g, table));
      continue;
    }
    for (int64_t r = first; r < s.q_count; r += tile_rows) {
      const int64_t rows = std::min(tile_rows, s.q_count - r);
      const int64_t hi_first = s.q_pos0 + r - s.kv_pos0, hi_last = hi_first + rows - 1;
      const int64_t lo = g.window > 0 ? std::max<int64_t>(0, hi_first - g.window + 1) : 0;
      const int64_t lo_last = g.window > 0 ? std::max<int64_t>(0, hi_last - g.window + 1) : 0;
      tiles.push_back({seq, static_cast<int32_t>(r), static_cast<int32_t>(rows), lo, hi_last,
                       ad::split_grid(lo, hi_first), ad::split_grid(lo_last, hi_last)});
    }
  }
  return tiles;
}

// Splits the tiles whose keys exceed twice a balanced share of 4 CTAs per SM (never below a tile)
// into one item per split of their rows' grid, then orders items longest first so the tail of the
// grid is short.
void plan_items(const std::vector<Tile>& tiles, const Geometry& g, int num_sms, Plan& plan) {
  int64_t total_keys = 0;
  for (const Tile& t : tiles) total_keys += t.keys();
  const int64_t share =
      std::max<int64_t>(ad::kTile, total_keys * g.num_kv_heads / (4 * int64_t{num_sms}));
  std::vector<std::pair<int64_t, ad::WorkItem>> items;  // (keys, item)
  for (const Tile& t : tiles) {
    const ad::SplitGrid grid = t.shared_grid();
    const int64_t splits = grid.splits;
    if (splits < 2 || t.keys() <= 2 * share) {
      items.push_back({t.keys(), {t.seq, t.row0, t.rows, 0, 0, -1}});
      continue;
    }
    const auto base = static_cast<int32_t>(plan.records);
    plan.groups.push_back({t.seq, t.row0, t.rows, static_cast<int32_t>(splits), base});
    const int64_t per_split = int64_t{t.rows} * g.num_heads;
    for (int64_t s = 0; s < splits; ++s) {
      const auto partial = static_cast<int32_t>(base + s * per_split);
      const int64_t key0 = grid.begin(s) * ad::kTile;  // slots below 2^31 (check_seq)
      const int64_t key1 = std::min(grid.begin(s + 1) * ad::kTile - 1, t.hi);
      items.push_back({key1 - key0 + 1,
                       {t.seq, t.row0, t.rows, static_cast<int32_t>(key0),
                        static_cast<int32_t>(key1), partial}});
    }
    plan.records += splits * per_split;
    BEAM_CHECK(plan.records < (int64_t{1} << 31)) << "paged_attention: too many split records";
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  plan.items.reserve(items.size());
  for (const auto& [keys, item] : items) plan.items.push_back(item);
}

using decode_items::ceil_div;

// True when the geometry's decode rows use the tensor-core split step (head_dim 128, G <= 8): then
// every row that is not in a tensor-core prefill chunk goes to the decode kernel, so a row's bits
// stay independent of its batch.
bool tensor_core_decode(const Geometry& g) {
  return g.head_dim == ad::decode_mma::kDim && g.group <= ad::decode_mma::kMaxGroup;
}

// Decode rows from which a CUDA-core decode warp serves two q heads: batches this large are bound
// by the kernel's shared-memory reads and issue (a warp per head re-reads and widens each K/V
// value G times), smaller ones by latency, which a warp per head keeps shortest (H200 run 57).
// Both give the same bits.
constexpr int64_t kWideDecodeRows = 32;

// Decode CTA slots per KV head: the layout's CTAs per SM over all KV heads.
int64_t decode_slots(const CudaContext& ctx, const Geometry& g, ad::DecodeLayout layout) {
  const int64_t per_sm = ad::is_mma(layout) ? ad::mma_ctas_per_sm(layout) : kDecodeCtasPerSm;
  return std::max<int64_t>(1, per_sm * ctx.props.multiProcessorCount / g.num_kv_heads);
}

// Decode rows from which the tensor-core kernel runs CTAs of two warps (three an SM, 2-stage rings;
// two an SM on 3-stage rings before run 190) instead of one of four: one CTA's item start and fold
// then overlap the others' streaming (H200 run 65: batch 128 at 512 keys 1.79 -> 1.58x its floor;
// run 190: 1.44x), while few rows keep four warps' shorter latency and fewer records to combine
// (batch 1: 25 vs 31x; batch 32 at 8K keys 1.33-1.41 vs 1.47-1.49x, run 191). Same bits.
constexpr int64_t kMmaTwoWarpRows = 64;
// Sliding windows up to this many keys (17 32-key tiles at most a row: one item of two warps)
// take the two-warp layout from more rows than two waves of four-warp CTAs hold: three times the
// slots then run every row in one wave (run 191, 512 keys, batch 48: 2.1-2.2 -> 1.5-1.6x).
constexpr int64_t kMmaShortWindow = 512;

// The decode kernel's warp layout for `rows` decode rows.
ad::DecodeLayout decode_layout(const CudaContext& ctx, const Geometry& g, int64_t rows) {
  if (tensor_core_decode(g)) {
    const bool short_rows = g.window > 0 && g.window <= kMmaShortWindow;
    const bool two_warps =
        rows >= kMmaTwoWarpRows ||
        (short_rows && rows > 2 * decode_slots(ctx, g, ad::DecodeLayout::kMmaFourWarps));
    return two_warps ? ad::DecodeLayout::kMmaTwoWarps : ad::DecodeLayout::kMmaFourWarps;
  }
  return rows >= kWideDecodeRows && g.group % 2 == 0 ? ad::DecodeLayout::kTwoHeadsPerWarp
                                                     : ad::DecodeLayout::kHeadPerWarp;
}

// How a layout's waves of decode items speed up when part full (decode_item_sizes.h): two-warp
// tensor-core CTAs stream at HBM's limit when every slot runs; the others at one speed.
decode_items::WaveSpeed decode_wave_speed(ad::DecodeLayout layout) {
  return layout == ad::DecodeLayout::kMmaTwoWarps ? decode_items::kHbmBoundWaves
                                                  : decode_items::kOneSpeed;
}

// Splits a decode CTA computes side by side (a tensor-core CTA's warps; a CUDA-core CTA computes
// one split at a time).
int64_t decode_parallel_splits(ad::DecodeLayout layout) {
  return ad::is_mma(layout) ? ad::mma_warps(layout) : 1;
}

// Puts the plan's (tiles, item) list, longest first, into plan.decode for a clustered launch over
// `cluster_slots` CTAs a KV head (decode_clusters::place: groups of 2-kDecodeCluster items whose
// records fit the landing slots each in one cluster, led by their prefix item; unused positions
// padding items). False, leaving the plan as it was, when no group clusters or it does not fit.
bool place_in_clusters(const std::vector<std::pair<int64_t, ad::DecodeItem>>& items, int64_t fold,
                       int64_t cluster_slots, Plan& plan) {
  constexpr int64_t kCluster = decode_clusters::kDecodeCluster;
  std::vector<decode_clusters::PlanItem> placed;
  placed.reserve(items.size());
  for (const auto& [tiles, it] : items) {
    const bool cluster_row = it.num_items > 1 && it.num_items <= kCluster &&
                             ad::group_records(it, static_cast<int>(fold)) <= kCluster;
    placed.push_back({it.row, cluster_row, it.split0 == 0});
  }
  const auto at = decode_clusters::place(placed, cluster_slots);
  if (!at) return false;
  ad::DecodeItem padding{};
  padding.leader = ad::kPaddingItem;
  plan.decode.assign(static_cast<size_t>(at->length), padding);
  for (size_t k = 0; k < items.size(); ++k) {
    ad::DecodeItem it = items[k].second;
    if (at->leader[k] >= 0) it.leader = static_cast<int32_t>(at->leader[k] % kCluster);
    plan.decode[static_cast<size_t>(at->position[k])] = it;
  }
  plan.decode_clustered = true;
  return true;
}

// Items of the splits decode_items::choose() sizes (about total tiles / slots 32-key tiles each,
// `parallel` splits at least, the splits a CTA computes side by side): a row whose splits need
// more items than one becomes a combine group (records for its later fold groups of `fold`
// splits; items start on fold-group boundaries), balanced within the row. Items go longest
// first, so the tail of the grid is short; with cluster_slots > 0, placed for a clustered launch
// where they fit (place_in_clusters).
void plan_decode(const std::vector<DecodeRow>& rows, const Geometry& g, int64_t slots,
                 int64_t parallel, int64_t fold, decode_items::WaveSpeed speed,
                 int64_t cluster_slots, Plan& plan) {
  std::vector<ad::SplitGrid> grids;
  grids.reserve(rows.size());
  for (const DecodeRow& r : rows) grids.push_back(r.grid);
  const std::vector<int64_t> per_item = decode_items::choose(grids, slots, parallel, fold, speed);
  std::vector<std::pair<int64_t, ad::DecodeItem>> items;  // (tiles, item)
  for (size_t i = 0; i < rows.size(); ++i) {
    const DecodeRow& r = rows[i];
    const int64_t splits = r.grid.splits, n = ceil_div(splits, per_item[i]);
    ad::DecodeItem it{};
    it.row = static_cast<int32_t>(r.row);
    it.table = static_cast<int32_t>(r.table);
    it.lo = static_cast<int32_t>(r.lo);
    it.hi = static_cast<int32_t>(r.hi);
    it.fresh = static_cast<int32_t>(r.fresh);
    it.num_splits = static_cast<int32_t>(splits);
    it.group = -1;
    it.num_items = static_cast<int32_t>(n);
    it.first_count = static_cast<int32_t>(per_item[i]);
    if (n > 1) {  // records: the first item's prefix, then the later fold groups
      it.group = static_cast<int32_t>(plan.decode_groups++);
      it.record = static_cast<int32_t>(plan.records);
      plan.records += int64_t{ad::group_records(it, static_cast<int>(fold))} * g.num_heads;
      BEAM_CHECK(plan.records < (int64_t{1} << 31) && plan.decode_groups < (int64_t{1} << 31))
          << "paged_attention: too many split records";
    }
    for (int64_t c = 0; c < n; ++c) {
      it.split0 = static_cast<int32_t>(c * per_item[i]);
      it.count = static_cast<int32_t>(std::min(per_item[i], splits - c * per_item[i]));
      items.push_back({r.grid.tiles_of(it.split0, it.split0 + it.count), it});
    }
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (cluster_slots > 0 && place_in_clusters(items, fold, cluster_slots, plan)) return;
  plan.decode.reserve(items.size());
  for (const auto& [tiles, item] : items) plan.decode.push_back(item);
}

// The partial-state scratch, grown stream-ordered (no synchronization).
float* reserve_partials(CudaContext& ctx, size_t floats) {
  AttentionScratch& sc = ctx.attention;
  if (sc.floats < floats) {
    if (sc.partials) CUDA_OK(cudaFreeAsync(sc.partials, ctx.stream));
    sc.partials = nullptr;
    sc.floats = 0;
    sc.partials = static_cast<float*>(device_malloc_async(
        floats * sizeof(float), ctx.stream, "paged_attention (CUDA): split-KV partials"));
    sc.floats = floats;
  }
  return sc.partials;
}

// The decode kernel's ticket counters, zeroed when grown (stream-ordered); the kernel leaves them
// zero.
uint32_t* reserve_counters(CudaContext& ctx, size_t count) {
  AttentionScratch& sc = ctx.attention;
  if (sc.num_counters < count) {
    if (sc.counters) CUDA_OK(cudaFreeAsync(sc.counters, ctx.stream));
    sc.counters = nullptr;
    sc.num_counters = 0;
    sc.counters = static_cast<uint32_t*>(device_malloc_async(
        count * sizeof(uint32_t), ctx.stream, "paged_attention (CUDA): decode tickets"));
    CUDA_OK(cudaMemsetAsync(sc.counters, 0, count * sizeof(uint32_t), ctx.stream));
    sc.num_counters = count;
  }
  return sc.counters;
}

// Host bytes of a plan's device arrays, each section 16-byte aligned, uploaded in one copy.
class MetaPacker {
 public:
  template <typename T>
  size_t add(const T* data, size_t count) {
    const size_t offset = (bytes_.size() + 15) / 16 * 16;
    bytes_.resize(offset + count * sizeof(T));
    if (count > 0) std::memcpy(bytes_.data() + offset, data, count * sizeof(T));
    return offset;
  }
  template <typename T>
  size_t add(const std::vector<T>& v) {
    return add(v.data(), v.size());
  }
  template <typename T>
  void patch(size_t offset, const T& value) {
    std::memcpy(bytes_.data() + offset, &value, sizeof(T));
  }
  const std::vector<char>& bytes() const { return bytes_; }
  // Queues the upload through the staging arena; returns the device address of byte 0.
  const char* stage(CudaContext& ctx) const {
    return static_cast<const char*>(ctx.staging.stage(bytes_.data(), bytes_.size(), ctx.stream));
  }

 private:
  std::vector<char> bytes_;
};

// Reserves a decode plan's header (zeroed: its counts and the table and zero-row offsets are
// written by finish_decode_header once known) and packs the items right after it; returns the
// header's offset.
size_t add_decode_header(MetaPacker& meta, const std::vector<ad::DecodeItem>& items) {
  const ad::DecodePlanHeader zeroed{};
  const size_t header = meta.add(&zeroed, 1);
  BEAM_CHECK(meta.add(items) == header + sizeof(ad::DecodePlanHeader))
      << "paged_attention: decode items must follow their header";
  return header;
}
void finish_decode_header(MetaPacker& meta, size_t header, size_t tables, size_t zero,
                          int64_t num_items, int64_t zero_rows, int64_t planned_rows) {
  auto rel = [header](size_t offset) {
    return static_cast<int64_t>(offset) - static_cast<int64_t>(header);
  };
  meta.patch(header, ad::DecodePlanHeader{static_cast<int32_t>(num_items),
                                          static_cast<int32_t>(zero_rows),
                                          static_cast<int32_t>(planned_rows), 0, rel(tables),
                                          rel(zero)});
}

size_t attend_smem(int64_t head_dim) {
  return sizeof(float) * ad::max_query_rows(static_cast<int>(head_dim)) * head_dim +
         sizeof(__nv_bfloat16) * ad::kTile * (ad::k_stride(static_cast<int>(head_dim)) + head_dim);
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

// Raises the decode kernel's shared-memory limit to the largest G's, once per context and kernel.
template <int D, ad::DecodeLayout kLayout, bool kClustered>
void prepare_decode(CudaContext& ctx) {
  constexpr int kDimIndex = D == 64 ? 0 : D == 128 ? 1 : 2;
  constexpr int kClusteredBit = 12;  // past the 3 head dims x 4 layouts
  static_assert(4 * 2 + static_cast<int>(ad::DecodeLayout::kMmaTwoWarps) < kClusteredBit);
  constexpr uint32_t kAttrBit =
      1u << (kClustered ? kClusteredBit : 4 * kDimIndex + static_cast<int>(kLayout));
  if (ctx.attention.decode_attributes & kAttrBit) return;
  CUDA_OK(cudaFuncSetAttribute(
      ad::decode_kernel<D, kLayout, kClustered>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(ad::decode_smem_bytes(kLayout, D, ad::kMaxDecodeGroup, kClustered))));
  ctx.attention.decode_attributes |= kAttrBit;
}

// Launches the decode kernel over grid (Nkv, min(slots, 65535)): `slots` CTAs per KV head (the
// kernel's CTAs stride over the plan's items), in clusters of kDecodeCluster CTAs along y when
// kClustered (four-warp layout; slots a multiple of it).
template <int D, ad::DecodeLayout kLayout, bool kClustered = false>
void launch_decode(CudaContext& ctx, const ad::DecodeParams& p, int64_t slots) {
  prepare_decode<D, kLayout, kClustered>(ctx);
  const dim3 grid(static_cast<unsigned>(p.num_kv_heads),
                  static_cast<unsigned>(std::clamp<int64_t>(slots, 1, kMaxGridY)));
  const auto cluster = static_cast<unsigned>(kClustered ? decode_clusters::kDecodeCluster : 1);
  BEAM_CHECK(grid.y % cluster == 0) << "paged_attention: " << grid.y << " decode CTA slots";
  launch_kernel_in_clusters(ctx, ad::decode_kernel<D, kLayout, kClustered>, grid,
                            dim3(1, cluster, 1), dim3(ad::decode_warps(kLayout, p.group) * 32),
                            ad::decode_smem_bytes(kLayout, D, p.group, kClustered),
                            After::kProgrammatic, p);
}

template <int D>
void launch_decode_cuda_cores(CudaContext& ctx, const ad::DecodeParams& p, int64_t slots,
                              ad::DecodeLayout layout) {
  if (layout == ad::DecodeLayout::kTwoHeadsPerWarp) {
    launch_decode<D, ad::DecodeLayout::kTwoHeadsPerWarp>(ctx, p, slots);
  } else {
    launch_decode<D, ad::DecodeLayout::kHeadPerWarp>(ctx, p, slots);
  }
}

// CTA slots per KV head of a clustered four-warp decode launch: the clusters of kDecodeCluster
// CTAs the GPU holds at once (one CTA an SM, a cluster within one GPC: fewer than SMs / size where
// GPCs' SM counts are not multiples of it), shared by the KV heads, at most the layout's slots;
// 0 when none fit or the geometry is not the tensor-core one.
int64_t decode_cluster_slots(CudaContext& ctx, const Geometry& g) {
  constexpr int64_t kCluster = decode_clusters::kDecodeCluster;
  if (!tensor_core_decode(g)) return 0;
  constexpr int kDim = ad::decode_mma::kDim;
  constexpr auto kFour = ad::DecodeLayout::kMmaFourWarps;
  if (ctx.attention.decode_clusters < 0) {  // once per context; 0: the layout runs unclustered
    prepare_decode<kDim, kFour, true>(ctx);
    const int clusters = max_active_clusters(
        ad::decode_kernel<kDim, kFour, true>, dim3(1, static_cast<unsigned>(kCluster), 1),
        dim3(ad::decode_warps(kFour, 1) * 32),
        ad::decode_smem_bytes(kFour, kDim, ad::kMaxDecodeGroup, true));
    ctx.attention.decode_clusters = clusters;
    log_info("paged_attention: " + std::to_string(clusters) + " clusters of " +
             std::to_string(kCluster) + " four-warp decode CTAs fit at once");
  }
  const int64_t layout_slots = decode_slots(ctx, g, kFour) / kCluster * kCluster;
  return std::min(ctx.attention.decode_clusters / g.num_kv_heads * kCluster, layout_slots);
}

// Whether a fixed plan of `rows` rows launches the decode kernel in clusters: sliding windows up to
// kMmaShortWindow keys (at most 17 tiles a row: at most five items, kDecodeCluster) on the
// four-warp layout, when every row's items fit one wave of the clustered slots. A function of the
// geometry and the graph batch only, so a graph's launch never changes between its plans.
bool fixed_clustered(CudaContext& ctx, const Geometry& g, int64_t rows) {
  return decode_layout(ctx, g, rows) == ad::DecodeLayout::kMmaFourWarps && g.window > 0 &&
         g.window <= kMmaShortWindow &&
         rows * decode_clusters::kDecodeCluster <= decode_cluster_slots(ctx, g);
}

// TMA maps of a paged KV cache at head_dim 128 ([slots, Nkv, 128] each, slots = num_blocks x
// block_size) as {128, Nkv, slots} with a box of {64 dims, 1 KV head, min(block_size, tile_keys)
// slots}: the box's slots, or 0 (no maps) when the block size gives no whole boxes of a
// tile_keys-key tile (a multiple of 8 that divides tile_keys or is a multiple of it), the slots
// overflow TMA's int32 coordinates or the driver refuses the maps.
int encode_kv_maps(const void* k_cache, const void* v_cache, int64_t num_blocks, int64_t block_size,
                   int64_t num_kv_heads, int64_t tile_keys, CUtensorMap& k, CUtensorMap& v) {
  constexpr int64_t kDim = 128;
  const TensorMapEncoder encode = tensor_map_encoder();
  const int64_t bs = block_size, slots = num_blocks * block_size;
  const bool boxes = bs % 8 == 0 && (tile_keys % bs == 0 || bs % tile_keys == 0);
  if (encode == nullptr || !boxes || slots > INT32_MAX) return 0;
  const auto row = static_cast<cuuint64_t>(kDim) * sizeof(__nv_bfloat16);
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(kDim), static_cast<cuuint64_t>(num_kv_heads),
                              static_cast<cuuint64_t>(slots)};
  const cuuint64_t strides[2] = {row, row * static_cast<cuuint64_t>(num_kv_heads)};
  const int rows = static_cast<int>(std::min(bs, tile_keys));
  const cuuint32_t box[3] = {kDim / 2, 1, static_cast<cuuint32_t>(rows)};
  const bool ok = encode_bf16_map(encode, k, k_cache, 3, dims, strides, box) &&
                  encode_bf16_map(encode, v, v_cache, 3, dims, strides, box);
  return ok ? rows : 0;
}

// The tensor-core decode layouts' TMA maps of the KV cache (decode_mma::DecodeMaps; box_rows 0:
// every key by cp.async), from the context's cache of them.
const ad::decode_mma::DecodeMaps& decode_maps(CudaContext& ctx, const ad::DecodeParams& p) {
  static_assert(ad::decode_mma::kDim == 128 && ad::decode_mma::kHalf == 64);
  auto& cache = ctx.attention.decode_maps;
  if (!cache) cache = std::make_unique<DecodeMapCache>();
  for (const DecodeMapCache::Entry& e : cache->entries)
    if (e.k_cache == p.k_cache && e.v_cache == p.v_cache && e.num_blocks == p.num_blocks &&
        e.block_size == p.block_size && e.num_kv_heads == p.num_kv_heads)
      return e.maps;
  if (cache->entries.size() == DecodeMapCache::kMaxEntries) cache->entries.clear();
  DecodeMapCache::Entry& e = cache->entries.emplace_back(
      DecodeMapCache::Entry{p.k_cache, p.v_cache, p.num_blocks, p.block_size, p.num_kv_heads, {}});
  e.maps.box_rows = encode_kv_maps(p.k_cache, p.v_cache, p.num_blocks, p.block_size, p.num_kv_heads,
                                   ad::kTile, e.maps.k, e.maps.v);
  e.maps.slots = e.maps.box_rows > 0 ? static_cast<int>(p.num_blocks * p.block_size) : 0;
  return e.maps;
}

// The decode kernel for head_dim over `slots` CTAs per KV head in `layout` (clustered: four-warp
// only); the unclustered tensor-core layouts with decode_maps().
void launch_decode_for_head_dim(CudaContext& ctx, const ad::DecodeParams& params, int64_t head_dim,
                                int64_t slots, ad::DecodeLayout layout, bool clustered) {
  ad::DecodeParams p = params;
  if (ad::decode_tma(layout, clustered)) p.maps = decode_maps(ctx, p);
  if (layout == ad::DecodeLayout::kMmaFourWarps) {
    constexpr int kDim = ad::decode_mma::kDim;
    if (clustered) {
      launch_decode<kDim, ad::DecodeLayout::kMmaFourWarps, true>(ctx, p, slots);
    } else {
      launch_decode<kDim, ad::DecodeLayout::kMmaFourWarps>(ctx, p, slots);
    }
    return;
  }
  if (layout == ad::DecodeLayout::kMmaTwoWarps) {
    launch_decode<ad::decode_mma::kDim, ad::DecodeLayout::kMmaTwoWarps>(ctx, p, slots);
    return;
  }
  switch (head_dim) {
    case 64:
      launch_decode_cuda_cores<64>(ctx, p, slots, layout);
      return;
    case 128:
      launch_decode_cuda_cores<128>(ctx, p, slots, layout);
      return;
    default:
      launch_decode_cuda_cores<256>(ctx, p, slots, layout);
      return;
  }
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

// The prefill kernel's TMA maps of the KV cache (attention_prefill.cuh's PrefillMaps), or
// box_rows 0 (every key by cp.async) where encode_kv_maps() gives none; and of q and out (each
// [token_rows, Nq, D]), or q_rows / o_rows 0 (rows copied or stored by the threads) when the tensor
// is not 16-byte aligned or too long.
ad::PrefillMaps prefill_maps(const ad::Params& p, int64_t token_rows) {
  ad::PrefillMaps maps{};
  const TensorMapEncoder encode = tensor_map_encoder();
  if (encode == nullptr) return maps;
  const auto row = static_cast<cuuint64_t>(ad::kPrefillDim) * sizeof(__nv_bfloat16);
  // A {D, Nq, rows} map of q or out with a box of one warpgroup's 64 rows of one head.
  auto token_map = [&](CUtensorMap& map, const __nv_bfloat16* data) {
    if (reinterpret_cast<uintptr_t>(data) % 16 != 0 || token_rows > INT32_MAX) return 0;
    const cuuint64_t dims[3] = {static_cast<cuuint64_t>(ad::kPrefillDim),
                                static_cast<cuuint64_t>(p.num_heads),
                                static_cast<cuuint64_t>(token_rows)};
    const cuuint64_t strides[2] = {row, row * static_cast<cuuint64_t>(p.num_heads)};
    const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(ad::kPrefillWgRows)};
    return encode_bf16_map(encode, map, data, 3, dims, strides, box) ? static_cast<int>(token_rows)
                                                                     : 0;
  };
  maps.q_rows = token_map(maps.q, p.q);
  maps.o_rows = token_map(maps.o, p.out);
  static_assert(ad::kPrefillDim == 128);
  maps.box_rows = encode_kv_maps(p.k_cache, p.v_cache, p.num_blocks, p.block_size, p.num_kv_heads,
                                 ad::kPrefillKeys, maps.k, maps.v);
  maps.slots = maps.box_rows > 0 ? static_cast<int>(p.num_blocks * p.block_size) : 0;
  return maps;
}

// The tensor-core prefill kernel over `count` items x Nq q heads: persistent, one 225 KB CTA per
// SM (at most), each looping over its share of the heaviest-first work list; out has out_rows
// rows. bf16_p: P enters P·V rounded to bf16. tensor_maps false: no TMA maps (every row by the
// threads).
void launch_prefill(CudaContext& ctx, const ad::Params& p, const ad::PrefillItem* items,
                    size_t count, int64_t out_rows, bool bf16_p, bool tensor_maps) {
  const auto kernel = bf16_p ? ad::prefill_kernel<true> : ad::prefill_kernel<false>;
  const uint32_t attr_bit = bf16_p ? 2u : 1u;
  if (!(ctx.attention.prefill_attributes & attr_bit)) {  // once per context and kernel
    CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(ad::kPrefillSmemBytes)));
    CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared));
    ctx.attention.prefill_attributes |= attr_bit;
  }
  const int64_t blocks = static_cast<int64_t>(count) * p.num_heads;
  BEAM_CHECK(blocks < (int64_t{1} << 31)) << "paged_attention: " << blocks << " prefill CTAs";
  const bool pow2 = (p.block_size & (p.block_size - 1)) == 0;
  int bs_shift = -1;
  if (pow2) {
    bs_shift = 0;
    while ((int64_t{1} << bs_shift) < p.block_size) ++bs_shift;
  }
  const int64_t grid = std::min<int64_t>(blocks, ctx.props.multiProcessorCount);
  kernel<<<static_cast<unsigned>(grid), ad::kPrefillThreads, ad::kPrefillSmemBytes, ctx.stream>>>(
      p, items, static_cast<int>(blocks), bs_shift,
      tensor_maps ? prefill_maps(p, out_rows) : ad::PrefillMaps{});
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
  // The decode kernels index cache rows in 32 bits (2^31 rows of K alone need 256 GB at D = 64).
  BEAM_CHECK(g.num_blocks * g.block_size * g.num_kv_heads <= INT32_MAX)
      << "paged_attention: a KV cache of " << g.num_blocks << " blocks x " << g.block_size
      << " slots x " << g.num_kv_heads << " KV heads exceeds 2^31 rows";
  return g;
}

// The host plan of a batch. Fixed plans (`all_decode`) plan every row as a decode row and never
// use the tensor-core prefill kernel; a row's bits are the same either way. `layout_rows` (> 0)
// chooses the decode layout instead of the decode rows' count (a fixed plan's graph batch).
Plan make_plan(CudaContext& ctx, std::span<const AttentionSeq> seqs, const Geometry& g,
               bool tensor_cores, bool all_decode, bool invariant, int64_t layout_rows = 0) {
  Plan plan;
  std::vector<DecodeRow> decode;
  const std::vector<Tile> tiles =
      plan_tiles(seqs, g, max_rows(g) / g.group, tensor_cores, all_decode, tensor_core_decode(g),
                 invariant, plan, decode);
  if (!tiles.empty()) plan_items(tiles, g, ctx.props.multiProcessorCount, plan);
  plan.decode_layout =
      decode_layout(ctx, g, layout_rows > 0 ? layout_rows : static_cast<int64_t>(decode.size()));
  // The slots a clustered launch offers (decode_clusters.h): a fixed plan's launch is clustered
  // or not by its geometry and batch (fixed_clustered), an eager one whenever its items place.
  const bool may_cluster = all_decode ? fixed_clustered(ctx, g, layout_rows)
                                      : plan.decode_layout == ad::DecodeLayout::kMmaFourWarps;
  const int64_t cluster_slots = may_cluster ? decode_cluster_slots(ctx, g) : 0;
  if (!decode.empty())
    plan_decode(decode, g, decode_slots(ctx, g, plan.decode_layout),
                decode_parallel_splits(plan.decode_layout), ad::fold_splits(plan.decode_layout),
                decode_wave_speed(plan.decode_layout), cluster_slots, plan);
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

// DecodeParams of everything but the plan's arrays and the partial states.
ad::DecodeParams decode_params(const TensorView& q, const PagedKv& kv, const Geometry& g,
                               const TensorView& out) {
  const ad::Params base = base_params(q, kv, g, out);
  ad::DecodeParams p{};
  p.q = base.q;
  p.out = base.out;
  p.k_cache = base.k_cache;
  p.v_cache = base.v_cache;
  p.num_blocks = base.num_blocks;
  p.block_size = static_cast<int32_t>(g.block_size);
  p.block_shift = -1;
  if ((g.block_size & (g.block_size - 1)) == 0) {
    p.block_shift = 0;
    while ((int64_t{1} << p.block_shift) < g.block_size) ++p.block_shift;
  }
  p.num_heads = base.num_heads;
  p.num_kv_heads = base.num_kv_heads;
  p.group = base.group;
  p.scale = base.scale;
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

// Makes `f` hold a plan of `meta_bytes` with `plan`'s records and groups, reallocating with 2x
// headroom when it does not fit; reallocation waits for queued work and bumps
// ctx.attention.fixed_generation (the graphs that read the old memory are recaptured).
void reserve_fixed(CudaContext& ctx, FixedAttentionPlan& f, const Plan& plan, size_t meta_bytes,
                   const Geometry& g) {
  const bool fits = f.meta.capacity() >= meta_bytes && f.partials != nullptr &&
                    f.counters != nullptr && plan.records <= f.records_cap &&
                    plan.decode_groups <= f.groups_cap && g.head_dim == f.partials_head_dim &&
                    g.num_kv_heads == f.counters_kv_heads;
  if (fits) return;
  // A plan without split rows needs no records: the first sizes still apply (a zero capacity
  // would leave memory unallocated and the plan "not fitting" on every step, recapturing graphs).
  auto grow = [](int64_t need, int64_t cap, int64_t min_cap) {
    return need <= cap && cap > 0 ? cap : std::max(2 * need, min_cap);
  };
  // First sizes cover decode of the largest graph bucket (256 rows) at a few thousand keys, so
  // contexts growing by a token per step rarely move the plan (each move recaptures the graphs).
  const int64_t meta_cap =
      grow(static_cast<int64_t>(meta_bytes), static_cast<int64_t>(f.meta.capacity()), 512 << 10);
  const int64_t records_cap = grow(plan.records, f.records_cap, 65536);
  const int64_t groups_cap = grow(plan.decode_groups, f.groups_cap, 1024);

  CUDA_OK(cudaStreamSynchronize(ctx.stream));  // queued work may still read the old memory
  // Everything old goes first (the new sizes may need its room); the plan is left empty, so the
  // next call grows it again, when an allocation throws DeviceOutOfMemory.
  ++ctx.attention.fixed_generation;
  f.meta = PinnedRegion();
  if (f.partials) CUDA_OK(cudaFree(f.partials));
  if (f.counters) CUDA_OK(cudaFree(f.counters));
  f.partials = nullptr;
  f.counters = nullptr;
  constexpr const char* kWhat = "paged_attention (CUDA): a graph step's fixed plan";
  f.meta = PinnedRegion(static_cast<size_t>(meta_cap), kWhat);
  const size_t floats = static_cast<size_t>(records_cap * (g.head_dim + 2));
  auto* partials = static_cast<float*>(device_malloc(floats * sizeof(float), kWhat));
  const auto counter_bytes = static_cast<size_t>(groups_cap * g.num_kv_heads) * sizeof(uint32_t);
  uint32_t* counters = nullptr;
  try {
    counters = static_cast<uint32_t*>(device_malloc(counter_bytes, kWhat));
  } catch (const DeviceOutOfMemory&) {
    cudaFree(partials);
    throw;
  }
  CUDA_OK(cudaMemsetAsync(counters, 0, counter_bytes, ctx.stream));
  f.partials = partials;
  f.counters = counters;
  f.records_cap = records_cap;
  f.groups_cap = groups_cap;
  f.partials_head_dim = g.head_dim;
  f.counters_kv_heads = g.num_kv_heads;
}

void check_not_capturing(CudaContext& ctx, const char* what) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_OK(cudaStreamIsCapturing(ctx.stream, &capture));
  BEAM_CHECK(capture == cudaStreamCaptureStatusNone)
      << what << " must run before a graph capture, not inside it";
}

}  // namespace

void paged_attention(CudaContext& ctx, const TensorView& q, const PagedKv& kv,
                     std::span<const AttentionSeq> seqs, int64_t window, const TensorView& out,
                     bool bf16_p, bool tensor_maps, bool invariant) {
  const Geometry g = make_geometry(q.dim(1), q.dim(2), kv, window);
  // cp.async reads q in 16-byte vectors; out is written in bf16 pairs.
  const bool tensor_cores = aligned16(q.data) && reinterpret_cast<uintptr_t>(out.data) % 4 == 0;
  const Plan plan = make_plan(ctx, seqs, g, tensor_cores, /*all_decode=*/false, invariant);
  if (plan.items.empty() && plan.prefill.empty() && plan.decode.empty()) return;
  // counts: attend items, reduce groups; the decode kernel's header (no zero rows).
  const std::vector<int32_t> counts = {static_cast<int32_t>(plan.items.size()),
                                       static_cast<int32_t>(plan.groups.size())};
  MetaPacker meta;
  const size_t counts_off = meta.add(counts), header_off = add_decode_header(meta, plan.decode),
               seqs_off = meta.add(plan.seqs), tables_off = meta.add(plan.tables),
               items_off = meta.add(plan.items), groups_off = meta.add(plan.groups),
               prefill_off = meta.add(plan.prefill);
  finish_decode_header(meta, header_off, tables_off, header_off,
                       static_cast<int64_t>(plan.decode.size()), 0, 0);
  const char* dev = meta.stage(ctx);
  ad::Params p = base_params(q, kv, g, out);
  p.counts = reinterpret_cast<const int32_t*>(dev + counts_off);
  p.seqs = reinterpret_cast<const ad::SeqDesc*>(dev + seqs_off);
  p.tables = reinterpret_cast<const int32_t*>(dev + tables_off);
  p.items = reinterpret_cast<const ad::WorkItem*>(dev + items_off);
  p.groups = reinterpret_cast<const ad::ReduceGroup*>(dev + groups_off);
  if (!plan.prefill.empty())
    launch_prefill(ctx, p, reinterpret_cast<const ad::PrefillItem*>(dev + prefill_off),
                   plan.prefill.size(), out.dim(0), bf16_p, tensor_maps);
  if (plan.records > 0) {
    const auto records = static_cast<size_t>(plan.records);
    p.part_acc = reserve_partials(ctx, records * static_cast<size_t>(g.head_dim + 2));
    p.part_ml = p.part_acc + records * static_cast<size_t>(g.head_dim);
  }
  if (!plan.items.empty())
    launch_for_head_dim(ctx, p, g.head_dim, static_cast<int64_t>(plan.items.size()),
                        static_cast<int64_t>(plan.groups.size()));
  if (plan.decode.empty()) return;
  ad::DecodeParams dp = decode_params(q, kv, g, out);
  dp.plan = reinterpret_cast<const ad::DecodePlanHeader*>(dev + header_off);
  dp.part_acc = p.part_acc;
  dp.part_ml = p.part_ml;
  dp.counters = reserve_counters(ctx, static_cast<size_t>(plan.decode_groups * g.num_kv_heads));
  dp.out_rows = 0;  // rows no sequence covers stay untouched
  launch_decode_for_head_dim(ctx, dp, g.head_dim, static_cast<int64_t>(plan.decode.size()),
                             plan.decode_layout, plan.decode_clustered);
}

void plan_fixed_attention(CudaContext& ctx, int slot, const PagedKv& kv, int64_t num_rows,
                          int64_t num_heads, int64_t head_dim, std::span<const AttentionSeq> seqs,
                          int64_t window) {
  BEAM_CHECK(slot >= 0 && slot < kNumFixedAttentionSlots) << "plan_fixed_attention: slot " << slot;
  check_not_capturing(ctx, "plan_fixed_attention");
  const Geometry g = make_geometry(num_heads, head_dim, kv, window);
  BEAM_CHECK(g.group <= ad::kMaxDecodeGroup && num_rows < (int64_t{1} << 31))
      << "plan_fixed_attention: CUDA supports at most " << ad::kMaxDecodeGroup
      << " query heads per KV head and 2^31 rows, got " << g.group << " and " << num_rows;
  const Plan plan = make_plan(ctx, seqs, g, /*tensor_cores=*/false, /*all_decode=*/true,
                              /*invariant=*/false, num_rows);
  std::vector<bool> covered(static_cast<size_t>(num_rows), false);
  for (const AttentionSeq& s : seqs)
    std::fill_n(covered.begin() + s.q_begin, s.q_count, true);
  std::vector<int32_t> zero_rows;
  for (int64_t r = 0; r < num_rows; ++r)
    if (!covered[static_cast<size_t>(r)]) zero_rows.push_back(static_cast<int32_t>(r));
  MetaPacker meta;
  const size_t header_off = add_decode_header(meta, plan.decode),
               tables_off = meta.add(plan.tables), zero_off = meta.add(zero_rows);
  finish_decode_header(meta, header_off, tables_off, zero_off,
                       static_cast<int64_t>(plan.decode.size()),
                       static_cast<int64_t>(zero_rows.size()), num_rows);
  std::unique_ptr<FixedAttentionPlan>& owned = ctx.attention.fixed[slot];
  if (!owned) owned = std::make_unique<FixedAttentionPlan>();
  FixedAttentionPlan& f = *owned;
  reserve_fixed(ctx, f, plan, meta.bytes().size(), g);
  std::memcpy(f.meta.host(), meta.bytes().data(), meta.bytes().size());
  f.meta.upload(0, meta.bytes().size(), ctx.stream);  // one copy per plan
  f.geometry = g;
  f.num_rows = num_rows;
  f.planned = true;
}

void fixed_paged_attention(CudaContext& ctx, int slot, const TensorView& q, const PagedKv& kv,
                           int64_t window, const TensorView& out, const AttentionGate* gate) {
  BEAM_CHECK(slot >= 0 && slot < kNumFixedAttentionSlots) << "fixed_paged_attention: slot " << slot;
  const FixedAttentionPlan* f = ctx.attention.fixed[slot].get();
  BEAM_CHECK(f != nullptr && f->planned)
      << "fixed_paged_attention: slot " << slot << " has no plan (plan_fixed_attention first)";
  const Geometry g = make_geometry(q.dim(1), q.dim(2), kv, window);
  BEAM_CHECK(g == f->geometry)
      << "fixed_paged_attention: slot " << slot << " was planned for another geometry";
  BEAM_CHECK(q.dim(0) >= f->num_rows)
      << "fixed_paged_attention: q has " << q.dim(0) << " rows, the plan " << f->num_rows;
  ad::DecodeParams p = decode_params(q, kv, g, out);
  p.plan = reinterpret_cast<const ad::DecodePlanHeader*>(f->meta.device());
  p.part_acc = f->partials;
  p.part_ml = f->partials + f->records_cap * g.head_dim;
  p.counters = f->counters;
  p.out_rows = q.dim(0);
  if (gate != nullptr) {
    p.gate = static_cast<const __nv_bfloat16*>(gate->g.data);
    p.gate_bias = static_cast<const __nv_bfloat16*>(gate->bias.data);
  }
  // The grid depends on the geometry and the SM count only; CTAs stride over the real counts
  // (and prefetch item blockIdx.y, which must lie inside the plan's memory).
  // Clustered as plan_fixed_attention planned it (fixed_clustered: the geometry and batch decide).
  const ad::DecodeLayout layout = decode_layout(ctx, g, f->num_rows);
  const bool clustered = fixed_clustered(ctx, g, f->num_rows);
  const int64_t slots =
      clustered ? decode_cluster_slots(ctx, g) : std::min(decode_slots(ctx, g, layout), kMaxGridY);
  BEAM_CHECK(sizeof(ad::DecodePlanHeader) + (slots + 1) * sizeof(ad::DecodeItem) <=
             f->meta.capacity())
      << "fixed_paged_attention: plan memory below one item per CTA";
  launch_decode_for_head_dim(ctx, p, g.head_dim, slots, layout, clustered);
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
