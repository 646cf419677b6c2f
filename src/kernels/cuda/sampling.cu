// CUDA sample_tokens: a cluster of kClusterBlocks blocks per sampled row (sampling_cluster.cuh,
// each block owning a slice of the row) runs the CPU Sampler's pipeline (runtime/sampling,
// docs/sampling.md) on its processed row (the raw row, or a scratch copy when a mask or edits
// apply): allowed-token mask (-inf) → sparse edits → argmax (greedy) or the draw of
// sampling_draw.cuh (top-k → weights exp((v - max) / T) → top-p → min-p → inverse-CDF draw with
// the row's uniform); then the logprobs from the raw row. Selections are radix selects over rank
// keys (sampling_select.cuh) or, on peaked rows, rank 0's sort of the few tokens they can end at;
// probability masses are exact integer sums of 2^-44 fixed-point weights, so a row gives the
// same token whatever the launch, and the CPU's token whenever its double sums put the draw on
// the same side of every boundary. score_tokens: the same logprobs of given tokens (prompt
// logprobs), a cluster per row, nothing drawn (rows without alternatives in a lighter kernel with
// the same sums). The top-n alternatives are the keys above a threshold from the warps' maxima
// (sampling_top.cuh), a radix select when those overflow. Rank 0 of a row's cluster writes its
// SampledRow.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sampling_draw.cuh"
#include "kernels/cuda/sampling_top.cuh"

