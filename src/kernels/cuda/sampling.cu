// CUDA sample_tokens: one block per sampled row runs the CPU Sampler's pipeline (runtime/sampling,
// docs/sampling.md) on a scratch copy of its logits row: allowed-token mask (-inf) → sparse edits
// → argmax (greedy) or top-k → weights exp((v - max) / T) → top-p → min-p → inverse-CDF draw with
// the row's uniform; then the logprobs from the raw row. Selections are radix selects over rank
// keys (sampling_select.cuh); probability masses are exact integer sums of 2^-44 fixed-point
// weights, so a row gives the same token whatever the launch, and the CPU's token whenever its
// double sums put the draw on the same side of every boundary. score_tokens: the same logprobs
// of given tokens (prompt logprobs), one block per row, nothing drawn.
#include <cfloat>
#include <climits>
#include <cmath>

#include "core/check.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sampling_select.cuh"

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
  SelectShared select;
  ReduceShared reduce;
  unsigned long long top_keys[kMaxSampledTopLogprobs];
  int top_count;
};

// Processed logit rank order over a row (NaN never takes part), weight 1: top-k and top-n.
struct LogitRankItem {
  const float* row;
  __device__ SelectItem operator()(int i) const {
    const float v = row[i];
    return {!isnan(v), rank_key(order_bits(v), i), 1ull};
  }
};

// Weight rank order over the scratch weights (-1 = outside top-k), restricted to keys >= min_key
// (the top-p nucleus) and weights >= min_p; weight = fixed-point probability weight.
struct WeightItem {
  const float* w;
  unsigned long long min_key;
  double min_p;
  __device__ SelectItem operator()(int i) const {
    const float x = w[i];
    const unsigned long long key = rank_key(__float_as_uint(x), i);
    const bool in = x >= 0.0f && key >= min_key && static_cast<double>(x) >= min_p;
    return {in, key, in ? fixed_weight(x) : 0ull};
  }
};

// Whether `mask` (nullptr: every token) allows token i: bit i % 32 of word i / 32.
__device__ __forceinline__ bool is_allowed(const uint32_t* mask, int i) {
  return mask == nullptr || ((mask[i >> 5] >> (i & 31)) & 1u) != 0;
}

// One token's edits, in the CPU's order (kernels/api/sampling.h).
__device__ void apply_edit(float* row, const LogitEdit& e, const SamplingRowParams& p) {
  row[e.token] = apply_logit_edit(row[e.token], e, p);
}

// argmax over values > -inf (NaN and -inf never win), ties → lowest id; id INT_MAX when none.
__device__ ValueId row_argmax(const float* row, int n, ReduceShared& s) {
  ValueId best{-INFINITY, INT_MAX};
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = row[i];
    if (v > -INFINITY) best = better(best, ValueId{v, i});
  }
  return block_best(best, s);
}

// Replaces the processed logits by weights (-1 outside the top-k set); returns their fixed sum.
__device__ unsigned long long to_weights(float* row, int n, unsigned long long topk_min_key,
                                         float max, float inv_t, ReduceShared& s) {
  unsigned long long sum = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = row[i];
    const bool in = topk_min_key == 0 || (!isnan(v) && rank_key(order_bits(v), i) >= topk_min_key);
    const float w = in ? weight_of(v, max, inv_t) : -1.0f;
    row[i] = w;
    if (in) sum += fixed_weight(w);
  }
  return block_sum(sum, s);  // its barriers also publish the weights to the block
}

// Smallest integer weight N with "prefix >= N" ⟺ "prefix >= target" (at_least) or
// "prefix > target", clamped to [1, total].
__device__ unsigned long long need_for(double target, bool at_least, unsigned long long total) {
  const double n = at_least ? ceil(target) : floor(target) + 1.0;
  if (!(n >= 1.0)) return 1;
  if (n >= static_cast<double>(total)) return total;
  return static_cast<unsigned long long>(n);
}

