// Token sampling and logprobs over logits rows that stay on the device (issue 7): per row, an
// optional allowed-token bitmask (disallowed → -inf), sparse logit edits (bias, min_tokens mask,
// penalties), greedy argmax or top-k → temperature → top-p → min-p → inverse-CDF draw, and
// log_softmax logprobs (of the raw row) with the top-n alternatives and the raw row's entropy at
// the logprobs' temperature; score_tokens gives the same
// logprobs of given tokens (prompt logprobs) without sampling. The semantics
// are runtime/sampling's CPU Sampler's, step for step (docs/sampling.md, "GPU sampling"); the CPU
// path IS that sampler, so this op has no CPU implementation (Device::kCpu aborts).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "core/host_device.h"
#include "kernels/api/context.h"

namespace beam {

inline constexpr int kMaxSampledTopLogprobs = 20;  // = runtime's kMaxTopLogprobs

// What a LogitEdit does to its token, in this order (flags may combine).
enum LogitEditFlag : uint32_t {
  kEditBias = 1u,             // v = f32(f64(v) + bias)
  kEditMask = 2u,             // v = -inf (min_tokens: stop ids, eos)
  kEditRepetition = 4u,       // HF: v = f32(v > 0 ? f64(v) / r : f64(v) * r)
  kEditFrequencyPresence = 8u // OpenAI: v = f32(f64(v) - frequency * count - presence)
};

// One token's edit; a row's edits name each token at most once.
struct LogitEdit {
  double bias = 0.0;
  int32_t token = 0;
  int32_t output_count = 0;  // committed + pending occurrences in the output (kEditFrequencyPresence)
  uint32_t flags = 0;        // LogitEditFlag bits
  uint32_t pad = 0;
};

// One row to sample. Plain data, copied to the device as is.
struct SamplingRowParams {
  double uniform = 0.0;               // the row's Philox uniform in [0, 1) (SamplingRng::uniform)
  double top_p = 1.0;                 // (0, 1]; 1 = off
  double min_p = 0.0;                 // [0, 1]; 0 = off
  double repetition_penalty = 1.0;    // used by kEditRepetition
  double frequency_penalty = 0.0;     // used by kEditFrequencyPresence
  double presence_penalty = 0.0;      // used by kEditFrequencyPresence
  double logprob_temperature = 1.0;   // T of the logprobs (temperature, 0 → 1)
  float inv_temperature = 1.0f;       // f32(min(1 / T, FLT_MAX)); 0 = greedy
  float logprob_inv_temperature = 1.0f;  // f32(min(1 / logprob_temperature, FLT_MAX))
  int64_t top_k = 0;                  // 0 = off; active only when 0 < top_k < vocab
  int32_t logits_row = 0;             // row of `logits` to read (siblings may share one)
  int32_t num_top_logprobs = -1;      // -1 = no logprobs; else [0, kMaxSampledTopLogprobs]
  int32_t edit_begin = 0;             // this row's edits: edits[edit_begin, edit_begin + edit_count)
  int32_t edit_count = 0;
  int32_t allowed_row = -1;  // -1: every token; else a row of sample_tokens' `allowed`
  int32_t entropy = 0;       // 1: write SampledRow::entropy
};

// Logit v of e.token after its edit, flags applied in the order above (the CPU's logit
// processors, runtime/sampling/logit_processors.cpp). Shared by the kernel and its host tests.
BEAM_HOST_DEVICE float apply_logit_edit(float v, const LogitEdit& e, const SamplingRowParams& p) {
  if (e.flags & kEditBias) v = static_cast<float>(static_cast<double>(v) + e.bias);
  if (e.flags & kEditMask) v = -INFINITY;
  if (e.flags & kEditRepetition) {
    const double d = v;
    v = static_cast<float>(d > 0 ? d / p.repetition_penalty : d * p.repetition_penalty);
  }
  if (e.flags & kEditFrequencyPresence)
    v = static_cast<float>(static_cast<double>(v) - p.frequency_penalty * e.output_count -
                           p.presence_penalty);
  return v;
}

// One row's result as the op writes it (all 4-byte words, so a [rows, kSampledRowWords] i32
// tensor holds them; the caller reinterprets after copying back).
struct SampledRow {
  int32_t token = -1;          // -1 only when the processed row has no finite logit
  int32_t chosen_rank = 0;     // with logprobs: 1 = most likely (rank order), else 0
  float chosen_logprob = 0.0f;
  int32_t num_top = 0;         // entries of top_* written (num_top_logprobs, or 0)
  int32_t top_ids[kMaxSampledTopLogprobs] = {};
  float top_logprobs[kMaxSampledTopLogprobs] = {};
  // With SamplingRowParams::entropy: the entropy (nats) of softmax(raw / logprob_temperature),
  // runtime/sampling/logprobs.h's distribution_entropy (the same weights; sums in another order).
  float entropy = 0.0f;
};
inline constexpr int64_t kSampledRowWords = sizeof(SampledRow) / 4;
static_assert(sizeof(SampledRow) % 4 == 0);

// Words of one allowed-token mask: token t is allowed iff bit t % 32 of word t / 32 is set.
BEAM_HOST_DEVICE constexpr int64_t allowed_mask_words(int64_t vocab) {
  return (vocab + 31) / 32;
}

// logits: [num_logit_rows, vocab] f32 on ctx's device (soft-capped; only read).
// rows, edits: host arrays (staged to the device by the op).
// allowed: host array of [num_allowed_rows, allowed_mask_words(vocab)] words (staged by the op);
// a row with allowed_row >= 0 sets the logits of the tokens its mask leaves out to -inf before
// its edits (logprobs stay those of the raw row).
// scratch: [rows.size(), vocab] f32 on the device (overwritten: processed logits, then weights).
// out: [rows.size(), kSampledRowWords] i32 on the device, one SampledRow per row.
// Queued on ctx's stream; nothing is synchronized. Device::kCuda only.
void sample_tokens(const KernelContext& ctx, const TensorView& logits,
                   std::span<const SamplingRowParams> rows, std::span<const LogitEdit> edits,
                   std::span<const uint32_t> allowed, const TensorView& scratch,
                   const TensorView& out);

// One row to score (score_tokens): the logprob of a given token, its rank and the top-n, as
// sample_tokens' logprobs would be had the row drawn that token.
struct ScoreRowParams {
  double temperature = 1.0;      // T of the logprobs (> 0; a request's 0 is scored as 1)
  float inv_temperature = 1.0f;  // f32(min(1 / temperature, FLT_MAX))
  int32_t logits_row = 0;        // row of `logits` to read
  int32_t token = 0;             // [0, vocab)
  int32_t num_top = 0;           // [0, kMaxSampledTopLogprobs]
};

// logits: [num_logit_rows, vocab] f32 on ctx's device (only read); rows: a host array (staged by
// the op); out: [rows.size(), kSampledRowWords] i32 on the device, one SampledRow per row whose
// token is the row's given token. Queued on ctx's stream. Device::kCuda only (the CPU scores
// with runtime/sampling/logprobs.h's compute_logprobs).
void score_tokens(const KernelContext& ctx, const TensorView& logits,
                  std::span<const ScoreRowParams> rows, const TensorView& out);

}  // namespace beam