namespace beam::cuda {
namespace {

using namespace sampling_detail;

struct SampleArgs {
  const float* logits;  // [num_logit_rows, vocab]
  const SamplingRowParams* rows;
  const LogitEdit* edits;
  const uint32_t* allowed;  // [num_allowed_rows, allowed_mask_words(vocab)]
  float* scratch;       // [num_rows, vocab]
  SampledRow* out;      // [num_rows]
  int vocab;
};

struct RowShared {
  union {  // a row's selections, then its alternatives' threshold (sampling_top.cuh)
    SelectShared select;
    ThresholdShared threshold;
  };
  ReduceShared reduce;
  unsigned long long top_keys[kMaxSampledTopLogprobs];  // this block's top-n keys, then (rank 0)
  int top_count;                                        // the row's, merged
};

// Whether `mask` (nullptr: every token) allows token i: bit i % 32 of word i / 32.
__device__ __forceinline__ bool is_allowed(const uint32_t* mask, int i) {
  return mask == nullptr || ((mask[i >> 5] >> (i & 31)) & 1u) != 0;
}

// argmax over the row's values > -inf (NaN and -inf never win), ties → lowest id; id INT_MAX
// when none. also(i, v) sees each value of the slice in the sweep.
template <typename Also>
__device__ ValueId row_argmax(const float* row, Slice slice, ReduceShared& s, Also&& also) {
  ValueId best{-INFINITY, INT_MAX};
  sweep(row, slice, [&](int i, float v, bool valid) {
    if (!valid) return;
    if (v > -INFINITY) best = better(best, ValueId{v, i});
    also(i, v);
  });
  return row_best(best, s);
}
__device__ ValueId row_argmax(const float* row, Slice slice, ReduceShared& s) {
  return row_argmax(row, slice, s, [](int, float) {});
}

// How a row's logprobs are computed: log_softmax(raw / t) with the top num_top alternatives.
struct LogprobSpec {
  double t;
  float inv_t;  // f32(min(1 / t, FLT_MAX))
  int num_top;  // [0, kMaxSampledTopLogprobs]
};

// log_softmax(raw / t) of a value, from the row's max and the log of its weight sum.
struct LogSoftmax {
  float max;
  double log_sum;
  double t;
  __device__ float operator()(float v) const {
    return static_cast<float>((static_cast<double>(v) - static_cast<double>(max)) / t - log_sum);
  }
};

// The chosen token's fields of out; `rank` tokens rank before it.
__device__ void write_chosen(SampledRow* out, unsigned long long rank, float logprob, int num_top) {
  out->chosen_rank = static_cast<int32_t>(rank + 1);
  out->chosen_logprob = logprob;
  out->num_top = num_top;
}

// The row's log_softmax and how many tokens rank before the chosen one (every thread of the
// cluster gets them), given the row's largest value (row_argmax's). also(i, v) sees each value
// of the slice in the sums' sweep.
struct ChosenFigures {
  LogSoftmax logprob_of;
  unsigned long long rank;
};
template <typename Also>
__device__ ChosenFigures chosen_figures(const float* raw, Slice slice, int token, float max,
                                        const LogprobSpec& p, ReduceShared& s, Also&& also) {
  const float chosen = raw[token];
  double sum = 0.0;
  unsigned long long rank = 0;
  sweep(raw, slice, [&](int i, float v, bool valid) {
    if (!valid) return;
    sum += weight_of(v, max, p.inv_t);
    rank += (v > chosen || (v == chosen && i < token)) ? 1 : 0;
    also(i, v);
  });
  return {LogSoftmax{max, log(row_sum(sum, s)), p.t}, row_sum(rank, s)};
}

// The entropy of softmax(raw / t) from the row's largest value: log S − Σ w·x / S over
// x = (v − max) · inv_t, w = weight_of (the logprobs' weights), in double; every thread gets it.
__device__ double row_entropy(const float* raw, Slice slice, float max, float inv_t,
                              ReduceShared& s) {
  double sum = 0.0, weighted = 0.0;
  sweep(raw, slice, [&](int, float v, bool valid) {
    if (!valid) return;
    const float w = weight_of(v, max, inv_t);
    if (w == 0.0f) return;  // also -inf logits, whose x · w would be NaN
    sum += w;
    weighted += static_cast<double>(w) * static_cast<double>(__fmul_rn(__fsub_rn(v, max), inv_t));
  });
  const double total = row_sum(sum, s);
  return fmax(0.0, log(total) - row_sum(weighted, s) / total);
}

// This block's keys of the row's top `last` (a select's result) into sh.top_keys / top_count.
__device__ void collect_top_keys(const float* raw, Slice slice, const SelectResult& last,
                                 RowShared& sh) {
  if (threadIdx.x == 0) sh.top_count = 0;
  __syncthreads();
  sweep(raw, slice, [&](int i, float v, bool valid) {
    if (!valid || !last.found) return;
    const SelectItem c = LogitRankItem{}(i, v);
    if (!c.candidate || c.key < last.key) return;
    const int slot = atomicAdd(&sh.top_count, 1);
    if (slot < kMaxSampledTopLogprobs) sh.top_keys[slot] = c.key;
  });
}

// Thread 0 of rank 0: the cluster's collected keys (at most num_top in all: keys are unique),
// in rank order, into its own sh.top_keys; returns their count.
__device__ int merge_top_keys(RowShared& sh, int num_top) {
  unsigned long long keys[kMaxSampledTopLogprobs];
  int count = 0;
  for (uint32_t r = 0; r < kClusterBlocks; ++r) {
    const int n = static_cast<int>(cluster::load_u32(cluster::map(&sh.top_count, r)));
    for (int j = 0; j < min(n, kMaxSampledTopLogprobs) && count < num_top; ++j)
      keys[count++] = cluster::load_u64(cluster::map(&sh.top_keys[j], r));
  }
  for (int a = 1; a < count; ++a)  // insertion sort, descending key = rank order
    for (int b = a; b > 0 && keys[b] > keys[b - 1]; --b) {
      const unsigned long long tmp = keys[b];
      keys[b] = keys[b - 1];
      keys[b - 1] = tmp;
    }
  for (int j = 0; j < count; ++j) sh.top_keys[j] = keys[j];
  return count;
}

// The chosen token's logprob and rank and the top-n alternatives, from the raw row (raw_max: its
// largest value); rank 0 of the cluster writes them to out. The alternatives come from the
// threshold of sampling_top.cuh, or from a radix select when its candidates overflow.
__device__ void write_logprobs(const float* raw, Slice slice, int token, float raw_max,
                               const LogprobSpec& p, RowShared& sh, SampledRow* out) {
  unsigned long long thread_max = 0;  // this thread's largest alternative_key
  const ChosenFigures f =
      chosen_figures(raw, slice, token, raw_max, p, sh.reduce, [&](int i, float v) {
        if (p.num_top > 0) thread_max = max(thread_max, alternative_key(i, v));
      });
  const LogSoftmax& logprob_of = f.logprob_of;
  const bool writer = threadIdx.x == 0 && cluster::rank() == 0;
  if (writer) write_chosen(out, f.rank, logprob_of(raw[token]), p.num_top);
  if (p.num_top <= 0) return;
  int count = 0;
  if (top_keys_by_threshold(raw, slice, p.num_top, thread_max, sh.threshold, sh.top_keys,
                            &sh.top_count)) {
    const SelectResult last = radix_select(raw, slice, LogitRankItem{},
                                           static_cast<unsigned long long>(p.num_top), sh.select);
    collect_top_keys(raw, slice, last, sh);
    cluster::sync();  // every block's keys are collected
    if (writer) count = merge_top_keys(sh, p.num_top);
  } else if (writer) {
    count = sh.top_count;
  }
  if (writer) {
    out->num_top = count;
    for (int j = 0; j < count; ++j) {
      const int id = id_of_key(sh.top_keys[j]);
      out->top_ids[j] = id;
      out->top_logprobs[j] = logprob_of(raw[id]);
    }
  }
  cluster::sync();  // no block leaves while rank 0 still reads its keys
}

// Grid: kClusterBlocks blocks per row, in clusters of that size.
__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kThreads)
    sample_rows_kernel(SampleArgs a) {
  __shared__ RowShared sh;
  __shared__ CandidateShared candidates;
  __shared__ DrawTally tally;
  if (threadIdx.x == 0) tally.count = 0;  // published by the argmax's cluster barriers
  const int n = a.vocab;
  const int64_t r = blockIdx.x / kClusterBlocks;
  const Slice slice = row_slice(n);
  const SamplingRowParams p = a.rows[r];
  const float* raw = a.logits + static_cast<int64_t>(p.logits_row) * n;
  float* row = a.scratch + r * n;
  SampledRow* out = a.out + r;
  const uint32_t* mask =
      p.allowed_row < 0 ? nullptr : a.allowed + p.allowed_row * allowed_mask_words(n);

  // The processed row: the raw one itself without a mask or edits, else a masked, edited copy.
  const bool edited = mask != nullptr || p.edit_count > 0;
  const float* processed = edited ? row : raw;
  if (edited) {
    sweep(raw, slice, [&](int i, float v, bool valid) {
      if (valid) row[i] = is_allowed(mask, i) ? v : -INFINITY;
    });
    __syncthreads();
    for (int e = threadIdx.x; e < p.edit_count; e += kThreads) {  // this block's slice's edits
      const LogitEdit& edit = a.edits[p.edit_begin + e];
      if (edit.token >= slice.begin && edit.token < slice.end)
        row[edit.token] = apply_logit_edit(row[edit.token], edit, p);
    }
    __syncthreads();
  }
  const bool greedy = p.inv_temperature == 0.0f;
  const bool top_k = !greedy && p.top_k > 0 && p.top_k < n;
  unsigned long long thread_max = 0;  // this thread's largest rank key (for top-k)
  const ValueId best = row_argmax(processed, slice, sh.reduce, [&](int i, float v) {
    if (top_k) thread_max = max(thread_max, alternative_key(i, v));
  });
  int token = -1;
  if (best.id != INT_MAX)
    token = greedy ? best.id
                   : draw_token(processed, row, n, slice, p, best.value, thread_max,
                                DrawShared{sh.select, sh.threshold, candidates, tally, sh.reduce});
  if (threadIdx.x == 0 && cluster::rank() == 0) {
    out->token = token;
    out->chosen_rank = 0;
    out->chosen_logprob = 0.0f;
    out->num_top = 0;
  }
  const bool logprobs = p.num_top_logprobs >= 0 && token >= 0;
  const bool entropy = p.entropy != 0 && token >= 0;
  if (!logprobs && !entropy) return;
  const float raw_max = edited ? row_argmax(raw, slice, sh.reduce).value : best.value;
  if (logprobs)
    write_logprobs(
        raw, slice, token, raw_max,
        LogprobSpec{p.logprob_temperature, p.logprob_inv_temperature, p.num_top_logprobs}, sh, out);
  if (entropy) {
    const double h = row_entropy(raw, slice, raw_max, p.logprob_inv_temperature, sh.reduce);
    if (threadIdx.x == 0 && cluster::rank() == 0) out->entropy = static_cast<float>(h);
  }
}

struct ScoreArgs {
  const float* logits;  // [num_logit_rows, vocab]
  const ScoreRowParams* rows;
  const int32_t* row_ids;  // the launch's rows (indices into rows and out), one per row it runs
  SampledRow* out;         // [num_rows]
  int vocab;
};

// The row this block's cluster scores: its parameters, raw logits and output (its token written
// by rank 0).
struct ScoredRow {
  ScoreRowParams p;
  const float* raw;
  SampledRow* out;
};
__device__ ScoredRow scored_row(const ScoreArgs& a) {
  const int32_t r = a.row_ids[blockIdx.x / kClusterBlocks];
  const ScoreRowParams p = a.rows[r];
  if (threadIdx.x == 0 && cluster::rank() == 0) a.out[r].token = p.token;
  return {p, a.logits + static_cast<int64_t>(p.logits_row) * a.vocab, a.out + r};
}

// A cluster per row: the given token's logprobs, written as sample_rows_kernel writes a drawn one.
// Four blocks an SM (32 registers; the few spills sit on the rare radix-select path): 0.48 ms for
// 512 rows with 20 alternatives on an H100 where the compiler's 64 registers took 0.69 ms
// (docs/benchmarks.md, run 290).
__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kThreads, 4)
    score_rows_kernel(ScoreArgs a) {
  __shared__ RowShared sh;
  const ScoredRow s = scored_row(a);
  const Slice slice = row_slice(a.vocab);
  write_logprobs(s.raw, slice, s.p.token, row_argmax(s.raw, slice, sh.reduce).value,
                 LogprobSpec{s.p.temperature, s.p.inv_temperature, s.p.num_top}, sh, s.out);
}