// top-k → weights → top-p → min-p → draw on the processed row (which becomes weights).
__device__ int draw_token(float* row, int n, const SamplingRowParams& p, float max, RowShared& sh) {
  unsigned long long topk_min_key = 0;  // 0: every token is in the top-k set
  if (p.top_k > 0 && p.top_k < n) {
    const SelectResult k = radix_select(n, LogitRankItem{row}, static_cast<unsigned long long>(p.top_k), sh.select);
    if (!k.found) return -1;
    topk_min_key = k.key;
  }
  unsigned long long kept = to_weights(row, n, topk_min_key, max, p.inv_temperature, sh.reduce);
  unsigned long long nucleus_min_key = 0;
  if (p.top_p < 1.0) {
    const unsigned long long need = need_for(p.top_p * static_cast<double>(kept), true, kept);
    const SelectResult nucleus = radix_select(n, WeightItem{row, 0ull, 0.0}, need, sh.select);
    if (!nucleus.found) return -1;
    nucleus_min_key = nucleus.key;
    kept = nucleus.through;
  }
  const WeightItem allowed{row, nucleus_min_key, p.min_p};
  if (p.min_p > 0.0) {
    unsigned long long sum = 0;
    for (int i = threadIdx.x; i < n; i += kThreads) sum += allowed(i).weight;
    kept = block_sum(sum, sh.reduce);
  }
  if (kept == 0) return -1;
  const unsigned long long need = need_for(p.uniform * static_cast<double>(kept), false, kept);
  const SelectResult drawn = radix_select(n, allowed, need, sh.select);
  return drawn.found ? id_of_key(drawn.key) : -1;
}

// How a row's logprobs are computed: log_softmax(raw / t) with the top num_top alternatives.
struct LogprobSpec {
  double t;
  float inv_t;  // f32(min(1 / t, FLT_MAX))
  int num_top;  // [0, kMaxSampledTopLogprobs]
};

// The chosen token's logprob and rank and the top-n alternatives, from the raw row.
__device__ void write_logprobs(const float* raw, int n, int token, const LogprobSpec& p,
                               RowShared& sh, SampledRow* out) {
  const float max = row_argmax(raw, n, sh.reduce).value;
  const float chosen = raw[token];
  double sum = 0.0;
  unsigned long long rank = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = raw[i];
    sum += weight_of(v, max, p.inv_t);
    rank += (v > chosen || (v == chosen && i < token)) ? 1 : 0;
  }
  sum = block_sum(sum, sh.reduce);
  rank = block_sum(rank, sh.reduce);
  const double log_sum = log(sum);
  const double t = p.t;
  auto logprob_of = [&](float v) {
    return static_cast<float>((static_cast<double>(v) - static_cast<double>(max)) / t - log_sum);
  };
  const int num_top = p.num_top;
  if (threadIdx.x == 0) {
    out->chosen_rank = static_cast<int32_t>(rank + 1);
    out->chosen_logprob = logprob_of(chosen);
    out->num_top = num_top;
    sh.top_count = 0;
  }
  if (num_top <= 0) return;
  const LogitRankItem item{raw};
  const SelectResult last = radix_select(n, item, static_cast<unsigned long long>(num_top), sh.select);
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const SelectItem c = item(i);
    if (!last.found || !c.candidate || c.key < last.key) continue;
    const int slot = atomicAdd(&sh.top_count, 1);
    if (slot < kMaxSampledTopLogprobs) sh.top_keys[slot] = c.key;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const int count = min(sh.top_count, num_top);
  for (int a = 1; a < count; ++a)  // insertion sort, descending key = rank order
    for (int b = a; b > 0 && sh.top_keys[b] > sh.top_keys[b - 1]; --b) {
      const unsigned long long tmp = sh.top_keys[b];
      sh.top_keys[b] = sh.top_keys[b - 1];
      sh.top_keys[b - 1] = tmp;
    }
  out->num_top = count;
  for (int j = 0; j < count; ++j) {
    const int id = id_of_key(sh.top_keys[j]);
    out->top_ids[j] = id;
    out->top_logprobs[j] = logprob_of(raw[id]);
  }
}