// A cluster per row without alternatives (num_top 0): score_rows_kernel's figures (the same code,
// so the same bits) without its selection state: half the registers and a twenty-fifth of the
// shared memory, so twice the blocks stay resident (docs/benchmarks.md, runs 280-281).
__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kThreads)
    score_plain_rows_kernel(ScoreArgs a) {
  __shared__ ReduceShared reduce;
  const ScoredRow s = scored_row(a);
  const Slice slice = row_slice(a.vocab);
  const ChosenFigures f = chosen_figures(
      s.raw, slice, s.p.token, row_argmax(s.raw, slice, reduce).value,
      LogprobSpec{s.p.temperature, s.p.inv_temperature, 0}, reduce, [](int, float) {});
  if (threadIdx.x == 0 && cluster::rank() == 0)
    write_chosen(s.out, f.rank, f.logprob_of(s.raw[s.p.token]), 0);
}

// Blocks of the grid for `rows` rows.
unsigned grid_of(size_t rows) {
  return static_cast<unsigned>(rows * kClusterBlocks);
}

}  // namespace

void sample_tokens(CudaContext& ctx, const TensorView& logits,
                   std::span<const SamplingRowParams> rows, std::span<const LogitEdit> edits,
                   std::span<const uint32_t> allowed, const TensorView& scratch,
                   const TensorView& out) {
  static_assert(sizeof(SampledRow) == kSampledRowWords * 4);
  SampleArgs a;
  a.logits = static_cast<const float*>(logits.data);
  const auto stage = [&](const auto& v) {
    return v.empty() ? nullptr : ctx.staging.stage(v.data(), v.size_bytes(), ctx.stream);
  };
  a.rows = static_cast<const SamplingRowParams*>(stage(rows));
  a.edits = static_cast<const LogitEdit*>(stage(edits));
  a.allowed = static_cast<const uint32_t*>(stage(allowed));
  a.scratch = static_cast<float*>(scratch.data);
  a.out = static_cast<SampledRow*>(out.data);
  a.vocab = static_cast<int>(logits.dim(1));
  sample_rows_kernel<<<grid_of(rows.size()), kThreads, 0, ctx.stream>>>(a);
  CUDA_LAUNCH_OK();
}

void score_tokens(CudaContext& ctx, const TensorView& logits, std::span<const ScoreRowParams> rows,
                  const TensorView& out) {
  // The rows with alternatives, then the plain ones (num_top 0).
  std::vector<int32_t> ids(rows.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto plain_begin = std::stable_partition(
      ids.begin(), ids.end(), [&](int32_t r) { return rows[static_cast<size_t>(r)].num_top > 0; });
  const auto with_top = static_cast<size_t>(plain_begin - ids.begin());
  const size_t plain = rows.size() - with_top;

  ScoreArgs a;
  a.logits = static_cast<const float*>(logits.data);
  a.rows = static_cast<const ScoreRowParams*>(
      ctx.staging.stage(rows.data(), rows.size_bytes(), ctx.stream));
  a.row_ids = ctx.staging.stage(ids, ctx.stream);
  a.out = static_cast<SampledRow*>(out.data);
  a.vocab = static_cast<int>(logits.dim(1));
  if (with_top > 0) {
    score_rows_kernel<<<grid_of(with_top), kThreads, 0, ctx.stream>>>(a);
    CUDA_LAUNCH_OK();
  }
  if (plain > 0) {
    a.row_ids += with_top;
    score_plain_rows_kernel<<<grid_of(plain), kThreads, 0, ctx.stream>>>(a);
    CUDA_LAUNCH_OK();
  }
}

}  // namespace beam::cuda