__global__ void __launch_bounds__(kThreads) sample_rows_kernel(SampleArgs a) {
  __shared__ RowShared sh;
  const int n = a.vocab;
  const SamplingRowParams p = a.rows[blockIdx.x];
  const float* raw = a.logits + static_cast<int64_t>(p.logits_row) * n;
  float* row = a.scratch + static_cast<int64_t>(blockIdx.x) * n;
  SampledRow* out = a.out + blockIdx.x;
  const uint32_t* mask =
      p.allowed_row < 0 ? nullptr : a.allowed + p.allowed_row * allowed_mask_words(n);

  for (int i = threadIdx.x; i < n; i += kThreads) row[i] = is_allowed(mask, i) ? raw[i] : -INFINITY;
  __syncthreads();
  for (int e = threadIdx.x; e < p.edit_count; e += kThreads) apply_edit(row, a.edits[p.edit_begin + e], p);
  __syncthreads();
  const ValueId best = row_argmax(row, n, sh.reduce);
  int token = -1;
  if (best.id != INT_MAX) token = p.inv_temperature == 0.0f ? best.id : draw_token(row, n, p, best.value, sh);
  if (threadIdx.x == 0) {
    out->token = token;
    out->chosen_rank = 0;
    out->chosen_logprob = 0.0f;
    out->num_top = 0;
  }
  if (p.num_top_logprobs >= 0 && token >= 0)
    write_logprobs(
        raw, n, token,
        LogprobSpec{p.logprob_temperature, p.logprob_inv_temperature, p.num_top_logprobs}, sh, out);
}

struct ScoreArgs {
  const float* logits;  // [num_logit_rows, vocab]
  const ScoreRowParams* rows;
  SampledRow* out;  // [num_rows]
  int vocab;
};

// One block per row: the given token's logprobs, written as sample_rows_kernel writes a drawn one.
__global__ void __launch_bounds__(kThreads) score_rows_kernel(ScoreArgs a) {
  __shared__ RowShared sh;
  const ScoreRowParams p = a.rows[blockIdx.x];
  const float* raw = a.logits + static_cast<int64_t>(p.logits_row) * a.vocab;
  SampledRow* out = a.out + blockIdx.x;
  if (threadIdx.x == 0) out->token = p.token;
  write_logprobs(raw, a.vocab, p.token, LogprobSpec{p.temperature, p.inv_temperature, p.num_top},
                 sh, out);
}

}  // namespace

void sample_tokens(CudaContext& ctx, const TensorView& logits,
                   std::span<const SamplingRowParams> rows, std::span<const LogitEdit> edits,
                   std::span<const uint32_t> allowed, const TensorView& scratch,
                   const TensorView& out) {
  static_assert(sizeof(SampledRow) == kSampledRowWords * 4);
  SampleArgs a;
  a.logits = static_cast<const float*>(logits.data);
  a.rows = static_cast<const SamplingRowParams*>(ctx.staging.stage(rows.data(), rows.size_bytes(), ctx.stream));
  a.edits = edits.empty() ? nullptr
                          : static_cast<const LogitEdit*>(ctx.staging.stage(edits.data(), edits.size_bytes(), ctx.stream));
  a.allowed = allowed.empty() ? nullptr
                              : static_cast<const uint32_t*>(ctx.staging.stage(
                                    allowed.data(), allowed.size_bytes(), ctx.stream));
  a.scratch = static_cast<float*>(scratch.data);
  a.out = static_cast<SampledRow*>(out.data);
  a.vocab = static_cast<int>(logits.dim(1));
  sample_rows_kernel<<<static_cast<unsigned>(rows.size()), kThreads, 0, ctx.stream>>>(a);
  CUDA_LAUNCH_OK();
}

void score_tokens(CudaContext& ctx, const TensorView& logits, std::span<const ScoreRowParams> rows,
                  const TensorView& out) {
  ScoreArgs a;
  a.logits = static_cast<const float*>(logits.data);
  a.rows = static_cast<const ScoreRowParams*>(
      ctx.staging.stage(rows.data(), rows.size_bytes(), ctx.stream));
  a.out = static_cast<SampledRow*>(out.data);
  a.vocab = static_cast<int>(logits.dim(1));
  score_rows_kernel<<<static_cast<unsigned>(rows.size()), kThreads, 0, ctx.stream>>>(a);
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda
